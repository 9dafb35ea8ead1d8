"""Many clients on one session, replay without gaps, slow clients, and hostile bytes."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import msgpack
import pytest
import trio

from roost.daemon.rpc._server import Daemon
from roost.protocol import Client, ConnectionClosed, ErrorCode, RpcError, pack
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import bash, events_until, finished, stored, text, write_script


async def test_every_attached_client_sees_the_same_events(daemon: Daemon, client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("sleep 0.2")], [text("fin")])
    session = (await client.call("sessions.create", cwd=str(project)))["session"]
    async with open_client(daemon.socket_path) as second, open_client(daemon.socket_path) as third:
        for c in (client, second, third):
            await c.call("attach", session=session)
        run = await client.call("dispatch", yes=True, task="t", session=session, model=model)
        seen = [await events_until(c, finished(run["run"])) for c in (client, second, third)]
    assert seen[0] == seen[1] == seen[2]
    assert [e["seq"] for e in stored(seen[0])] == list(range(1, len(stored(seen[0])) + 1))


async def test_attach_mid_run_replays_then_goes_live_without_gap_or_duplicate(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    model = write_script(project, *[[bash("sleep 0.05")] for _ in range(6)], [text("fin")])
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    await events_until(client, lambda e: e["type"] == "tool.finished")
    async with open_client(daemon.socket_path) as late:
        reply = await late.call("attach", session=run["session"])
        assert reply["last_seq"] >= 5
        events = await events_until(late, finished(run["run"]))
    seqs = [e["seq"] for e in stored(events)]
    assert seqs == list(range(1, seqs[-1] + 1))
    history = await client.call("events", session=run["session"])
    assert [e["seq"] for e in history["events"]] == seqs


async def test_attach_since_returns_only_later_events(daemon: Daemon, client: TrioClient, project: Path) -> None:
    run = await client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project), attach=True)
    everything = stored(await events_until(client, finished(run["run"])))
    async with open_client(daemon.socket_path) as other:
        reply = await other.call("attach", session=run["session"], since=5)
        assert reply["last_seq"] == everything[-1]["seq"]
        later = [e for e in everything if e["seq"] > 5]
        replayed = []
        with trio.fail_after(10):
            while len(replayed) < len(later):
                note = await other.notifications.receive()
                replayed.append(note.params[0])
    assert replayed == later


async def test_a_client_that_stops_reading_is_detached_and_slows_nothing(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    words = " ".join(f"w{i}" for i in range(40_000))
    # The reply starts once its step's events are stored, so that its 40,000 deltas come one
    # by one (of those that came before, at most 256 would go out: see CallAhead).
    model = write_script(project, [text(words)], delay=0.2)
    session = (await client.call("sessions.create", cwd=str(project)))["session"]
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(str(daemon.socket_path))
    stuck.sendall(pack([0, 1, "attach", [{"session": session}]]))
    try:
        # A client that keeps up: a separate program, as it would be in real use.
        with trio.fail_after(30):
            result = await trio.run_process(
                [sys.executable, "-c", _FAST_READER, str(daemon.socket_path), session, model],
                capture_stdout=True,
            )
        streamed, last = json.loads(result.stdout)
        # Every word reached it (the deltas that came while the step was stored, as one).
        assert streamed == words
        assert last["reason"] == "done"
        # The stuck client, reading at last, finds the notice that it was detached.
        stuck.setblocking(False)
        unpacker = msgpack.Unpacker(raw=False)
        notices = []
        with trio.fail_after(10):
            while not notices:
                try:
                    data = stuck.recv(1 << 20)
                except BlockingIOError:
                    await trio.sleep(0.01)
                    continue
                assert data, "daemon closed the slow client instead of telling it"
                unpacker.feed(data)
                notices = [m for m in unpacker if m[0] == 2 and m[1] == "lagged"]
        assert notices[0][2][0]["session"] == session
        assert isinstance(notices[0][2][0]["last_seq"], int)
    finally:
        stuck.close()


_FAST_READER = """
import json, sys
from roost.protocol import Client
with Client.connect(sys.argv[1]) as fast:
    run = fast.call("dispatch", yes=True, task="t", session=sys.argv[2], model=sys.argv[3], attach=True)
    streamed = []
    for event in fast.events():
        assert event["type"] != "lagged", event
        if event["type"] == "text.delta":
            streamed.append(event["text"])
        if event["type"] == "run.finished" and event["run"] == run["run"]:
            print(json.dumps(["".join(streamed), event]))
            break
"""


def _raw(daemon: Daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(daemon.socket_path))
    return sock


def _read_all(sock: socket.socket) -> list:
    unpacker = msgpack.Unpacker(raw=False)
    out = []
    while True:
        data = sock.recv(65536)
        if not data:
            return out
        unpacker.feed(data)
        out.extend(unpacker)


async def test_garbage_bytes_close_only_that_connection(daemon: Daemon, client: TrioClient) -> None:
    def garbage() -> list:
        with _raw(daemon) as sock:
            sock.sendall(b"\xc1\xc1 not msgpack at all")
            return _read_all(sock)

    messages = await trio.to_thread.run_sync(garbage)
    assert messages[0][:2] == [2, "error"]
    assert messages[0][2][0]["code"] == ErrorCode.INVALID_MESSAGE
    assert (await client.call("status"))["sessions"] == 0


async def test_a_message_that_is_not_rpc_gets_an_error_and_the_connection_goes_on(daemon: Daemon) -> None:
    def exchange() -> list:
        with _raw(daemon) as sock:
            sock.sendall(pack({"not": "an array"}) + pack([0, 5, 7, []]) + pack([0, 6, "status", []]))
            unpacker = msgpack.Unpacker(raw=False)
            got: list = []
            while len(got) < 3:
                unpacker.feed(sock.recv(65536))
                got.extend(unpacker)
            return got

    notice, bad, good = await trio.to_thread.run_sync(exchange)
    assert notice[:2] == [2, "error"]
    assert bad[0] == 1 and bad[1] == 5 and bad[2]["code"] == ErrorCode.INVALID_MESSAGE
    assert good[0] == 1 and good[1] == 6 and good[2] is None and "pid" in good[3]


async def test_params_that_are_not_one_map(daemon: Daemon) -> None:
    def exchange() -> list:
        with Client.connect(daemon.socket_path) as c:
            msgid = c.send_request("status", {})
            c.wait_result(msgid)
            c._send(pack([0, 99, "status", ["a", "b"]]))
            c._session._pending[99] = "status"
            with pytest.raises(RpcError) as error:
                c.wait_result(99)
            return [error.value.code]

    assert await trio.to_thread.run_sync(exchange) == [ErrorCode.INVALID_PARAMS]


async def test_a_frame_over_the_limit_closes_the_connection(tmp_path: Path, nursery: trio.Nursery) -> None:
    import os

    d = Daemon(Path(os.environ["ROOST_SOCKET"]), tmp_path / "db", max_frame=1024)
    await nursery.start(d.serve)
    try:
        def big() -> list:
            with _raw(d) as sock:
                try:
                    sock.sendall(pack([0, 1, "status", [{"pad": "x" * 5000}]]))
                except BrokenPipeError:
                    pass
                return _read_all(sock)

        messages = await trio.to_thread.run_sync(big)
        assert messages and messages[0][2][0]["code"] == ErrorCode.FRAME_TOO_LARGE
        async with open_client(d.socket_path) as c:
            assert (await c.call("status"))["sessions"] == 0
    finally:
        d.stopping.set()


async def test_a_client_vanishing_mid_stream_harms_nothing(daemon: Daemon, client: TrioClient, project: Path) -> None:
    model = write_script(project, [text(" ".join(["word"] * 5000))], [])
    session = (await client.call("sessions.create", cwd=str(project)))["session"]
    with _raw(daemon) as sock:
        sock.sendall(pack([0, 1, "attach", [{"session": session}]]))
    run = await client.call("dispatch", yes=True, task="t", session=session, model=model, attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["type"] == "run.finished"
    assert (await client.call("status"))["runs"] == 0


async def test_blocking_client_against_the_daemon(daemon: Daemon, project: Path) -> None:
    def script() -> tuple[dict, list[str]]:
        with Client.connect(daemon.socket_path) as c:
            run = c.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project), attach=True)
            types = []
            for event in c.events():
                types.append(event["type"])
                if event["type"] == "run.finished":
                    break
            return run, types

    run, types = await trio.to_thread.run_sync(script)
    assert types[:2] == ["session.created", "run.started"] and types[-1] == "run.finished"
    with pytest.raises(ConnectionClosed):
        def after_stop() -> None:
            with Client.connect(daemon.socket_path) as c:
                c.call("shutdown")
                c.call("status")
        await trio.to_thread.run_sync(after_stop)
