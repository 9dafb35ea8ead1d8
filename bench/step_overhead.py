"""Figure 1: per-step overhead of a run, with the sandbox off and on, and against the floor.

Whole-process wall time of ``roost dispatch`` (daemon already running) for a run of 20 tool
steps minus the same for a run of 1 tool step, divided by 19. A "tool step" is one model
call answering text + one ``bash`` tool call running ``true``; both runs end with a final
text answer, so they differ by exactly 19 (model call + tool call) round trips. The model
costs nothing: ``scripted`` replays a script file; ``anthropic`` talks to the local fake
Messages API (tests/fakes/anthropic_server.py) and ``openai`` (an OpenAI-compatible
provider in config.toml) to the local fake Chat Completions API
(tests/fakes/openai_server.py), over 127.0.0.1, with streaming SSE.

``scripted`` is measured twice, ``--sandbox off`` and ``--sandbox workspace`` (the run's
bubblewrap sandbox, built at its first command, whose spawner starts every command),
interleaved run by run; the difference is what the sandbox adds to each command (its
start, once per run, spread over the run's steps; bench/sandbox_spawn.py measures both
apart). ``anthropic`` and ``openai`` run with ``--sandbox off``, and each roost run is
followed by the floor (bench/_floor_loop.py, a stdlib agent loop making the same HTTP calls
and running the same commands) for the same number of steps against the same server; the
floor's per-step figure is computed the same way and the ratio printed.

``anthropic`` and ``openai`` are each measured twice, over plain HTTP and over HTTPS (the
fake server behind a self-signed certificate made here, which the daemon and the floor
trust through ``SSL_CERT_FILE``; the floor then speaks TLS too), each in a daemon of its own.

Runs alternate (1-step, 20-step) to share any drift; medians over --runs pairs.

    uv run python bench/step_overhead.py [--runs 7] [--only scripted|anthropic|openai] [--no-https]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
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
    Ran,
    read_proc_status,
    report,
    run_timed,
    spread,
    tool_steps_script,
)
from tests.fakes._http import self_signed  # noqa: E402  (_common put the repo on sys.path)

LONG, SHORT = 20, 1
TARGET_MS = 3.0
#: What the sandbox may add to one command.
SANDBOX_TARGET_MS = 1.0
#: Roost's per-step overhead through a vendor API, as a multiple of the floor loop's.
FLOOR_RATIO_TARGET = 1.5
FLOOR_LOOP = Path(__file__).resolve().parent / "_floor_loop.py"


def daemon_side_seconds(env: BenchEnv, session: str) -> float:
    """run.finished ts minus run.started ts, as the daemon recorded them."""
    with env.client() as client:
        events = client.call("events", session=session)["events"]
    ts = {e["type"]: e["ts"] for e in events if e["type"] in ("run.started", "run.finished")}
    return ts["run.finished"] - ts["run.started"]


def dispatch(env: BenchEnv, model: str, sandbox: str) -> tuple[Ran, str]:
    """One ``roost dispatch`` run, followed to its end; (timing, session id)."""
    # --yes: in agent mode every bash call would wait for an approval.
    ran = env.run_roost("dispatch", "benchmark task", "--model", model, "--sandbox", sandbox, "--yes",
                        "--max-turns", "40", "--json", stdout=subprocess.PIPE)
    first = json.loads(ran.proc.stdout.split(b"\n", 1)[0])
    return ran, first["session"]


def measure(env: BenchEnv, runs: int, model_for: Any, before_run: Any = None,
            sandboxes: tuple[str, ...] = ("off",), floor: Any = None) -> dict[str, dict[str, Any]]:
    """The figures of each sandbox mode, their runs interleaved (so they share any drift).

    ``floor(steps)``, if given, runs the floor loop for ``steps`` right after each roost run
    (``before_run`` is called before each of them): its walls go in ``out[s]["floor"]``.
    """
    walls = {s: {SHORT: [], LONG: []} for s in sandboxes}
    inside = {s: {SHORT: [], LONG: []} for s in sandboxes}
    floor_walls: dict[int, list[float]] = {SHORT: [], LONG: []}
    floor_cpu = {SHORT: 0.0, LONG: 0.0}
    # CPU seconds summed over the measured runs: the CLI process, the daemon itself, and the
    # daemon's reaped children (the bash tool processes). /proc counts in 10 ms ticks, so
    # only sums over many runs mean anything.
    cpu = {s: {n: {"cli": 0.0, "daemon": 0.0, "tools": 0.0} for n in (SHORT, LONG)} for s in sandboxes}
    for i in range(runs + 1):  # the first pair is a warm-up, not counted
        for sandbox in sandboxes:
            for steps in (SHORT, LONG):
                if before_run:
                    before_run(steps)
                own0, kids0 = process_cpu(env.daemon_pid)
                ran, session = dispatch(env, model_for(steps), sandbox)
                own1, kids1 = process_cpu(env.daemon_pid)
                if i:
                    walls[sandbox][steps].append(ran.wall)
                    inside[sandbox][steps].append(daemon_side_seconds(env, session))
                    cpu[sandbox][steps]["cli"] += ran.cpu
                    cpu[sandbox][steps]["daemon"] += own1 - own0
                    cpu[sandbox][steps]["tools"] += kids1 - kids0
                if floor is not None:
                    if before_run:
                        before_run(steps)
                    floor_ran = floor(steps)
                    if i:
                        floor_walls[steps].append(floor_ran.wall)
                        floor_cpu[steps] += floor_ran.cpu
    steps_measured = runs * (LONG - SHORT)
    out = {}
    for s in sandboxes:
        w, ins, c = walls[s], inside[s], cpu[s]
        out[s] = {"walls": w, "inside": ins,
                  "per_step": (median(w[LONG]) - median(w[SHORT])) / (LONG - SHORT),
                  "per_step_inside": (median(ins[LONG]) - median(ins[SHORT])) / (LONG - SHORT),
                  "cpu_per_step": {k: (c[LONG][k] - c[SHORT][k]) / steps_measured for k in c[LONG]}}
        if floor is not None:
            out[s]["floor"] = {
                "walls": floor_walls,
                "per_step": (median(floor_walls[LONG]) - median(floor_walls[SHORT])) / (LONG - SHORT),
                "cpu_per_step": (floor_cpu[LONG] - floor_cpu[SHORT]) / steps_measured,
            }
    return out


def spawn_floors(n: int = 40) -> tuple[float, float | None]:
    """Median seconds to spawn and reap ``bash -c true`` from Python (the tool's own floor),
    bare and inside a bwrap sandbox of its own as the daemon would build one for a project
    folder here (what a run's first command pays; None: no bwrap); alternated, so that
    both see the same machine."""
    bare = ["bash", "-c", "true"]
    if not shutil.which("bwrap"):
        return median([_spawn(bare) for _ in range(n)]), None
    from roost.daemon.sandbox import Bubblewrap, build_policy

    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        boxed = Bubblewrap().argv(bare, folder, build_policy(folder))
        times = [(_spawn(bare), _spawn(boxed)) for _ in range(n)]
    return median([t[0] for t in times]), median([t[1] for t in times])


def _spawn(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def figures_for(name: str, m: dict[str, Any], how: str, key: str) -> list[Figure]:
    w, ins = m["walls"], m["inside"]
    return [
        Figure(
            key=f"step_overhead.{key}_ms", title=f"per-step overhead ({name})",
            value=m["per_step"] * 1000, unit="ms/step", better="lower", target=TARGET_MS,
            how=how,
            details=[
                f"roost dispatch wall, {SHORT}-step run: min/median/max {spread(w[SHORT], 1000)} ms",
                f"roost dispatch wall, {LONG}-step run: min/median/max {spread(w[LONG], 1000)} ms",
                f"inside the daemon (run.finished ts - run.started ts): {SHORT}-step "
                f"{median(ins[SHORT]) * 1000:.1f} ms, {LONG}-step {median(ins[LONG]) * 1000:.1f} ms "
                f"-> {m['per_step_inside'] * 1000:.2f} ms/step",
                "CPU per step (sum over long runs - short runs, / steps): daemon "
                f"{m['cpu_per_step']['daemon'] * 1000:.2f} ms, bash tool processes "
                f"{m['cpu_per_step']['tools'] * 1000:.2f} ms, roost CLI "
                f"{m['cpu_per_step']['cli'] * 1000:.2f} ms",
            ],
        ),
    ]


def run_scripted(runs: int) -> tuple[list[Figure], list[str]]:
    with BenchEnv("step") as env:
        env.start_daemon()
        scripts = {n: env.write_script(f"s{n}.json", tool_steps_script(n)) for n in (SHORT, LONG)}
        with env.client() as client:
            available = client.call("status")["sandbox"]
        sandboxes = ("off", "workspace") if available["available"] else ("off",)
        m = measure(env, runs, lambda n: f"scripted/{scripts[n]}", sandboxes=sandboxes)
    how = (f"(median wall of `roost dispatch --json` for {LONG} tool steps - same for {SHORT}) / "
           f"{LONG - SHORT}; {runs} alternating pairs after 1 warm-up pair; model `scripted/FILE`; "
           f"each step: one model reply + `bash -c true`")
    figures = figures_for("scripted", m["off"], how + "; `--sandbox off`", "scripted")
    if "workspace" not in m:
        return figures, [f"sandbox part skipped: {available['reason']}"]
    on, off = m["workspace"], m["off"]
    figures += figures_for("scripted, sandbox on", on, how + "; `--sandbox workspace` (bubblewrap)",
                           "scripted_sandbox")
    added = on["per_step"] - off["per_step"]
    figures.append(Figure(
        key="step_overhead.sandbox_per_command_ms", title="sandbox cost per command",
        value=added * 1000, unit="ms/command", better="lower", target=SANDBOX_TARGET_MS,
        how="per-step overhead with `--sandbox workspace` - the same with `--sandbox off` "
            "(runs interleaved; one bash command per step)",
        details=[f"inside the daemon: {(on['per_step_inside'] - off['per_step_inside']) * 1000:.2f} ms/command",
                 "CPU per command it adds: daemon "
                 f"{(on['cpu_per_step']['daemon'] - off['cpu_per_step']['daemon']) * 1000:.2f} ms, "
                 "tool processes (bwrap and bash) "
                 f"{(on['cpu_per_step']['tools'] - off['cpu_per_step']['tools']) * 1000:.2f} ms"],
    ))
    return figures, []


class HttpModel:
    """One vendor API served by its fake server in this process, for roost and the floor.

    :meth:`enqueue` scripts a run of N tool steps (each reply: text + one ``bash`` call of
    ``true I``, then a final text reply); :meth:`floor` runs the floor loop
    (``bench/_floor_loop.py``) against the same server, sending the first request body
    roost sent (its model, system prompt, tools and task): the very first request.
    """

    def __init__(self, kind: str, server: Any, env: BenchEnv) -> None:
        self.kind, self.server, self.env = kind, server, env
        self.template = env.root / f"{kind}-template.json"
        self._runs = iter(range(10**9))

    def enqueue(self, steps: int) -> None:
        run = next(self._runs)
        if self.kind == "anthropic":
            turns: list[dict[str, Any]] = [{
                "content": [{"type": "text", "text": f"step {i}"},
                            {"type": "tool_use", "id": f"toolu_b{run}_{i}", "name": "bash",
                             "input": {"command": f"true {i}"}}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 20},
            } for i in range(1, steps + 1)]
            turns.append({"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
                          "usage": {"input_tokens": 100, "output_tokens": 5}})
        else:
            turns = [{
                "content": f"step {i}",
                "tool_calls": [{"id": f"call_b{run}_{i}", "name": "bash",
                                "arguments": {"command": f"true {i}"}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20},
            } for i in range(1, steps + 1)]
            turns.append({"content": "done", "usage": {"prompt_tokens": 100, "completion_tokens": 5}})
        self.server.enqueue(*turns)

    def floor(self, steps: int) -> Ran:
        if not self.template.exists():  # the first request of roost's first run
            self.template.write_text(json.dumps(self.server.requests[0].body))
        return run_timed([PYTHON, str(FLOOR_LOOP), "--kind", self.kind, "--url", self.server.base_url,
                          "--template", str(self.template)], self.env.env, self.env.project)


def serve_model(kind: str, tls: Any = None) -> Any:
    if kind == "anthropic":
        from tests.fakes.anthropic_server import serve_anthropic

        return serve_anthropic(tls=tls)
    from tests.fakes.openai_server import serve_openai

    return serve_openai(tls=tls)


def run_http(kind: str, runs: int, https: bool = False) -> tuple[list[Figure], list[str]]:
    """Roost through the ``kind`` provider against its fake server, and the floor loop;
    ``https``: the server behind a certificate of its own, trusted through SSL_CERT_FILE."""
    notes = []
    with BenchEnv(f"step{kind[0].upper()}{'s' if https else ''}") as env:
        cert, tls = self_signed(env.root) if https else (None, None)
        if cert is not None:
            env.env["SSL_CERT_FILE"] = str(cert)  # the daemon's providers, and the floor
        with serve_model(kind, tls) as server:
            return _run_http(kind, runs, https, env, server, notes)


def _run_http(kind: str, runs: int, https: bool, env: BenchEnv, server: Any,
              notes: list[str]) -> tuple[list[Figure], list[str]]:
    name, key = (f"{kind}, https", f"{kind}_https") if https else (kind, kind)
    model = env.use_model_server(kind, server.base_url)
    env.start_daemon()
    side = HttpModel(kind, server, env)
    both = measure(env, runs, lambda n: model, before_run=side.enqueue, floor=side.floor)["off"]
    status = read_proc_status(env.daemon_pid)
    notes.append(f"daemon with the {name} provider loaded, after {2 * (runs + 1)} runs: "
                 f"VmHWM {status['VmHWM'] / 1024:.1f} MiB, VmRSS {status['VmRSS'] / 1024:.1f} MiB")
    notes.append(f"fake {name} server saw {len(server.requests)} requests, "
                 f"{server.connections} connections")
    floor = both["floor"]
    how = (f"as for scripted (`--sandbox off`), with model `{model}` against "
           f"tests/fakes/{kind}_server.py (in this process, 127.0.0.1, streamed SSE, zero delay"
           + (", over TLS: a self-signed certificate the daemon and the floor trust through "
              "SSL_CERT_FILE" if https else "") + ")"
           + ("; each dispatch brings ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL pointing at it"
              if kind == "anthropic" else "; a `[providers.local]` of kind openai in config.toml")
           + " (the provider is built in the warm-up pair)")
    figures = figures_for(name, both, how, key)
    ratio = both["per_step"] / floor["per_step"]
    figures.append(Figure(
        key=f"step_overhead.{key}_floor_ratio", title=f"per-step overhead / floor ({name})",
        value=ratio, unit="x", better="lower", target=FLOOR_RATIO_TARGET,
        how=("roost's per-step figure above / the floor's, measured the same way in the same "
             "run: bench/_floor_loop.py (a stdlib agent loop: http.client, SSE read line by "
             "line, `bash -c` per tool call) run after each roost run against the same server, "
             "sending the first request body roost sent"),
        details=[f"roost {both['per_step'] * 1000:.2f} ms/step, floor {floor['per_step'] * 1000:.2f} "
                 f"ms/step -> {ratio:.2f}x",
                 f"floor process wall, {SHORT}-step: min/median/max {spread(floor['walls'][SHORT], 1000)} "
                 f"ms; {LONG}-step: {spread(floor['walls'][LONG], 1000)} ms",
                 f"floor CPU per step (its process and its bash processes): "
                 f"{floor['cpu_per_step'] * 1000:.2f} ms"],
    ))
    return figures, notes


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=11, help="measured pairs of runs per model (default 11)")
    p.add_argument("--only", choices=("scripted", "anthropic", "openai"))
    p.add_argument("--no-https", action="store_true", help="the vendor APIs over plain HTTP only")
    args = p.parse_args()
    context = prepare(args)
    figures: list[Figure] = []
    if args.only in (None, "scripted"):
        figs, notes = run_scripted(args.runs)
        figures += figs
        context += notes
    for kind in ("anthropic", "openai"):
        for https in (False, True):
            if args.only in (None, kind) and not (https and args.no_https):
                figs, notes = run_http(kind, args.runs, https)
                figures += figs
                context += notes
    floor, boxed = spawn_floors()
    context.append(f"floor: `bash -c true` spawned by subprocess.run from Python takes "
                   f"{floor * 1000:.2f} ms (median of 40); each step includes one")
    if boxed is not None:
        context.append(f"floor in a sandbox of its own: the same inside bwrap, as the daemon builds a "
                       f"run's for a folder here, takes {boxed * 1000:.2f} ms (+{(boxed - floor) * 1000:.2f} ms; "
                       "alternated with the bare one); a run pays it once")
    report("per-step overhead", figures, args, context)


if __name__ == "__main__":
    main()
