"""Figure 6: the daemon's peak RSS after 20 sessions have run.

A fresh daemon; 20 ``roost dispatch`` runs with ``--model scripted/demo`` (the built-in
offline script: 3 model calls, 2 ``bash`` tool calls, each run in a new session), one
after another; then ``VmHWM`` (the peak resident set size) is read from
``/proc/PID/status``. VmRSS right after start-up and at the end are reported for context.

    uv run python bench/daemon_rss.py [--sessions 20]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchEnv, Figure, parser, prepare, read_proc_status, report  # noqa: E402

TARGET_MIB = 120.0


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=20, help="sessions to run (default 20)")
    args = p.parse_args()
    context = prepare(args)
    with BenchEnv("rss") as env:
        took = env.start_daemon()
        with env.client() as client:
            client.call("status")
        time.sleep(0.1)
        idle = read_proc_status(env.daemon_pid)
        walls = []
        for _ in range(args.sessions):
            ran = env.run_roost("dispatch", "list the files here and count them",
                                "--model", "scripted/demo", "--yes")
            walls.append(ran.wall)
        with env.client() as client:
            info = client.call("status")
        after = read_proc_status(env.daemon_pid)
    context.append(f"daemon listening {took * 1000:.0f} ms after Popen; right after start-up: "
                   f"VmRSS {idle['VmRSS'] / 1024:.1f} MiB, VmHWM {idle['VmHWM'] / 1024:.1f} MiB")
    fig = Figure(
        key="rss.daemon_peak_mib", title=f"daemon peak RSS after {args.sessions} sessions",
        value=after["VmHWM"] / 1024, unit="MiB", better="lower", target=TARGET_MIB,
        how=f"VmHWM from /proc/PID/status after {args.sessions} sequential `roost dispatch --yes "
            f"--model scripted/demo` runs (new session each; 3 model calls, 2 bash calls)",
        details=[f"at the end: VmRSS {after['VmRSS'] / 1024:.1f} MiB; status reports "
                 f"{info['sessions']} sessions; the dispatches took {sum(walls):.1f} s in all"],
    )
    report("daemon memory", [fig], args, context)


if __name__ == "__main__":
    main()
