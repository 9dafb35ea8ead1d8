"""Figure 2: from `roost dispatch` process start to the model request, daemon already running.

anthropic, openai: the clock starts just before ``subprocess.Popen(["roost", "dispatch",
...])`` and stops when the local fake server (tests/fakes/anthropic_server.py, or
tests/fakes/openai_server.py behind an OpenAI-compatible provider in config.toml; running in
this process) begins handling the ``POST`` (its ``do_POST`` is entered: request line and
headers read). Same process, same monotonic clock. Each roost dispatch is followed by the
floor, measured the same way: bench/_floor_loop.py (a stdlib agent loop) sending the body
of roost's first request to the same server; the ratio is printed.

scripted (an equivalent, not the same thing): no request goes anywhere, so the clock stops
at the ``ts`` of the run's first ``text.delta`` event, which the scripted provider emits as
soon as the daemon calls it (the first word of its reply). ``ts`` is the daemon's
``time.time()``; it is compared with this process's ``time.time()`` taken just before
Popen (the same system clock).

anthropic and openai are each measured over plain HTTP and over HTTPS (the fake server
behind a self-signed certificate made here, trusted by the daemon and the floor through
``SSL_CERT_FILE``), each with a daemon of its own.

    uv run python bench/first_request.py [--runs 15] [--no-https]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchEnv, Figure, median, parser, prepare, report, roost_exe, spread  # noqa: E402
from tests.fakes._http import self_signed  # noqa: E402  (_common put the repo on sys.path)

TARGET_MS = 80.0
#: Roost's figure as a multiple of the floor loop's.
FLOOR_RATIO_TARGET = 1.1
FLOOR_LOOP = Path(__file__).resolve().parent / "_floor_loop.py"


def popen_dispatch(env: BenchEnv, model: str, stdout: Any) -> tuple[float, float, subprocess.Popen[bytes]]:
    """Start ``roost dispatch``; (perf_counter, time.time) just before Popen, the process."""
    argv = [roost_exe(), "dispatch", "benchmark task", "--model", model, "--json"]
    t_wall = time.time()
    t_perf = time.perf_counter()
    proc = subprocess.Popen(argv, env=env.env, cwd=env.project, stdout=stdout,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    return t_perf, t_wall, proc


def serve_model(kind: str, tls: Any = None) -> Any:
    """The fake ``kind`` server, answering every request with a one-word reply (over TLS
    with ``tls``)."""
    if kind == "anthropic":
        from tests.fakes.anthropic_server import serve_anthropic

        return serve_anthropic(default={"content": [{"type": "text", "text": "ok"}],
                                        "stop_reason": "end_turn",
                                        "usage": {"input_tokens": 10, "output_tokens": 1}}, tls=tls)
    from tests.fakes.openai_server import serve_openai

    return serve_openai(default={"content": "ok", "usage": {"prompt_tokens": 10, "completion_tokens": 1}}, tls=tls)


def run_http(kind: str, runs: int, https: bool = False) -> list[Figure]:
    """Roost's dispatch and the floor loop, alternated, to the ``kind`` fake server's do_POST
    (``https``: behind a certificate of its own, which both trust through SSL_CERT_FILE)."""
    with BenchEnv(f"first{kind[0]}{'s' if https else ''}") as env:
        cert, tls = self_signed(env.root) if https else (None, None)
        if cert is not None:
            env.env["SSL_CERT_FILE"] = str(cert)
        with serve_model(kind, tls) as server:
            return _run_http(kind, runs, https, env, server)


def _run_http(kind: str, runs: int, https: bool, env: BenchEnv, server: Any) -> list[Figure]:
    name, key = (f"{kind}, https", f"{kind}_https") if https else (kind, kind)
    arrivals: list[float] = []
    base = server.RequestHandlerClass

    class Timed(base):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:
            arrivals.append(time.perf_counter())
            super().do_POST()

    server.RequestHandlerClass = Timed
    model = env.use_model_server(kind, server.base_url)
    env.start_daemon()
    template = env.root / "template.json"
    floor_argv = [PYTHON, str(FLOOR_LOOP), "--kind", kind, "--url", server.base_url,
                  "--template", str(template), "--max-turns", "1"]
    times: dict[str, list[float]] = {"roost": [], "floor": []}
    totals: dict[str, list[float]] = {"roost": [], "floor": []}
    for i in range(runs + 2):  # two warm-ups: the first one builds the provider in the daemon
        for side in ("roost", "floor"):
            arrivals.clear()
            if side == "roost":
                start, _, proc = popen_dispatch(env, model, subprocess.DEVNULL)
            else:
                if not template.exists():  # the body of roost's first request
                    template.write_text(json.dumps(server.requests[0].body))
                start = time.perf_counter()
                proc = subprocess.Popen(floor_argv, env=env.env, cwd=env.project,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL)
            _, err = proc.communicate(timeout=60)
            end = time.perf_counter()
            if proc.returncode != 0 or not arrivals:
                raise RuntimeError(f"{side} failed ({proc.returncode}): {err.decode(errors='replace')}")
            if i >= 2:
                times[side].append(arrivals[0] - start)
                totals[side].append(end - start)
    roost, floor = median(times["roost"]), median(times["floor"])
    return [
        Figure(
            key=f"first_request.{key}_ms", title=f"dispatch start -> model request ({name})",
            value=roost * 1000, unit="ms", better="lower", target=TARGET_MS,
            how=(f"median of {runs} (after 2 warm-ups): perf_counter before Popen(`roost dispatch "
                 f"--model {model} --json`) to tests/fakes/{kind}_server.py (in this process"
                 + (", over TLS: a self-signed certificate trusted through SSL_CERT_FILE" if https else "")
                 + ") entering do_POST; daemon already running with the provider built"),
            details=[f"min/median/max {spread(times['roost'], 1000)} ms; whole process (to exit) "
                     f"median {median(totals['roost']) * 1000:.1f} ms"],
        ),
        Figure(
            key=f"first_request.{key}_floor_ratio", title=f"dispatch start -> model request / floor ({name})",
            value=roost / floor, unit="x", better="lower", target=FLOOR_RATIO_TARGET,
            how=("the figure above / the same for bench/_floor_loop.py (a stdlib agent loop: "
                 "interpreter start, json + http.client + subprocess imports, read the request "
                 "body roost sent from a file, connect, POST), alternated with roost's runs"
                 + ("; over TLS the floor, a new process, makes a new connection (a handshake) each "
                    "time, where roost's daemon keeps its own" if https else "")),
            details=[f"roost {roost * 1000:.1f} ms, floor {floor * 1000:.1f} ms -> {roost / floor:.2f}x",
                     f"floor min/median/max {spread(times['floor'], 1000)} ms; whole process (to exit) "
                     f"median {median(totals['floor']) * 1000:.1f} ms"],
        ),
    ]


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
    p.add_argument("--no-https", action="store_true", help="the vendor APIs over plain HTTP only")
    args = p.parse_args()
    context = prepare(args)
    figures = []
    for kind in ("anthropic", "openai"):
        for https in (False, True):
            if not (https and args.no_https):
                figures += run_http(kind, args.runs, https)
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
