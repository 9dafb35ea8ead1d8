"""An MCP server (the SDK's) that says where it runs from: its plugin's folder."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool(structured_output=False)
def where() -> str:
    """The plugin folder this server was started from."""
    return f"plugin root {os.environ.get('CLAUDE_PLUGIN_ROOT')} file {os.path.abspath(__file__)}"


server.run()
