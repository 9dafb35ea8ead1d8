"""`roost sessions --prune` and `roost gc` as a user runs them: listed first, asked, done."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from .conftest import ROOST, E2E, bash, text

DAY = 86400.0


def _age(database: Path, session: str, days: float) -> None:
    check = sqlite3.connect(database)
    with check:
        check.execute("UPDATE events SET ts = ts - ? WHERE session = ?", (days * DAY, session))
        check.execute("UPDATE sessions SET created = created - ? WHERE id = ?", (days * DAY, session))
    check.close()


def _session_of(done: subprocess.CompletedProcess[str]) -> str:
    """The session of a ``dispatch --json`` (its last line is the run.finished event)."""
    return json.loads(done.stdout.splitlines()[-1])["session"]


def _at_a_terminal(e2e: E2E, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``roost ARGS`` with a terminal as its input, answering ``answer`` to its question."""
    master, slave = os.openpty()
    try:
        os.write(master, answer.encode() + b"\n")
        return subprocess.run(
            [ROOST, *args], stdin=slave, capture_output=True, text=True, cwd=e2e.project, env=e2e.env, timeout=20
        )
    finally:
        os.close(master)
        os.close(slave)


def test_prune_lists_asks_and_deletes_old_sessions_then_gc_says_what_it_freed(e2e: E2E) -> None:
    (e2e.project / "big.txt").write_text("".join(f"{i} {os.urandom(20).hex()}\n" for i in range(300)))
    model = e2e.script([bash("cat big.txt")], [text("read")])
    old = _session_of(e2e.ok("dispatch", "--yes", "read it", "--model", model, "--json"))
    recent = _session_of(e2e.ok("dispatch", "--yes", "hello", "--model", e2e.script([text("hi")]), "--json"))
    e2e.ok("stop")
    database = Path(e2e.env["XDG_STATE_HOME"]) / "roost" / "roost.db"
    _age(database, old, 45)

    listed = e2e.ok("sessions", "--prune", "--older-than", "30d", "--dry-run")
    assert "would delete 1 sessions:" in listed.stdout and old in listed.stdout and recent not in listed.stdout
    # Not at a terminal, and no --yes: refused, nothing deleted.
    refused = e2e.roost("sessions", "--prune", "--older-than", "30d")
    assert refused.returncode != 0 and "add --yes" in refused.stderr
    said_no = _at_a_terminal(e2e, "n", "sessions", "--prune", "--older-than", "30d")
    assert "Delete these 1 sessions?" in said_no.stdout and "nothing was deleted" in said_no.stdout
    assert {r["id"] for r in e2e.json_out("sessions", "--json")} == {old, recent}

    said_yes = _at_a_terminal(e2e, "y", "sessions", "--prune", "--older-than", "30d")
    assert said_yes.returncode == 0, said_yes.stderr
    assert "deleted 1 sessions" in said_yes.stdout
    assert [r["id"] for r in e2e.json_out("sessions", "--json")] == [recent]

    freed = e2e.ok("gc")
    assert freed.stdout.startswith("freed ") and "(1 stored outputs nothing referred to)" in freed.stdout
    assert e2e.json_out("gc", "--json")["blobs"] == 0
    none = e2e.ok("sessions", "--prune", "--older-than", "30d", "--yes")
    assert none.stdout.strip() == "no session is that old"
