"""Figure 8: MCP tool calls through McpManager against the bare SDK, and ensure() to ready.

No daemon: one ``trio.run`` in this process, real servers as child processes (the pinned
ones the tests use, installed into ``.cache/test-servers/`` on first use):

- **call overhead**: ``everything__echo`` through ``McpManager.call`` against
  ``ClientSession.call_tool("echo")`` of the bare SDK (``stdio_client`` or
  ``streamable_http_client``), each on its own connection to the same server
  (``@modelcontextprotocol/server-everything``: two ``node .../dist/index.js stdio``
  processes; one ``streamableHttp`` process on 127.0.0.1 for both HTTP sessions). Calls
  alternate between the two (stdio first, then HTTP), ``--calls`` each after 30 warm-up;
  figure = median(manager) - median(bare SDK), which is what roost adds: name lookup, the
  timeout scope, result mapping. Medians of two connections to two processes: expect
  +-0.1 ms of noise on stdio, more on HTTP.
- **ensure() to ready**: wall time of ``await manager.ensure({name: config})`` on a fresh
  manager (spawn or connect, initialize, tools/list) until the server's tools are offered;
  median of ``--starts`` after one cold start (printed: it includes importing the SDK).
  Servers: everything over stdio (node), mcp-server-time over stdio (Python), everything
  over HTTP (the server already listening).

    uv run python bench/mcp_overhead.py [--calls 300] [--starts 7]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import REPO, Figure, median, parser, prepare, report, spread  # noqa: E402

from tests._servers import EVERYTHING_JS, TIME_EXE, ensure  # noqa: E402

LOOPBACK = REPO / "tests" / "daemon" / "mcp" / "loopback.cjs"
WARMUP = 30


def configs(http_url: str) -> dict[str, Any]:
    from roost.daemon.mcp import McpServerConfig

    return {
        "everything": McpServerConfig("everything", "stdio", "node", (str(EVERYTHING_JS), "stdio")),
        "time": McpServerConfig("time", "stdio", str(TIME_EXE), ("--local-timezone", "UTC")),
        "web": McpServerConfig("web", "http", url=http_url),
    }


@contextmanager
def http_server(tmp: Path) -> Iterator[str]:
    """server-everything in streamable HTTP mode on 127.0.0.1; yields its URL."""
    err = tmp / "http.stderr"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(["node", "--require", str(LOOPBACK), str(EVERYTHING_JS), "streamableHttp"],
                                env={**os.environ, "PORT": "0"}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 15
        while not (found := re.search(r"listening on port (\d+)", err.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start: {err.read_text()}")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{found.group(1)}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def time_alternating(calls: int, **fns: Callable[[], Awaitable[Any]]) -> dict[str, list[float]]:
    """Seconds per call of each function, called in turn (the order reversed every other
    round, so that neither always follows the other), after WARMUP rounds."""
    clock = time.perf_counter
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    for i in range(WARMUP + calls):
        for name, fn in order if i % 2 else reversed(order):
            t = clock()
            await fn()
            if i >= WARMUP:
                times[name].append(clock() - t)
    return times


async def measure_starts(servers: dict[str, Any], starts: int, logs: Path) -> dict[str, list[float]]:
    """Seconds from ensure() to ready, per server: the cold first start, then ``starts`` more."""
    import trio

    from roost.daemon.mcp import McpManager

    times: dict[str, list[float]] = {}
    for name in ("everything", "time", "web"):
        for _ in range(starts + 1):
            async with trio.open_nursery() as nursery:
                manager = McpManager(nursery, logs)
                t = time.perf_counter()
                await manager.ensure({name: servers[name]})
                took = time.perf_counter() - t
                [status] = manager.status()
                if status["state"] != "ready" or not manager.tools():
                    raise RuntimeError(f"{name} did not get ready: {status}")
                times.setdefault(name, []).append(took)
                await manager.aclose()
    return times


async def measure_calls(servers: dict[str, Any], calls: int, logs: Path) -> dict[str, list[float]]:
    """Manager and bare SDK, on stdio and on HTTP, each on its own connection, in turn."""
    import trio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    from roost.daemon.mcp import McpManager

    args = {"message": "bench"}
    with open(logs / "bare-sdk.log", "w") as errlog:
        params = StdioServerParameters(command="node", args=[str(EVERYTHING_JS), "stdio"])
        async with trio.open_nursery() as nursery, \
                stdio_client(params, errlog=errlog) as (r1, w1), ClientSession(r1, w1) as stdio_bare, \
                streamable_http_client(servers["web"].url) as (r2, w2), ClientSession(r2, w2) as http_bare:
            await stdio_bare.initialize()
            await http_bare.initialize()
            manager = McpManager(nursery, logs)
            await manager.ensure({"everything": servers["everything"], "web": servers["web"]})
            try:
                # One transport at a time: a call right after an HTTP call shares the CPU with
                # the HTTP server still finishing its response.
                times = await time_alternating(
                    calls,
                    stdio_manager=lambda: manager.call("everything__echo", args),
                    stdio_bare=lambda: stdio_bare.call_tool("echo", args),
                )
                times |= await time_alternating(
                    calls,
                    http_manager=lambda: manager.call("web__echo", args),
                    http_bare=lambda: http_bare.call_tool("echo", args),
                )
            finally:
                await manager.aclose()
    return times


def figures(calls: dict[str, list[float]], starts: dict[str, list[float]], n_calls: int) -> list[Figure]:
    out = []
    for kind in ("stdio", "http"):
        ours, bare = calls[f"{kind}_manager"], calls[f"{kind}_bare"]
        overhead = (median(ours) - median(bare)) * 1000
        out.append(Figure(
            key=f"mcp.{kind}_call_overhead_ms", title=f"MCP call overhead vs bare SDK ({kind})",
            value=overhead, unit="ms", better="lower", informational=True,
            how=(f"median McpManager.call('everything__echo') - median ClientSession.call_tool('echo'), "
                 f"server-everything over {kind}, {n_calls} calls each after {WARMUP} warm-up, alternating"),
            details=[f"manager: min/median/max {spread(ours, 1000, '{:.3f}')} ms",
                     f"bare SDK: min/median/max {spread(bare, 1000, '{:.3f}')} ms"],
        ))
    labels = {"everything": "everything, stdio (node)", "time": "mcp-server-time, stdio (python)",
              "web": "everything, streamable HTTP"}
    for name, label in labels.items():
        cold, warm = starts[name][0], starts[name][1:]
        out.append(Figure(
            key=f"mcp.ensure_ready_{name}_ms", title=f"ensure() -> tools ready ({label})",
            value=median(warm) * 1000, unit="ms", better="lower", informational=True,
            how=(f"await McpManager.ensure() on a fresh manager until ready (spawn or connect, "
                 f"initialize, tools/list); median of {len(warm)} after one cold start"),
            details=[f"min/median/max {spread(warm, 1000, '{:.0f}')} ms; first start in the process "
                     f"{cold * 1000:.0f} ms" + (" (includes importing the mcp SDK)" if name == "everything" else "")],
        ))
    return out


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300, help="measured calls per kind (default 300)")
    p.add_argument("--starts", type=int, default=7, help="measured starts per server (default 7)")
    args = p.parse_args()
    ensure()
    context = prepare(args)
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(var, None)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

    import trio

    with tempfile.TemporaryDirectory(prefix="rb-mcp-", dir="/tmp") as tmp, http_server(Path(tmp)) as url:
        servers = configs(url)
        starts = trio.run(measure_starts, servers, args.starts, Path(tmp))
        calls = trio.run(measure_calls, servers, args.calls, Path(tmp))
    report("mcp overhead", figures(calls, starts, args.calls), args, context)


if __name__ == "__main__":
    main()
