"""Fan-out's promises, with small limits so that lagging is easy to cause: every seq once, in
order, and a client that falls behind is told every time, even while it re-attaches."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Sequence

import msgpack
import pytest
import trio
import trio.testing

from roost.cli._follow import follow
from roost.daemon.rpc import _connection
from roost.daemon.runs import _fanout
from roost.daemon.rpc._connection import Connection
from roost.daemon.runs._fanout import Fanout
from roost.loop import Event
from roost.protocol import Client, pack

from .conftest import bash, serving, write_script


def _event(seq: int) -> Event:
    return Event("step.started", "s1", "r1", 0.0, {"step": seq}, seq)


async def _read_until(stream: trio.abc.ReceiveStream, count_lagged: int) -> list[Any]:
    unpacker = msgpack.Unpacker(raw=False)
    out: list[Any] = []
    with trio.fail_after(5):
        while sum(1 for m in out if m[1] == "lagged") < count_lagged:
            unpacker.feed(await stream.receive_some(65536))
            out.extend(unpacker)
    return out


async def test_a_client_is_told_it_lagged_even_while_it_re_attaches(nursery: trio.Nursery) -> None:
    log: list[Event] = []
    fanout: Fanout

    async def stored(session: str, since: int) -> Sequence[tuple[int, bytes]]:
        replay = _packed(log, since)
        # The run goes on while the replay reads the store: more live events than the
        # replay buffer holds.
        for _ in range(6):
            publish()
        await trio.lowlevel.checkpoint()
        return replay

    def publish() -> None:
        event = _event(len(log) + 1)
        log.append(event)
        fanout.publish(event.to_map())

    fanout = Fanout(stored, replay_buffer=4)
    ours, theirs = trio.testing.memory_stream_pair()
    connection = Connection(ours, outbox_size=4)  # type: ignore[arg-type]
    assert await fanout.attach(connection, "s1", 0) == 0  # lagged at once: told, not fed
    for _ in range(10):
        publish()  # not attached any more: nothing queued
    assert await fanout.attach(connection, "s1", 0) == 0  # and again
    assert fanout.count("s1") == 0
    nursery.start_soon(connection.run_writer)
    messages = await _read_until(theirs, 2)
    notes = [m for m in messages if m[1] == "lagged"]
    assert [n[2][0] for n in notes] == [{"session": "s1", "last_seq": 0}] * 2

    # A client that keeps up gets every seq once, in order, history first.
    calm = Fanout(lambda session, since: _after(log, since))
    ours2, theirs2 = trio.testing.memory_stream_pair()
    reader = Connection(ours2)  # type: ignore[arg-type]
    nursery.start_soon(reader.run_writer)
    assert await calm.attach(reader, "s1", 3) == len(log)
    calm.publish(_event(len(log)).to_map())  # already replayed: not sent twice
    calm.publish(_event(len(log) + 1).to_map())
    unpacker = msgpack.Unpacker(raw=False)
    seqs: list[int] = []
    with trio.fail_after(5):
        while len(seqs) < len(log) - 2:
            unpacker.feed(await theirs2.receive_some(65536))
            seqs += [m[2][0]["seq"] for m in unpacker]
    assert seqs == list(range(4, len(log) + 2))


async def test_a_long_replay_goes_out_in_chunks_each_seq_once(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fanout, "REPLAY_CHUNK", 100)  # a few events a chunk
    log = [_event(seq) for seq in range(1, 41)]
    fanout: Fanout

    async def stored(session: str, since: int) -> Sequence[tuple[int, bytes]]:
        replay = _packed(log, since)
        log.append(_event(41))  # published while the store is read
        fanout.publish(log[-1].to_map())
        return replay

    fanout = Fanout(stored)
    ours, theirs = trio.testing.memory_stream_pair()
    connection = Connection(ours)  # type: ignore[arg-type]
    nursery.start_soon(connection.run_writer)
    writes: list[int] = []
    sent = ours.send_stream.send_all_hook

    async def count() -> None:
        writes.append(1)
        if sent is not None:
            await sent()

    ours.send_stream.send_all_hook = count
    assert await fanout.attach(connection, "s1", 5) == 41  # the live one after the replay
    unpacker = msgpack.Unpacker(raw=False)
    seqs: list[int] = []
    with trio.fail_after(5):
        while len(seqs) < 36:
            unpacker.feed(await theirs.receive_some(65536))
            seqs += [m[2][0]["seq"] for m in unpacker]
    assert seqs == list(range(6, 42))
    assert 5 < len(writes) < 35  # many events a write, more than one write


async def test_a_message_goes_straight_into_the_socket_and_what_does_not_fit_keeps_its_place(
    nursery: trio.Nursery,
) -> None:
    ours_sock, theirs_sock = trio.socket.socketpair()
    ours, theirs = trio.SocketStream(ours_sock), trio.SocketStream(theirs_sock)
    async with ours, theirs:
        connection = Connection(ours)
        first = msgpack.packb([2, "event", [{"seq": 1}]])
        assert connection.queue(first)
        with trio.fail_after(5):  # no writer task yet: it went straight into the socket
            assert await theirs.receive_some(65536) == first

        big = msgpack.packb([2, "event", [{"seq": 2, "text": "x" * 8_000_000}]])  # more than the buffer holds
        assert connection.queue(big)
        for seq in range(3, 40):
            assert connection.queue(msgpack.packb([2, "event", [{"seq": seq}]]))
        nursery.start_soon(connection.run_writer)
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=16_000_000)
        seqs: list[int] = []
        with trio.fail_after(5):
            while len(seqs) < 38:
                unpacker.feed(await theirs.receive_some(1 << 20))
                seqs += [m[2][0]["seq"] for m in unpacker]
        assert seqs == list(range(2, 40))
        connection.close_outbox()


async def _after(log: list[Event], since: int) -> list[tuple[int, bytes]]:
    return _packed(log, since)


def _packed(log: list[Event], since: int) -> list[tuple[int, bytes]]:
    """The stored events after ``since`` as the store gives them to a replay."""
    return [(e.seq, pack(e.to_map())) for e in log if e.seq is not None and e.seq > since]


async def test_a_follower_that_lagged_catches_up_and_never_hangs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project: Path
) -> None:
    # Tiny limits: the follower below lags, then re-attaches and replays.
    monkeypatch.setattr(_connection, "OUTBOX_SIZE", 8)
    monkeypatch.setattr(_fanout, "REPLAY_BUFFER", 8)
    # Big results, each call a little different (the same call four times running is a
    # stuck loop).
    calls = [[bash(f"head -c 30000 /dev/zero | tr '\\0' x; echo {i}")] for i in range(40)]
    model = write_script(project, *calls, [{"type": "text", "text": "done"}])
    seen: list[dict[str, Any]] = []
    lags = threading.Event()

    def slow_follower(socket: Path) -> dict[str, Any] | None:
        with Client.connect(socket) as client:
            run = client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True, max_turns=50)
            # Not reading while the whole run goes by: far more than the outbox and the
            # socket's buffers hold, so this client lags for sure.
            with Client.connect(socket) as watcher:
                while watcher.call("sessions.list")["sessions"][-1]["status"] != "done":
                    threading.Event().wait(0.05)

            def on_event(event: dict[str, Any]) -> None:
                if event.get("type") == "lagged":
                    lags.set()
                seen.append(event)

            return follow(client, run["session"], on_event, since=0, until_run=run["run"], attached=True)

    async with serving(tmp_path / "roost.db") as daemon:
        with trio.fail_after(60):
            finished = await trio.to_thread.run_sync(slow_follower, daemon.socket_path)
    assert finished is not None and finished["reason"] == "done"
    assert lags.is_set()
    seqs = [e["seq"] for e in seen if e.get("seq") is not None]
    assert seqs == list(range(1, seqs[-1] + 1))  # every stored event once, in order
