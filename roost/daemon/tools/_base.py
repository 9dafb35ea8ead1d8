"""What a tool is (a name, a JSON Schema for its input, an async function), and what every
tool shares: the output cut and the one check of where a path really is."""

from __future__ import annotations

import os
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, TypeVar

import trio

from .._environ import tool_environment

if TYPE_CHECKING:
    from ..sandbox import RunSandbox
    from ._ledger import ProcessLedger

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
    #: secrets); see roost.daemon._environ.
    env: Mapping[str, str] | None = None
    #: The user trusted the session's folder: project files that link out of it are read.
    trusted_folder: bool = False
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

    The daemon resolves the paths a call names with it before the call is decided, and
    the tools resolve them again with it when they run.
    """
    return os.path.realpath(Path(cwd) / Path(path).expanduser())


def resolve_path(ctx: ToolContext, path: str) -> tuple[Path, bool]:
    """Where ``path`` (relative to the working directory, ``~`` expanded) really is.

    Returns the path with every symlink followed, and whether it lies inside the working
    directory (itself resolved). This is the one place that decides "inside". The
    permission policy decides on the same real paths (the daemon resolves them with
    :func:`real_path` first); a path that a symlink takes outside after that is refused
    here (see :func:`outside_result`).
    """
    real = Path(real_path(ctx.cwd, path))
    return real, real.is_relative_to(os.path.realpath(ctx.cwd))


def readable(root: Path, files: list[str], ctx: ToolContext) -> list[str]:
    """Those of ``files`` (paths relative to the real folder ``root``) that a search may
    read, judged where each really leads (blocking: run it in a worker thread).

    A file inside ``root`` (the folder the call was decided on) is read unless a deny rule
    on reads holds for its real path; a file that a symlink takes out of ``root`` is read
    only if a read of its target would be allowed without asking. Without a policy
    (``read_permission`` None), a link out of ``root`` is followed only into the working
    directory.
    """
    base = str(root).rstrip("/") + "/"
    project = os.path.realpath(ctx.cwd).rstrip("/") + "/"
    # Each folder is resolved once; a file itself only when it is a link (one lstat).
    folders: dict[str, str] = {"": base}
    kept = []
    for name in files:
        folder, _, leaf = name.rpartition("/")
        real_folder = folders.get(folder)
        if real_folder is None:
            real_folder = folders[folder] = os.path.realpath(base + folder).rstrip("/") + "/"
        path = real_folder + leaf
        try:
            link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            continue  # gone since it was listed
        real = os.path.realpath(path) if link else path
        within = real.startswith(base)
        if ctx.read_permission is not None:
            action = ctx.read_permission(real)
            ok = action != "deny" if within else action == "allow"
        else:
            ok = within or real.startswith(project)
        if ok:
            kept.append(name)
    return kept


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
