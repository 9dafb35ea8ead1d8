"""Figure 15: another client's `status` while patterns from a model or a project run.

A run greps `(a+)+$` (catastrophic for a backtracking engine) over a 10 MB file of lines
that end in `!`, then globs a `**/` x 20 pattern over a tree 60 folders deep; meanwhile a
second connection calls `status` every 20 ms, and its round trips are timed. With Python's
`re` the first call never ends and every `status` waits for the interpreter lock; with RE2
(roost.loop.linear_regex) the daemon answers as it does when idle. Printed: the status
latency during the run (median, p99, max), against the same calls with the daemon idle.

    uv run python bench/freeze.py [--rounds 3]
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchEnv, Figure, median, parser, percentile, prepare, report  # noqa: E402

TARGET_MS = 50.0


def _tool(name: str, **input: str) -> dict:
    return {"content": [{"type": "tool_use", "name": name, "input": input}]}


def _probe(env: BenchEnv, stop: threading.Event, out: list[float]) -> None:
    with env.client() as client:
        while not stop.is_set():
            t = time.perf_counter()
            client.call("status")
            out.append(time.perf_counter() - t)
            time.sleep(0.02)


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="runs of the two patterns (default 3)")
    args = p.parse_args()
    context = prepare(args)
    with BenchEnv("freeze") as env:
        (env.project / "big.txt").write_text(("a" * 60 + "!\n") * 170_000)
        deep = env.project.joinpath(*["d"] * 60)
        deep.mkdir(parents=True)
        (deep / "leaf.txt").write_text("x\n")
        env.start_daemon()
        idle: list[float] = []
        stop = threading.Event()
        probe = threading.Thread(target=_probe, args=(env, stop, idle))
        probe.start()
        time.sleep(1.0)
        stop.set()
        probe.join()
        busy: list[float] = []
        runs: list[float] = []
        for i in range(args.rounds):
            script = env.write_script(f"s{i}.json", [
                _tool("grep", pattern="(a+)+$", path="big.txt"),
                _tool("glob", pattern="/".join(["**"] * 20) + "/leaf.txt"),
                {"content": [{"type": "text", "text": "done"}]},
            ])
            stop = threading.Event()
            probe = threading.Thread(target=_probe, args=(env, stop, busy))
            probe.start()
            t = time.perf_counter()
            env.run_roost("dispatch", "t", "--model", f"scripted/{script}", "--yes", "--json")
            runs.append(time.perf_counter() - t)
            stop.set()
            probe.join()
    context.append(f"runs (grep over 10 MB, then the glob): median {median(runs):.2f} s over {args.rounds}")
    context.append(f"status idle: median {median(idle) * 1000:.2f} ms, p99 {percentile(idle, 99) * 1000:.2f} ms "
                   f"({len(idle)} calls)")
    fig = Figure(
        key="freeze.status_p99_ms", title="`status` p99 while (a+)+$ and **/x20 run",
        value=percentile(busy, 99) * 1000, unit="ms", better="lower", target=TARGET_MS,
        how=f"{len(busy)} status round trips on a second connection, one every 20 ms, during "
            f"{args.rounds} runs of grep (a+)+$ over 10 MB then a glob of **/ x 20",
        details=[f"median {median(busy) * 1000:.2f} ms, max {max(busy) * 1000:.2f} ms"],
    )
    report("freeze", [fig], args, context)


if __name__ == "__main__":
    main()
