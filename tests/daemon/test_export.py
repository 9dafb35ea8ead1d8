"""sessions.export and sessions.import through a real daemon: exact round trips in bounded
pages, forks written whole, damaged files refused by line with nothing stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.rpc import _sessions_api
from roost.daemon.storage import _export
from roost.daemon.rpc._server import Daemon
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import bash, events_until, finished, text, write_script


async def _export_lines(client: TrioClient, session: str) -> list[str]:
    params: dict[str, Any] = {"session": session}
    lines: list[str] = []
    while True:
        part = await client.call("sessions.export", params)
        lines += part["lines"]
        if part["next"] is None:
            return lines
        params = {"session": session, "since": part["next"], "upto": part["upto"]}


async def _import(client: TrioClient, lines: list[Any], per_part: int = 1000) -> dict[str, Any]:
    upload: dict[str, Any] = {}
    parts = [lines[i : i + per_part] for i in range(0, len(lines), per_part)] or [[]]
    for part in parts[:-1]:
        upload = {"upload": (await client.call("sessions.import", lines=part, **upload))["upload"]}
    return await client.call("sessions.import", lines=parts[-1], done=True, **upload)


async def _events(client: TrioClient, session: str) -> list[dict[str, Any]]:
    return (await client.call("events", session=session))["events"]


def _without_session(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "session"} for e in events]


async def _a_session(client: TrioClient, project: Path) -> dict[str, Any]:
    model = write_script(
        project, [text("Lüge ✓ \u00e9\n\ttabs"), bash("printf 'a\\x00b' ; echo ünï")], [text("done " * 50)]
    )
    run = await client.call("dispatch", yes=True, task="go «quoted»", model=model, cwd=str(project), attach=True)
    await events_until(client, finished(run["run"]))
    return run


async def test_an_export_in_bounded_pages_imports_to_the_same_events(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await _a_session(client, project)
    session = run["session"]
    # Small pages, so that the export takes many calls, each bounded.
    monkeypatch.setattr(_export, "PAGE_BYTES", 300)
    monkeypatch.setattr(_sessions_api, "PAGE_EVENTS", 4)
    pages = []
    params: dict[str, Any] = {"session": session}
    while True:
        part = await client.call("sessions.export", params)
        pages.append(part["lines"])
        if part["next"] is None:
            break
        params = {"session": session, "since": part["next"], "upto": part["upto"]}
    lines = [line for p in pages for line in p]
    original = await _events(client, session)
    assert len(pages) > 3 and all(len(p) <= 5 for p in pages)
    # A page ends once its events' lines reach the limit (the header comes on top).
    bodies = [pages[0][1:]] + pages[1:]
    assert all(sum(map(len, body[:-1])) < 300 for body in bodies)

    header = json.loads(lines[0])
    assert (header["format"], header["version"]) == ("roost.session", 1)
    assert header["session"]["id"] == session and header["session"]["events"] == len(original)
    assert header["session"]["status"] == "done" and header["session"]["cwd"] == str(project)
    assert [json.loads(line) for line in lines[1:]] == original

    # The id is taken here (the original is still there): a new one, the same events.
    first = await _import(client, lines, per_part=3)
    second = await _import(client, lines)
    assert first["original"] == session and first["events"] == len(original)
    assert len({session, first["session"], second["session"]}) == 3
    for copy in (first["session"], second["session"]):
        events = await _events(client, copy)
        assert _without_session(events) == _without_session(original)
        assert {e["session"] for e in events} == {copy}
    rows = {r["id"]: r for r in (await client.call("sessions.list"))["sessions"]}
    assert rows[first["session"]]["created"] == rows[session]["created"]
    assert (rows[first["session"]]["status"], rows[first["session"]]["events"]) == ("done", len(original))

    # An imported session goes on like its original: the model sees its history.
    model = write_script(project, [], [], [text("next, after the import")], name="next.json")
    more = await client.call("dispatch", task="more", model=model, session=first["session"], attach=True)
    events = await events_until(client, finished(more["run"]))
    assert events[-1]["text"] == "next, after the import"


async def test_an_export_of_a_fork_holds_its_whole_history(client: TrioClient, project: Path) -> None:
    run = await _a_session(client, project)
    fork = await client.call("sessions.fork", session=run["session"], at=5)
    lines = await _export_lines(client, fork["session"])
    header = json.loads(lines[0])["session"]
    assert (header["parent"], header["forked_at"]) == (run["session"], fork["forked_at"])
    exported = [json.loads(line) for line in lines[1:]]
    assert exported == await _events(client, fork["session"])
    assert [e["seq"] for e in exported] == list(range(1, fork["last_seq"] + 1))
    imported = await _import(client, lines)
    # The import stands alone: a session of its own, no parent.
    row = next(r for r in (await client.call("sessions.list"))["sessions"] if r["id"] == imported["session"])
    assert (row["parent"], row["forked_at"]) == (None, None)
    assert _without_session(await _events(client, imported["session"])) == _without_session(exported)


def _damaged(lines: list[str], n: int, value: Any) -> list[str]:
    """``lines`` with line ``n`` (1-based) changed: a map's fields updated, else replaced."""
    out = list(lines)
    out[n - 1] = json.dumps({**json.loads(out[n - 1]), **value}) if isinstance(value, dict) else value
    return out


async def test_a_damaged_or_foreign_file_is_refused_by_line_and_nothing_is_imported(
    client: TrioClient, project: Path
) -> None:
    run = await _a_session(client, project)
    lines = await _export_lines(client, run["session"])
    n = len(lines)
    header = json.loads(lines[0])
    tool = next(i for i, line in enumerate(lines, start=1) if '"tool.finished"' in line)
    cases = [
        (lines[:-1], n, f"the file ends after {n - 2} events, but its header announces {n - 1} (is it cut short?)"),
        (lines[:3] + [lines[3][:40]] + lines[4:], 4, "not JSON (Expecting "),
        (_damaged(lines, 5, ""), 5, "not JSON (Expecting value at column 1)"),
        (_damaged(lines, 1, {"format": "something.else"}), 1, "not a roost session export"),
        (_damaged(lines, 1, {"version": 2, "roost": "9.0"}), 1, "format version 2 (made by roost 9.0) is newer"),
        (_damaged(lines, 1, {"session": {**header["session"], "cwd": 7}}), 1, "the header's session.cwd is missing or not a string"),
        (_damaged(lines, 4, {"seq": 9}), 4, "seq 9 where 3 was expected"),
        (_damaged(lines, 4, {"type": "text.delta"}), 4, "'text.delta' is not a type of stored event"),
        (_damaged(lines, 4, {"session": "another"}), 4, "an event of session 'another'"),
        (_damaged(lines, 3, {"type": "step.started"}), 3, "a step.started event that does not fit the history"),
        (_damaged(lines, tool, json.dumps({k: v for k, v in json.loads(lines[tool - 1]).items() if k != "call_id"})),
         tool, "a tool.finished event that does not fit the history before it (KeyError('call_id'))"),
        (_damaged(lines, 2, {"type": "message.user", "text": "x"}), 2, "the first event must be session.created"),
        (lines + [lines[-1]], n + 1, f"one line more than the {n - 1} events"),
        ([lines[0], b"\xff\xfe"], 2, "not UTF-8 text (byte 1)"),
        (["[1, 2]"], 1, "not a JSON object"),
        ([], 1, "the file is empty"),
    ]
    before = (await client.call("sessions.list"))["sessions"]
    for damaged, line, message in cases:
        with pytest.raises(RpcError) as info:
            # Small parts: the refusal comes in a later part than the first.
            await _import(client, damaged, per_part=2)
        assert info.value.code == ErrorCode.IMPORT_INVALID, message
        assert info.value.data == {"line": line}, (message, info.value.message)
        assert info.value.message.startswith(f"line {line}: {message}"), info.value.message
    assert (await client.call("sessions.list"))["sessions"] == before


async def test_a_refused_upload_is_gone_and_parts_belong_to_their_connection(
    client: TrioClient, project: Path, daemon: Daemon
) -> None:
    run = await _a_session(client, project)
    lines = await _export_lines(client, run["session"])
    upload = (await client.call("sessions.import", lines=lines[:2]))["upload"]
    async with open_client(daemon.socket_path) as other:
        with pytest.raises(RpcError) as info:
            await other.call("sessions.import", lines=lines[2:], upload=upload, done=True)
        assert info.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(RpcError):
        await client.call("sessions.import", lines=["not json"], upload=upload)
    with pytest.raises(RpcError) as info:
        await client.call("sessions.import", lines=lines[2:], upload=upload, done=True)
    assert info.value.code == ErrorCode.INVALID_PARAMS and "no import" in info.value.message
    assert len((await client.call("sessions.list"))["sessions"]) == 1


async def test_a_session_exported_mid_run_imports_idle(client: TrioClient, project: Path) -> None:
    # Agent mode: the bash call waits for a person, so the run is in flight when exported.
    model = write_script(project, [text("look"), bash("ls")], [text("after")])
    run = await client.call("dispatch", task="go", model=model, cwd=str(project), attach=True)
    await events_until(client, lambda e: e.get("type") == "permission.requested")
    lines = await _export_lines(client, run["session"])
    imported = await _import(client, lines)
    events = await _events(client, imported["session"])
    assert imported["events"] == len(lines) - 1 + 3
    # The open request is closed and the call answered, then the run ends: a whole history.
    assert [e["type"] for e in events[len(lines) - 1 :]] == ["permission.resolved", "tool.finished", "run.finished"]
    assert events[-1]["reason"] == "aborted" and "exported while this run was in flight" in events[-1]["error"]
    again = await client.call("dispatch", yes=True, task="again", model=model, session=imported["session"], attach=True)
    done = await events_until(client, finished(again["run"]))
    assert done[-1]["text"] == "after"


async def test_an_imported_session_brings_its_history_never_its_grants(client: TrioClient, project: Path) -> None:
    # A session where a person approved a command "for the session" ...
    model = write_script(project, [bash("ls")], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    asked = (await events_until(client, lambda e: e["type"] == "permission.requested"))[-1]
    await client.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve", scope="session")
    await events_until(client, finished(run["run"]))
    lines = await _export_lines(client, run["session"])
    # ... whose file is edited to grant everything, as a hostile file would be.
    events = [json.loads(line) for line in lines[1:]]
    [resolved] = [e for e in events if e["type"] == "permission.resolved"]
    resolved["rules"] = ["bash(*)", "write(/**)"]
    edited = [lines[0], *(json.dumps(e) for e in events)]
    imported = await _import(client, edited)
    copy = await _events(client, imported["session"])
    [kept] = [e for e in copy if e["type"] == "permission.resolved"]
    assert "rules" not in kept and kept["rules_not_granted"] == ["bash(*)", "write(/**)"]
    # In the imported session the same command asks again.
    # (The scripted model answers by the number of replies in the history: two before.)
    model = write_script(project, [], [], [bash("ls")], [text("done")], name="again.json")
    again = await client.call("dispatch", task="t", model=model, session=imported["session"], attach=True)
    asked = (await events_until(client, lambda e: e["type"] in ("permission.requested", "run.finished")))[-1]
    assert asked["type"] == "permission.requested" and asked["input"] == {"command": "ls"}
    await client.call("permission.respond", session=imported["session"], call_id=asked["call_id"], decision="deny")
    await events_until(client, finished(again["run"]))
