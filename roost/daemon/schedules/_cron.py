"""When a schedule is due: cron expressions read by ``cronsim`` (a maintained, dependency-free
library: five fields, ``@daily`` and friends, ``L`` and ``#``), in a time zone, so that
``0 9 * * 1-5`` is nine in the morning there, summer time or not."""

from __future__ import annotations

import datetime
import os
import zoneinfo

from cronsim import CronSim, CronSimError

__all__ = ["CronError", "local_zone", "next_after"]


class CronError(ValueError):
    """A cron expression or a time zone that cannot be used; the message says which."""


def next_after(expression: str, tz: str, ts: float) -> float:
    """The first time after ``ts`` (seconds since the epoch) that ``expression`` names in the
    time zone ``tz``.

    Raises:
        CronError: the expression or the zone cannot be used.
    """
    try:
        zone = zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CronError(f"{tz!r} is not a time zone (one such as UTC or Europe/Paris)") from None
    try:
        return next(CronSim(expression, datetime.datetime.fromtimestamp(ts, zone))).timestamp()
    except CronSimError as exc:
        raise CronError(f"{expression!r} is not a cron expression: {exc} (five fields: minute hour day month weekday)") from None
    except StopIteration:
        raise CronError(f"{expression!r} is never due") from None


def local_zone() -> str:
    """This machine's time zone by name (``TZ``, else where ``/etc/localtime`` leads; else
    UTC)."""
    for name in (os.environ.get("TZ", "").removeprefix(":"), _linked_zone()):
        if name:
            try:
                zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                continue
            return name
    return "UTC"


def _linked_zone() -> str:
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return ""
    _, found, name = target.partition("/zoneinfo/")
    return name if found else ""
