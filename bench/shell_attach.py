"""Figure 8: the interactive shell in a real terminal (tmux): attach, and typing during a stream.

*Attach*: a session of about 5,000 stored events (one run of 1,000 tool steps in mode
full: each step a short Markdown reply and a ``bash true`` call, so about 3,000 lines of
transcript) is made first. Then ``roost attach SESSION`` is started in a new tmux window
(120x40) and the clock runs from just before the ``tmux new-window`` call until
``capture-pane`` shows the history's last line (the run's ``■ done`` summary) with the
toolbar saying ``idle`` under it. capture-pane is polled in a loop (each poll is a
``tmux`` process, about 2 ms here, which is the resolution). Median of 5 attaches; each
window is killed after.

*Keystroke to screen*: a shell attached to another session starts a run on the model
``anthropic/claude-sonnet-4-5`` against the fake Messages API (tests/fakes/anthropic_server.py,
in this process), whose reply streams as one SSE event per word with a pause between
events, tuned to about 1,000 ``text.delta`` events a second, with a newline every 12
words. While it streams, one key (``x``) is sent with ``tmux send-keys`` every 80-160 ms
and the clock runs until capture-pane shows one more ``x`` on the input line. The same
probes with nothing streaming give the floor (tmux, the polling and the shell's own
redraw). The delta rate is measured by a separate client attached to the session (deltas
received / time from the first to the last).

    uv run python bench/shell_attach.py [--attaches 5] [--probes 40]
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ANTHROPIC_MODEL, BenchEnv, Figure, median, parser, percentile, prepare, process_cpu, report, roost_exe, spread,
)

ATTACH_TARGET_MS = 1000.0
KEYSTROKE_TARGET_MS = 50.0
STEPS = 1000
DELTAS = 6000
DELTA_PAUSE = 0.0008  # seconds between SSE events; with the server's own work, ~1,000/s


class Tmux:
    """A private tmux server (its socket in the bench's temp dir)."""

    def __init__(self, env: BenchEnv) -> None:
        self.env = env
        self.socket = str(env.root / "tmux")
        self.started = False

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], env=self.env.env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {done.stderr}")
        return done.stdout

    def window(self, command: str) -> str:
        """A new 120x40 window running ``command`` in the project folder; its pane id."""
        if not self.started:
            # A first window that stays, so the server outlives the panes that are killed.
            self.started = True
            self.run("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "sleep 3600")
        where = ["-c", str(self.env.project), "-P", "-F", "#{pane_id}", command + "; sleep 600"]
        return self.run("new-window", "-d", *where).strip()

    def screen(self, pane: str) -> list[str]:
        return self.run("capture-pane", "-p", "-t", pane).rstrip().split("\n")

    def shell_pid(self, pane: str) -> int:
        """The pid of the roost process in ``pane`` (the child of the pane's shell)."""
        parent = int(self.run("display", "-p", "-t", pane, "#{pane_pid}"))
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent and "roost" in (stat.parent / "cmdline").read_text():
                return int(stat.parent.name)
        raise RuntimeError(f"no roost process under pane {pane}")

    def kill(self, pane: str) -> None:
        self.run("kill-pane", "-t", pane)

    def close(self) -> None:
        if self.started:
            subprocess.run(["tmux", "-S", self.socket, "kill-server"], env=self.env.env, capture_output=True)


def wait_for(check: Callable[[], bool], timeout: float = 60.0, pause: float = 0.0) -> float:
    """Poll ``check`` (with ``pause`` seconds between polls) until true; the perf_counter
    time it became true."""
    deadline = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > deadline:
            raise RuntimeError("timed out waiting for the screen")
        time.sleep(pause)
    return time.perf_counter()


def toolbar_at(lines: list[str], session: str) -> int | None:
    found = [i for i, line in enumerate(lines) if line.startswith(f" {session} ")]
    return found[-1] if found else None


# -- figure 8a: attach ---------------------------------------------------------------------------


def big_session(env: BenchEnv) -> tuple[str, int]:
    """A session of ~5,000 events: one run of STEPS tool steps; (id, events)."""
    responses: list[dict[str, Any]] = [
        {"content": [{"type": "text", "text": f"Step {i}: checking **part {i}** with `true {i}`."},
                     {"type": "tool_use", "name": "bash", "input": {"command": f"true {i}"}}]}
        for i in range(1, STEPS + 1)
    ]
    responses.append({"content": [{"type": "text", "text": "## Done\n\nEvery part checked."}]})
    script = env.write_script("big.json", responses)
    with env.client(timeout=600) as client:
        started = client.call("dispatch", task="check every part", model=f"scripted/{script}",
                              mode="full", max_turns=STEPS + 5, cwd=str(env.project), attach=True)
        for event in client.events():
            if event.get("type") == "run.finished":
                if event.get("reason") != "done":
                    raise RuntimeError(f"the setup run ended {event.get('reason')}: {event.get('error')}")
                break
        rows = client.call("sessions.list")["sessions"]
    (row,) = [r for r in rows if r["id"] == started["session"]]
    return row["id"], row["events"]


def measure_attach(env: BenchEnv, tmux: Tmux, session: str, attaches: int) -> list[float]:
    times = []
    for _ in range(attaches + 1):
        t0 = time.perf_counter()
        pane = tmux.window(f"{roost_exe()} attach {session}")

        def shown() -> bool:
            lines = tmux.screen(pane)
            at = toolbar_at(lines, session)
            return at is not None and "idle │" in lines[at] and any(
                line.startswith("■ done · 1001 turns") for line in lines[:at])

        # Polls 10 ms apart: each is a tmux process, and the shell needs the CPUs too.
        t1 = wait_for(shown, pause=0.01)
        tmux.kill(pane)
        times.append(t1 - t0)
    return times[1:]  # the first is a warm-up


# -- figure 8b: keystroke to screen during a stream ------------------------------------------------


def stream_turn() -> dict[str, Any]:
    words = [f"w{i}" + ("\n" if i % 12 == 11 else " ") for i in range(DELTAS)]
    return {"content": [{"type": "text", "deltas": words}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": DELTAS}, "delay": DELTA_PAUSE}


def count_deltas(env: BenchEnv, session: str, ready: threading.Event, seen: list[float]) -> None:
    """A second client on the session: notes when each delta arrives, until the run ends."""
    with env.client(timeout=120) as client:
        # Since the last stored event: only what comes from now on.
        last = client.call("events", session=session, limit=1)["last_seq"]
        client.call("attach", session=session, since=last)
        ready.set()
        for event in client.events():
            if event.get("type") == "text.delta":
                seen.append(time.perf_counter())
            elif event.get("type") == "run.finished":
                return


def input_xs(tmux: Tmux, pane: str, session: str) -> int:
    """How many x are on the input line (-1: no input line on screen now)."""
    lines = tmux.screen(pane)
    at = toolbar_at(lines, session)
    if not at:
        return -1
    match = re.search(r"›\s?(x*)\s*$", lines[at - 1])
    return len(match.group(1)) if match else -1


def probe(tmux: Tmux, pane: str, session: str, count: int, until: Callable[[], bool] = lambda: False
          ) -> list[tuple[float, float]]:
    """Send ``x`` up to ``count`` times, 80-160 ms apart, until ``until()``: for each, when
    it ended and the seconds from send-keys to the x on screen."""
    out = []
    typed = input_xs(tmux, pane, session)
    for _ in range(count):
        time.sleep(random.uniform(0.08, 0.16))
        if until():
            break
        t0 = time.perf_counter()
        tmux.run("send-keys", "-t", pane, "-l", "x")
        typed += 1
        t1 = wait_for(lambda: input_xs(tmux, pane, session) >= typed, 10)
        out.append((t1, t1 - t0))
    return out


def measure_keystrokes(probes: int) -> tuple[list[float], list[float], int, float, float]:
    """Latencies with nothing streaming and while streaming; deltas seen, their rate, and
    the share of one CPU the shell used while they streamed."""
    from tests.fakes.anthropic_server import serve_anthropic

    with serve_anthropic([stream_turn()]) as server, BenchEnv("shellk") as env:
        env.start_daemon({"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": server.base_url})
        tmux = Tmux(env)
        try:
            with env.client() as client:
                session = client.call("sessions.create", cwd=str(env.project))["session"]
            pane = tmux.window(f"{roost_exe()} attach {session} --model {ANTHROPIC_MODEL} --mode full")
            wait_for(lambda: input_xs(tmux, pane, session) == 0, 30)
            idle = [took for _, took in probe(tmux, pane, session, 20)]
            # Clear what the idle probes typed, then start the run.
            tmux.run("send-keys", "-t", pane, "C-u")
            wait_for(lambda: input_xs(tmux, pane, session) == 0, 10)
            seen: list[float] = []
            ready = threading.Event()
            counter = threading.Thread(target=count_deltas, args=(env, session, ready, seen))
            counter.start()
            ready.wait(10)
            tmux.run("send-keys", "-t", pane, "-l", "stream please")
            tmux.run("send-keys", "-t", pane, "Enter")
            shell = tmux.shell_pid(pane)
            wait_for(lambda: len(seen) > 100, 30, pause=0.01)
            cpu0, t0 = process_cpu(shell)[0], time.perf_counter()
            busy = probe(tmux, pane, session, probes, until=lambda: not counter.is_alive())
            counter.join(60)
            cpu_share = (process_cpu(shell)[0] - cpu0) / (time.perf_counter() - t0)
        finally:
            tmux.close()
    rate = (len(seen) - 1) / (seen[-1] - seen[0]) if len(seen) > 1 else 0.0
    # Only the probes that ended while deltas were still arriving count.
    return idle, [took for ended, took in busy if seen and ended <= seen[-1]], len(seen), rate, cpu_share


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--attaches", type=int, default=5, help="measured attaches (default 5)")
    p.add_argument("--probes", type=int, default=40, help="keystrokes sent during the stream (default 40)")
    args = p.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("bench: tmux is needed (apt-get install tmux)")
    context = prepare(args)

    with BenchEnv("shella") as env:
        env.start_daemon()
        tmux = Tmux(env)
        try:
            t = time.perf_counter()
            session, events = big_session(env)
            context.append(f"setup: a session of {events:,} events in {time.perf_counter() - t:.1f} s")
            attach = measure_attach(env, tmux, session, args.attaches)
        finally:
            tmux.close()
        logs = env.run_roost("logs", session)
        context.append(f"for scale: `roost logs SESSION` (the plain renderer, to /dev/null) "
                       f"{logs.wall * 1000:.0f} ms, {logs.cpu * 1000:.0f} ms CPU")

    idle, busy, deltas, rate, cpu_share = measure_keystrokes(args.probes)
    context.append(f"stream: {deltas:,} text.delta events at {rate:,.0f}/s (measured by a second client); "
                   f"the shell used {cpu_share:.0%} of a CPU meanwhile (probes included)")

    figures = [
        Figure(
            key="shell.attach_5000_ms", title="`roost attach` -> 5,000-event history on screen",
            value=median(attach) * 1000, unit="ms", better="lower", target=ATTACH_TARGET_MS,
            how=f"tmux new-window `roost attach` until capture-pane shows the last history line and "
                f"the idle toolbar; median of {len(attach)} after 1 warm-up; {events:,} events",
            details=[f"min/median/max {spread(attach, 1000)} ms"],
        ),
        Figure(
            key="shell.keystroke_stream_ms", title="keystroke -> screen while 1,000 deltas/s stream",
            value=median(busy) * 1000, unit="ms", better="lower", target=KEYSTROKE_TARGET_MS,
            how=f"tmux send-keys `x` until capture-pane shows it on the input line, {len(busy)} "
                f"probes during the stream; median",
            details=[f"min/median/p95/max {min(busy) * 1000:.1f} / {median(busy) * 1000:.1f} / "
                     f"{percentile(busy, 95) * 1000:.1f} / {max(busy) * 1000:.1f} ms",
                     f"floor, nothing streaming ({len(idle)} probes): median {median(idle) * 1000:.1f} ms, "
                     f"p95 {percentile(idle, 95) * 1000:.1f} ms"],
        ),
    ]
    report("shell", figures, args, context)


if __name__ == "__main__":
    main()
