"""The scheduler: the daemon runs each schedule's task when it is due, as a run any client
can attach to (its approvals wait for a person, as any run's do).

- Due: its cron expression, in its time zone (``_cron``), after the time it last came due;
  the next time is counted from when it ran, so a daemon that was busy or asleep does not
  run a backlog.
- Missed while the daemon was down: ``once`` runs it once when the daemon starts, ``skip``
  waits for the next time (and says so in ``last_error``).
- Overlap: a schedule whose last run is still going is not started again; that time is
  skipped, and said.
- ``run_now``: a run now, whatever the time (``roost schedule run NAME``); when it is next
  due stays as it was.

The wall clock is read through ``now`` (tests give one that trio's mock clock moves), and
the scheduler looks again at least every :data:`LOOK_AGAIN` seconds, so a machine that slept
through a due time finds it on waking.
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from dataclasses import replace
from typing import Awaitable, Callable

import trio

from ._cron import CronError, next_after
from ._table import Schedule, ScheduleTable

__all__ = ["LOOK_AGAIN", "Scheduler"]

log = logging.getLogger(__name__)

#: Seconds the scheduler sleeps at most before it reads the clock again.
LOOK_AGAIN = 60.0

#: Starts a schedule's run: its session and run ids. Raises what a dispatch raises.
StartRun = Callable[[Schedule], Awaitable[tuple[str, str]]]
#: Whether a session has a run in flight.
Running = Callable[[str], Awaitable[bool]]


class Scheduler:
    """Runs the schedules of a :class:`ScheduleTable` when they are due (see the module)."""

    def __init__(
        self, table: ScheduleTable, start: StartRun, running: Running, now: Callable[[], float] = time.time,
        look_again: float = LOOK_AGAIN,
    ) -> None:
        self.table = table
        self._look_again = look_again
        self._start = start
        self._running = running
        self._now = now
        self._wake = trio.Event()
        #: One schedule fires at a time (the loop, or a run asked for now).
        self._firing = trio.Lock()

    def now(self) -> float:
        """The wall clock the scheduler goes by."""
        return self._now()

    def changed(self) -> None:
        """A schedule was added, changed or removed: look at the table again now."""
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Forever: run what is due, sleep until the next is (started once the times missed
        while the daemon was down are dealt with)."""
        await self._missed()
        task_status.started()
        while True:
            self._wake = trio.Event()
            soonest = math.inf
            for schedule in await self.table.all():
                if schedule.paused:
                    continue
                if schedule.next_due <= self._now():
                    schedule = await self._fire(schedule, manual=False)
                soonest = min(soonest, schedule.next_due)
            with trio.move_on_after(min(self._look_again, max(0.0, soonest - self._now()))):
                await self._wake.wait()

    async def run_now(self, schedule: Schedule) -> Schedule:
        """Run ``schedule`` now; the schedule as it is after."""
        return await self._fire(schedule, manual=True)

    async def _missed(self) -> None:
        now = self._now()
        for schedule in await self.table.all():
            if schedule.next_due <= now and schedule.missed == "skip" and not schedule.paused:
                when = datetime.datetime.fromtimestamp(schedule.next_due).isoformat(timespec="minutes")
                await self.table.save(replace(
                    schedule, next_due=_next(schedule, now), last_error=f"skipped: due at {when} while the daemon was down"
                ))

    async def _fire(self, schedule: Schedule, *, manual: bool) -> Schedule:
        async with self._firing:
            current = await self.table.get(schedule.name)
            if current is None:
                return schedule  # removed meanwhile
            schedule = updated = current
            now = self._now()
            if schedule.last_session and await self._running(schedule.last_session):
                note = f"skipped: its last run (session {schedule.last_session}) was still going"
                log.info("schedule %s: %s", schedule.name, note)
                updated = replace(schedule, last_error=note)
            else:
                try:
                    session, run = await self._start(schedule)
                except Exception as exc:
                    # Said where the user looks (roost schedule list); the schedule goes on.
                    log.warning("schedule %s: not started: %s", schedule.name, exc)
                    updated = replace(schedule, last_run=now, last_error=f"not started: {getattr(exc, 'message', None) or exc}")
                else:
                    log.info("schedule %s: run %s in session %s", schedule.name, run, session)
                    updated = replace(schedule, runs=schedule.runs + 1, last_run=now, last_session=session,
                                      last_run_id=run, last_error=None)
            if not manual:
                updated = replace(updated, next_due=_next(schedule, now))
            await self.table.save(updated)
            return updated


def _next(schedule: Schedule, after: float) -> float:
    try:
        return next_after(schedule.cron, schedule.tz, after)
    except CronError:
        return math.inf  # checked when it was added: a zone gone since never comes due
