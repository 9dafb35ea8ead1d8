"""Schedules: the scheduler on trio's mock clock (due times in a time zone, a time missed
while the daemon was down, overlap, pause and resume, a run asked for now), and schedules
through a real daemon (the methods, a due run started by the daemon itself when it starts).
"""

from __future__ import annotations

import datetime
import sqlite3
import zoneinfo
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio
import trio.testing

from roost.daemon.schedules import CronError, Schedule, Scheduler, ScheduleTable, next_after
from roost.daemon.storage._schema import connect, migrate
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import events_until, serving, text, write_script

#: Friday 27 November 2026, 06:00 UTC (07:00 in Paris).
BASE = datetime.datetime(2026, 11, 27, 6, 0, tzinfo=datetime.timezone.utc).timestamp()


def at(hour: int, minute: int = 0, day: int = 27) -> float:
    return datetime.datetime(2026, 11, day, hour, minute, tzinfo=datetime.timezone.utc).timestamp()


def test_cron_is_read_in_the_schedules_time_zone() -> None:
    assert next_after("0 9 * * *", "UTC", BASE) == at(9)
    assert next_after("0 9 * * *", "Europe/Paris", BASE) == at(8)  # 09:00 in Paris (UTC+1)
    assert next_after("0 9 * * 1-5", "UTC", at(9)) == at(9, day=30)  # Friday's has passed: Monday
    # Summer time: 09:00 in Paris is 07:00 UTC in July.
    july = datetime.datetime(2027, 7, 1, 8, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")).timestamp()
    assert datetime.datetime.fromtimestamp(next_after("0 9 * * *", "Europe/Paris", july), datetime.timezone.utc).hour == 7
    for cron, tz, said in [("every day", "UTC", "is not a cron expression"), ("0 9 * * *", "Mars/Base", "is not a time zone")]:
        with pytest.raises(CronError, match=said):
            next_after(cron, tz, BASE)


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """Trio's mock clock, jumping to the next deadline once nothing ran for 100 ms of real
    time: the schedules table's SQLite calls run on a worker thread, which trio counts as
    idle, and an immediate jump would pass due times while one is under way."""
    return trio.testing.MockClock(autojump_threshold=0.1)


class Runs:
    """What the scheduler starts (its start and running callbacks)."""

    def __init__(self) -> None:
        self.started: list[tuple[str, float]] = []
        self.busy: set[str] = set()
        self.fail: str | None = None

    async def start(self, schedule: Schedule) -> tuple[str, str]:
        if self.fail:
            raise ValueError(self.fail)
        self.started.append((schedule.name, BASE + trio.current_time()))
        return f"s{len(self.started)}", f"r{len(self.started)}"

    async def running(self, session: str) -> bool:
        return session in self.busy


@pytest.fixture
async def table(tmp_path: Path) -> AsyncIterator[ScheduleTable]:
    db = tmp_path / "roost.db"
    _migrated(db)
    opened = ScheduleTable.open(db)
    yield opened
    await opened.close()


def _migrated(db: Path) -> None:
    connection = connect(db)
    migrate(connection)
    connection.close()


def every(name: str, cron: str, due: float, **kw: Any) -> Schedule:
    return Schedule(name, cron, kw.pop("tz", "UTC"), f"task of {name}", "/p", created=BASE, next_due=due, **kw)


async def _scheduler(nursery: trio.Nursery, table: ScheduleTable, runs: Runs) -> Scheduler:
    # It reads the clock again only when something is due (the mock clock never drifts).
    scheduler = Scheduler(table, runs.start, runs.running, now=lambda: BASE + trio.current_time(), look_again=1e9)
    await nursery.start(scheduler.run)
    return scheduler


async def test_a_schedule_runs_each_time_it_is_due(clock: trio.testing.MockClock, nursery: trio.Nursery, table: ScheduleTable) -> None:
    runs = Runs()
    await table.add(every("half", "*/30 * * * *", next_after("*/30 * * * *", "UTC", BASE)))
    await table.add(every("nine", "0 9 * * *", at(8), tz="Europe/Paris"))
    await _scheduler(nursery, table, runs)
    await trio.sleep(at(9) - BASE + 1)
    assert [when for name, when in runs.started if name == "half"] == [BASE + 1800 * n for n in range(1, 7)]
    assert [when for name, when in runs.started if name == "nine"] == [at(8)]
    nine = await table.get("nine")
    assert nine is not None and (nine.runs, nine.last_session, nine.next_due) == (1, "s" + str(runs.started.index(("nine", at(8))) + 1), at(8, day=28))


async def test_a_time_missed_while_the_daemon_was_down_runs_once_or_is_skipped(
    clock: trio.testing.MockClock, nursery: trio.Nursery, table: ScheduleTable
) -> None:
    runs = Runs()
    await table.add(every("once", "0 * * * *", BASE - 3 * 3600))  # due three hours ago
    await table.add(every("skip", "0 * * * *", BASE - 3 * 3600, missed="skip"))
    await _scheduler(nursery, table, runs)
    await trio.sleep(1)
    assert runs.started == [("once", BASE)]
    skipped = await table.get("skip")
    assert skipped is not None and skipped.runs == 0 and skipped.next_due == BASE + 3600
    assert skipped.last_error is not None and skipped.last_error.startswith("skipped: due at ")
    once = await table.get("once")
    assert once is not None and once.next_due == BASE + 3600


async def test_a_schedule_whose_last_run_still_goes_is_not_started_again(
    clock: trio.testing.MockClock, nursery: trio.Nursery, table: ScheduleTable
) -> None:
    runs = Runs()
    await table.add(every("hourly", "0 * * * *", BASE + 3600))
    await _scheduler(nursery, table, runs)
    await trio.sleep(3601)
    runs.busy.add("s1")
    await trio.sleep(3600)
    hourly = await table.get("hourly")
    assert hourly is not None and len(runs.started) == 1
    assert hourly.last_error == "skipped: its last run (session s1) was still going" and hourly.next_due == BASE + 3 * 3600
    runs.busy.clear()
    await trio.sleep(3600)
    assert len(runs.started) == 2


async def test_pause_resume_and_run_now(clock: trio.testing.MockClock, nursery: trio.Nursery, table: ScheduleTable) -> None:
    runs = Runs()
    await table.add(every("hourly", "0 * * * *", BASE + 3600, paused=True))
    scheduler = await _scheduler(nursery, table, runs)
    await trio.sleep(5 * 3600)
    assert runs.started == []
    paused = await table.get("hourly")
    assert paused is not None
    await table.save(replace(paused, paused=False, next_due=next_after(paused.cron, paused.tz, scheduler.now())))
    scheduler.changed()
    await trio.sleep(3601)
    assert [name for name, _ in runs.started] == ["hourly"]
    # Now, whatever the time; when it is next due stays.
    before = await table.get("hourly")
    assert before is not None
    after = await scheduler.run_now(before)
    assert len(runs.started) == 2 and after.next_due == before.next_due and after.runs == 2
    # A run that cannot start says why, and the schedule goes on.
    runs.fail = "no model"
    failed = await scheduler.run_now(after)
    assert failed.last_error == "not started: no model" and failed.runs == 2


# -- through the daemon ---------------------------------------------------------------------------


async def test_schedules_through_the_daemon(client: TrioClient, project: Path) -> None:
    added = (await client.call("schedules.add", cron="0 7 * * 1-5", task="Run the tests, then summarize", cwd=str(project),
                               mode="exec", tz="Europe/Paris"))["schedule"]
    assert (added["name"], added["mode"], added["tz"], added["missed"], added["paused"]) == (
        "run-the-tests", "exec", "Europe/Paris", "once", False)
    due = datetime.datetime.fromtimestamp(added["next_due"], zoneinfo.ZoneInfo("Europe/Paris"))
    assert (due.hour, due.minute) == (7, 0) and due.weekday() < 5
    for params, said in [
        ({"cron": "every day"}, "is not a cron expression"),
        ({"cron": "0 7 * * *", "tz": "Nowhere/Else"}, "is not a time zone"),
        ({"cron": "0 7 * * *"}, "there is a schedule 'run-the-tests' already"),
        ({"cron": "0 7 * * *", "name": "x", "mode": "turbo"}, "mode must be one of"),
    ]:
        with pytest.raises(RpcError, match=said) as caught:
            await client.call("schedules.add", task="Run the tests", cwd=str(project), **params)
        assert caught.value.code == ErrorCode.INVALID_PARAMS

    paused = (await client.call("schedules.pause", name="run-the-tests"))["schedule"]
    assert paused["paused"]
    resumed = (await client.call("schedules.resume", name="run-the-tests"))["schedule"]
    assert not resumed["paused"]
    [listed] = (await client.call("schedules.list"))["schedules"]
    assert listed["name"] == "run-the-tests"
    await client.call("schedules.remove", name="run-the-tests")
    assert (await client.call("schedules.list"))["schedules"] == []
    with pytest.raises(RpcError, match="no schedule 'run-the-tests'"):
        await client.call("schedules.run", name="run-the-tests")


async def test_a_due_schedule_runs_as_a_session_any_client_can_follow(tmp_path: Path, project: Path) -> None:
    db = tmp_path / "roost.db"
    model = write_script(project, [text("The tests pass.")])
    async with serving(db) as daemon:
        async with open_client(daemon.socket_path) as client:
            await client.call("schedules.add", cron="0 3 * * *", task="check the tests", cwd=str(project),
                              model=model, name="nightly")
            # Run now, as `roost schedule run` does: a session of its own, followed like any.
            ran = (await client.call("schedules.run", name="nightly"))["schedule"]
            assert ran["last_error"] is None and ran["runs"] == 1
            await client.call("attach", session=ran["last_session"])
            events = await events_until(client, lambda e: e["type"] == "run.finished")
            assert events[-1]["text"] == "The tests pass." and events[-1]["reason"] == "done"
            started = next(e for e in events if e["type"] == "run.started")
            assert started["request_id"].startswith("schedule nightly @")
    # Due while the daemon was down: it runs once when the daemon starts.
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE schedules SET next_due = ? WHERE name = 'nightly'", (BASE - 86400,))
    async with serving(db) as daemon:
        async with open_client(daemon.socket_path) as client:
            with trio.fail_after(10):
                while (nightly := (await client.call("schedules.list"))["schedules"][0])["runs"] < 2:
                    await trio.sleep(0.05)
            assert nightly["last_session"] != ran["last_session"] and nightly["next_due"] > BASE


async def test_schedules_through_the_cli(client: TrioClient, project: Path) -> None:
    import os

    from click.testing import CliRunner

    from roost.cli._main import cli

    runner = CliRunner()
    socket = os.environ["ROOST_SOCKET"]

    def roost(*args: str) -> Any:
        return runner.invoke(cli, ["--socket", socket, *args], catch_exceptions=False)

    model = write_script(project, [text("Nothing to report.")])
    added = await trio.to_thread.run_sync(
        roost, "schedule", "add", "30 6 * * *", "report on the night", "--cwd", str(project), "--model", model,
        "--tz", "UTC", "--name", "night",
    )
    assert added.output.startswith("schedule night: next run ") and added.output.endswith(" (UTC)\n")
    ran = await trio.to_thread.run_sync(roost, "schedule", "run", "night")
    assert ran.output.startswith("schedule night: started: session ")
    shown = await trio.to_thread.run_sync(roost, "schedule", "list")
    lines = shown.output.splitlines()
    assert lines[0].startswith("night  30 6 * * * (UTC)  next ") and lines[0].endswith(f"· agent · {project}")
    assert lines[1] == "    report on the night"
    assert lines[2].startswith("    last ") and lines[2].endswith("· 1 run")
    paused = await trio.to_thread.run_sync(roost, "schedule", "pause", "night")
    assert paused.output == "schedule night: paused\n"
    gone = await trio.to_thread.run_sync(roost, "schedule", "rm", "night")
    assert gone.output == "removed schedule night\n"
    empty = await trio.to_thread.run_sync(roost, "schedule", "list", "--json")
    assert empty.output == "[]\n"
