"""Figure 5: fan-out, events per second delivered to 10 attached clients in total.

Ten client *processes* (so no single Python client limits the figure) each connect to the
daemon, ``attach`` to one session and say they are ready. Then this process dispatches one
run on that session with the scripted model, whose reply is a text of WORDS words; the
scripted provider publishes one live ``text.delta`` event per word (in blocks of
BLOCK words: it yields to the scheduler once per block), plus the run's stored events
(run.started, message.user, step.started, message.assistant, step.finished, run.finished).

Each client counts the ``event`` notifications of the run it receives up to and including
``run.finished`` (not ``session.created``, which ``attach`` replays before the clock
starts), and notes the monotonic time (CLOCK_MONOTONIC, shared by all processes) at which
it got ``run.finished``. The figure is::

    sum of events received by the 10 clients / (last run.finished received - dispatch sent)

A client that falls behind is detached by the daemon with a ``lagged`` notification (by
design: a slow client never slows a run). A run in which that happened did not deliver the
whole stream: it is reported, and left out of the median (if every run lagged, the figure
is marked NOT VALID).

Two kinds of clients are measured: ``Client`` (roost.protocol.Client.events(): every message
decoded into an event map, as a real script would), and ``raw`` (a socket and a bare
msgpack.Unpacker: the cheapest possible reader, so the figure shows the daemon's side).
The raw readers get a 50,000-word stream. ``Client`` processes are slower readers (each
message becomes a Python object; ten of them share the machine's cores with the daemon)
and lag on that stream, so they get a 7,000-word burst that fits in the daemon's
per-connection outbox (8192 messages): nothing is dropped, and the figure is how fast they
drain it. One 50,000-word run to Client processes is also made, to report whether they lag.

    uv run python bench/fanout.py [--words 50000] [--client-words 7000] [--repeat 3]
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchEnv, Figure, parser, prepare, report  # noqa: E402

TARGET = 200_000


# -- the client processes -------------------------------------------------------------------


def client_main(kind: str, sock_path: str, session: str) -> None:
    """Attach, say ready, count events until run.finished, print a JSON summary."""
    if kind == "client":
        _client_with_roost(sock_path, session)
    else:
        _client_raw(sock_path, session)


def _client_with_roost(sock_path: str, session: str) -> None:
    from roost.protocol import Client

    client = Client.connect(sock_path, client="bench-fanout")
    client.call("attach", session=session)
    print("ready", flush=True)
    count = lagged = 0
    first = None
    for event in client.events():
        kind = event.get("type")
        if kind == "lagged":
            lagged += 1
            break
        if kind == "session.created":  # replayed by attach, before the clock starts
            continue
        if first is None:
            first = time.perf_counter()
        count += 1
        if kind == "run.finished":
            break
    last = time.perf_counter()
    print(json.dumps({"count": count, "lagged": lagged, "first": first, "last": last}), flush=True)


def _client_raw(sock_path: str, session: str) -> None:
    import msgpack

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sock_path)
    sock.sendall(msgpack.packb([0, 1, "attach", [{"session": session}]]))
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    attached = False
    while not attached:
        unpacker.feed(sock.recv(65536))
        for msg in unpacker:
            if msg[0] == 1 and msg[1] == 1:
                if msg[2]:
                    raise SystemExit(f"attach failed: {msg[2]}")
                attached = True
    print("ready", flush=True)
    count = lagged = 0
    first = None
    done = False
    recv = sock.recv
    while not done:
        data = recv(1 << 20)
        if not data:
            break
        if first is None:
            first = time.perf_counter()
        unpacker.feed(data)
        for msg in unpacker:
            if msg[0] != 2:
                continue
            if msg[1] == "lagged":
                lagged += 1
                done = True
                break
            count += 1
            if msg[2][0].get("type") == "run.finished":
                done = True
                break
    last = time.perf_counter()
    print(json.dumps({"count": count, "lagged": lagged, "first": first, "last": last}), flush=True)


# -- the measurement ------------------------------------------------------------------------


def one_run(env: BenchEnv, script: Path, kind: str, clients: int) -> dict[str, Any]:
    with env.client(timeout=60) as control:
        session = control.call("sessions.create", cwd=str(env.project))["session"]
        procs = [
            subprocess.Popen([PYTHON, __file__, "--client", kind, str(env.socket), session],
                             env=env.env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            for _ in range(clients)
        ]
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a fan-out client failed to attach: {line!r}")
        time.sleep(0.2)  # let the clients' start-up CPU settle
        start = time.perf_counter()
        control.call("dispatch", task="stream", session=session, model=f"scripted/{script}")
        results = []
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            results.append(json.loads(out.strip().splitlines()[-1]))
        # Events the daemon produced for this run: stored ones are counted from the store;
        # live deltas are one per word.
        stored = control.call("events", session=session)["events"]
    end = max(r["last"] for r in results)
    total = sum(r["count"] for r in results)
    return {
        "total": total,
        "seconds": end - start,
        "rate": total / (end - start),
        "lagged": sum(r["lagged"] for r in results),
        "per_client": [r["count"] for r in results],
        "stored": len(stored),
    }


def stream_script(env: BenchEnv, name: str, words: int, block: int) -> Path:
    blocks = []
    left = words
    while left > 0:
        n = min(block, left)
        blocks.append({"type": "text", "text": "word " * n})
        left -= n
    return env.write_script(name, [{"content": blocks}])


def figure(kind: str, runs: list[dict[str, Any]], words: int, block: int, clients: int) -> Figure:
    # Runs in which a client lagged (was cut off) did not deliver the whole stream: the
    # figure is the median of the complete runs, and only if there are none, of all runs.
    complete = sorted((r for r in runs if not r["lagged"]), key=lambda r: r["rate"])
    used = complete or sorted(runs, key=lambda r: r["rate"])
    mid = used[len(used) // 2]
    full = words + mid["stored"] - 1  # the run's stored events; session.created is not counted
    details = [
        f"median run: {mid['total']:,} events in {mid['seconds'] * 1000:.0f} ms; per client "
        f"{min(mid['per_client']):,}..{max(mid['per_client']):,} (the whole stream is {full:,})",
        "all runs: " + ", ".join(f"{r['rate']:,.0f}/s{' (lagged)' if r['lagged'] else ''}"
                                 for r in runs),
    ]
    if not complete:
        details.append("NOT VALID: a client lagged in every run (cut off by the daemon); the "
                       "rate counts only what the clients got")
    elif len(complete) < len(runs):
        details.append(f"{len(runs) - len(complete)} of {len(runs)} runs had a client that "
                       f"lagged and was cut off: left out of the median")
    reader = "roost.protocol.Client (events())" if kind == "client" else "raw socket + msgpack.Unpacker"
    return Figure(
        key=f"fanout.{kind}_events_per_s",
        title=f"fan-out to {clients} {'Client processes' if kind == 'client' else 'raw readers'}",
        value=mid["rate"], unit="events/s", better="higher", target=TARGET,
        how=(f"median of the {len(used)} complete runs of {len(runs)}: events received by "
             f"{clients} attached client processes ({reader}) up to run.finished / (last "
             f"run.finished received - dispatch sent); one scripted run streaming {words:,} "
             f"words = {words:,} text.delta events (blocks of {block} words) + the run's "
             f"stored events"),
        details=details,
    )


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=50_000,
                   help="words streamed to the raw readers (default 50000)")
    p.add_argument("--client-words", type=int, default=7_000,
                   help="words streamed to the Client processes (default 7000: the burst fits "
                        "the daemon's 8192-message outbox, so slow readers do not lag)")
    p.add_argument("--block", type=int, default=1000, help="words per text block (default 1000)")
    p.add_argument("--clients", type=int, default=10, help="attached client processes (default 10)")
    p.add_argument("--repeat", type=int, default=5, help="runs per client kind; median (default 5)")
    p.add_argument("--client", nargs=3, metavar=("KIND", "SOCKET", "SESSION"), help=argparse_hidden())
    args = p.parse_args()
    if args.client:
        client_main(*args.client)
        return
    context = prepare(args)
    figures = []
    with BenchEnv("fanout") as env:
        env.start_daemon()
        raw_script = stream_script(env, "raw.json", args.words, args.block)
        client_script = stream_script(env, "client.json", args.client_words, args.block)
        runs = [one_run(env, raw_script, "raw", args.clients) for _ in range(args.repeat)]
        figures.append(figure("raw", runs, args.words, args.block, args.clients))
        runs = [one_run(env, client_script, "client", args.clients) for _ in range(args.repeat)]
        figures.append(figure("client", runs, args.client_words, args.block, args.clients))
        # A long stream to Client processes: do they keep up?
        long = one_run(env, raw_script, "client", args.clients)
        context.append(
            f"the {args.words:,}-word stream to {args.clients} Client processes: "
            f"{long['lagged']} of {args.clients} lagged (detached by the daemon); they received "
            f"{min(long['per_client']):,}..{max(long['per_client']):,} events each, "
            f"{long['rate']:,.0f} events/s in total until then")
    context.append(f"{os.cpu_count()} cpus shared by the daemon and the {args.clients} client processes")
    report("fan-out", figures, args, context)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
