"""The tools a session can call, and the one place a call is checked and run.

A call to an unknown tool, with input that breaks the tool's JSON Schema, or that raises,
becomes an error result the model sees; it never ends the run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Iterable, Mapping

import trio

from ..providers import ToolSpec
from ._ask_human import ASK_HUMAN
from ._base import Tool, ToolContext, ToolResult
from ._bash import BASH
from ._edit import EDIT
from ._glob import GLOB
from ._grep import GREP
from ._read import READ
from ._notebook import NOTEBOOK_EDIT, NOTEBOOK_READ
from ._recall import RECALL
from ._remember import REMEMBER
from ._shells import BASH_OUTPUT, KILL_SHELL
from ._skill import SKILL
from ._todo import TODO
from ._web_fetch import WEB_FETCH_TOOL
from ._write import WRITE

log = logging.getLogger(__name__)

BUILTIN_TOOLS: tuple[Tool, ...] = (
    BASH, BASH_OUTPUT, KILL_SHELL, READ, WRITE, EDIT, NOTEBOOK_READ, NOTEBOOK_EDIT, GLOB, GREP, ASK_HUMAN, SKILL,
    REMEMBER, RECALL, TODO, WEB_FETCH_TOOL,
)

#: Worker threads the tools of one registry (one daemon) use at most, all calls together.
TOOL_THREADS = 16


class ToolRegistry:
    """Tools by name, and the worker threads their calls share.

    Resource handling:
        Owns :attr:`threads`, a capacity limiter of :data:`TOOL_THREADS` that every call's
        blocking work (file reads, walks, searches, writes) runs under, apart from trio's
        default limiter and the store's: a call that waits for a thread delays other tool
        calls only.
    """

    def __init__(self, tools: Iterable[Tool] = BUILTIN_TOOLS, *, threads: int = TOOL_THREADS) -> None:
        self._tools = {tool.name: tool for tool in tools}
        # Made once: every model call offers them, and what a call holds lives as long as
        # it does (seconds), past the collector's young generation (bench/scale.py).
        self._specs = {name: ToolSpec(name, tool.description, tool.input_schema) for name, tool in self._tools.items()}
        self._validators: dict[str, Any] = {}
        self.threads = trio.CapacityLimiter(threads)

    def names(self) -> tuple[str, ...]:
        """Every tool's name."""
        return tuple(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if any."""
        return self._tools.get(name)

    def spec(self, name: str) -> ToolSpec | None:
        """How the tool called ``name`` is offered to a model, if there is one."""
        return self._specs.get(name)

    async def call(self, name: str, input: Any, ctx: ToolContext) -> ToolResult:
        """Check and run one call; every failure comes back as an error result."""
        started = time.monotonic()
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(
                f"unknown tool {name!r}; available: {', '.join(sorted(self._tools))}", is_error=True
            )
        problem = self._check(tool, input)
        if problem is not None:
            return ToolResult(f"invalid input for {name}: {problem}", is_error=True)
        if ctx.threads is None:
            ctx = replace(ctx, threads=self.threads)
        try:
            result = await tool.run(input, ctx)
        except Exception as exc:
            log.exception("tool %s failed", name)
            return ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
        meta = {"latency": time.monotonic() - started, **result.meta}
        return ToolResult(result.text, result.is_error, meta, result.parts)

    def _check(self, tool: Tool, input: Any) -> str | None:
        if not isinstance(input, Mapping):
            return "input must be an object"
        validator = self._validators.get(tool.name)
        if validator is None:
            import jsonschema

            validator = self._validators[tool.name] = jsonschema.Draft202012Validator(tool.input_schema)
        error = next(iter(sorted(validator.iter_errors(input), key=lambda e: list(e.path))), None)
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message
