"""Blocking work on a worker thread, for the hot paths that wait for it every step.

``trio.to_thread.run_sync`` takes a capacity limiter, copies the context, opens a cancel
scope and reports back through a closure; on this machine a call that does nothing costs
about 120 µs of CPU, and the store commits twice a step. :func:`in_worker` hands the call to
one of trio's cached worker threads and is woken with its outcome, nothing else: about 90 µs.
It cannot be cancelled (callers that must wait for the work anyway, as the store's writer
does, shield it) and takes no limiter (callers that must bound their threads make one call
at a time).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import trio

if TYPE_CHECKING:
    import outcome

_T = TypeVar("_T")


async def in_worker(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on a worker thread; its result, or what it raised. Not cancellable."""
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def deliver(result: outcome.Outcome[_T]) -> None:
        token.run_sync_soon(trio.lowlevel.reschedule, task, result)

    trio.lowlevel.start_thread_soon(functools.partial(fn, *args), deliver)
    done: _T = await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
    return done
