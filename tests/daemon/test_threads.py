"""``in_worker``: blocking work off the event loop's thread, its result or its error
brought back, and never abandoned halfway by a cancellation."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from roost.daemon._threads import in_worker


async def test_the_work_runs_on_another_thread_and_its_result_comes_back() -> None:
    loop = threading.get_ident()
    assert await in_worker(lambda a, b: (threading.get_ident() != loop, a + b), 2, 3) == (True, 5)


async def test_what_the_work_raises_is_raised_in_the_caller() -> None:
    def fails() -> None:
        raise ValueError("disk says no")

    with pytest.raises(ValueError, match="disk says no"):
        await in_worker(fails)


async def test_a_cancellation_waits_for_the_work_to_finish() -> None:
    finished: list[bool] = []

    def slow() -> str:
        time.sleep(0.05)
        finished.append(True)
        return "done"

    with trio.move_on_after(0.001) as scope:
        assert await in_worker(slow) == "done"
        await trio.lowlevel.checkpoint()  # where the cancellation lands
    assert scope.cancelled_caught and finished == [True]
