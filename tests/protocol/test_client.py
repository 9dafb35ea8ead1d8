"""The blocking Client against a small scripted server on a real Unix socket.

The server runs in a thread; each test gives it a script: a function that reads requests
and writes responses and notifications in whatever order the test needs.
"""

from __future__ import annotations

import collections
import socket
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from roost.protocol import (
    PROTOCOL_VERSION,
    Client,
    ConnectionClosed,
    Decoder,
    ErrorCode,
    Notification,
    Request,
    Response,
    RpcError,
    Timeout,
    encode,
)

WAIT = 10.0  # generous real-time bound, only reached when something is broken


class Peer:
    """The server's end of one connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._decoder = Decoder()
        self._inbox: collections.deque[Any] = collections.deque()

    def read_request(self) -> Request | None:
        """The next request, or None when the client has closed."""
        while not self._inbox:
            data = self.sock.recv(65536)
            if not data:
                return None
            self._inbox.extend(self._decoder.feed(data))
        message = self._inbox.popleft()
        assert isinstance(message, Request), message
        return message

    def read_requests(self, n: int) -> list[Request]:
        requests = [self.read_request() for _ in range(n)]
        assert all(r is not None for r in requests)
        return requests  # type: ignore[return-value]

    def send(self, *messages: Any) -> None:
        for message in messages:  # one write each: the client may read them apart or together
            self.sock.sendall(encode(message))


def note(i: int) -> Notification:
    return Notification("event", [{"type": "text.delta", "seq": i}])


@contextmanager
def serving(path: Path, script: Callable[[Peer], None]) -> Iterator[Path]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(WAIT)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(WAIT)
                script(Peer(conn))
        except BaseException as exc:  # reported in the test below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        thread.join(WAIT)
        listener.close()
    assert not thread.is_alive(), "server script did not finish"
    if errors:
        raise errors[0]


@pytest.fixture
def sock_path(roost_env: Path) -> Path:
    # roost_env is a short folder under /tmp (AF_UNIX paths are limited to ~107 bytes)
    return roost_env / "t.sock"


def connect(path: Path) -> Client:
    return Client.connect(path, hello=False, timeout=WAIT)


def test_connect_says_hello_and_keeps_info(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        hello = peer.read_request()
        assert hello is not None and hello.method == "hello"
        assert hello.params == [{"client": "tester", "protocol": PROTOCOL_VERSION, "catalogue": False}]
        peer.send(Response(hello.msgid, None, {"api_level": 1, "version": "0.1.0"}))
        assert peer.read_request() is None

    with serving(sock_path, script):
        with Client.connect(sock_path, client="tester", timeout=WAIT, catalogue=False) as client:
            assert client.info == {"api_level": 1, "version": "0.1.0"}


def test_connect_uses_roost_socket_by_default(sock_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOST_SOCKET", str(sock_path))

    def script(peer: Peer) -> None:
        (req,) = peer.read_requests(1)
        peer.send(Response(req.msgid, None, "pong"))
        assert peer.read_request() is None

    with serving(sock_path, script):
        with Client.connect(hello=False, timeout=WAIT) as client:
            assert client.call("ping") == "pong"


def test_connect_to_nothing_raises_oserror(sock_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Client.connect(sock_path)


def test_call_sends_one_params_map(sock_path: Path) -> None:
    seen: list[Request] = []

    def script(peer: Peer) -> None:
        (req,) = peer.read_requests(1)
        seen.append(req)
        peer.send(Response(req.msgid, None, {"session": "s1", "run": "r1"}))
        assert peer.read_request() is None

    with serving(sock_path, script), connect(sock_path) as client:
        result = client.call("dispatch", {"task": "t"}, model="scripted/demo")
        assert result == {"session": "s1", "run": "r1"}
    assert seen[0].method == "dispatch"
    assert seen[0].params == [{"task": "t", "model": "scripted/demo"}]


def test_responses_out_of_order_with_notifications_interleaved(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        a, b, c = peer.read_requests(3)
        peer.send(note(1), Response(c.msgid, None, "C"), note(2), Response(a.msgid, None, "A"))
        peer.send(note(3), Response(b.msgid, None, "B"), note(4))
        assert peer.read_request() is None

    with serving(sock_path, script), connect(sock_path) as client:
        ids = [client.send_request(m, {}) for m in ("a", "b", "c")]
        assert len(set(ids)) == 3
        assert client.wait_result(ids[1]) == "B"  # the last answer: everything else queued
        assert client.wait_result(ids[0]) == "A"
        assert client.wait_result(ids[2]) == "C"
        got = [client.next_notification(timeout=WAIT) for _ in range(4)]
        assert got == [note(1), note(2), note(3), note(4)]
        assert client.next_notification(timeout=0.05) is None


def test_notifications_during_a_call_are_queued_in_order(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        (req,) = peer.read_requests(1)
        peer.send(note(1), note(2), note(3), Response(req.msgid, None, {"ok": True}))
        (req,) = peer.read_requests(1)
        peer.send(note(4), Response(req.msgid, None, 2), note(5))
        assert peer.read_request() is None

    with serving(sock_path, script), connect(sock_path) as client:
        assert client.call("attach", session="s") == {"ok": True}
        assert client.call("second") == 2
        assert client.next_notification() == note(1)  # queued: no wait, no timeout needed
        assert client.next_notification() == note(2)
        assert client.next_notification() == note(3)
        assert client.next_notification() == note(4)
        assert client.next_notification(timeout=WAIT) == note(5)


def test_next_notification_times_out_with_none_then_still_works(sock_path: Path) -> None:
    go = threading.Event()

    def script(peer: Peer) -> None:
        assert go.wait(WAIT)
        peer.send(note(7))
        (req,) = peer.read_requests(1)
        peer.send(Response(req.msgid, None, "after"))
        assert peer.read_request() is None

    with serving(sock_path, script), connect(sock_path) as client:
        assert client.next_notification(timeout=0.05) is None
        assert client.next_notification(timeout=0) is None
        go.set()
        assert client.next_notification(timeout=WAIT) == note(7)
        # the connection's own timeout is back in force for calls (they wait in halves of it)
        assert client._sock.gettimeout() == WAIT / 2
        assert client.call("x") == "after"


def test_events_yields_maps(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        peer.send(
            Notification("event", [{"type": "run.started", "seq": 1}]),
            Notification("lagged", [{"last_seq": 9}]),
            Notification("event", [{"type": "run.finished", "seq": 2}]),
        )
        assert peer.read_request() is None

    with serving(sock_path, script), connect(sock_path) as client:
        events = client.events()
        assert next(events) == {"type": "run.started", "seq": 1}
        assert next(events) == {"type": "lagged", "last_seq": 9}
        assert next(events) == {"type": "run.finished", "seq": 2}


def test_error_response_raises_rpc_error(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        (req,) = peer.read_requests(1)
        error = {"code": 3, "name": "UNKNOWN_METHOD", "message": "no method nope", "data": {"m": "nope"}}
        peer.send(Response(req.msgid, error, None))
        (req,) = peer.read_requests(1)
        peer.send(Response(req.msgid, None, "fine"))
        assert peer.read_request() is None

    with serving(sock_path, script), connect(sock_path) as client:
        with pytest.raises(RpcError) as info:
            client.call("nope")
        assert (info.value.code, info.value.message, info.value.data) == (
            ErrorCode.UNKNOWN_METHOD,
            "no method nope",
            {"m": "nope"},
        )
        assert client.call("next") == "fine"  # an error response leaves the connection usable


def test_closed_after_request_raises_connection_closed(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        peer.read_requests(1)
        peer.send(note(1))  # then hang up without answering

    with serving(sock_path, script), connect(sock_path) as client:
        with pytest.raises(ConnectionClosed):
            client.call("dispatch", task="t")
        with pytest.raises(ConnectionClosed):
            client.call("again")
        # what arrived before the end is still handed out, then the end is reported
        assert client.next_notification(timeout=WAIT) == note(1)
        with pytest.raises(ConnectionClosed):
            client.next_notification(timeout=WAIT)


def test_closed_before_anything_raises_connection_closed(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        pass  # accept and hang up at once

    with serving(sock_path, script), connect(sock_path) as client:
        with pytest.raises(ConnectionClosed):
            client.call("status")


def test_closed_while_waiting_for_notifications(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        peer.send(note(1))

    with serving(sock_path, script), connect(sock_path) as client:
        events = client.events()
        assert next(events)["seq"] == 1
        with pytest.raises(ConnectionClosed):
            next(events)


def test_close_twice_is_fine(sock_path: Path) -> None:
    with serving(sock_path, lambda peer: None):
        client = connect(sock_path)
        client.close()
        client.close()


# -- timeouts: silence is what times out, never a slow answer ------------------------------

QUICK = 0.4  # a client timeout short enough for a test; nothing below asserts on timings


def test_a_silent_daemon_is_a_timeout_after_a_status_check(sock_path: Path) -> None:
    seen: list[str] = []

    def script(peer: Peer) -> None:
        for request in peer.read_requests(2):  # the call, then the check; neither answered
            seen.append(request.method)
        assert peer.read_request() is None

    with serving(sock_path, script):
        client = Client.connect(sock_path, hello=False, timeout=QUICK)
        with client, pytest.raises(Timeout) as info:
            client.call("dispatch", task="t")
    assert seen == ["dispatch", "status"]
    assert str(info.value) == f"the roost daemon at {sock_path} did not answer within {QUICK:g} s"


def test_a_daemon_that_stops_reading_is_a_timeout_not_a_hang(sock_path: Path) -> None:
    # The socket blocks with the kernel's timeouts (SO_SNDTIMEO): a request larger than both
    # sockets' buffers, to a peer that reads nothing, is given up after the timeout.
    stop = threading.Event()

    def script(peer: Peer) -> None:
        stop.wait(WAIT)

    with serving(sock_path, script):
        client = Client.connect(sock_path, hello=False, timeout=QUICK)
        try:
            with client, pytest.raises(Timeout):
                client.call("chat", messages=["x" * (16 << 20)])
        finally:
            stop.set()


def test_a_slow_answer_from_a_live_daemon_is_waited_for(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        (call,) = peer.read_requests(1)
        # Longer than the timeout in all: each silence brings a check, and each is answered.
        for _ in range(3):
            (check,) = peer.read_requests(1)
            assert check.method == "status"
            peer.send(Response(check.msgid, None, {"pid": 1}))
        peer.send(note(1), Response(call.msgid, None, "slow but fine"))
        assert peer.read_request() is None

    with serving(sock_path, script):
        with Client.connect(sock_path, hello=False, timeout=QUICK) as client:
            assert client.call("chat", messages=[]) == "slow but fine"
            assert client.next_notification() == note(1)  # the checks' answers are not kept


def test_hello_to_a_silent_daemon_times_out_and_closes(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        peer.read_requests(2)
        assert peer.read_request() is None  # the client closed its end

    with serving(sock_path, script):
        with pytest.raises(Timeout):
            Client.connect(sock_path, timeout=QUICK)


def test_events_check_a_silent_daemon_only_when_asked(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        peer.send(note(1))
        (check,) = peer.read_requests(1)
        assert check.method == "status"
        peer.send(Response(check.msgid, None, {}), note(2))
        peer.read_requests(2)  # the next check and its own check: no answer now
        assert peer.read_request() is None

    # The check's own call waits the client's timeout: 2 s, not WAIT, for the last one.
    with serving(sock_path, script), Client.connect(sock_path, hello=False, timeout=2.0) as client:
        events = client.events(check_after=QUICK / 2)
        assert next(events)["seq"] == 1
        assert next(events)["seq"] == 2
        with pytest.raises(Timeout):
            next(events)


def test_a_timeout_must_be_positive(sock_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        Client.connect(sock_path, timeout=0)
