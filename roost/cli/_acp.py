"""``roost acp``: roost as an Agent Client Protocol agent for editors (the agent itself is
``_acp_agent``, imported only when the command runs: the ACP SDK is not light)."""

from __future__ import annotations

from typing import Any

import click

from ._connect import local_socket


@click.command()
@click.pass_obj
def acp(obj: dict[str, Any]) -> None:
    """Serve roost to an editor as an Agent Client Protocol (ACP) agent on stdin/stdout.

    Zed, JetBrains IDEs and the Neovim and Emacs plugins start it as an agent server. An
    editor's session is a roost session: `roost attach` in a terminal shows the same run,
    either side can approve, and the run goes on if the editor closes. Local daemon only
    (no --host). See docs/editors.md.

    \b
    Zed (settings.json):
      "agent_servers": {"roost": {"command": "roost", "args": ["acp"]}}
    """
    socket = local_socket(obj, "roost acp")
    from ._acp_agent import serve

    serve(socket)
