"""roost export and roost import with the real command and a real daemon: a round trip,
twice, and a damaged file refused by line with nothing imported."""

from __future__ import annotations

import json
import subprocess

from .conftest import E2E, ROOST, bash, text


def _strip(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "session"} for e in events]


def test_export_then_import_twice_round_trips_the_events(e2e: E2E) -> None:
    model = e2e.script([text("Looking ✓"), bash("ls")], [text("Three files.")])
    e2e.ok("dispatch", "count «these»", "--model", model, "--yes")
    [row] = e2e.json_out("sessions", "--json")
    session = row["id"]
    original = e2e.events(session)

    exported = e2e.ok("export", session[:5]).stdout
    path = e2e.tmp / "s.jsonl"
    path.write_text(exported)
    lines = exported.splitlines()
    header = json.loads(lines[0])
    assert (header["format"], header["version"], header["session"]["id"]) == ("roost.session", 1, session)
    assert [json.loads(line) for line in lines[1:]] == original

    first = e2e.roost("import", str(path))
    assert first.returncode == 0, first.stderr
    copy = first.stdout.strip()
    assert f"(its id {session} is taken here: imported as {copy})" in first.stderr
    second = json.loads(e2e.ok("import", str(path), "--json").stdout)
    # From standard input too.
    piped = subprocess.run([ROOST, "import", "-"], input=exported, capture_output=True, text=True,
                           env=e2e.env, cwd=e2e.project, timeout=20)
    assert piped.returncode == 0, piped.stderr
    copies = [copy, second["session"], piped.stdout.strip()]
    assert len({session, *copies}) == 4 and second["events"] == len(original)
    for other in copies:
        events = e2e.events(other)
        assert _strip(events) == _strip(original) and {e["session"] for e in events} == {other}
    # The copy exports to the same file, but for its id and the time of the export.
    again = e2e.ok("export", copy).stdout.splitlines()
    assert [json.loads(line) for line in again[1:]] == [{**json.loads(line), "session": copy} for line in lines[1:]]
    assert len(e2e.json_out("sessions", "--json")) == 4


def test_a_damaged_file_is_refused_with_its_line_and_nothing_is_imported(e2e: E2E) -> None:
    model = e2e.script([text("hello there")])
    e2e.ok("dispatch", "say hello", "--model", model)
    [row] = e2e.json_out("sessions", "--json")
    lines = e2e.ok("export", row["id"]).stdout.splitlines()

    broken = e2e.tmp / "broken.jsonl"
    broken.write_text("\n".join(lines[:3] + [lines[3][:-5]] + lines[4:]) + "\n")
    done = e2e.roost("import", str(broken))
    assert done.returncode == 10 and done.stdout == ""
    assert done.stderr.startswith(f"Error: {broken}: line 4: not JSON (Unterminated string starting at column ")
    assert done.stderr.endswith("); nothing was imported [IMPORT_INVALID]\n")

    cut = e2e.tmp / "cut.jsonl"
    cut.write_text("\n".join(lines[:-2]) + "\n")
    done = e2e.roost("import", str(cut))
    assert done.returncode == 10
    assert f"line {len(lines) - 1}: the file ends after {len(lines) - 3} events, but its header announces" in done.stderr

    foreign = e2e.tmp / "foreign.jsonl"
    foreign.write_text('{"some": "other tool"}\n' + "\n".join(lines[1:]) + "\n")
    done = e2e.roost("import", str(foreign))
    assert done.returncode == 10 and "line 1: not a roost session export" in done.stderr
    assert [r["id"] for r in e2e.json_out("sessions", "--json")] == [row["id"]]
