"""Figure 4: RPC round trip with the blocking client, roost.protocol.Client.

One connected :class:`roost.protocol.Client` calls ``detach`` with a session id that does not
exist, one call at a time; each call is timed with ``perf_counter_ns`` around
``client.call(...)`` (encode, sendall, recv, decode, result). ``detach`` is the cheapest real
method: the daemon checks params, pops nothing from two dicts and answers ``{"ok": true}``
(no SQLite, no error path). ``status`` is not used because it reads SQLite, ``hello``
because its reply is the whole API catalogue (several KiB). For comparison the script
also times ``events`` on a bogus session (an error response, SESSION_NOT_FOUND), and three
floors, in blocks of 1,000 calls taking turns with roost's: a 20-byte ping-pong between two
blocking Python processes on a socketpair (the figure is roost's median as a multiple of
it), and the same client against two minimal servers that decode each request and answer
it inline: one written with trio (one task per connection, ``send_all``), one with blocking
sockets (a forked child on a socketpair). The last is what a server without an event loop
would cost: it tells what trio adds from what the RPC itself does.

    uv run python bench/rpc_roundtrip.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchEnv, Figure, median, parser, percentile, prepare, report  # noqa: E402

TARGET_US = 50.0
#: The round trip as a multiple of a blocking Python ping-pong on a socketpair.
PINGPONG_RATIO_TARGET = 1.2


def floor_server(path: str) -> None:
    """The minimal trio msgpack-RPC server used as the floor (``--floor-server PATH``)."""
    import msgpack
    import trio

    async def handle(stream: trio.SocketStream) -> None:
        unpacker = msgpack.Unpacker(raw=False)
        while data := await stream.receive_some(65536):
            unpacker.feed(data)
            for msg in unpacker:
                await stream.send_all(msgpack.packb([1, msg[1], None, {"ok": True}]))

    async def main() -> None:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(path)
        sock.listen(8)
        await trio.serve_listeners(handle, [trio.SocketListener(sock)])

    trio.run(main)


class ForkedPeer:
    """A child forked here that runs ``serve`` on its end of a socketpair, with blocking
    reads and writes; :attr:`sock` is ours. Resource handling: :meth:`close` closes our end,
    which ends the child's loop, and reaps it."""

    def __init__(self, serve: Callable[[socket.socket], None]) -> None:
        self.sock, theirs = socket.socketpair()
        self._pid = os.fork()
        if self._pid == 0:
            self.sock.close()
            serve(theirs)
            os._exit(0)
        theirs.close()

    def close(self) -> None:
        self.sock.close()
        os.waitpid(self._pid, 0)


def _echo(sock: socket.socket) -> None:
    while data := sock.recv(4096):
        sock.sendall(data)


def _answer_rpc(sock: socket.socket) -> None:
    """What :func:`floor_server` does with trio, with blocking calls."""
    import msgpack

    unpacker = msgpack.Unpacker(raw=False)
    while data := sock.recv(65536):
        unpacker.feed(data)
        for msg in unpacker:
            sock.sendall(msgpack.packb([1, msg[1], None, {"ok": True}]))


class PingPong(ForkedPeer):
    """The machine's floor: 20-byte round trips between two blocking Python processes on a
    socketpair (an echo child)."""

    def __init__(self) -> None:
        super().__init__(_echo)

    def time(self, calls: int) -> list[float]:
        """µs per round trip."""
        a, clock, out = self.sock, time.perf_counter_ns, [0.0] * calls
        for i in range(calls):
            t = clock()
            a.sendall(b"x" * 20)
            a.recv(4096)
            out[i] = (clock() - t) / 1000
        return out


def start_floor_server(env: BenchEnv) -> tuple[subprocess.Popen[bytes], Path]:
    """The minimal trio server of the trio floor, listening; (process, socket path)."""
    path = env.root / "floor.sock"
    server = subprocess.Popen([PYTHON, __file__, "--floor-server", str(path)], env=env.env)
    deadline = time.monotonic() + 10
    while not path.exists():
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise RuntimeError("the floor server did not start")
        time.sleep(0.01)
    return server, path


def time_calls(client, method: str, params: dict, calls: int, expect_error: bool = False) -> list[float]:
    from roost.protocol import RpcError

    call = client.call
    clock = time.perf_counter_ns
    out = [0.0] * calls
    for i in range(calls):
        t = clock()
        try:
            call(method, params)
        except RpcError:
            if not expect_error:
                raise
        out[i] = (clock() - t) / 1000
    return out


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000, help="timed calls (default 20000)")
    p.add_argument("--floor-server", metavar="PATH", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor_server:
        floor_server(args.floor_server)
        return
    context = prepare(args)
    blocks, block = max(1, args.calls // 1000), min(args.calls, 1000)
    with BenchEnv("rpc") as env:
        env.start_daemon()
        server, floor_path = start_floor_server(env)
        ping = PingPong()
        blocking_server = ForkedPeer(_answer_rpc)
        from roost.protocol import Client

        try:
            with (env.client(timeout=None) as client, Client.connect(floor_path, hello=False) as bare,
                  Client(blocking_server.sock, timeout=None) as blocking):
                bogus = {"session": "s-no-such-session"}
                time_calls(client, "detach", bogus, 2000)  # warm-up
                time_calls(bare, "detach", bogus, 2000)
                time_calls(blocking, "detach", bogus, 2000)
                ping.time(2000)
                # In blocks, taking turns, so that the floors see the machine as roost does.
                detach: list[float] = []
                floor: list[float] = []
                raw: list[float] = []
                plain: list[float] = []
                total = 0.0
                for _ in range(blocks):
                    started = time.perf_counter()
                    detach += time_calls(client, "detach", bogus, block)
                    total += time.perf_counter() - started
                    raw += ping.time(block)
                    floor += time_calls(bare, "detach", bogus, block)
                    plain += time_calls(blocking, "detach", bogus, block)
                errors = time_calls(client, "events", bogus, min(args.calls, 5000), expect_error=True)
                # Pipelined: requests/s on one connection when not waiting for each answer. In
                # windows of 500: a blocking client that writes without ever reading would
                # deadlock once both sockets' buffers are full (the daemon stops reading
                # requests while it cannot write answers).
                n, window = 20000, 500
                started_p = time.perf_counter()
                for _ in range(n // window):
                    ids = [client.send_request("detach", bogus) for _ in range(window)]
                    for msgid in ids:
                        client.wait_result(msgid)
                pipelined = n / (time.perf_counter() - started_p)
        finally:
            ping.close()
            blocking_server.close()
            server.kill()
            server.wait()
    calls = len(detach)
    context.append(f"`events` on a bogus session (error response SESSION_NOT_FOUND), "
                   f"{len(errors)} calls: median {median(errors):.1f} µs, p99 {percentile(errors, 99):.1f} µs")
    context.append(f"trio floor, in the same blocks: the same client and calls against a minimal trio "
                   f"server (answers inline, no task per request): median {median(floor):.1f} µs, "
                   f"p99 {percentile(floor, 99):.1f} µs -> roost is {median(detach) / median(floor):.2f}x it")
    context.append(f"blocking floor, in the same blocks: the same client and calls against a minimal "
                   f"server with blocking sockets (a forked child on a socketpair): median "
                   f"{median(plain):.1f} µs, p99 {percentile(plain, 99):.1f} µs -> roost is "
                   f"{median(detach) / median(plain):.2f}x it, the trio floor {median(floor) / median(plain):.2f}x it")
    context.append(f"pipelined `detach` on one connection (20,000, in windows of 500 sent then read): "
                   f"{pipelined:,.0f} requests/s")
    figures = [
        Figure(
            key="rpc.detach_median_us", title="RPC round trip median (Client, detach)",
            value=median(detach), unit="µs", better="lower", target=TARGET_US,
            how=f"median over {calls:,} sequential `detach` calls on a bogus session (after "
                f"2,000 warm-up; in blocks of 1,000 taking turns with the floors), perf_counter_ns "
                f"around Client.call",
            details=[f"p50 {median(detach):.1f} µs, p90 {percentile(detach, 90):.1f} µs, "
                     f"p99 {percentile(detach, 99):.1f} µs, max {max(detach):.0f} µs; "
                     f"{calls / total:,.0f} calls/s"],
        ),
        Figure(
            key="rpc.pingpong_ratio", title="RPC round trip / blocking ping-pong",
            value=median(detach) / median(raw), unit="x", better="lower", target=PINGPONG_RATIO_TARGET,
            how=("median of the calls above / median of 20-byte round trips between two blocking Python "
                 "processes on a socketpair (an echo child), timed in blocks of 1,000 taking turns "
                 "with roost's calls and the trio floor's"),
            details=[f"roost {median(detach):.1f} µs, ping-pong {median(raw):.1f} µs (p99 "
                     f"{percentile(raw, 99):.1f} µs) -> {median(detach) / median(raw):.2f}x"],
        ),
        Figure(
            key="rpc.detach_p99_us", title="RPC round trip p99 (Client, detach)",
            value=percentile(detach, 99), unit="µs", better="lower",
            how="99th percentile of the same calls", informational=True,
        ),
    ]
    report("RPC round trip", figures, args, context)


if __name__ == "__main__":
    main()
