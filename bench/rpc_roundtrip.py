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

from _common import PYTHON, BenchEnv, Figure, median, parser, percentile, prepare, process_cpu, report  # noqa: E402

TARGET_US = 50.0
#: Each answer timed as a multiple of the same against a minimal trio server (issue 30).
TRIO_RATIO_TARGET = 1.1


def floor_server(path: str) -> None:
    """The minimal trio msgpack-RPC server used as the floor (``--floor-server PATH``)."""
    import msgpack
    import trio

    async def handle(stream: trio.SocketStream) -> None:
        unpacker = msgpack.Unpacker(raw=False)
        while data := await stream.receive_some(65536):
            unpacker.feed(data)
            for msg in unpacker:
                await stream.send_all(msgpack.packb(_answer_of(msg)))

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
            sock.sendall(msgpack.packb(_answer_of(msg)))


def _answer_of(request: list) -> list:
    """A floor server's response to a request: ``{"ok": true}`` to ``detach``, to anything
    else the error roost answers ``events`` on a session there is not."""
    if request[2] == "detach":
        return [1, request[1], None, {"ok": True}]
    error = {"code": 10, "name": "SESSION_NOT_FOUND", "message": f"no session {request[3][0]['session']!r}"}
    return [1, request[1], error, None]


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
    p.add_argument("--no-pin", action="store_true", help="leave the processes on every CPU")
    p.add_argument("--floor-server", metavar="PATH", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor_server:
        floor_server(args.floor_server)
        return
    context = prepare(args)
    if not args.no_pin:
        # One CPU for the client, the daemon and the floors: a round trip is then the work of
        # both ends and two switches. Across two CPUs it also pays waking the other one,
        # which on this VM swings from run to run (medians of 30 or 75 µs for the same code).
        cpu = max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        context.append(f"pinned to CPU {cpu} with the processes it starts (--no-pin: not)")
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
                for peer in (client, bare, blocking):  # warm-up
                    time_calls(peer, "detach", bogus, 2000)
                    time_calls(peer, "events", bogus, 500, expect_error=True)
                ping.time(2000)
                # In blocks, taking turns, so that the floors see the machine as roost does.
                t: dict[str, list[float]] = {k: [] for k in ("detach", "floor", "raw", "plain", "errors", "floor_errors")}
                # CPU seconds of each server over its timed blocks (/proc/PID/stat).
                cpu_used = {"roost": 0.0, "floor": 0.0}
                total = 0.0
                for _ in range(blocks):
                    own = process_cpu(env.daemon_pid)[0]
                    started = time.perf_counter()
                    t["detach"] += time_calls(client, "detach", bogus, block)
                    total += time.perf_counter() - started
                    t["errors"] += time_calls(client, "events", bogus, block, expect_error=True)
                    cpu_used["roost"] += process_cpu(env.daemon_pid)[0] - own
                    t["raw"] += ping.time(block)
                    own = process_cpu(server.pid)[0]
                    t["floor"] += time_calls(bare, "detach", bogus, block)
                    t["floor_errors"] += time_calls(bare, "events", bogus, block, expect_error=True)
                    cpu_used["floor"] += process_cpu(server.pid)[0] - own
                    t["plain"] += time_calls(blocking, "detach", bogus, block)
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
    detach, floor, raw, plain, errors = t["detach"], t["floor"], t["raw"], t["plain"], t["errors"]
    calls = len(detach)
    context.append(f"blocking floor, in the same blocks: the same client and calls against a minimal "
                   f"server with blocking sockets (a forked child on a socketpair): median "
                   f"{median(plain):.1f} µs, p99 {percentile(plain, 99):.1f} µs -> roost is "
                   f"{median(detach) / median(plain):.2f}x it, the trio floor {median(floor) / median(plain):.2f}x it")
    context.append(f"server CPU per call over the timed blocks (detach and events alike, /proc/PID/stat): "
                   f"roost's daemon {cpu_used['roost'] / (2 * calls) * 1e6:.1f} µs, the trio floor's server "
                   f"{cpu_used['floor'] / (2 * calls) * 1e6:.1f} µs -> {cpu_used['roost'] / max(cpu_used['floor'], 1e-9):.2f}x")
    context.append(f"pipelined `detach` on one connection (20,000, in windows of 500 sent then read): "
                   f"{pipelined:,.0f} requests/s")
    trio_how = ("in blocks of 1,000 taking turns: the same client and calls against a minimal trio "
                "server in a process of its own (msgpack Unpacker, answers inline with send_all: "
                "`{ok: true}` to detach, roost's SESSION_NOT_FOUND error to events)")
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
            key="rpc.detach_trio_ratio", title="RPC round trip / trio floor (detach)",
            value=median(detach) / median(floor), unit="x", better="lower", target=TRIO_RATIO_TARGET,
            how="median of the calls above / the same calls' median against the trio floor, " + trio_how,
            details=[f"roost {median(detach):.1f} µs, trio floor {median(floor):.1f} µs (p99 "
                     f"{percentile(floor, 99):.1f} µs) -> {median(detach) / median(floor):.2f}x"],
        ),
        Figure(
            key="rpc.error_trio_ratio", title="RPC error answer / trio floor (events, no such session)",
            value=median(errors) / median(t["floor_errors"]), unit="x", better="lower", target=TRIO_RATIO_TARGET,
            how=("median of `events` calls on a session there is not (the SESSION_NOT_FOUND error, "
                 "raised by the client as RpcError) / the same against the trio floor, " + trio_how),
            details=[f"roost {median(errors):.1f} µs (p99 {percentile(errors, 99):.1f} µs), trio floor "
                     f"{median(t['floor_errors']):.1f} µs -> {median(errors) / median(t['floor_errors']):.2f}x"],
        ),
        Figure(
            key="rpc.pingpong_ratio", title="RPC round trip / blocking ping-pong",
            value=median(detach) / median(raw), unit="x", better="lower", informational=True,
            how=("median of the calls above / median of 20-byte round trips between two blocking Python "
                 "processes on a socketpair (an echo child), timed in blocks of 1,000 taking turns "
                 "with roost's calls and the trio floor's; context: the target is against the trio "
                 "floor (issue 30), since trio is the daemon's event loop by design"),
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
