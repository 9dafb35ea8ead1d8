"""What a tool is (a name, a JSON Schema for its input, an async function), and what every
tool shares: the output cut and the one check of where a path really is."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, TypeVar

import trio

from ..runs._environ import tool_environment
from ._fs import KernelPath, real_paths, resolve
from ._media import Media

if TYPE_CHECKING:
    from ..memory import MemoryIndex
    from ..sandbox import RunSandbox
    from ._ledger import ProcessLedger
    from ._shells import Shells

_T = TypeVar("_T")


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
    #: secrets); see roost.daemon.runs._environ.
    env: Mapping[str, str] | None = None
    #: The user trusted the session's folder: project files that link out of it are read.
    trusted_folder: bool = False
    #: The enabled Claude Code plugins' skill folders (see ``folder._project.Place``).
    plugin_skills: tuple[tuple[str, str], ...] = ()
    #: What the run's permission policy says to a read of a real path: ``allow``, ``ask``
    #: or ``deny`` (None: no policy, as in tests of the tools alone). glob and grep ask it
    #: about every file they walk into, read about its file (see :func:`readable`).
    read_permission: Callable[[str], str] | None = None
    #: The run's sandbox, where a command runs (None: it runs as it is).
    sandbox: RunSandbox | None = None
    #: The worker threads a tool's blocking work runs on (see :meth:`in_thread`); the
    #: registry sets its own, shared by its tools and nothing else (None: trio's default).
    threads: trio.CapacityLimiter | None = None
    #: web_fetch may reach loopback, link-local and private addresses (the user's
    #: ``[tools.web_fetch] allow_private``); otherwise only public ones.
    private_network: bool = False
    #: The run's background commands (``bash`` with ``run_in_background``, read by
    #: ``bash_output``, ended by ``kill_shell``); None: none can be started.
    shells: Shells | None = None
    #: What the daemon remembers, for ``recall`` (None: nothing can be recalled).
    memory: MemoryIndex | None = None

    def process_env(self) -> dict[str, str]:
        """The environment a tool's process gets."""
        return dict(self.env) if self.env is not None else tool_environment(os.environ)

    async def in_thread(self, fn: Callable[..., _T], *args: Any, abandon_on_cancel: bool = False) -> _T:
        """``fn(*args)`` in a worker thread of the tools' own (:attr:`threads`).

        Tools never borrow the threads the store commits with: files that are slow to read
        (a network file system) or many tool calls at once can make runs wait for tool
        threads, never stop the daemon storing events.
        """
        return await trio.to_thread.run_sync(fn, *args, limiter=self.threads, abandon_on_cancel=abandon_on_cancel)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call, as the model sees it."""

    text: str
    is_error: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Media the model sees after the text (an image read, an MCP tool's image).
    parts: tuple[Media, ...] = ()


@dataclass(frozen=True, slots=True)
class Tool:
    """A built-in tool."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolResult]]
    #: Its calls only read: they may run beside each other (the others run one at a time).
    read_only: bool = False


def truncate(text: str, limit: int, total: int | None = None) -> str:
    """``text`` cut to ``limit`` characters, with a note of how much was cut.

    ``total`` is the whole output's size when ``text`` is already only its start.
    """
    total = len(text) if total is None else max(total, len(text))
    if total <= limit:
        return text
    return f"{text[:limit]}\n[... output truncated: {total - limit} more characters not shown]"


def real_path(cwd: str, path: str) -> str:
    """Where ``path`` (relative to ``cwd``, ``~`` expanded) really leads: ``..``, ``//``,
    ``/proc/self/root`` and every symlink followed (blocking: a few ``lstat`` calls).

    The daemon resolves the paths a call names with it before the call is decided; the
    tools resolve them again when they run (:func:`locate`), and open what they resolved
    without following links.
    """
    return os.path.realpath(Path(cwd) / Path(path).expanduser())


def locate(ctx: ToolContext, path: str) -> tuple[Path, bool] | ToolResult:
    """Where ``path`` (relative to the working directory, ``~`` expanded) really is, and
    whether it lies inside the working directory (itself resolved); or the error result
    the model sees instead (blocking: a few ``lstat`` calls).

    This is the one place that decides "inside". The permission policy decides on the
    same real paths (the daemon resolves them with :func:`real_path` first); a path that a
    symlink takes outside after that is refused here, unless the call was allowed to go
    there. A path into ``/proc``, ``/sys`` or ``/dev`` is always refused. The real path
    has no link left in it: the tools open it with ``_fs.open_path``, which follows none,
    so that a link swapped in after this point is refused, never followed.
    """
    try:
        real = Path(resolve(os.path.expanduser(path), ctx.cwd))
    except KernelPath as exc:
        return ToolResult(str(exc.strerror), is_error=True)
    except (OSError, ValueError) as exc:
        return ToolResult(f"cannot resolve {path}: {getattr(exc, 'strerror', None) or exc}", is_error=True)
    inside = real.is_relative_to(os.path.realpath(ctx.cwd))
    if not inside and not ctx.outside_ok:
        return ToolResult(
            f"{path} resolves to {real}, outside the working directory ({ctx.cwd}); name that "
            "path in the call so that a person can be asked to approve it",
            is_error=True,
            meta={"outside": True},
        )
    return real, inside


def readable(root: Path, files: list[str], ctx: ToolContext) -> list[tuple[str, str]]:
    """Those of ``files`` (paths relative to the real folder ``root``) that a search may
    read, judged where each really leads, each with the real path it was judged on: the
    path to open, with ``_fs.open_path`` (blocking: run it in a worker thread).

    A file inside ``root`` (the folder the call was decided on) is read unless a deny rule
    on reads holds for its real path; a file that a symlink takes out of ``root`` is read
    only if a read of its target would be allowed without asking. Without a policy
    (``read_permission`` None), a link out of ``root`` is followed only into the working
    directory. A file that leads into ``/proc``, ``/sys`` or ``/dev`` is never read, nor
    one a folder swapped for a link since the listing passed off as its own
    (:func:`_fs.real_paths`).
    """
    base = str(root).rstrip("/") + "/"
    project = os.path.realpath(ctx.cwd).rstrip("/") + "/"
    kept = []
    for name, real in real_paths(str(root), files):
        within = real.startswith(base)
        if ctx.read_permission is not None:
            action = ctx.read_permission(real)
            ok = action != "deny" if within else action == "allow"
        else:
            ok = within or real.startswith(project)
        if ok:
            kept.append((name, real))
    return kept


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (a tool's command and everything it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
