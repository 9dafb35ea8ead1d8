"""MCP servers owned by the daemon: their configuration, connections and tools.

``load_mcp_servers(cwd, environ)`` reads the configured servers; an ``McpManager`` in the
daemon's nursery starts them when first needed, shares one connection per server across
sessions, restarts a crashed one, and offers their tools as ``server__tool``.
"""

from ._config import DEFAULT_TIMEOUT, McpServerConfig, load_mcp_servers
from ._manager import McpManager, UnknownServer
from ._tools import McpTool

__all__ = [
    "DEFAULT_TIMEOUT",
    "McpManager",
    "McpServerConfig",
    "McpTool",
    "UnknownServer",
    "load_mcp_servers",
]
