"""Figure 17: what a background command's output costs the daemon: memory and throughput.

No daemon: the tools run in the benchmark's own process, on a trio loop, as the daemon runs
them. A background ``bash`` (``run_in_background``, unsandboxed) writes ``--megabytes`` MB
(``head -c N /dev/zero``) as fast as it can; the run's ``Shells`` keeps it in its two
unlinked files (the newest 4 to 8 MiB). Printed: the process's peak RSS growth (VmHWM,
from /proc) while it ran, against the output's size (the files live in the page cache,
not the heap); the throughput from start to the last byte stored; what the files hold at
the end; and one ``bash_output`` of it all (the newest 30,000 characters shown), timed.

    uv run python bench/background_output.py [--megabytes 200]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, parser, prepare, report  # noqa: E402

import trio  # noqa: E402

from roost.daemon.tools import Shells, ToolContext, ToolRegistry  # noqa: E402

#: The most a background command's output may add to the daemon's memory.
RSS_TARGET_MIB = 16.0


def _status(field: str) -> int:
    """A /proc/self/status figure in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


async def _measure(size: int, folder: Path) -> tuple[float, float, int, float]:
    registry = ToolRegistry()
    async with trio.open_nursery() as nursery:
        shells = Shells(nursery, folder)
        ctx = ToolContext(cwd=str(folder), shells=shells)
        before = _status("VmHWM")
        started = time.perf_counter()
        await registry.call("bash", {"command": f"head -c {size} /dev/zero", "run_in_background": True}, ctx)
        shell = shells.get("bg1")
        assert shell is not None
        await shell.exited.wait()
        while shell.output.total < size:
            await trio.sleep(0.001)
        took = time.perf_counter() - started
        grown = (_status("VmHWM") - before) / 1024
        held = sum(os.fstat(fd).st_size for fd, _ in shell.output._segments)
        read_at = time.perf_counter()
        await registry.call("bash_output", {"id": "bg1"}, ctx)
        read = time.perf_counter() - read_at
        nursery.cancel_scope.cancel()
    shells.close()
    return grown, size / took / 1e6, held, read * 1000


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--megabytes", type=int, default=200)
    args = p.parse_args()
    context = prepare(args)
    size = args.megabytes * 1_000_000
    with tempfile.TemporaryDirectory(prefix="rb-bg-") as temp:
        grown, rate, held, read_ms = trio.run(_measure, size, Path(temp))
    figures = [
        Figure(
            "background.rss_growth_mib", "background output: peak RSS growth", grown, "MiB", "lower", RSS_TARGET_MIB,
            f"{args.megabytes} MB written by one background command; VmHWM before and after",
            [f"kept in its files at the end: {held / 2**20:.1f} MiB (page cache, not the heap)"],
        ),
        Figure(
            "background.throughput_mb_s", "background output: stored", rate, "MB/s", "higher", None,
            "from the call to the last byte stored", informational=True,
        ),
        Figure(
            "background.read_ms", "background output: one bash_output", read_ms, "ms", "lower", None,
            "a read of everything new (the newest 30,000 characters shown)", informational=True,
        ),
    ]
    report("background_output", figures, args, context)


if __name__ == "__main__":
    main()
