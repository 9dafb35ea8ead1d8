"""A schedule's run, started by the daemon itself: planned as a dispatch of its task (in its
folder, with its agent, model and mode) with the daemon's own environment, in a new
session; its ``run.started`` carries the request id ``schedule NAME @TIME``."""

from __future__ import annotations

import datetime
import os

from ..schedules import Schedule
from ._conductor import Conductor
from ._plan import Dispatch
from ._sessions import SessionNotFound
from ._settings import Asked

__all__ = ["scheduled_run", "session_running"]


async def scheduled_run(conductor: Conductor, schedule: Schedule) -> tuple[str, str]:
    """Start ``schedule``'s run now: its session and run ids.

    Raises:
        What a dispatch's plan raises (ConfigError, PlanError, ProviderError, SettingsError).
    """
    asked = Asked.from_params({"agent": schedule.agent, "model": schedule.model, "mode": schedule.mode})
    when = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    plan = await conductor.planner.dispatch(
        Dispatch(schedule.cwd, schedule.task, asked, dict(os.environ), request_id=f"schedule {schedule.name} @{when}")
    )
    session = await conductor.sessions.create(schedule.cwd)
    with session.claim():
        run = await conductor.start_run(session, plan)
    return session.id, run


async def session_running(conductor: Conductor, session_id: str) -> bool:
    """Whether the session has a run in flight (False: there is no such session now)."""
    try:
        session = await conductor.sessions.get(session_id)
    except SessionNotFound:
        return False
    return session.state.run is not None
