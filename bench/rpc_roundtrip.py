"""Figure 4: RPC round trip with the blocking client, roost.protocol.Client.

One connected :class:`roost.protocol.Client` calls ``detach`` with a session id that does not
exist, one call at a time; each call is timed with ``perf_counter_ns`` around
``client.call(...)`` (encode, sendall, recv, decode, result). ``detach`` is the cheapest real
method: the daemon checks params, pops nothing from two dicts and answers ``{"ok": true}``
(no SQLite, no error path). ``status`` is not used because it reads SQLite, ``hello``
because its reply is the whole API catalogue (several KiB). For comparison the script
also times ``events`` on a bogus session (an error response, SESSION_NOT_FOUND), and, as
the machine's floor at this moment, the same client against a minimal trio server (one
task per connection that decodes each request and answers it inline with ``send_all``).

    uv run python bench/rpc_roundtrip.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchEnv, Figure, median, parser, percentile, prepare, report  # noqa: E402

TARGET_US = 50.0


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


def ping_pong_floor(calls: int) -> list[float]:
    """Round trips of 20 bytes between two blocking Python processes on a socketpair (µs)."""
    import os
    import socket

    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the echo child
        a.close()
        while data := b.recv(4096):
            b.sendall(data)
        os._exit(0)
    b.close()
    out = []
    clock = time.perf_counter_ns
    for _ in range(calls + 2000):
        t = clock()
        a.sendall(b"x" * 20)
        a.recv(4096)
        out.append((clock() - t) / 1000)
    a.close()
    os.waitpid(pid, 0)
    return out[2000:]


def measure_floor(env: BenchEnv, calls: int) -> list[float]:
    from roost.protocol import Client

    path = env.root / "floor.sock"
    server = subprocess.Popen([PYTHON, __file__, "--floor-server", str(path)], env=env.env)
    try:
        deadline = time.monotonic() + 10
        while not path.exists():
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the floor server did not start")
            time.sleep(0.01)
        with Client.connect(path, hello=False) as client:
            time_calls(client, "detach", {"session": "x"}, 2000)
            return time_calls(client, "detach", {"session": "x"}, calls)
    finally:
        server.kill()
        server.wait()


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
    with BenchEnv("rpc") as env:
        env.start_daemon()
        with env.client(timeout=None) as client:
            bogus = {"session": "s-no-such-session"}
            time_calls(client, "detach", bogus, 2000)  # warm-up
            started = time.perf_counter()
            detach = time_calls(client, "detach", bogus, args.calls)
            total = time.perf_counter() - started
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
        floor = measure_floor(env, args.calls)
    raw = ping_pong_floor(args.calls)
    context.append(f"`events` on a bogus session (error response SESSION_NOT_FOUND), "
                   f"{len(errors)} calls: median {median(errors):.1f} µs, p99 {percentile(errors, 99):.1f} µs")
    context.append(f"machine floor now: 20-byte ping-pong between two blocking Python processes "
                   f"on a socketpair: median {median(raw):.1f} µs, p99 {percentile(raw, 99):.1f} µs")
    context.append(f"trio floor now: the same client and calls against a minimal trio server "
                   f"(answers inline, no task per request): median {median(floor):.1f} µs, "
                   f"p99 {percentile(floor, 99):.1f} µs")
    context.append(f"pipelined `detach` on one connection (20,000, in windows of 500 sent then read): "
                   f"{pipelined:,.0f} requests/s")
    figures = [
        Figure(
            key="rpc.detach_median_us", title="RPC round trip median (Client, detach)",
            value=median(detach), unit="µs", better="lower", target=TARGET_US,
            how=f"median over {args.calls:,} sequential `detach` calls on a bogus session (after "
                f"2,000 warm-up), perf_counter_ns around Client.call",
            details=[f"p50 {median(detach):.1f} µs, p90 {percentile(detach, 90):.1f} µs, "
                     f"p99 {percentile(detach, 99):.1f} µs, max {max(detach):.0f} µs; "
                     f"{args.calls / total:,.0f} calls/s"],
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
