"""Agents on a schedule: tasks the daemon runs by itself (see ``_scheduler``)."""

from ._cron import CronError, local_zone, next_after
from ._scheduler import LOOK_AGAIN, Scheduler
from ._table import MISSED, Schedule, ScheduleTable

__all__ = ["LOOK_AGAIN", "MISSED", "CronError", "Schedule", "ScheduleTable", "Scheduler", "local_zone", "next_after"]
