"""Bounded resources, end to end (the real roost command, a real daemon process): a read of a
few lines of a huge file takes little memory; a damaged database is set aside and said so;
the daemon starts on a full disk, says what it cannot do, and works once there is room."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests._disk import fill

from .conftest import E2E, text, wait_until


def _read(path: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": "read", "input": {"path": path, **extra}}


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def _result(e2e: E2E, model: str) -> str:
    out = e2e.ok("dispatch", "--yes", "--json", "--model", model, "read it").stdout
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["reason"] == "done", events[-1]
    return next(e["result"] for e in events if e["type"] == "tool.finished")


def test_five_lines_of_a_huge_sparse_file_cost_the_daemon_little_memory(e2e: E2E) -> None:
    lines = e2e.project / "huge.log"
    with open(lines, "wb") as f:
        f.write(b"".join(b"line %d\n" % n for n in range(1, 21)))
        f.truncate(6 << 30)  # 6 GB: 20 lines, then one endless line of NUL bytes
    one_line = e2e.project / "one-line.log"
    with open(one_line, "wb") as f:
        f.truncate(2 << 30)
    # A first read loads what every read needs (modules, the tool's schema).
    assert _result(e2e, e2e.script([_read("a.txt")], [text("ok")])) == "1\ta.txt"
    (pid,) = e2e.lock_pids()
    before = _peak_rss(pid)
    five = _result(e2e, e2e.script([_read("huge.log", limit=5)], [text("ok")]))
    assert five == "\n".join(f"{n}\tline {n}" for n in range(1, 6)) + "\n[more lines follow; read on with offset 6]"
    # Line 21 does not fit after lines 19 and 20; read on its own, it is cut.
    near = _result(e2e, e2e.script([_read("huge.log", offset=19)], [text("ok")]))
    assert near == "19\tline 19\n20\tline 20\n[more lines follow; read on with offset 21]"
    past = _result(e2e, e2e.script([_read("huge.log", offset=21)], [text("ok")]))
    assert past.startswith("21\t\0") and past.endswith("[line 21 is longer than 65,536 characters and was cut there; read on with offset 22]")
    cut = _result(e2e, e2e.script([_read("one-line.log")], [text("ok")]))
    assert cut.startswith("1\t\0") and cut.endswith("was cut there; read on with offset 2]")
    grown = _peak_rss(pid) - before
    assert grown < 50 << 20, f"the daemon's peak memory grew by {grown >> 20} MiB"


def test_a_damaged_database_is_set_aside_and_the_command_says_so(e2e: E2E) -> None:
    state = Path(e2e.env["XDG_STATE_HOME"]) / "roost"
    state.mkdir(mode=0o700)
    database = state / "roost.db"
    garbage = b"not a database at all\n" * 200
    database.write_bytes(garbage)
    database.chmod(0o600)
    done = e2e.ok("dispatch", "--yes", "--model", e2e.script([text("fresh start")]), "hello")
    assert "fresh start" in done.stdout
    (aside,) = state.glob("roost.db.corrupt-*")
    assert aside.read_bytes() == garbage
    notice = (
        f"roost: the database {database} is damaged (file is not a database): it was moved to {aside} "
        "(with its -wal and -shm files, if any) and roost started with an empty database. Its "
        f"sessions may be recovered with `sqlite3 {aside} .recover | sqlite3 {aside}.recovered`; to "
        f"use that file, stop the daemon (roost stop) and put it in place of {database}"
    )
    assert notice in done.stderr, done.stderr
    assert "lost the connection" not in done.stderr
    status = e2e.ok("status")
    assert f"notice   {notice.removeprefix('roost: ')}" in status.stdout
    # The new database is the daemon's: the next command says nothing more.
    again = e2e.ok("sessions")
    assert again.stderr == "" and len(e2e.json_out("sessions", "--json")) == 1


def test_the_daemon_starts_on_a_full_disk_and_works_once_there_is_room(e2e: E2E, small_disk: Path) -> None:
    # Everything the daemon keeps (database, log, trust) on a 3 MiB disk.
    e2e.env["XDG_STATE_HOME"] = str(small_disk)
    database = small_disk / "roost" / "roost.db"
    e2e.ok("dispatch", "--yes", "--model", e2e.script([text("one")]), "first")
    e2e.ok("stop")
    filler = fill(small_disk)
    refused = e2e.roost("dispatch", "--yes", "--model", e2e.script([text("two")]), "second")
    assert refused.returncode == 10, refused.stdout
    assert f"the disk holding the database {database} is full" in refused.stderr
    assert "free some space there; the daemon opens it as soon as it can" in refused.stderr
    assert "[STORE_FULL]" in refused.stderr and "Traceback" not in refused.stderr
    status = e2e.status()
    assert status["store"]["ok"] is False and "is full" in status["store"]["error"]
    shown = e2e.ok("status").stdout
    assert f"database {database}\n         UNAVAILABLE: the disk holding the database" in shown
    listed = e2e.roost("sessions")
    assert listed.returncode == 10 and f"Error: the disk holding the database {database} is full" in listed.stderr
    assert "[STORE_FULL]" in listed.stderr
    filler.unlink()
    wait_until(lambda: e2e.status()["store"]["ok"], timeout=10, what="the database to open")
    assert "three" in e2e.ok("dispatch", "--yes", "--model", e2e.script([text("three")]), "third").stdout
    assert len(e2e.json_out("sessions", "--json")) == 2
    e2e.ok("stop")
    check = sqlite3.connect(database)
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        check.close()
