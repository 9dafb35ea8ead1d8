"""Figure 3: `roost status` whole process, daemon already running; and the light commands
against `python -c "import click"`.

Wall time from Popen to exit of ``roost status`` (connect, hello, status, print), stdout to
/dev/null. The daemon holds 20 finished sessions so that ``status`` (which counts sessions in
SQLite) does real work. Context lines give the floors (a bare interpreter, ``roost
--version``) and a breakdown: the same command run in-process with the import of
``roost.cli`` and the command's work timed separately.

The floor of the CLI is click itself: ``roost --version``, ``roost status`` and ``roost
pending`` are timed in rounds with ``python -c "import click"``, one of each per round, and
each is printed as a multiple of it (target: 1.3). So is ``roost bridge`` (what ``roost
--host ssh://...`` runs on the remote machine), from Popen to the answer of a ``status``
request written to its stdin read whole from its stdout (then its stdin is closed and it
exits).

    uv run python bench/status_cli.py [--runs 20]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchEnv, Figure, median, parser, prepare, report, roost_exe, run_timed, spread  # noqa: E402

TARGET_MS = 60.0
#: The light commands' whole process as a multiple of `python -c "import click"`.
CLICK_RATIO_TARGET = 1.3

# Runs the CLI in-process, timing its import and its work separately (stderr: two floats).
_PARTS = r"""
import sys, time
t0 = time.perf_counter()
from roost.cli import cli
t1 = time.perf_counter()
sys.argv = ["roost", "status"]
try:
    cli.main(standalone_mode=False)
except SystemExit:
    pass
sys.stderr.write(f"{t1 - t0} {time.perf_counter() - t1}\n")
"""


def parts(env: BenchEnv, runs: int) -> tuple[float, float, float]:
    """Medians (whole process, `import roost.cli`, the command's work) in seconds."""
    whole, imports, work = [], [], []
    for _ in range(runs):
        t = time.perf_counter()
        proc = subprocess.run([PYTHON, "-c", _PARTS], env=env.env, cwd=env.project,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        whole.append(time.perf_counter() - t)
        a, b = map(float, proc.stderr.split()[-2:])
        imports.append(a)
        work.append(b)
    return median(whole), median(imports), median(work)


def wall(argv: list[str], env: BenchEnv, runs: int) -> list[float]:
    """Wall seconds of ``argv``, ``runs`` times after one warm-up run."""
    return rounds({"": argv}, env, runs)[""]


def rounds(commands: dict[str, list[str]], env: BenchEnv, runs: int) -> dict[str, list[float]]:
    """Wall seconds of each command, one of each per round (so they share the machine's
    moment), after one warm-up round; ``roost bridge`` to its first answer (see
    :func:`bridged`)."""
    out: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(runs + 1):
        for name, argv in commands.items():
            elapsed = bridged(argv, env) if argv[1:] == ["bridge"] else run_timed(argv, env.env, env.project).wall
            if i:
                out[name].append(elapsed)
    return out


def bridged(argv: list[str], env: BenchEnv) -> float:
    """Seconds from Popen of ``roost bridge`` to a ``status`` request's answer read whole
    from its stdout; then its stdin is closed and it is waited for."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env.env, cwd=env.project, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(msgpack.packb([0, 1, "status", [{}]]))
    proc.stdin.flush()
    unpacker = msgpack.Unpacker()
    while True:
        chunk = proc.stdout.read1(65536)
        if not chunk:
            raise RuntimeError("roost bridge ended before it answered")
        unpacker.feed(chunk)
        answer = next(unpacker, None)
        if answer is not None:
            break
    elapsed = time.perf_counter() - started
    if answer[2] is not None:
        raise RuntimeError(f"roost bridge relayed an error: {answer[2]}")
    proc.stdin.close()
    proc.wait(10)
    proc.stdout.close()
    return elapsed


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=30, help="measured runs (default 30)")
    args = p.parse_args()
    context = prepare(args)
    with BenchEnv("status") as env:
        env.start_daemon()
        with env.client() as client:
            for _ in range(20):
                client.call("sessions.create", cwd=str(env.project))
        status = wall([roost_exe(), "status"], env, args.runs)
        version = wall([roost_exe(), "--version"], env, 10)
        bare = wall([PYTHON, "-c", "pass"], env, 10)
        whole, imports, work = parts(env, 11)
        light = rounds({"import click": [PYTHON, "-c", "import click"],
                        "--version": [roost_exe(), "--version"],
                        "status": [roost_exe(), "status"],
                        "pending": [roost_exe(), "pending"],
                        "bridge": [roost_exe(), "bridge"]}, env, args.runs)
    context.append(f"floors (median of 10): `python -c pass` {median(bare) * 1000:.1f} ms; "
                   f"`roost --version` {median(version) * 1000:.1f} ms")
    context.append(f"where the time goes (the status command run in-process, median of 11): "
                   f"whole {whole * 1000:.1f} ms = `import roost.cli` {imports * 1000:.1f} ms + "
                   f"parse, connect, hello, status, print {work * 1000:.1f} ms + interpreter "
                   f"start and exit {(whole - imports - work) * 1000:.1f} ms")
    fig = Figure(
        key="status.wall_ms", title="`roost status` whole process",
        value=median(status) * 1000, unit="ms", better="lower", target=TARGET_MS,
        how=f"median wall, Popen to exit, of {args.runs} runs (after 1 warm-up), daemon running "
            f"with 20 sessions, stdout to /dev/null",
        details=[f"min/median/max {spread(status, 1000)} ms"],
    )
    click = median(light["import click"])
    figures = [fig]
    for name in ("--version", "status", "pending", "bridge"):
        ratio = median(light[name]) / click
        figures.append(Figure(
            key=f"status.click_ratio_{name.strip('-')}", title=f"`roost {name}` / `import click`",
            value=ratio, unit="x", better="lower", target=CLICK_RATIO_TARGET,
            how=(f"median wall of `roost {name}` / median wall of `python -c \"import click\"`, "
                 f"{args.runs} rounds of the four commands (after 1 warm-up round), daemon running"),
            details=[f"roost {name} {median(light[name]) * 1000:.1f} ms "
                     f"(min/median/max {spread(light[name], 1000)}), import click {click * 1000:.1f} ms "
                     f"(min/median/max {spread(light['import click'], 1000)}) -> {ratio:.2f}x"],
        ))
    report("roost status", figures, args, context)


if __name__ == "__main__":
    main()
