"""Figure 11: many concurrent sessions on one daemon, each with a follower.

``--sessions`` (1,000) sessions are created in one daemon and each gets its own follower: a
client connection (trio, all in this process) attached to it. Then every follower
dispatches a run of ``--steps`` (10) tool steps on its session and reads the run's events
to ``run.finished``. The model is ``scripted`` with each reply waiting ``--think`` seconds
before it starts (a model's pace: concurrent sessions spend most of their time waiting for
their model), the dispatches spread evenly over one think time; each step reads a small
file (``read``, a different file each step). Measured:

- **peak RSS** of the daemon (``VmHWM``) at the end;
- **step overhead**: each step's ``step.finished`` latency (the previous result fed to its
  tool calls done, as the daemon records it) minus its model call's latency (the
  ``message.assistant`` latency, measured around the provider call): what the daemon adds
  to a step (storing and publishing its events, starting the model call, running the tool,
  feeding the result back), p50 and p99 over the steps that began once every run was
  dispatched (the figure), and apart over those that began before, while 250 runs a
  second were being planned and started (a start-up burst, printed beside). Also printed:
  the model call's latency minus the think time (the provider, and how late the event
  loop wakes for a reply that is due);
- **nothing lost**: every follower got every stored event of its run once, in order (seq
  with no gap, the same seqs as ``events`` returns from the store afterwards), no ``lagged``
  notice, and every run ended ``done``;
- **memory per idle session** (RSS after creating the sessions, minus before, per session)
  and **per attached client** (RSS after connecting and attaching the followers, minus
  before, per client); and per idle session after its run (its history held in memory);
- event delivery (follower's receive time minus the event's ``ts``, the run's events),
  p50 and p99;
- **interactive latency under the load**, from a probe process of its own (the followers'
  process is busy decoding their events) while the runs go on: a ``status`` round trip
  every 20 ms; ``permission.respond`` (approve) sent to ``tool.started`` received, in runs
  of agent mode that ask before each ``bash`` call (the model answers at once); and a
  dispatch on an idle session (made before the load) to its model's first word, the first
  ``text.delta``'s ``ts`` (the daemon's clock) minus ``time.time()`` before the request
  (the scripted model answers at once): p50 and p99 of each, of what began once every run
  was dispatched (the figures) and, beside, of what began during the start-up burst.

    uv run python bench/scale.py [--sessions 1000] [--steps 10] [--think 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchEnv, Figure, median, parser, percentile, prepare, read_proc_status, report  # noqa: E402

RSS_TARGET_MIB = 500.0
STEP_P99_TARGET_MS = 50.0
#: status, approve -> tool.started, dispatch -> first model request, p99 under the load.
INTERACTIVE_P99_TARGET_MS = 50.0
#: Idle sessions made for the dispatch probe (one per dispatch; more than a run's length needs).
PROBE_SESSIONS = 400


def script(steps: int, think: float) -> dict[str, Any]:
    """Each reply waits ``think`` s, then reads ``f{i}.txt``; then a final text reply."""
    responses: list[dict[str, Any]] = [
        {"delay": think, "content": [{"type": "text", "text": f"step {i}"},
                                     {"type": "tool_use", "name": "read", "input": {"path": f"f{i}.txt"}}]}
        for i in range(1, steps + 1)
    ]
    responses.append({"delay": think, "content": [{"type": "text", "text": "done"}]})
    return {"responses": responses}


def rss_mib(pid: int) -> float:
    return read_proc_status(pid)["VmRSS"] / 1024


def probe_scripts(root: Path) -> tuple[str, str]:
    """The probe's models: ``scripted/FILE`` of five replies each asking for a ``bash``
    call (agent mode asks before each), and of one word, both answering at once."""
    asks = root / "probe-asks.json"
    asks.write_text(json.dumps({"responses": [
        *({"content": [{"type": "tool_use", "name": "bash", "input": {"command": f"true {i}"}}]} for i in range(5)),
        {"content": [{"type": "text", "text": "done"}]}]}))
    word = root / "probe-word.json"
    word.write_text(json.dumps({"responses": [{"content": [{"type": "text", "text": "ok"}]}]}))
    return f"scripted/{asks}", f"scripted/{word}"


async def probe(socket: str, cwd: str, asks: str, word: str, sessions: list[str]) -> dict[str, list[float]]:
    """The probe process's work (``--probe``): until its stdin closes, time a status round
    trip, an approval, a dispatch on an idle session (see the module); seconds each."""
    import trio

    from roost.protocol.trio_client import open_client

    # Each latency, and beside it (key + "_at") when it began (time.time()).
    out: dict[str, list[float]] = {k: [] for k in ("status", "approve", "dispatch", "status_at", "approve_at", "dispatch_at")}
    stop = trio.Event()

    async def statuses() -> None:
        async with open_client(socket, client="probe-status") as client:
            while not stop.is_set():
                at, started = time.time(), time.perf_counter()
                await client.call("status")
                out["status"].append(time.perf_counter() - started)
                out["status_at"].append(at)
                await trio.sleep(0.02)

    async def approvals() -> None:
        async with open_client(socket, client="probe-approve", buffer=4096) as client:
            while not stop.is_set():
                run = await client.call("dispatch", task="probe", model=asks, cwd=cwd, attach=True,
                                        mode="agent", sandbox="off")
                asked: dict[str, float] = {}
                async for note in client.notifications:
                    event = note.params[0] if note.method == "event" else {}
                    if event.get("run") != run["run"]:
                        continue
                    if event["type"] == "permission.requested":
                        asked[event["call_id"]] = time.perf_counter()
                        await client.call("permission.respond", session=run["session"], call_id=event["call_id"],
                                          decision="approve")
                    elif event["type"] == "tool.started" and event["call_id"] in asked:
                        out["approve"].append(time.perf_counter() - asked.pop(event["call_id"]))
                        out["approve_at"].append(time.time())
                    elif event["type"] == "run.finished":
                        break

    async def dispatches() -> None:
        async with open_client(socket, client="probe-dispatch", buffer=4096) as client:
            for session in sessions:
                if stop.is_set():
                    return
                sent = time.time()
                run = await client.call("dispatch", session=session, task="probe", model=word, attach=True, yes=True)
                async for note in client.notifications:
                    event = note.params[0] if note.method == "event" else {}
                    if event.get("run") == run["run"] and event["type"] == "text.delta":
                        out["dispatch"].append(event["ts"] - sent)
                        out["dispatch_at"].append(sent)
                    if event.get("run") == run["run"] and event["type"] == "run.finished":
                        break
                await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        for job in (statuses, approvals, dispatches):
            nursery.start_soon(job)
        await trio.to_thread.run_sync(sys.stdin.read)  # the load is over when stdin closes
        stop.set()
        with trio.move_on_after(10):
            while nursery.child_tasks and not all(out.values()):
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    return out


async def run_all(env: BenchEnv, sessions: int, steps: int, think: float, model: str) -> dict[str, Any]:
    import trio

    from roost.protocol.trio_client import open_client

    pid = env.daemon_pid
    out: dict[str, Any] = {"rss": {"start": rss_mib(pid)}}
    async with open_client(env.socket, client="bench-admin") as admin:
        ids = [(await admin.call("sessions.create", cwd=str(env.project)))["session"] for _ in range(sessions)]
        out["rss"]["sessions"] = rss_mib(pid)

        overheads: list[float] = []
        #: When each step of ``overheads`` began (time.time()).
        overheads_at: list[float] = []
        model_over: list[float] = []
        delivery: list[float] = []
        problems: list[str] = []
        received: dict[str, list[int]] = {}
        attached = trio.Event()
        ready = 0
        go = trio.Event()
        started_at: list[float] = []
        dispatched = 0
        #: When the last run was dispatched (time.time()): from then on all of them run.
        all_running: list[float] = []

        # A few connections at a time: the daemon's listen backlog is 128, and a connect to a
        # full backlog does not wait under trio (it fails the peer check).
        connecting = trio.Semaphore(32)

        async def follower(session: str, delay: float) -> None:
            nonlocal ready, dispatched
            async with contextlib.AsyncExitStack() as stack:
                async with connecting:
                    client = await stack.enter_async_context(
                        open_client(env.socket, client="bench-follower", buffer=65536))
                    await client.call("attach", session=session)
                ready += 1
                if ready == sessions:
                    attached.set()
                await go.wait()
                await trio.sleep(delay)
                run = (await client.call("dispatch", session=session, task="scale", model=model, yes=True))["run"]
                dispatched += 1
                if dispatched == sessions:
                    all_running.append(time.time())
                seqs = received.setdefault(session, [])
                model_latency = 0.0
                async for note in client.notifications:
                    now = time.time()
                    if note.method != "event":
                        problems.append(f"{session}: {note.method} {note.params}")
                        continue
                    event = note.params[0]
                    if event.get("run") == run:  # live, not the history replayed on attach
                        delivery.append(now - event["ts"])
                    if event.get("seq") is not None:
                        seqs.append(event["seq"])
                    if event["type"] == "message.assistant":
                        model_latency = event["latency"]
                        model_over.append(model_latency - think)
                    elif event["type"] == "step.finished":
                        overheads.append(event["latency"] - model_latency)
                        overheads_at.append(event["ts"] - event["latency"])
                    if event["type"] == "run.finished" and event.get("run") == run:
                        if event["reason"] != "done":
                            problems.append(f"{session}: run ended {event['reason']}: {event.get('error')}")
                        return

        probing = [(await admin.call("sessions.create", cwd=str(env.project)))["session"]
                   for _ in range(PROBE_SESSIONS)]
        asks, word = probe_scripts(env.root)
        prober = subprocess.Popen(
            [PYTHON, __file__, "--probe", json.dumps([str(env.socket), str(env.project), asks, word, probing])],
            env=env.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        async with trio.open_nursery() as nursery:
            for session in ids:
                nursery.start_soon(follower, session, random.uniform(0, think))
            await attached.wait()
            out["rss"]["attached"] = rss_mib(pid)
            started_at.append(time.perf_counter())
            go.set()
        out["wall"] = time.perf_counter() - started_at[0]
        probed, _ = await trio.to_thread.run_sync(prober.communicate)
        out["probe"] = json.loads(probed)
        out["rss"]["after"] = rss_mib(pid)
        # Nothing lost: what each follower got is what the store holds for its run.
        for session in ids:
            stored = [e["seq"] for e in (await admin.call("events", session=session))["events"]]
            got = received.get(session, [])
            tail = stored[len(stored) - len(got):] if got else []
            if not got or got != tail or got != list(range(got[0], got[0] + len(got))):
                problems.append(f"{session}: received seqs {got[:3]}...{got[-3:]} but the store has "
                                f"{stored[:3]}...{stored[-3:]}")
    out.update(overheads=overheads, overheads_at=overheads_at, all_running=all_running[0], model_over=model_over,
               delivery=delivery, problems=problems, events=sum(len(v) for v in received.values()),
               hwm=read_proc_status(pid)["VmHWM"] / 1024)
    return out


def split(values: list[float], began: list[float], since: float) -> tuple[list[float], list[float]]:
    """``values`` of what began once every run was running (``since``), and of what began
    before: while the runs were being dispatched."""
    running = [v for v, at in zip(values, began) if at >= since]
    starting = [v for v, at in zip(values, began) if at < since]
    return running, starting


def spread_ms(values: list[float]) -> str:
    """Count, p50, p99 and max of ``values`` (seconds), in ms."""
    if not values:
        return "no samples"
    return (f"{len(values)} samples; p50 {median(values) * 1000:.1f} ms, p99 {percentile(values, 99) * 1000:.1f} ms, "
            f"max {max(values) * 1000:.1f} ms")


def interactive(probed: dict[str, list[float]], n: int, since: float) -> list[Figure]:
    """The probe's figures: p99 of each interactive latency once every run is running, and
    beside it the same while the runs were being dispatched."""
    titles = {
        "status": ("`status` round trip", "a `status` call every 20 ms, perf_counter around the call"),
        "approve": ("approve -> tool.started", "perf_counter from sending permission.respond (approve) to "
                    "the call's tool.started received, agent-mode runs asking before each bash call"),
        "dispatch": ("dispatch on an idle session -> first model request", "time.time() before sending "
                     "dispatch to the ts of the run's first text.delta (the scripted model's first word)"),
    }
    figures = []
    for key, (title, how) in titles.items():
        running, starting = split(probed.get(key) or [], probed.get(f"{key}_at") or [], since)
        figures.append(Figure(
            key=f"scale.{key}_p99_ms", title=f"{title} p99, {n} sessions running",
            value=percentile(running or [float("nan")], 99) * 1000, unit="ms", better="lower",
            target=INTERACTIVE_P99_TARGET_MS,
            how=f"from a probe process while the runs go on (what began once all {n} were dispatched): {how}",
            details=[spread_ms(running),
                     f"while the {n} runs were being dispatched (before): {spread_ms(starting)}"]))
    return figures


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=1000, help="concurrent sessions, one follower each (default 1000)")
    p.add_argument("--steps", type=int, default=10, help="tool steps per run (default 10)")
    p.add_argument("--think", type=float, default=4.0, help="seconds each scripted reply waits (default 4)")
    p.add_argument("--probe", help=argparse.SUPPRESS)
    args = p.parse_args()
    import trio

    if args.probe:
        print(json.dumps(trio.run(probe, *json.loads(args.probe))))
        return
    context = prepare(args)

    with BenchEnv("scale") as env:
        for i in range(1, args.steps + 1):
            (env.project / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        path = env.root / "scale.json"
        path.write_text(json.dumps(script(args.steps, args.think)))
        env.start_daemon()
        m = trio.run(run_all, env, args.sessions, args.steps, args.think, f"scripted/{path}")
    n, rss = args.sessions, m["rss"]
    per_session_kib = (rss["sessions"] - rss["start"]) * 1024 / n
    per_client_kib = (rss["attached"] - rss["sessions"]) * 1024 / n
    after_kib = (rss["after"] - rss["start"]) * 1024 / n
    steps_done = len(m["overheads"])
    steps_running, steps_starting = split(m["overheads"], m["overheads_at"], m["all_running"])
    ok = not m["problems"]
    context.append(f"{n} sessions x {args.steps} tool steps (+1 final reply), think {args.think:g} s per "
                   f"reply, dispatches spread over {args.think:g} s: {steps_done} steps in {m['wall']:.1f} s "
                   f"({steps_done / m['wall']:.0f} steps/s), {m['events']} stored events received")
    context.append(f"daemon RSS: {rss['start']:.1f} MiB at start, {rss['sessions']:.1f} with {n} idle sessions, "
                   f"{rss['attached']:.1f} with a follower attached to each, {rss['after']:.1f} after the runs")
    context.append(f"event delivery (follower receive time - event ts): p50 {median(m['delivery']) * 1000:.1f} ms, "
                   f"p99 {percentile(m['delivery'], 99) * 1000:.1f} ms")
    for problem in m["problems"][:10]:
        context.append(f"PROBLEM: {problem}")
    figures = [
        Figure(
            key="scale.peak_rss_mib", title=f"daemon peak RSS, {n} sessions with followers",
            value=m["hwm"], unit="MiB", better="lower", target=RSS_TARGET_MIB,
            how=f"VmHWM of the daemon after {n} concurrent {args.steps}-step scripted runs, one follower each",
        ),
        Figure(
            key="scale.step_overhead_p99_ms", title=f"step overhead p99, {n} concurrent sessions",
            value=percentile(steps_running or [float("nan")], 99) * 1000, unit="ms", better="lower",
            target=STEP_P99_TARGET_MS,
            how=f"p99 over the steps that began once all {n} runs were dispatched ({len(steps_running)} of "
                f"{steps_done}) of step.finished latency minus the step's model call latency "
                f"(message.assistant latency)",
            details=[spread_ms(steps_running),
                     f"the steps that began while the runs were being dispatched: {spread_ms(steps_starting)}",
                     f"every step: p50 {median(m['overheads']) * 1000:.2f} ms, p90 "
                     f"{percentile(m['overheads'], 90) * 1000:.2f} ms, p99 {percentile(m['overheads'], 99) * 1000:.1f} ms",
                     f"model call latency minus the {args.think:g} s think time (provider, and the loop waking "
                     f"late): p50 {median(m['model_over']) * 1000:.2f} ms, p99 "
                     f"{percentile(m['model_over'], 99) * 1000:.2f} ms"],
        ),
        *interactive(m["probe"], n, m["all_running"]),
        Figure(
            key="scale.lost", title="runs with an event lost, duplicated or out of order",
            value=len(m["problems"]), unit="runs", better="lower", target=1,
            how="per follower: seqs received in order with no gap and equal to the store's for its run, "
                "no lagged notice, run ended done",
            details=["nothing lost" if ok else f"{len(m['problems'])} problems (first ones above)"],
        ),
        Figure(
            key="scale.idle_session_kib", title="memory per idle session",
            value=per_session_kib, unit="KiB", better="lower", informational=True,
            how=f"(daemon RSS after sessions.create x {n} - before) / {n}",
            details=[f"after its run (history in memory): {after_kib:.1f} KiB per session, followers closed"],
        ),
        Figure(
            key="scale.attached_client_kib", title="memory per attached client",
            value=per_client_kib, unit="KiB", better="lower", informational=True,
            how=f"(daemon RSS after {n} connections each attached to one session - before) / {n}",
        ),
    ]
    report("scale", figures, args, context)


if __name__ == "__main__":
    main()
