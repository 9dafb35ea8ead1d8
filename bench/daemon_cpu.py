"""Figure 19: the daemon's own CPU per scripted step and per stored event, and where it goes.

*Counters*: a daemon (``python -m roost.daemon``) runs scripted runs with ``--sandbox off``:
a run of 300 tool steps and a run of 1, alternated, ``--rounds`` times after a warm-up pair
(each step: one model reply, text + a ``bash`` call of ``true N``; each run ends with a
final text reply; ``roost dispatch --yes --json`` follows each to its end, so one client is
attached). The daemon's CPU (user + system, all its threads) is read from
``/proc/PID/stat`` before and after each run; per step = (CPU of the long run - CPU of the
short one) / 299, per stored event = the same difference / the difference of the events
each stored (``events``). Medians over the rounds. Also printed: that CPU split between the
daemon's main thread (the trio loop) and its other threads (the store's writer, trio's
workers), from ``/proc/PID/task/*/stat``; the bash processes it reaped; and the stored events
per step by type.

*Per dispatch*: before those runs, the same daemon's CPU over 200 dispatches of a one-reply
run, each on an idle session made beforehand, attached and followed to its end as ``roost
dispatch`` does (planning, the run's events, its transcript and memory), per dispatch.

*Profile*: a second daemon started the same way but under cProfile, switched on for one
300-step run and off after (SIGUSR1, SIGUSR2: the start-up and the warm-up run are left out).
cProfile sees the main thread only (its clock is that thread's CPU time), and slows what it
sees (each call costs more), so its figures are shares, not times: the functions with the most self time, and the cumulative
time of the stages a step's events go through, each per stored event.

    uv run python bench/daemon_cpu.py [--rounds 3] [--steps 300] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    PYTHON,
    BenchEnv,
    Figure,
    median,
    parser,
    prepare,
    process_cpu,
    report,
    spread,
    tool_steps_script,
)

STEP_TARGET_MS = 1.0
EVENT_TARGET_US = 100.0
#: One-reply runs dispatched for the CPU per dispatch.
DISPATCHES = 200
#: The stages an event goes through, by the function that does each (file suffix, name):
#: their cumulative time in the profile, per stored event.
STAGES = (
    ("roost/loop/_step.py", "step", "loop.step (the pure loop: fold, decide, events)"),
    ("roost/daemon/storage/_store.py", "append", "store.append (number, pack, queue, wait for the commit)"),
    ("roost/daemon/storage/_writer.py", "event_row", "event_row (pack the body for the store)"),
    ("roost/daemon/runs/_fanout.py", "publish", "fanout.publish (pack for the wire, queue to clients)"),
    ("roost/daemon/runs/_conductor.py", "_advance", "Conductor._advance (publish, transcript, notify, perform)"),
    ("roost/daemon/runs/_conductor.py", "feed", "Conductor.feed (all of the above)"),
    ("roost/daemon/runs/_tool_calls.py", "run_tool", "ToolCalls.run_tool (hooks, spawn, output)"),
    ("roost/daemon/runs/_model_calls.py", "call_model", "ModelCalls.call_model (the scripted model's reply)"),
)


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of each live thread of ``pid`` so far: tid -> (name, seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue  # ended meanwhile
        fields = tail.split()
        out[int(tid)] = (head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / tick)
    return out


def dispatch(env: BenchEnv, script: Path, steps: int) -> str:
    """One scripted run, sandbox off, followed to its end by the CLI; its session id."""
    ran = env.run_roost("dispatch", "benchmark task", "--model", f"scripted/{script}", "--sandbox", "off",
                        "--yes", "--max-turns", str(steps + 10), "--json", stdout=subprocess.PIPE)
    return json.loads(ran.proc.stdout.split(b"\n", 1)[0])["session"]


def stored_types(env: BenchEnv, session: str) -> collections.Counter[str]:
    with env.client() as client:
        events = client.call("events", session=session)["events"]
    return collections.Counter(e["type"] for e in events)


def per_dispatch(env: BenchEnv, count: int) -> float:
    """The daemon's CPU (seconds) per dispatch of a one-reply run on an idle session made
    beforehand, attached as ``roost dispatch`` is, followed to its end (after a few to
    warm up)."""
    script = env.write_script("word.json", [{"content": [{"type": "text", "text": "ok"}]}])
    with env.client() as client:
        sessions = [client.call("sessions.create", cwd=str(env.project))["session"] for _ in range(count + 5)]

        def run(session: str) -> None:
            started = client.call("dispatch", session=session, task="t", model=f"scripted/{script}", yes=True,
                                  sandbox="off", attach=True)["run"]
            for event in client.events():
                if event.get("type") == "run.finished" and event.get("run") == started:
                    client.call("detach", session=session)
                    return

        for session in sessions[:5]:
            run(session)
        before = sum(process_cpu(env.daemon_pid))
        for session in sessions[5:]:
            run(session)
        return (sum(process_cpu(env.daemon_pid)) - before) / count


def measure(rounds: int, steps: int) -> dict[str, Any]:
    """The counters: per round, the daemon's CPU for a long and a short run, and events;
    and per dispatch."""
    out: dict[str, Any] = {"cpu": {1: [], steps: []}, "main": {1: [], steps: []}, "tools": {1: [], steps: []},
                           "events": {1: [], steps: []}, "types": {}, "wall": {1: [], steps: []}}
    with BenchEnv("dcpu") as env:
        env.start_daemon()
        out["dispatch"] = per_dispatch(env, DISPATCHES)
        pid = env.daemon_pid
        scripts = {n: env.write_script(f"s{n}.json", tool_steps_script(n)) for n in (1, steps)}
        for i in range(rounds + 1):  # the first pair warms up
            for n in (1, steps):
                own0, kids0 = process_cpu(pid)
                threads0 = thread_cpu(pid)
                started = time.perf_counter()
                session = dispatch(env, scripts[n], n)
                wall = time.perf_counter() - started
                own1, kids1 = process_cpu(pid)
                threads1 = thread_cpu(pid)
                types = stored_types(env, session)
                if not i:
                    continue
                out["cpu"][n].append(own1 - own0)
                out["tools"][n].append(kids1 - kids0)
                out["main"][n].append(threads1[pid][1] - threads0.get(pid, ("", 0.0))[1])
                out["events"][n].append(sum(types.values()))
                out["wall"][n].append(wall)
                out["types"][n] = types
    return out


def profiled_daemon(socket: str, out: str) -> None:
    """The daemon of ``--profiled-daemon``: cProfile on at SIGUSR1, off and dumped at SIGUSR2."""
    from roost.daemon.__main__ import main

    # The main thread's CPU time, not wall time: waiting in epoll is not work.
    profile = cProfile.Profile(time.thread_time)
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())

    def dump(*_: Any) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR2, dump)
    sys.exit(main(["--socket", socket]))


def profile_run(steps: int, keep: str | None = None) -> tuple[pstats.Stats, int]:
    """One long run under cProfile (after a warm-up run); the stats and the events stored
    (the profile copied to ``keep`` too, if given)."""
    with BenchEnv("dprof") as env:
        out = env.root / "daemon.prof"
        assert env.daemon is None
        with open(env.root / "daemon.stderr", "wb") as stderr:
            env.daemon = subprocess.Popen(
                [PYTHON, __file__, "--profiled-daemon", str(env.socket), str(out)],
                env=env.env, cwd=env.project, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=stderr, start_new_session=True)
        deadline = time.monotonic() + 15
        while not env.socket.exists():
            if time.monotonic() > deadline or env.daemon.poll() is not None:
                raise RuntimeError("the profiled daemon did not start: "
                                   + (env.root / "daemon.stderr").read_text(errors="replace"))
            time.sleep(0.01)
        script = env.write_script("long.json", tool_steps_script(steps))
        dispatch(env, script, steps)  # warm-up
        os.kill(env.daemon_pid, signal.SIGUSR1)
        session = dispatch(env, script, steps)
        os.kill(env.daemon_pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the dump is written whole
        events = sum(stored_types(env, session).values())
        if keep:
            shutil.copy(out, keep)
        return pstats.Stats(str(out)), events


def feed_share(stats: pstats.Stats) -> float:
    """The share of the profiled main thread's time spent in ``Conductor.feed`` (step, store,
    publish, perform: what each stored event goes through)."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    feed = sum(v[3] for k, v in raw.items() if k[0].endswith("roost/daemon/runs/_conductor.py") and k[2] == "feed")
    return feed / total


def profile_lines(stats: pstats.Stats, events: int, top: int) -> list[str]:
    """The top functions by self time, and the stages' cumulative time, per stored event."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    root = str(Path(__file__).resolve().parent.parent) + "/"

    def name(key: tuple[str, int, str]) -> str:
        file, line, function = key
        file = file.replace(root, "")
        if "site-packages/" in file:
            file = file.split("site-packages/", 1)[1]
        elif file.startswith("/") and "/lib/python" in file:
            file = "stdlib:" + file.split("/lib/python", 1)[1].split("/", 1)[-1]
        return f"{file}:{line} {function}" if file != "~" else function

    lines = [f"profile (cProfile, main thread CPU, one {events}-event run): {total * 1e6 / events:.0f} µs "
             f"per stored event under the profiler (it inflates every call; read shares)",
             f"top {top} by self time (µs per stored event, share of the profiled total, calls per event):"]
    for key, (_, ncalls, tt, _ct, _) in sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]:
        lines.append(f"  {tt * 1e6 / events:7.1f} µs  {tt / total:5.1%}  {ncalls / events:6.2f}  {name(key)}")
    lines.append("stages (cumulative µs per stored event, share):")
    for suffix, function, title in STAGES:
        cum = sum(v[3] for k, v in raw.items() if k[0].endswith(suffix) and k[2] == function)
        lines.append(f"  {cum * 1e6 / events:7.1f} µs  {cum / total:5.1%}  {title}")
    return lines


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="measured pairs of runs (default 3)")
    p.add_argument("--steps", type=int, default=300, help="tool steps of the long run (default 300)")
    p.add_argument("--top", type=int, default=25, help="functions listed from the profile (default 25)")
    p.add_argument("--no-profile", action="store_true", help="the counters only")
    p.add_argument("--profile-out", metavar="FILE", help="keep the profile (pstats) in FILE")
    p.add_argument("--profile-only", action="store_true", help="the profile only (no figures)")
    p.add_argument("--profiled-daemon", nargs=2, metavar=("SOCKET", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.profiled_daemon:
        profiled_daemon(*args.profiled_daemon)
        return
    context = prepare(args)
    n = args.steps
    if args.profile_only:
        print("\n".join(context + profile_lines(*profile_run(n, args.profile_out), args.top)))
        return
    m = measure(args.rounds, n)
    diffs = [(long - short) for long, short in zip(m["cpu"][n], m["cpu"][1])]
    events = [(long - short) for long, short in zip(m["events"][n], m["events"][1])]
    main_diffs = [(long - short) for long, short in zip(m["main"][n], m["main"][1])]
    tools = [(long - short) for long, short in zip(m["tools"][n], m["tools"][1])]
    per_step = median(diffs) / (n - 1)
    per_event = median([d / e for d, e in zip(diffs, events)])
    types = m["types"][n]
    per_type = ", ".join(f"{t} {c / n:.2f}" for t, c in types.most_common())
    how = (f"daemon CPU (utime+stime of all its threads, /proc/PID/stat) over a {n}-step scripted run "
           f"minus over a 1-step run, `--sandbox off`, `roost dispatch --json` attached; median of "
           f"{args.rounds} rounds after a warm-up")
    figures = [
        Figure(key="daemon_cpu.per_step_ms", title="daemon CPU per scripted step (sandbox off)",
               value=per_step * 1000, unit="ms/step", better="lower", target=STEP_TARGET_MS,
               how=how + f"; / {n - 1}",
               details=[f"daemon CPU, {n}-step run: min/median/max {spread(m['cpu'][n], 1000)} ms; "
                        f"1-step run: {spread(m['cpu'][1], 1000)} ms",
                        f"of which the main thread (trio loop): {median(main_diffs) / (n - 1) * 1000:.2f} ms/step, "
                        f"other threads (store writer, workers): "
                        f"{(median(diffs) - median(main_diffs)) / (n - 1) * 1000:.2f} ms/step",
                        f"bash processes it reaped: {median(tools) / (n - 1) * 1000:.2f} ms/step; "
                        f"wall of the {n}-step run (CLI process): median {median(m['wall'][n]) * 1000:.0f} ms"]),
        Figure(key="daemon_cpu.per_event_us", title="daemon CPU per stored event (sandbox off)",
               value=per_event * 1e6, unit="µs/event", better="lower", target=EVENT_TARGET_US,
               how=how + "; / the difference of the stored events",
               details=[f"stored events per step: {median(events) / (n - 1):.2f} ({per_type})"]),
        Figure(key="daemon_cpu.per_dispatch_ms", title="daemon CPU per dispatch (one-reply run)",
               value=m["dispatch"] * 1000, unit="ms", better="lower", informational=True,
               how=f"daemon CPU (utime+stime, /proc/PID/stat) over {DISPATCHES} dispatches, each of a one-reply "
                   f"scripted run on an idle session made beforehand, `sandbox off`, attached and followed to its "
                   f"end as `roost dispatch` does / {DISPATCHES}: planning, the run's events, its transcript and "
                   f"memory"),
    ]
    if not args.no_profile:
        stats, stored = profile_run(n, args.profile_out)
        context += profile_lines(stats, stored, args.top)
        share = feed_share(stats)
        figures[1].details.append(
            f"of which the event pipeline (Conductor.feed: step, store, publish, perform), its share of "
            f"the profile ({share:.0%}) of the main thread's CPU: about "
            f"{share * median(main_diffs) / median(events) * 1e6:.0f} µs per stored event")
    report("daemon CPU per step and per event", figures, args, context)


if __name__ == "__main__":
    main()
