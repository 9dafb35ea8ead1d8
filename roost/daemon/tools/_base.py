"""What a tool is (a name, a JSON Schema for its input, an async function), and what every
tool shares: the output cut and the one check of where a path really is."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from .._environ import tool_environment

if TYPE_CHECKING:
    from ..sandbox import Confinement
    from ._ledger import ProcessLedger


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a call runs."""

    cwd: str
    #: Seconds before a call is ended (a call's own ``timeout`` input may lower it).
    timeout: float = 120.0
    #: Characters of output kept; the rest is cut with a note.
    output_limit: int = 30_000
    #: Where a tool records the process groups it spawns (None: not recorded).
    ledger: ProcessLedger | None = None
    #: The call may reach outside the working directory (the permission policy or a
    #: person allowed exactly that); otherwise a path that resolves outside is refused.
    outside_ok: bool = False
    #: The environment of the processes a tool starts (None: the daemon's, without
    #: secrets); see roost.daemon._environ.
    env: Mapping[str, str] | None = None
    #: The user trusted the session's folder: project files that link out of it are read.
    trusted_folder: bool = False
    #: The sandbox a command runs in (None: it runs as it is).
    sandbox: Confinement | None = None

    def process_env(self) -> dict[str, str]:
        """The environment a tool's process gets."""
        return dict(self.env) if self.env is not None else tool_environment(os.environ)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call, as the model sees it."""

    text: str
    is_error: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Tool:
    """A built-in tool."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolResult]]


def truncate(text: str, limit: int, total: int | None = None) -> str:
    """``text`` cut to ``limit`` characters, with a note of how much was cut.

    ``total`` is the whole output's size when ``text`` is already only its start.
    """
    total = len(text) if total is None else max(total, len(text))
    if total <= limit:
        return text
    return f"{text[:limit]}\n[... output truncated: {total - limit} more characters not shown]"


def resolve_path(ctx: ToolContext, path: str) -> tuple[Path, bool]:
    """Where ``path`` (relative to the working directory, ``~`` expanded) really is.

    Returns the path with every symlink followed, and whether it lies inside the working
    directory (itself resolved). This is the one place that decides "inside". The
    permission policy asks before a call names a path outside; a path that only a symlink
    takes outside is refused here (see :func:`outside_result`).
    """
    real = Path(os.path.realpath(Path(ctx.cwd) / Path(path).expanduser()))
    return real, real.is_relative_to(os.path.realpath(ctx.cwd))


def outside_result(path: str, real: Path, ctx: ToolContext) -> ToolResult | None:
    """The refusal for ``path``, which resolves to ``real`` outside the working directory,
    unless the call was allowed to go there (None: go on)."""
    if ctx.outside_ok:
        return None
    return ToolResult(
        f"{path} resolves to {real}, outside the working directory ({ctx.cwd}); name that "
        "path in the call so that a person can be asked to approve it",
        is_error=True,
        meta={"outside": True},
    )


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (a tool's command and everything it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
