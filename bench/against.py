"""Benchmarks here and at an earlier commit, measured in turns: each figure side by side.

    uv run python bench/against.py REV [--only daemon_cpu,scale] [--rounds 2]

On a machine whose speed drifts (a shared VM slowed by a third in one afternoon here), a
figure compared with one measured hours before says little: the baseline file cannot tell
a change from the drift. This script checks REV out in a git worktree under /tmp, installs
its environment there (``uv sync --locked``), byte-compiles both sides, and runs each chosen
benchmark there and here in turns, ``--rounds`` times (the side that goes first alternates),
each with its own daemon. It prints each figure's values on both sides and the ratio of
their medians (here / REV). Each run's whole report is kept in a log beside the worktree
(its path is printed); the worktree and the logs go at the end (``--keep``: they stay).
Exits non-zero only if REV cannot be checked out or a script fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REPO, _num, compile_everything  # noqa: E402
from run_all import SCRIPTS  # noqa: E402


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


def _prepare(rev: str, root: Path) -> str:
    """Check ``rev`` out at ``root`` and install its environment; its interpreter."""
    _git("worktree", "add", "--detach", str(root), rev)
    uv = shutil.which("uv")
    if uv is None:
        sys.exit("against: no `uv` on PATH to install the earlier commit's environment")
    subprocess.run([uv, "sync", "--locked", "--compile-bytecode", "--quiet"], cwd=root, check=True)
    python = str(root / ".venv" / "bin" / "python")
    subprocess.run([python, "-m", "compileall", "-q", str(root / "roost")], check=True, stdout=subprocess.DEVNULL)
    return python


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rev", help="the earlier commit (anything git rev-parse takes)")
    p.add_argument("--only", default="daemon_cpu", help=f"comma-separated, of: {', '.join(SCRIPTS)} (default daemon_cpu)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each benchmark on each side (default 2)")
    p.add_argument("--keep", action="store_true", help="leave the worktree and the logs")
    args = p.parse_args()
    chosen = args.only.split(",")
    unknown = set(chosen) - set(SCRIPTS)
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    rev = _git("rev-parse", "--verify", f"{args.rev}^{{commit}}")
    head = _git("rev-parse", "--short", "HEAD")
    work = Path(tempfile.mkdtemp(prefix="rb-against-", dir="/tmp"))
    root = work / "tree"
    print(f"checking out {rev[:12]} in {root} (logs in {work})", flush=True)
    try:
        sides = {rev[:12]: (_prepare(rev, root), root), f"{head} (here)": (PYTHON, REPO)}
        compile_everything()
        values: dict[str, dict[str, list[float]]] = {}
        titles: dict[str, tuple[str, str]] = {}
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in chosen:
                for side in order:
                    python, tree = sides[side]
                    out = work / f"{name}-{round_}-{side.split()[0]}.json"
                    log = out.with_suffix(".log")
                    argv = [python, str(tree / "bench" / f"{name}.py"), "--no-compile", "--results", str(out)]
                    with log.open("w") as f:
                        done = subprocess.run(argv, cwd=tree, stdout=f, stderr=subprocess.STDOUT)
                    if done.returncode != 0 or not out.exists():
                        print(f"   {name} failed at {side}: see {log}", flush=True)
                        return 1
                    for fig in json.loads(out.read_text())["figures"]:
                        values.setdefault(fig["key"], {}).setdefault(side, []).append(fig["value"])
                        titles[fig["key"]] = (fig["title"], fig["unit"])
                    print(f"   round {round_ + 1}: {name} at {side} done", flush=True)
        _table(values, titles, list(sides))
    finally:
        if not args.keep:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(root)], capture_output=True)
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _table(values: dict[str, dict[str, list[float]]], titles: dict[str, tuple[str, str]], sides: list[str]) -> None:
    print()
    print(f"== {sides[1]} against {sides[0]}, in turns ==")
    for key, by_side in values.items():
        title, unit = titles[key]
        earlier, here = by_side.get(sides[0], []), by_side.get(sides[1], [])
        if not earlier or not here:
            print(f"-- {title}: only at {sides[1] if here else sides[0]}")
            continue
        ratio = statistics.median(here) / statistics.median(earlier) if statistics.median(earlier) else float("nan")
        both = f"{', '.join(_num(v) for v in earlier)} -> {', '.join(_num(v) for v in here)} {unit}"
        print(f"-- {title}: {both}  (median {ratio:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
