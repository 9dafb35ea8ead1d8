"""Figure 2: from `roost dispatch` process start to the model request, daemon already running.

anthropic: the clock starts just before ``subprocess.Popen(["roost", "dispatch", ...])``
and stops when the local fake Messages API server (tests/fakes/anthropic_server.py, running
in this process) begins handling ``POST /v1/messages`` (its ``do_POST`` is entered: request
line and headers read). Same process, same monotonic clock.

scripted (an equivalent, not the same thing): no request goes anywhere, so the clock stops
at the ``ts`` of the run's first ``text.delta`` event, which the scripted provider emits as
soon as the daemon calls it (the first word of its reply). ``ts`` is the daemon's
``time.time()``; it is compared with this process's ``time.time()`` taken just before
Popen (the same system clock).

    uv run python bench/first_request.py [--runs 15]
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchEnv, Figure, median, parser, prepare, report, roost_exe, spread  # noqa: E402

TARGET_MS = 80.0
ANTHROPIC_MODEL = "anthropic/claude-sonnet-4-5"


def popen_dispatch(env: BenchEnv, model: str, stdout: Any) -> tuple[float, float, subprocess.Popen[bytes]]:
    """Start ``roost dispatch``; (perf_counter, time.time) just before Popen, the process."""
    argv = [roost_exe(), "dispatch", "benchmark task", "--model", model, "--json"]
    t_wall = time.time()
    t_perf = time.perf_counter()
    proc = subprocess.Popen(argv, env=env.env, cwd=env.project, stdout=stdout,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    return t_perf, t_wall, proc


def run_anthropic(runs: int) -> tuple[Figure, list[str]]:
    from tests.fakes.anthropic_server import serve_anthropic

    arrivals: list[float] = []
    arrived = threading.Event()
    turn = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 1}}
    with serve_anthropic(default=turn) as server, BenchEnv("first") as env:
        base = server.RequestHandlerClass

        class Timed(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                arrivals.append(time.perf_counter())
                arrived.set()
                super().do_POST()

        server.RequestHandlerClass = Timed
        env.start_daemon({"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": server.base_url})
        times, totals = [], []
        for i in range(runs + 2):  # two warm-ups: the first one imports the SDK in the daemon
            arrivals.clear()
            arrived.clear()
            start, _, proc = popen_dispatch(env, ANTHROPIC_MODEL, subprocess.DEVNULL)
            _, err = proc.communicate(timeout=60)
            end = time.perf_counter()
            if proc.returncode != 0 or not arrivals:
                raise RuntimeError(f"dispatch failed ({proc.returncode}): {err.decode(errors='replace')}")
            if i >= 2:
                times.append(arrivals[0] - start)
                totals.append(end - start)
    fig = Figure(
        key="first_request.anthropic_ms", title="dispatch start -> model request (anthropic)",
        value=median(times) * 1000, unit="ms", better="lower", target=TARGET_MS,
        how=(f"median of {runs} (after 2 warm-ups): perf_counter before Popen(`roost dispatch "
             f"--model {ANTHROPIC_MODEL} --json`) to the fake server entering do_POST for "
             f"POST /v1/messages; daemon already running with the SDK imported"),
        details=[f"min/median/max {spread(times, 1000)} ms; whole process (to exit) "
                 f"median {median(totals) * 1000:.1f} ms"],
    )
    return fig, []


def run_scripted(runs: int) -> Figure:
    with BenchEnv("firstS") as env:
        env.start_daemon()
        script = env.write_script("one.json", [{"content": [{"type": "text", "text": "ok then"}]}])
        times, starts = [], []
        for i in range(runs + 1):
            _, t_wall, proc = popen_dispatch(env, f"scripted/{script}", subprocess.PIPE)
            out, err = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise RuntimeError(f"dispatch failed ({proc.returncode}): {err.decode(errors='replace')}")
            events = [json.loads(line) for line in out.splitlines() if line.strip()]
            first_delta = next(e["ts"] for e in events if e["type"] == "text.delta")
            run_started = next(e["ts"] for e in events if e["type"] == "run.started")
            if i:
                times.append(first_delta - t_wall)
                starts.append(run_started - t_wall)
    return Figure(
        key="first_request.scripted_ms", title="dispatch start -> first model delta (scripted)",
        value=median(times) * 1000, unit="ms", better="lower", target=TARGET_MS,
        how=(f"median of {runs} (after 1 warm-up): time.time() before Popen(`roost dispatch "
             f"--model scripted/FILE --json`) to the `ts` of the run's first text.delta event "
             f"(stamped by the daemon when the scripted provider emits its first word); "
             f"an equivalent of the anthropic figure without HTTP, not the same measurement"),
        details=[f"min/median/max {spread(times, 1000)} ms; to the run.started event's ts: "
                 f"median {median(starts) * 1000:.1f} ms"],
    )


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=21, help="measured dispatches per model (default 21)")
    args = p.parse_args()
    context = prepare(args)
    figures = []
    try:
        fig, notes = run_anthropic(args.runs)
        figures.append(fig)
        context += notes
    except ImportError as exc:
        context.append(f"anthropic part skipped: tests/fakes/anthropic_server.py unusable ({exc})")
    figures.append(run_scripted(args.runs))
    # Context: how much of that is just starting the CLI process.
    with BenchEnv("firstV") as env:
        walls = []
        for _ in range(10):
            t = time.perf_counter()
            subprocess.run([roost_exe(), "--version"], env=env.env, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t)
        context.append(f"for scale: `roost --version` (interpreter + click + CLI imports, no "
                       f"socket) takes {median(walls) * 1000:.1f} ms whole-process (median of 10)")
    report("dispatch start to model request", figures, args, context)


if __name__ == "__main__":
    main()
