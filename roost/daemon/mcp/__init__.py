"""MCP servers owned by the daemon: their configuration, connections and tools.

``load_mcp_servers(cwd, environ)`` reads the servers configured for a folder
(``mcp_servers_from`` as part of one reading of it); an
``McpManager`` in the daemon's nursery starts them when first needed, keeps one connection
per server (keyed by what the server is, never by its name) shared by every session whose
configuration has it, restarts a crashed one, and offers their tools as ``server__tool``.
"""

from ._config import DEFAULT_TIMEOUT, McpServerConfig, McpServers, client_servers, load_mcp_servers, mcp_servers_from
from ._content import McpPrompt, McpRequestError, McpResource
from ._environment import with_environment
from ._manager import McpManager, UnknownServer
from ._tools import McpTool

__all__ = [
    "DEFAULT_TIMEOUT",
    "McpManager",
    "McpPrompt",
    "McpRequestError",
    "McpResource",
    "McpServerConfig",
    "McpServers",
    "McpTool",
    "UnknownServer",
    "client_servers",
    "load_mcp_servers",
    "mcp_servers_from",
    "with_environment",
]
