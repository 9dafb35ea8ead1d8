"""A dispatch's task made from MCP prompts and resources (see ``mcp._content``).

``/mcp__server__prompt args`` runs the prompt: the daemon starts the server if it must,
asks it for the prompt with the typed arguments, and the messages' text is the task.
``@server:uri`` in the text the user typed reads that resource and sends its text after the
task. Both reach only the folder's servers that may run (a project's need trust): a
project's untrusted server is never started for them, and its prompts and resources are
not there. Resources are read only where the person typed them, never from what a
command's file or a prompt put in the task: a file of a project must not pull the user's
own servers' data into a run.
"""

from __future__ import annotations

from typing import Any

import trio

from ..folder._setup import FolderSetup
from ..mcp import McpManager, McpRequestError
from ..mcp._content import prompt_arguments, prompt_text, resource_references, resource_text, split_prompt_command, unreadable


class PromptError(Exception):
    """An MCP prompt cannot make the task; the message says why."""


def is_prompt(setup: FolderSetup, name: str) -> bool:
    """Whether ``/name`` is an MCP prompt of the folder's servers (trusted or not)."""
    parts = split_prompt_command(name)
    return parts is not None and (parts[0] in setup.mcp or parts[0] in setup.mcp_config.untrusted)


async def prompt_task(mcp: McpManager | None, setup: FolderSetup, name: str, typed: str) -> tuple[str, dict[str, Any]]:
    """The task ``/name typed`` makes (``name``: an MCP prompt's command, see
    :func:`is_prompt`), and what ``run.started`` records of it.

    Raises:
        PromptError: the server is not trusted or not there, has no such prompt, an
            argument it requires is missing, or it failed the request.
    """
    server = name[len("mcp__"):].partition("__")[0]
    if server not in setup.mcp:
        untrusted = setup.mcp_config.untrusted[server]
        raise PromptError(f"/{name}: the MCP server {server} ({untrusted.source}) is not trusted: review it with roost trust {setup.root}")
    if mcp is None:
        raise PromptError(f"/{name}: MCP servers are not available in this daemon")
    mine = {server: setup.mcp[server]}
    await mcp.ensure(mine)
    try:
        prompt = mcp.find_prompt(name, mine)
        arguments = prompt_arguments(prompt, typed)
        _, result = await mcp.get_prompt(name, arguments, mine)
    except (McpRequestError, ValueError) as exc:
        raise PromptError(str(exc)) from None
    text = prompt_text(result)
    if not text:
        raise PromptError(f"/{name}: the prompt has no text")
    command = {"name": name, "arguments": typed, "source": f"MCP server {server}", "typed": f"/{name} {typed}".rstrip(),
               "kind": "mcp prompt"}
    return text, command


async def with_resources(mcp: McpManager | None, setup: FolderSetup, typed: str, task: str) -> str:
    """``task`` with the text of each resource ``typed`` (what the person typed) names as
    ``@server:uri`` after it; a reference to no server of the folder stays text."""
    references = resource_references(typed, setup.mcp)
    if mcp is None or not references:
        return task
    await mcp.ensure({server: setup.mcp[server] for server, _ in references})
    included = [""] * len(references)

    async def read(index: int, server: str, uri: str) -> None:
        try:
            included[index] = resource_text(server, uri, await mcp.read_resource(server, uri, setup.mcp))
        except McpRequestError as exc:
            included[index] = unreadable(server, uri, str(exc))

    async with trio.open_nursery() as nursery:
        for index, (server, uri) in enumerate(references):
            nursery.start_soon(read, index, server, uri)
    return "\n\n".join([task, *included])
