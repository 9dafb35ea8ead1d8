"""Run every benchmark (each in its own process, with its own daemon) and print a summary.

    uv run python bench/run_all.py [--update-baseline] [--only status_cli,rpc_roundtrip]

Byte-compiles roost and site-packages once, then runs the scripts one after another with
``--no-compile``. Each script prints its own figures and how they were measured; the table
at the end collects them with their targets and their ratio to bench/baseline.json.
Exits 0 whatever the figures are (benchmarks report, they do not judge); non-zero only if a
script itself failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH_DIR, PYTHON, _num, compile_everything, machine  # noqa: E402

SCRIPTS = ["step_overhead", "first_request", "status_cli", "rpc_roundtrip", "fanout", "daemon_rss",
           "provider_overhead", "shell_attach", "mcp_overhead", "judge_lines", "ssh_overhead", "storage", "scale",
           "sandbox_spawn", "freeze", "background_output", "image_read", "daemon_cpu", "recall"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--update-baseline", action="store_true",
                   help="rewrite bench/baseline.json with this run's figures")
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(SCRIPTS)}")
    args = p.parse_args()
    chosen = args.only.split(",") if args.only else SCRIPTS
    unknown = set(chosen) - set(SCRIPTS)
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")

    started = time.perf_counter()
    took = compile_everything()
    print(f"byte-compiled roost + site-packages in {took:.1f} s; machine: {machine()}")
    rows, failed = [], []
    with tempfile.TemporaryDirectory(prefix="rb-all-", dir="/tmp") as tmp:
        for name in chosen:
            out = Path(tmp) / f"{name}.json"
            argv = [PYTHON, str(BENCH_DIR / f"{name}.py"), "--no-compile", "--results", str(out)]
            if args.update_baseline:
                argv.append("--update-baseline")
            t = time.perf_counter()
            proc = subprocess.run(argv)
            print(f"   ({name} took {time.perf_counter() - t:.1f} s)", flush=True)
            if proc.returncode != 0 or not out.exists():
                failed.append(name)
                continue
            rows += [(name, fig) for fig in json.loads(out.read_text())["figures"]]

    print()
    print(f"== summary ({time.perf_counter() - started:.0f} s) ==")
    header = ("#", "figure", "value", "target", "", "vs baseline")
    table = []
    numbers = {name: i + 1 for i, name in enumerate(SCRIPTS)}
    for name, fig in rows:
        met = fig["met"]
        verdict = "" if met is None else ("ok" if met else "MISS")
        if fig["ratio"] is None:
            ratio = "new"
        else:
            ratio = f"{fig['ratio']:.2f}x"
        target = "-"
        if fig["target"] is not None:
            target = f"{'<' if fig['better'] == 'lower' else '>'} {_num(fig['target'])}"
        table.append((str(numbers[name]), fig["title"], f"{_num(fig['value'])} {fig['unit']}",
                      target, verdict, ratio))
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    for r in [header, *table]:
        print("  ".join(c.ljust(w) if i in (1, 4) else c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    print("vs baseline = value / baseline value (for events/s higher is better, for the rest lower)")
    if failed:
        print(f"FAILED to run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
