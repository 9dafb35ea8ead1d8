"""Figure 11: storage: database bytes per event, and opening and attaching long sessions.

*Bytes per event*: for each kind of tool output, a fresh daemon and database, one scripted
run in mode full of 200 tool steps (5 stored events each: ``step.started``,
``message.assistant``, ``tool.started``, ``tool.finished``, ``step.finished``; about 1,000
events with the run's own) calling ``read``: *small*, a 3-line file (about 30 bytes of
output); *large*, a different 8 KiB slice of a file of random hex text at every step (text
that compresses about 2:1, as logs and source do); *duplicated*, the same 8 KiB slice at
every step (the path spelled three ways in turn, so that no call repeats three times
running). The daemon is then stopped (its write-ahead log checkpointed into the file), and
the figure is (size of ``roost.db`` - size of an empty one) / stored events. The SQLite
tables are measured too: event bodies, blobs (stored outputs), snapshots.

*Open and attach against length*: one database holding sessions of 100, 1,000 and
10,000 events (small outputs), made by one daemon; then, 5 times, a fresh daemon over it
(nothing loaded) and for each session in turn: *attach*, the first request, from sending
``attach`` on a raw socket to its response, after every stored event (a bare
``msgpack.Unpacker``: the daemon's cost, not a Python client's); *attach with Client*:
again with ``roost.protocol.Client.call`` (what a script pays, its decoding included);
*events*, ``events`` for the whole log (what ``roost logs`` reads); *report*, ``report``
on the session (its run folded from the stored events, the daemon's whole cost); and on
another fresh daemon, *open*: the first request, one that needs the session's state
(``pending`` with the session: the daemon folds it, from its snapshot if it has one).
Medians of the 5.

``--code DIR`` runs the daemons from another checkout (``PYTHONPATH=DIR``), e.g. the code
before a change, to record its figures as the baseline (``--update-baseline``).

    uv run python bench/storage.py [--rounds 5] [--code /path/to/checkout]
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchEnv, Figure, median, parser, prepare, report, spread  # noqa: E402

OPEN_TARGET_MS = 100.0
ATTACH_TARGET_MS = 100.0
REPORT_TARGET_MS = 100.0
LENGTHS = (100, 1000, 10000)
KINDS = ("small", "large", "duplicated")
BYTES_STEPS = 200
SLICE_LINES = 128  # lines of 64 hex characters: 8 KiB a slice


def write_files(project: Path, slices: int) -> None:
    (project / "small.txt").write_text("one\ntwo\nthree\n")
    with open(project / "big.txt", "w") as f:
        for _ in range(slices * SLICE_LINES):
            f.write(os.urandom(32).hex() + "\n")


def read_call(kind: str, i: int) -> dict[str, Any]:
    if kind == "small":
        # Different offsets past line 1 give the same short output: no call repeats.
        return {"path": "small.txt", "limit": 3 + i % 3}
    if kind == "large":
        return {"path": "big.txt", "offset": i * SLICE_LINES + 1, "limit": SLICE_LINES}
    return {"path": ["big.txt", "./big.txt", "././big.txt"][i % 3], "limit": SLICE_LINES}


def make_session(env: BenchEnv, kind: str, steps: int, runs: int = 1) -> tuple[str, int]:
    """``runs`` runs of ``steps`` read steps each, in one session; (session, stored events)."""
    responses: list[dict[str, Any]] = []
    for _ in range(runs):
        # The scripted model answers by the number of replies so far: one script for all runs.
        responses += [
            {"content": [{"type": "text", "text": f"step {i}"},
                         {"type": "tool_use", "name": "read", "input": read_call(kind, len(responses) + i)}]}
            for i in range(steps)
        ]
        responses.append({"content": [{"type": "text", "text": "done"}]})
    script = env.write_script(f"{kind}-{steps}x{runs}.json", responses)
    session = None
    with env.client(timeout=600) as client:
        for _ in range(runs):
            where = {"session": session} if session else {"cwd": str(env.project)}
            started = client.call("dispatch", task="read", model=f"scripted/{script}", mode="full",
                                  max_turns=steps + 5, attach=True, **where)
            session = started["session"]
            for event in client.events():
                if event.get("type") == "run.finished":
                    if event.get("reason") != "done":
                        raise RuntimeError(f"the setup run ended {event.get('reason')}: {event.get('error')}")
                    break
            client.call("detach", session=session)
        rows = client.call("sessions.list")["sessions"]
    (row,) = [r for r in rows if r["id"] == session]
    return row["id"], row["events"]


def database(env: BenchEnv) -> Path:
    return env.root / "state" / "roost" / "roost.db"


def tables(db: Path) -> dict[str, int]:
    """Bytes of the event bodies, the blobs (stored outputs) and snapshots, if those exist."""
    con = sqlite3.connect(db)
    try:
        names = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out = {"events": con.execute("SELECT coalesce(sum(length(body)), 0) FROM events").fetchone()[0]}
        if "blobs" in names:
            out["blobs"] = con.execute("SELECT coalesce(sum(length(data)), 0) FROM blobs").fetchone()[0]
            out["blob rows"] = con.execute("SELECT count(*) FROM blobs").fetchone()[0]
        if "snapshots" in names:
            out["snapshots"] = con.execute("SELECT coalesce(sum(length(body)), 0) FROM snapshots").fetchone()[0]
        return out
    finally:
        con.close()


def bytes_per_event(kind: str, daemon_env: dict[str, str]) -> tuple[float, str]:
    with BenchEnv(f"st{kind[:4]}") as env:
        write_files(env.project, BYTES_STEPS)
        env.start_daemon(daemon_env)
        env.stop_daemon()
        empty = database(env).stat().st_size
        env.start_daemon(daemon_env)
        _, events = make_session(env, kind, BYTES_STEPS)
        time.sleep(0.5)  # a snapshot is written in the background once the run ends
        env.stop_daemon()
        size = database(env).stat().st_size
        detail = ", ".join(f"{k} {v:,}" for k, v in tables(database(env)).items())
    return (size - empty) / events, f"{kind}: {size - empty:,} bytes for {events:,} events ({detail})"


class RawClient:
    """A socket and a bare msgpack.Unpacker: only the daemon's work is timed."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 30)
        self.msgid = 0
        self.call("hello", {"client": "bench-raw"})

    def call(self, method: str, params: dict[str, Any]) -> tuple[Any, int]:
        """The result, and how many notifications came before it."""
        self.msgid += 1
        self.sock.sendall(msgpack.packb([0, self.msgid, method, [params]], use_bin_type=True))
        notes = 0
        while True:
            for message in self.unpacker:
                if message[0] == 2:
                    notes += 1
                elif message[1] == self.msgid:
                    if message[2] is not None:
                        raise RuntimeError(f"{method}: {message[2]}")
                    return message[3], notes
            self.unpacker.feed(self.sock.recv(1 << 20))

    def close(self) -> None:
        self.sock.close()


def read_bodies(db: Path, session: str) -> int:
    """The floor of a replay: a session's stored bodies read with sqlite3, nothing else."""
    con = sqlite3.connect(db)
    try:
        return len(con.execute("SELECT seq, body FROM events WHERE session = ? ORDER BY seq", (session,)).fetchall())
    finally:
        con.close()


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="fresh daemons for open and attach (default 5)")
    p.add_argument("--code", metavar="DIR", help="run the daemons from this checkout (PYTHONPATH=DIR)")
    args = p.parse_args()
    context = prepare(args)
    daemon_env = {"PYTHONPATH": str(Path(args.code).resolve())} if args.code else {}
    if args.code:
        context.append(f"daemons run from {args.code}")

    figures: list[Figure] = []
    sizes = [bytes_per_event(kind, daemon_env) for kind in KINDS]
    for kind, (value, detail) in zip(KINDS, sizes):
        figures.append(Figure(
            key=f"storage.bytes_per_event_{kind}", title=f"database bytes per event ({kind} outputs)",
            value=value, unit="B/event", better="lower", informational=True,
            how=f"{BYTES_STEPS} read steps in one run; (roost.db - an empty one) / stored events",
            details=[detail],
        ))

    opened: dict[int, list[float]] = {n: [] for n in LENGTHS}
    attached: dict[int, list[float]] = {n: [] for n in LENGTHS}
    by_client: dict[int, list[float]] = {n: [] for n in LENGTHS}
    read: dict[int, list[float]] = {n: [] for n in LENGTHS}
    reported: dict[int, list[float]] = {n: [] for n in LENGTHS}
    reported_last: list[float] = []
    floor: list[float] = []
    with BenchEnv("stlen") as env:
        write_files(env.project, 1)
        env.start_daemon(daemon_env)
        t = time.perf_counter()
        sessions = {n: make_session(env, "small", (n - 5) // 5) for n in LENGTHS}
        # The usual shape of a long session: many runs (here 100 of 20 steps).
        many_runs = make_session(env, "small", 20, runs=100)
        context.append(f"setup: sessions of {', '.join(f'{e:,}' for _, e in sessions.values())} events "
                       f"in {time.perf_counter() - t:.1f} s")
        time.sleep(1.0)  # background snapshots
        env.stop_daemon()
        from roost.protocol import Client

        for _ in range(args.rounds):
            # Each first request on a daemon that has loaded nothing: an attach (what
            # `roost attach` costs after a restart), then, on another, an open.
            env.start_daemon(daemon_env)
            raw = RawClient(env.socket)
            with Client.connect(env.socket, client="bench", timeout=120) as client:
                for n, (session, events) in sessions.items():
                    took, (_, notes) = timed(lambda: raw.call("attach", {"session": session}))
                    assert notes == events, (notes, events)
                    attached[n].append(took)
                    raw.call("detach", {"session": session})
                    took, _ = timed(lambda: client.call("attach", session=session))
                    by_client[n].append(took)
                    client.call("detach", session=session)
                    while client.next_notification(timeout=0) is not None:
                        pass
                    read[n].append(timed(lambda: raw.call("events", {"session": session}))[0])
                    reported[n].append(timed(lambda: raw.call("report", {"session": session}))[0])
                session = many_runs[0]
                raw.call("attach", {"session": session})
                raw.call("detach", {"session": session})
                reported_last.append(timed(lambda: raw.call("report", {"session": session}))[0])
            raw.close()
            env.stop_daemon()
            floor.append(timed(lambda: read_bodies(database(env), sessions[LENGTHS[-1]][0]))[0])
            env.start_daemon(daemon_env)
            raw = RawClient(env.socket)
            for n, (session, _) in sessions.items():
                opened[n].append(timed(lambda: raw.call("pending", {"session": session}))[0])
            raw.close()
            env.stop_daemon()

    for n in LENGTHS:
        events = sessions[n][1]
        figures.append(Figure(
            key=f"storage.open_{n}_ms", title=f"open a session of {n:,} events",
            value=median(opened[n]) * 1000, unit="ms", better="lower", target=OPEN_TARGET_MS if n == 10000 else None,
            informational=n != 10000,
            how=f"fresh daemon, first request `pending` with the session (loads it); median of {len(opened[n])}; "
                f"{events:,} events",
            details=[f"min/median/max {spread(opened[n], 1000)} ms"],
        ))
        figures.append(Figure(
            key=f"storage.attach_{n}_ms", title=f"attach: {n:,} events replayed",
            value=median(attached[n]) * 1000, unit="ms", better="lower",
            target=ATTACH_TARGET_MS if n == 10000 else None, informational=n != 10000,
            how=f"fresh daemon, first request; raw socket + msgpack.Unpacker, `attach` sent to its "
                f"response after every event; median of {len(attached[n])}",
            details=[f"min/median/max {spread(attached[n], 1000)} ms; with roost.protocol.Client "
                     f"{spread(by_client[n], 1000)} ms; `events` (the whole log) {spread(read[n], 1000)} ms"],
        ))
        figures.append(Figure(
            key=f"storage.report_{n}_ms", title=f"report: a run of {n:,} events",
            value=median(reported[n]) * 1000, unit="ms", better="lower",
            target=REPORT_TARGET_MS if n == 10000 else None, informational=n != 10000,
            how=f"`report` on the session (after attach: loaded), raw socket, to its response; "
                f"median of {len(reported[n])}",
            details=[f"min/median/max {spread(reported[n], 1000)} ms"],
        ))
    figures.append(Figure(
        key="storage.report_last_of_100_runs_ms", title=f"report: the last of 100 runs, {many_runs[1]:,} events",
        value=median(reported_last) * 1000, unit="ms", better="lower", target=REPORT_TARGET_MS,
        how=f"`report` on a session of 100 runs of 20 steps (its last run: read from where it started); "
            f"median of {len(reported_last)}",
        details=[f"min/median/max {spread(reported_last, 1000)} ms"],
    ))
    context.append(f"floor, at the same moments: the 10,000 stored bodies read with sqlite3 in this process "
                   f"{spread(floor, 1000)} ms (min/median/max)")
    figures.append(Figure(
        key="storage.attach_client_10000_ms", title="attach with Client: 10,000 events",
        value=median(by_client[10000]) * 1000, unit="ms", better="lower", informational=True,
        how="roost.protocol.Client.call('attach') to its return, every event decoded by the client",
    ))
    figures.append(Figure(
        key="storage.events_10000_ms", title="`events`: a 10,000-event log",
        value=median(read[10000]) * 1000, unit="ms", better="lower", informational=True,
        how="raw socket, `events` for the whole log to its response",
    ))
    report("storage", figures, args, context)


if __name__ == "__main__":
    main()
