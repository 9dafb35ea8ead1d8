"""Text that is not valid Unicode never breaks a run: lone surrogates from a model, file names
that are not UTF-8, invalid UTF-8 on the wire. Stored and sent safely, with no seq gap."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import msgpack
import trio

from roost.daemon.rpc._server import Daemon
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, stored


async def test_lone_surrogates_and_undecodable_file_names_are_stored_safely(client: TrioClient, project: Path) -> None:
    os.mkdir(os.fsencode(project) + b"/dir-\xff")
    with open(os.fsencode(project) + b"/caf\xe9.txt", "wb") as f:
        f.write(b"needle \xff\xfe bytes\n")
    script = project / "model.json"
    # JSON as a model may send it: an escaped lone surrogate in a tool's input and in text.
    script.write_text(
        '{"responses": ['
        '{"content": [{"type": "text", "text": "half a pair: \\ud800"},'
        ' {"type": "tool_use", "name": "bash", "input": {"command": "echo \\udcff; ls"}},'
        ' {"type": "tool_use", "name": "glob", "input": {"pattern": "*"}},'
        ' {"type": "tool_use", "name": "grep", "input": {"pattern": "needle"}}]},'
        '{"content": [{"type": "text", "text": "done"}]}]}'
    )
    run = await client.call(
        "dispatch", yes=True, task="look", model=f"scripted/{script}", cwd=str(project), attach=True
    )
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "done", events[-1]
    seqs = [e["seq"] for e in stored(events)]
    assert seqs == list(range(1, len(seqs) + 1))
    reply = next(e for e in events if e["type"] == "message.assistant")
    assert reply["content"][0]["text"] == "half a pair: \ufffd"
    results = [e["result"] for e in events if e["type"] == "tool.finished"]
    assert any("caf\ufffd.txt" in r for r in results), results
    # The history as stored reads back the same.
    again = await client.call("events", session=run["session"])
    assert [e["seq"] for e in again["events"]] == seqs
    json.dumps(again["events"])  # every string is valid text


async def test_invalid_utf8_on_the_wire_is_an_error_not_a_crash(daemon: Daemon, client: TrioClient) -> None:
    # A str (fixstr 0xa3) holding bytes that are not UTF-8, as a task.
    frame = msgpack.packb([0, 1, "dispatch", [{"task": "x"}]]).replace(b"\xa1x", b"\xa3\xff\xfe\xfd")

    def exchange() -> bytes:
        # A plain blocking client, in a thread: the daemon runs in this test's event loop.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(daemon.socket_path))
            sock.sendall(frame)
            return sock.recv(65536)

    message = msgpack.unpackb(await trio.to_thread.run_sync(exchange), raw=False)
    assert message[:2] == [2, "error"] and "not msgpack" in message[2][0]["message"]
    assert (await client.call("status"))["pid"] == os.getpid()
