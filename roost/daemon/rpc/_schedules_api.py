"""The methods of schedules: add, list, remove, run now, pause, resume (see
``roost.daemon.schedules``)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import trio

from roost.protocol import MODES, ErrorCode, RpcError

from ..runs._conductor import Conductor
from ..schedules import MISSED, CronError, Schedule, Scheduler, local_zone, next_after
from ._api_part import ApiPart, Handler, checked_cwd
from ._connection import Connection

#: What a schedule's name may be.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class SchedulesApi(ApiPart):
    """``schedules.*``."""

    def __init__(self, conductor: Conductor, shutdown: trio.Event, scheduler: Scheduler | None) -> None:
        super().__init__(conductor, shutdown)
        self._scheduler = scheduler

    def table(self) -> dict[str, Handler]:
        """This part's methods and their handlers."""
        return {
            "schedules.add": self.add,
            "schedules.list": self.listed,
            "schedules.remove": self.remove,
            "schedules.run": self.run,
            "schedules.pause": self.pause,
            "schedules.resume": self.resume,
        }

    async def add(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        scheduler = self._need()
        task = params["task"].strip()
        if not task:
            raise RpcError(ErrorCode.INVALID_PARAMS, "task is empty")
        name = params.get("name") or _name_of(task)
        if not _NAME.fullmatch(name):
            raise RpcError(ErrorCode.INVALID_PARAMS, f"{name!r}: a schedule's name is letters, digits, '.', '_' and '-'")
        mode = params.get("mode") or "agent"
        if mode not in MODES:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"mode must be one of {', '.join(MODES)}")
        missed = params.get("missed") or "once"
        if missed not in MISSED:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"missed must be one of {', '.join(MISSED)}")
        tz = params.get("tz") or local_zone()
        now = scheduler.now()
        try:
            due = next_after(params["cron"], tz, now)
        except CronError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None
        schedule = Schedule(
            name, params["cron"], tz, task, checked_cwd(params.get("cwd")), params.get("agent"), params.get("model"),
            mode, missed, created=now, next_due=due,
        )
        if not await scheduler.table.add(schedule):
            raise RpcError(ErrorCode.INVALID_PARAMS, f"there is a schedule {name!r} already: give another --name")
        scheduler.changed()
        return {"schedule": schedule.to_map()}

    async def listed(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"schedules": [s.to_map() for s in await self._need().table.all()]}

    async def remove(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        scheduler = self._need()
        if not await scheduler.table.remove(params["name"]):
            raise _unknown(params["name"])
        scheduler.changed()
        return {"ok": True}

    async def run(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        scheduler = self._need()
        schedule = await self._schedule(scheduler, params["name"])
        return {"schedule": (await scheduler.run_now(schedule)).to_map()}

    async def pause(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._paused(params["name"], True)

    async def resume(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return await self._paused(params["name"], False)

    async def _paused(self, name: str, paused: bool) -> dict[str, Any]:
        scheduler = self._need()
        schedule = await self._schedule(scheduler, name)
        if not paused and schedule.paused:
            # Resumed: due next from now, not at a time that passed while it was paused.
            schedule = replace(schedule, next_due=next_after(schedule.cron, schedule.tz, scheduler.now()))
        schedule = replace(schedule, paused=paused)
        await scheduler.table.save(schedule)
        scheduler.changed()
        return {"schedule": schedule.to_map()}

    def _need(self) -> Scheduler:
        if self._scheduler is None:
            raise RpcError(ErrorCode.INVALID_PARAMS, "this daemon runs no schedules")
        return self._scheduler

    async def _schedule(self, scheduler: Scheduler, name: str) -> Schedule:
        schedule = await scheduler.table.get(name)
        if schedule is None:
            raise _unknown(name)
        return schedule


def _unknown(name: str) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, f"no schedule {name!r} (roost schedule list shows them)")


def _name_of(task: str) -> str:
    """A name from a task's first words (``nightly-tests`` from "nightly tests, then ...")."""
    words = re.findall(r"[A-Za-z0-9]+", task.lower())[:3]
    return "-".join(words) or "schedule"
