"""Figure 14: what the sandbox costs a command, and a run, with one sandbox per run.

No daemon: the spawn layer is timed in the benchmark's own process, on a trio loop, as the
daemon's tools use it. A command is ``true``, started, its output read to the end and its
exit waited for: unsandboxed by ``roost.daemon.tools.spawn`` (the daemon's own
``Popen``), sandboxed by ``RunSandbox.spawn`` (the run's spawner inside bubblewrap, the
policy the daemon would build for a folder here). ``--commands`` of each, alternated one by
one in one run's sandbox (so that both see the same machine), after 20 warm-up pairs;
median and p90 of each, and of the differences of each pair. The per-run start: a fresh
``RunSandbox``'s first command minus the median sandboxed command, over ``--runs`` runs
(each run then ended, its time printed). Also printed: the same ``true`` through the
``bash`` tool (``bash -c true``, the registry and its checks), sandboxed and not, and the
floors of one bwrap sandbox running ``true`` and of the spawner's interpreter alone.

    uv run python bench/sandbox_spawn.py [--commands 200] [--runs 20]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, Figure, median, parser, percentile, prepare, report, spread  # noqa: E402

import trio  # noqa: E402

from roost.daemon.sandbox import Bubblewrap, RunSandbox, Sandbox, build_policy  # noqa: E402
from roost.daemon.tools import ToolContext, ToolRegistry, spawn  # noqa: E402

#: What the sandbox may add to one command, and to one run (issue 24).
COMMAND_TARGET_MS = 1.0
START_TARGET_MS = 15.0


async def _timed(start: Callable[[], Awaitable[Any]]) -> float:
    """Seconds to start a command, read its output to the end and wait for its exit."""
    t = time.perf_counter()
    process = await start()
    async with process.stdout:
        while await process.stdout.receive_some(65536):
            pass
    await process.wait()
    return time.perf_counter() - t


async def measure(folder: str, commands: int, runs: int) -> dict[str, Any]:
    sandbox = Sandbox(Bubblewrap())
    available = await sandbox.probe()
    if not available.available:
        raise SystemExit(f"bench: no sandbox here: {available.reason}")
    confined = sandbox.confine(build_policy(folder))
    assert confined is not None
    env = dict(os.environ)
    argv = ["true"]
    out: dict[str, Any] = {"off": [], "on": [], "diff": [], "start": [], "end": [], "tool_off": [], "tool_on": []}
    async with RunSandbox(confined, folder) as box:
        tools = ToolRegistry()
        bare, boxed = ToolContext(folder, env=env), ToolContext(folder, env=env, sandbox=box)
        for i in range(20 + commands):
            off = await _timed(lambda: spawn(argv, cwd=folder, env=env))
            on = await _timed(lambda: box.spawn(argv, cwd=folder, env=env))
            if i >= 20:
                out["off"].append(off)
                out["on"].append(on)
                out["diff"].append(on - off)
        for i in range(20 + commands // 2):
            t = time.perf_counter()
            await tools.call("bash", {"command": "true"}, bare)
            off = time.perf_counter() - t
            t = time.perf_counter()
            await tools.call("bash", {"command": "true"}, boxed)
            on = time.perf_counter() - t
            if i >= 20:
                out["tool_off"].append(off)
                out["tool_on"].append(on)
    each = median(out["on"])
    for _ in range(runs):
        run = RunSandbox(confined, folder)
        out["start"].append(await _timed(lambda: run.spawn(argv, cwd=folder, env=env)) - each)
        t = time.perf_counter()
        await run.aclose()
        out["end"].append(time.perf_counter() - t)
    return out


def floors(folder: str, n: int = 20) -> tuple[float, float]:
    """Median seconds of bwrap (the policy's sandbox) running ``true``, and of the spawner's
    interpreter starting with nothing to do (``python -I -S -c pass``), alternated."""
    box = Bubblewrap().argv(["true"], folder, build_policy(folder))
    python = [PYTHON, "-I", "-S", "-c", "pass"]
    times = [(_run(box), _run(python)) for _ in range(n)]
    return median([t[0] for t in times]), median([t[1] for t in times])


def _run(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--commands", type=int, default=200, help="timed commands of each kind (default 200)")
    p.add_argument("--runs", type=int, default=20, help="timed run sandboxes started (default 20)")
    args = p.parse_args()
    context = prepare(args)
    if not shutil.which("bwrap"):
        raise SystemExit("bench: bwrap not found (install bubblewrap)")
    with tempfile.TemporaryDirectory(prefix="rb-sbx-", dir="/tmp") as folder:
        m = trio.run(measure, folder, args.commands, args.runs)
        bwrap, python = floors(folder)
    ms = 1000
    context.append(f"floors: bwrap running `true` {bwrap * ms:.2f} ms; `python -I -S -c pass` {python * ms:.2f} ms "
                   "(median of 20, alternated)")
    figures = [
        Figure(
            key="sandbox_spawn.per_command_ms", title="sandbox cost per command",
            value=median(m["diff"]) * ms, unit="ms", better="lower", target=COMMAND_TARGET_MS,
            how=f"median over {args.commands} pairs of (`true` started by the run's spawner in its sandbox - "
                "`true` started by the daemon unsandboxed), each started, read to EOF and waited for; "
                "pairs alternated in one run's sandbox after 20 warm-up pairs",
            details=[
                f"sandboxed: median {median(m['on']) * ms:.3f} ms, p90 {percentile(m['on'], 90) * ms:.3f} ms "
                f"(min/median/max {spread(m['on'], ms, '{:.3f}')})",
                f"unsandboxed: median {median(m['off']) * ms:.3f} ms, p90 {percentile(m['off'], 90) * ms:.3f} ms "
                f"(min/median/max {spread(m['off'], ms, '{:.3f}')})",
                f"difference of each pair: p90 {percentile(m['diff'], 90) * ms:.3f} ms",
                f"through the bash tool (`bash -c true`, {len(m['tool_on'])} pairs): sandboxed median "
                f"{median(m['tool_on']) * ms:.3f} ms p90 {percentile(m['tool_on'], 90) * ms:.3f} ms; unsandboxed "
                f"median {median(m['tool_off']) * ms:.3f} ms p90 {percentile(m['tool_off'], 90) * ms:.3f} ms",
            ],
        ),
        Figure(
            key="sandbox_spawn.per_run_start_ms", title="sandbox start per run",
            value=median(m["start"]) * ms, unit="ms", better="lower", target=START_TARGET_MS,
            how=f"median over {args.runs} fresh run sandboxes of (their first command - the median sandboxed "
                "command): bwrap builds the sandbox, the spawner's interpreter starts and says it is ready",
            details=[
                f"min/median/max {spread(m['start'], ms)} ms, p90 {percentile(m['start'], 90) * ms:.1f} ms",
                f"ending a run's sandbox (stop, then bwrap reaped): median {median(m['end']) * ms:.2f} ms",
            ],
        ),
    ]
    report("sandbox_spawn", figures, args, context)


if __name__ == "__main__":
    main()
