"""The schedules, in the daemon's database (the ``schedules`` table, see
``storage._schema``), on a connection of their own: they are written seldom, and never on
a run's path.

All SQLite work runs on one worker thread at a time (the table's own limiter).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, TypeVar

import trio

from ..storage._schema import connect

__all__ = ["MISSED", "Schedule", "ScheduleTable"]

_T = TypeVar("_T")

#: What a schedule does about a time it was due while the daemon was down: run ``once``
#: when the daemon starts, or ``skip`` it.
MISSED = ("once", "skip")


@dataclass(frozen=True, slots=True)
class Schedule:
    """A task the daemon runs by itself when ``cron`` says, in the time zone ``tz``."""

    name: str
    cron: str
    tz: str
    task: str
    cwd: str
    agent: str | None = None
    model: str | None = None
    mode: str = "agent"
    missed: str = "once"
    paused: bool = False
    created: float = 0.0
    #: When it is next due (seconds since the epoch).
    next_due: float = 0.0
    #: Runs started so far, and the last one: when, its session and run, or why it did not
    #: start.
    runs: int = 0
    last_run: float | None = None
    last_session: str | None = None
    last_run_id: str | None = None
    last_error: str | None = None

    def to_map(self) -> dict[str, Any]:
        """The schedule as the protocol carries it."""
        return asdict(self)


_COLUMNS = tuple(f.name for f in fields(Schedule))


class ScheduleTable:
    """The ``schedules`` table.

    Resource handling:
        :meth:`open` it; :meth:`close` when done.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._thread = trio.CapacityLimiter(1)

    @classmethod
    def open(cls, path: Path) -> ScheduleTable:
        """The table of the (migrated) database at ``path``."""
        return cls(connect(path))

    async def close(self) -> None:
        """Close the connection."""
        await self._run(self._db.close)

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self._thread)

    async def all(self) -> list[Schedule]:
        """Every schedule, by name."""
        return await self._run(self._select, "ORDER BY name", ())

    async def get(self, name: str) -> Schedule | None:
        """The schedule called ``name`` (None: there is none)."""
        return next(iter(await self._run(self._select, "WHERE name = ?", (name,))), None)

    def _select(self, where: str, args: tuple[str, ...]) -> list[Schedule]:
        rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM schedules {where}", args).fetchall()
        return [replace(Schedule(**dict(zip(_COLUMNS, row))), paused=bool(row[9])) for row in rows]

    async def add(self, schedule: Schedule) -> bool:
        """Store a new schedule; False if one has its name already."""
        return await self._run(self._add, schedule)

    def _add(self, schedule: Schedule) -> bool:
        values = asdict(schedule)
        values["paused"] = int(schedule.paused)
        try:
            self._db.execute(
                f"INSERT INTO schedules ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                tuple(values[c] for c in _COLUMNS),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    async def save(self, schedule: Schedule) -> None:
        """Store what changed of an existing schedule (its name says which)."""
        await self._run(self._save, schedule)

    def _save(self, schedule: Schedule) -> None:
        values = {**asdict(schedule), "paused": int(schedule.paused)}
        columns = [c for c in _COLUMNS if c != "name"]
        self._db.execute(
            f"UPDATE schedules SET {', '.join(f'{c} = ?' for c in columns)} WHERE name = ?",
            (*(values[c] for c in columns), schedule.name),
        )

    async def remove(self, name: str) -> bool:
        """Delete a schedule; False if there was none."""
        return await self._run(lambda: self._db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount > 0)
