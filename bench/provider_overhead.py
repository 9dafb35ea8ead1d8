"""Figure 7: provider overhead per model call, streamed, against zero-latency local servers.

For each provider (``anthropic``: AnthropicProvider with tests/fakes/anthropic_server.py;
``openai``: OpenAIProvider with tests/fakes/openai_server.py), in one ``trio.run`` in this
process, with the fake servers in separate processes (``python -m tests.fakes.*_server``,
127.0.0.1, TCP_NODELAY, no delay):

- **per call**: wall time of ``await provider.stream(request, on_delta)`` (``perf_counter``
  around it) for a reply of 1 text delta; median over ``--calls`` calls after 20 warm-up
  calls. It includes the fake server's own work, done in parallel on the other core.
- **per SSE event**: the same for a reply of 200 text deltas (199 more SSE events than the
  1-delta reply): (median t200 − median t1) / 199.
- **floor**: the same two replies fetched with a bare ``httpx2.AsyncClient`` (POST, read the
  body to its end, no parsing): what HTTP and the fake server cost without any provider.
  The four kinds of call (provider and floor, 1 and 200 deltas) are made in turn, round
  after round, each against its own server or with its own client so that every one keeps
  its connection; medians per kind.
- **connections**: 100 consecutive calls against one in-process fake server, counting the
  connections it accepted (target: 1, i.e. the connection is kept alive between turns).

    uv run python bench/provider_overhead.py [--calls 200] [--only anthropic|openai]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REPO, Figure, median, parser, prepare, report, spread  # noqa: E402

EVENTS = 200
WARMUP = 20
TURNS = 100
TARGET_CONNECTIONS = 2  # "< 2": exactly one

ANTHROPIC_MODEL = "claude-test"  # not in the SDK's list of deprecated models
OPENAI_MODEL = "gpt-test"


def replies(kind: str, deltas: int) -> dict[str, Any]:
    """The fake server's turn for a reply of ``deltas`` text deltas."""
    pieces = [f"w{i} " for i in range(deltas)]
    if kind == "anthropic":
        return {"content": [{"type": "text", "deltas": pieces}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": deltas}}
    return {"content": pieces, "usage": {"prompt_tokens": 10, "completion_tokens": deltas}}


@contextmanager
def server_process(kind: str, turn: dict[str, Any], tmp: Path) -> Iterator[str]:
    """``python -m tests.fakes.KIND_server`` serving ``turn`` forever; yields its base URL."""
    script = tmp / f"{kind}-{id(turn)}.json"
    script.write_text(json.dumps({"turns": [], "default": turn}))
    proc = subprocess.Popen([PYTHON, "-m", f"tests.fakes.{kind}_server", "--port", "0",
                             "--script", str(script)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the {kind} fake server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def make_provider(kind: str, url: str) -> Any:
    if kind == "anthropic":
        from roost.daemon.providers._anthropic import AnthropicProvider

        return AnthropicProvider(api_key="bench-key", base_url=url)
    from roost.daemon.providers._openai import OpenAIProvider

    return OpenAIProvider(url, "bench-key")


def request_for(kind: str) -> Any:
    from roost.daemon.providers._base import ModelRequest

    return ModelRequest(model=ANTHROPIC_MODEL if kind == "anthropic" else OPENAI_MODEL,
                        system="be brief", messages=({"role": "user", "content": "hi"},),
                        max_tokens=1024)


async def time_round_robin(calls: int, **fns: Callable[[], Any]) -> dict[str, list[float]]:
    """Seconds per call of each function, called in turn, after WARMUP rounds."""
    clock = time.perf_counter
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(WARMUP + calls):
        for name, fn in fns.items():
            t = clock()
            await fn()
            if i >= WARMUP:
                times[name].append(clock() - t)
    return times


async def measure(kind: str, url1: str, url200: str, calls: int) -> dict[str, list[float]]:
    """The provider, and a bare httpx2 client as the floor, on both replies, in turn."""
    import httpx2

    request = request_for(kind)
    one, many = make_provider(kind, url1), make_provider(kind, url200)
    seen = [0]

    def on_delta(k: str, text: str) -> None:
        seen[0] += 1

    # The floor: the same requests with a bare httpx2 client; POST, read to the end, no parsing.
    if kind == "anthropic":
        path, headers = "/v1/messages", {"x-api-key": "bench-key", "anthropic-version": "2023-06-01"}
        body: dict[str, Any] = {"model": ANTHROPIC_MODEL, "max_tokens": 1024, "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}
    else:
        path, headers = "/chat/completions", {"authorization": "Bearer bench-key"}
        body = {"model": OPENAI_MODEL, "max_tokens": 1024, "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}]}
    # Two clients, so that each keeps one connection to its server, as the providers do.
    bare1, bare200 = httpx2.AsyncClient(headers=headers), httpx2.AsyncClient(headers=headers)

    async def fetch(client: Any, url: str) -> None:
        async with client.stream("POST", url + path, json=body) as response:
            async for _ in response.aiter_raw():
                pass

    try:
        times = await time_round_robin(
            calls,
            t1=lambda: one.stream(request, on_delta),
            t200=lambda: many.stream(request, on_delta),
            f1=lambda: fetch(bare1, url1),
            f200=lambda: fetch(bare200, url200),
        )
    finally:
        for closable in (one, many):
            await closable.aclose()
        for client in (bare1, bare200):
            await client.aclose()
    expected = (WARMUP + calls) * (1 + EVENTS)
    if seen[0] != expected:
        raise RuntimeError(f"{kind}: saw {seen[0]} deltas, expected {expected}")
    return times


async def count_connections(kind: str) -> int:
    """Connections an in-process fake server accepts for TURNS consecutive calls."""
    if kind == "anthropic":
        from tests.fakes.anthropic_server import serve_anthropic as serve
    else:
        from tests.fakes.openai_server import serve_openai as serve
    request = request_for(kind)
    with serve(default=replies(kind, 5)) as server:
        accepted = [0]
        accept = server.get_request

        def counting() -> Any:  # counted here, the same way for both fakes
            conn = accept()
            accepted[0] += 1
            return conn

        server.get_request = counting  # type: ignore[method-assign]
        provider = make_provider(kind, server.base_url)
        try:
            for _ in range(TURNS):
                await provider.stream(request, lambda k, t: None)
        finally:
            await provider.aclose()
        if len(server.requests) != TURNS:
            raise RuntimeError(f"{kind}: the server saw {len(server.requests)} requests")
    return accepted[0]


def run(kind: str, calls: int, tmp: Path) -> list[Figure]:
    import trio

    with server_process(kind, replies(kind, 1), tmp) as url1, \
            server_process(kind, replies(kind, EVENTS), tmp) as url200:
        m = trio.run(measure, kind, url1, url200, calls)
    connections = trio.run(count_connections, kind)

    per_call = median(m["t1"]) * 1000
    per_event = (median(m["t200"]) - median(m["t1"])) / (EVENTS - 1) * 1e6
    floor_call = median(m["f1"]) * 1000
    floor_event = (median(m["f200"]) - median(m["f1"])) / (EVENTS - 1) * 1e6
    server = f"tests/fakes/{kind}_server.py"
    provider = "AnthropicProvider (official SDK)" if kind == "anthropic" else "OpenAIProvider (httpx2)"
    return [
        Figure(
            key=f"provider.{kind}_call_ms", title=f"provider call, 1 delta ({kind})",
            value=per_call, unit="ms", better="lower", informational=True,
            how=(f"{provider}.stream() against {server} in its own process (127.0.0.1, "
                 f"streamed, zero delay), reply of 1 text delta; median of {calls} calls after "
                 f"{WARMUP} warm-up; in turn with the 200-delta calls and the floor's"),
            details=[f"min/median/max {spread(m['t1'], 1000, '{:.2f}')} ms",
                     f"floor (bare httpx2 POST + read to the end, same reply): "
                     f"{floor_call:.2f} ms -> provider overhead {per_call - floor_call:.2f} ms"],
        ),
        Figure(
            key=f"provider.{kind}_event_us", title=f"provider per SSE event ({kind})",
            value=per_event, unit="µs", better="lower", informational=True,
            how=(f"(median call with {EVENTS} text deltas - median call with 1) / {EVENTS - 1}; "
                 f"includes the fake server encoding and writing each event"),
            details=[f"{EVENTS}-delta call: min/median/max {spread(m['t200'], 1000, '{:.2f}')} ms",
                     f"floor (bare httpx2, same replies): {floor_event:.1f} µs per event -> "
                     f"provider overhead {per_event - floor_event:.1f} µs per event"],
        ),
        Figure(
            key=f"provider.{kind}_connections", title=f"connections for {TURNS} turns ({kind})",
            value=connections, unit="connections", better="lower", target=TARGET_CONNECTIONS,
            how=(f"{TURNS} consecutive {provider}.stream() calls (5-delta replies) against one "
                 f"in-process {server}; connections it accepted (target: exactly 1)"),
        ),
    ]


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=200,
                   help="measured calls per reply size and provider (default 200)")
    p.add_argument("--only", choices=("anthropic", "openai"))
    args = p.parse_args()
    context = prepare(args)
    # Loopback only: no proxy may stand between the providers and the fake servers.
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(var, None)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    for var in [v for v in os.environ if v.startswith(("ANTHROPIC_", "OPENAI_"))]:
        del os.environ[var]

    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="rb-prov-", dir="/tmp") as tmp:
        for kind in ("anthropic", "openai"):
            if args.only and args.only != kind:
                continue
            figures += run(kind, args.calls, Path(tmp))
    report("provider overhead", figures, args, context)


if __name__ == "__main__":
    main()
