"""A run while it lasts: its :class:`LiveRun` (nursery, sandbox, tool limiter, streamed
text, the rules it was given), made when the run starts and gone when it ends, with the MCP servers it uses held
running meanwhile."""

from __future__ import annotations

from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable

import trio

from ..mcp import McpManager
from ..sandbox import RunSandbox
from ..tools import ProcessLedger, Shell, Shells
from ._media import MediaMemo

if TYPE_CHECKING:
    from ._sessions import Track

#: Tool calls of one step that may run at the same time.
TOOL_CONCURRENCY = 8


@dataclass(eq=False)
class LiveRun:
    """What a track's run has exactly while it lasts."""

    #: Its effects run here; cancelling it ends them all.
    nursery: trio.Nursery
    #: The sandbox its commands run in (None: unsandboxed): its own, built at its first
    #: command, or its caller's when that one holds it.
    sandbox: RunSandbox | None
    #: Set once the run has ended and its tasks and sandbox with it.
    done: trio.Event
    #: Its background commands (watched in :attr:`nursery`: they end with the run).
    shells: Shells
    #: Bounds the tool calls of one step that run at once (a sub-agent's count with its
    #: caller's: they share it).
    tool_limiter: trio.CapacityLimiter = field(default_factory=lambda: trio.CapacityLimiter(TOOL_CONCURRENCY))
    #: Text streamed so far by the model call in flight (kept if the run is aborted).
    streamed: list[str] = field(default_factory=list)
    #: What the PreToolUse hooks left for a call's result (by call id: the hooks that
    #: failed, and whether they changed its input), until it runs.
    prepared: dict[str, tuple[tuple[str, ...], bool]] = field(default_factory=dict)
    #: The path-scoped rules (by file) whose text the run's tool results carried: each
    #: is given once a run.
    rules_given: set[str] = field(default_factory=set)
    #: What its last model call sent, so the next looks through only what is new for media.
    media: MediaMemo = field(default_factory=MediaMemo)


@asynccontextmanager
async def live_run(
    cwd: str,
    track: Track,
    caller: Track | None,
    *,
    mcp: McpManager | None,
    ledger: ProcessLedger | None,
    on_failure: Callable[[str], Awaitable[None]],
    shown: tuple[str, ...] = (),
    background: set[Shell] | None = None,
) -> AsyncIterator[LiveRun]:
    """``track``'s run while the block lasts: its MCP servers held, its sandbox (its
    caller's, when that one holds it: a sub-agent with the same policy; else its own, built
    at its first command, ``on_failure`` told why if it cannot be) and its nursery, kept on
    it as its :class:`LiveRun`. A sub-agent's tool calls count with its caller's. Its own
    sandbox shows its commands ``shown`` (the session's transcript), read-only."""
    plan = track.plan
    done = trio.Event()
    live: LiveRun | None = None
    shells: Shells | None = None
    shared = caller.live if caller is not None else None
    confined = plan.confinement if plan is not None else None
    caller_box = shared.sandbox if shared is not None else None
    own = None if confined is None or (caller_box is not None and caller_box.fits(confined)) else confined
    try:
        with mcp.hold(plan.mcp_servers) if mcp is not None and plan is not None else nullcontext():
            async with (
                RunSandbox(own, cwd, ledger=ledger, on_failure=on_failure, shown=shown) if own is not None else nullcontext()
            ) as box, trio.open_nursery() as nursery:
                sandbox = box if own is not None else (caller_box if confined is not None else None)
                shells = Shells(nursery, running=background)
                live = track.live = LiveRun(nursery, sandbox, done, shells)
                if shared is not None:
                    live.tool_limiter = shared.tool_limiter
                yield live
    finally:
        if shells is not None:
            shells.close()  # its commands' tasks ended with the nursery
        # Unless the track's next run has begun meanwhile (once this one's end was stored,
        # while its tasks and its sandbox ended).
        if live is not None and track.live is live:
            track.live = None
        done.set()
