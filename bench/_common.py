"""Shared plumbing for the benchmarks: isolated environment, daemon lifetime, statistics,
the baseline file and the report format.

Every benchmark script is standalone (``python bench/NAME.py``) and:

- byte-compiles roost and the venv's site-packages first (``PYTHONDONTWRITEBYTECODE=1`` is
  set on these machines, so without it every process would recompile roost at start-up);
- makes a short temp dir under /tmp (AF_UNIX paths are limited to ~107 bytes) holding the
  socket, ``HOME`` and every ``XDG_*`` dir, so the real home is never touched;
- starts its own daemon (``python -m roost.daemon --socket PATH``) and stops it after;
- prints each figure with how it was measured, its target, and its ratio to
  ``bench/baseline.json``. Slowness never makes a benchmark fail.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import math
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
BASELINE = BENCH_DIR / "baseline.json"

# The repo root on sys.path: for ``roost`` (also installed editable) and ``tests.fakes``.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PYTHON = sys.executable


def roost_exe() -> str:
    """The ``roost`` console script next to this interpreter (the venv's)."""
    candidate = Path(PYTHON).parent / "roost"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("roost")
    if not found:
        sys.exit("bench: no `roost` script next to the interpreter; run with `uv run python ...`")
    return found


# -- arguments ------------------------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    """The flags every benchmark script takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--update-baseline", action="store_true",
                   help="rewrite this script's figures in bench/baseline.json with this run")
    p.add_argument("--results", metavar="FILE",
                   help="also write the figures as JSON to FILE (used by run_all.py)")
    p.add_argument("--no-compile", action="store_true",
                   help="skip byte-compiling (run_all.py does it once)")
    return p


# -- byte-compiling -------------------------------------------------------------------------


def compile_everything() -> float:
    """Byte-compile roost and the venv's site-packages (only stale files are rewritten).

    ``compileall`` writes ``.pyc`` files whatever ``PYTHONDONTWRITEBYTECODE`` says, and an
    interpreter started with that variable still *reads* them, so start-up is measured as it
    is on an installed system. Returns the seconds it took.
    """
    started = time.perf_counter()
    paths = {str(REPO / "roost"), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for path in sorted(paths):
        if os.path.isdir(path):
            compileall.compile_dir(path, quiet=1, workers=0)
    return time.perf_counter() - started


# -- the isolated environment and its daemon ------------------------------------------------


#: The models runs use against the fake vendor servers (tests/fakes/): the built-in
#: anthropic provider, and an OpenAI-compatible one named ``local`` (see
#: :meth:`BenchEnv.use_model_server`).
ANTHROPIC_MODEL = "anthropic/claude-sonnet-4-5"
OPENAI_MODEL = "local/gpt-test"


class BenchEnv:
    """A temp dir with the socket, HOME and XDG dirs, and a daemon started in it.

    Resource handling: use as a context manager; on exit the daemon is stopped (shutdown
    request, then SIGTERM, then SIGKILL) and the temp dir removed.
    """

    def __init__(self, tag: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"rb-{tag[:6]}-", dir="/tmp"))
        self.socket = self.root / "s"
        assert len(str(self.socket)) < 100, self.socket
        self.project = self.root / "proj"
        self.project.mkdir()
        home = self.root / "home"
        env = {
            k: v for k, v in os.environ.items()
            if not k.startswith(("XDG_", "ROOST_", "ANTHROPIC_"))
            and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
        }
        env.update(
            HOME=str(home),
            XDG_STATE_HOME=str(self.root / "state"),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_DATA_HOME=str(self.root / "data"),
            XDG_CACHE_HOME=str(self.root / "cache"),
            XDG_RUNTIME_DIR=str(self.root / "run"),
            ROOST_SOCKET=str(self.socket),
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            PYTHONDONTWRITEBYTECODE="1",
        )
        for name in ("home", "state", "config", "data", "cache", "run"):
            (self.root / name).mkdir(mode=0o700)
        self.env = env
        self.daemon: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop_daemon()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def use_model_server(self, kind: str, base_url: str) -> str:
        """Point runs at a fake ``kind`` server (``anthropic`` or ``openai``) at ``base_url``;
        the model id to dispatch with. Call before :meth:`start_daemon`."""
        if kind == "anthropic":
            # A dispatch brings its own terminal's key and URL; the daemon's serve nothing else.
            self.env.update(ANTHROPIC_API_KEY="bench-key", ANTHROPIC_BASE_URL=base_url)
            return ANTHROPIC_MODEL
        config = self.root / "config" / "roost" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'[providers.local]\nkind = "openai"\nbase_url = "{base_url}"\napi_key_env = ""\n')
        return OPENAI_MODEL

    def start_daemon(self, extra_env: dict[str, str] | None = None, timeout: float = 15.0) -> float:
        """Start ``python -m roost.daemon`` and wait until it answers; seconds it took."""
        assert self.daemon is None
        env = {**self.env, **(extra_env or {})}
        started = time.perf_counter()
        with open(self.root / "daemon.stderr", "wb") as stderr:
            self.daemon = subprocess.Popen(
                [PYTHON, "-m", "roost.daemon", "--socket", str(self.socket)],
                env=env, cwd=self.project, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
            )
        deadline = started + timeout
        while True:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.connect(str(self.socket))
                return time.perf_counter() - started
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            if self.daemon.poll() is not None or time.perf_counter() > deadline:
                err = (self.root / "daemon.stderr").read_text(errors="replace")
                raise RuntimeError(f"the daemon did not start (status {self.daemon.poll()}): {err}")
            time.sleep(0.005)

    @property
    def daemon_pid(self) -> int:
        assert self.daemon is not None
        return self.daemon.pid

    def stop_daemon(self) -> None:
        """Ask the daemon to shut down; SIGTERM, then SIGKILL, if it lingers."""
        process, self.daemon = self.daemon, None
        if process is None or process.poll() is not None:
            return
        from roost.protocol import Client

        with contextlib.suppress(Exception):
            with Client.connect(self.socket, timeout=5) as client:
                client.call("shutdown")
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
            try:
                process.wait(timeout=10)
                return
            except subprocess.TimeoutExpired:
                continue

    def client(self, timeout: float | None = 30):
        """A blocking :class:`roost.protocol.Client` connected to this env's daemon."""
        from roost.protocol import Client

        return Client.connect(self.socket, client="bench", timeout=timeout)

    def run_roost(self, *args: str, env: dict[str, str] | None = None,
                  stdout: Any = subprocess.DEVNULL) -> Ran:
        """Run ``roost ARGS`` in the project dir and time it (see :class:`Ran`)."""
        return run_timed([roost_exe(), *args], {**self.env, **(env or {})}, self.project, stdout)

    def write_script(self, name: str, responses: list[dict[str, Any]]) -> Path:
        """A scripted-provider script file; returns its absolute path."""
        path = self.root / name
        path.write_text(json.dumps({"responses": responses}))
        return path


@dataclass
class Ran:
    """A finished child process: wall seconds from Popen to exit, its CPU seconds."""

    wall: float
    cpu: float
    proc: subprocess.CompletedProcess[bytes]


def run_timed(argv: list[str], env: dict[str, str], cwd: Path | None = None,
              stdout: Any = subprocess.DEVNULL) -> Ran:
    """Run argv to completion. CPU is user+sys of the child (from RUSAGE_CHILDREN, which
    grows when a child is reaped: nothing else may be reaped meanwhile)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=stdout,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)[:160]} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Ran(wall, cpu, proc)


def process_cpu(pid: int) -> tuple[float, float]:
    """(CPU seconds of the process itself, CPU seconds of its reaped children) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    # After the ")": state is field 3, so utime (14) is index 11, stime 12, cutime 13, cstime 14.
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / tick, (cutime + cstime) / tick


def tool_steps_script(steps: int, command: str = "true") -> list[dict[str, Any]]:
    """``steps`` responses that each call ``bash COMMAND N`` (N the step: the same call
    three replies running would be stopped as a stuck loop), then a final text answer."""
    responses: list[dict[str, Any]] = [
        {"content": [{"type": "text", "text": f"step {i}"},
                     {"type": "tool_use", "name": "bash", "input": {"command": f"{command} {i}"}}]}
        for i in range(1, steps + 1)
    ]
    responses.append({"content": [{"type": "text", "text": "done"}]})
    return responses


def read_proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS) and friends from /proc/PID/status, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.startswith("Vm") or key.startswith("Rss"):
                out[key] = int(value.split()[0])
    return out


# -- statistics -----------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def spread(values: Sequence[float], scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    """``min / median / max`` of values times scale, for the report."""
    return " / ".join(fmt.format(v * scale) for v in (min(values), median(values), max(values)))


# -- figures, baseline, report --------------------------------------------------------------


@dataclass
class Figure:
    """One measured number."""

    key: str                   # stable id in baseline.json, e.g. "status.wall_ms"
    title: str                 # short human name for the summary table
    value: float
    unit: str
    better: str                # "lower" or "higher"
    target: float | None = None
    how: str = ""              # how it was measured
    details: list[str] = field(default_factory=list)
    informational: bool = False  # context figure, no target

    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.value < self.target if self.better == "lower" else self.value > self.target

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        return f"{'<' if self.better == 'lower' else '>'} {_num(self.target)} {self.unit}"


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def load_baseline() -> dict[str, Any]:
    try:
        return json.loads(BASELINE.read_text())
    except FileNotFoundError:
        return {"figures": {}}


def baseline_note(fig: Figure, baseline: dict[str, Any]) -> tuple[str, float | None]:
    """The comparison text for one figure, and the ratio value / baseline (None if new)."""
    entry = baseline.get("figures", {}).get(fig.key)
    if not entry or not entry.get("value"):
        return "no baseline yet (this run becomes it)", None
    base = float(entry["value"])
    ratio = fig.value / base
    if math.isclose(ratio, 1.0, rel_tol=0.03):
        verdict = "about the same"
    else:
        worse = ratio > 1 if fig.better == "lower" else ratio < 1
        verdict = "worse" if worse else "better"
    return f"{ratio:.2f}x baseline ({_num(base)} {fig.unit}; {verdict})", ratio


def report(bench: str, figures: list[Figure], args: argparse.Namespace,
           context: list[str] | None = None) -> None:
    """Print the figures, compare with (and maybe update) the baseline, write --results."""
    baseline = load_baseline()
    print()
    print(f"== {bench} ==")
    for line in context or []:
        print(f"   {line}")
    rows = []
    for fig in figures:
        note, ratio = baseline_note(fig, baseline)
        met = fig.met()
        status = "" if met is None else ("  [meets target]" if met else "  [MISSES target]")
        print(f"-- {fig.title}: {_num(fig.value)} {fig.unit}"
              f"{'  (target ' + fig.target_text() + ')' if fig.target is not None else ''}{status}")
        if fig.how:
            print(f"   how: {fig.how}")
        for line in fig.details:
            print(f"   {line}")
        print(f"   baseline: {note}")
        rows.append({**asdict(fig), "met": met, "ratio": ratio,
                     "baseline": baseline.get("figures", {}).get(fig.key, {}).get("value")})
    figures_in_base = baseline.setdefault("figures", {})
    changed = False
    for fig in figures:
        if args.update_baseline or fig.key not in figures_in_base:
            figures_in_base[fig.key] = {"value": fig.value, "unit": fig.unit, "better": fig.better,
                                        "title": fig.title,
                                        "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
            changed = True
    if changed:
        baseline["machine"] = machine()
        baseline["figures"] = dict(sorted(figures_in_base.items()))
        BASELINE.write_text(json.dumps(baseline, indent=2) + "\n")
        print(f"   (baseline.json {'rewritten' if args.update_baseline else 'extended'} "
              f"for {bench})")
    if args.results:
        Path(args.results).write_text(json.dumps({"bench": bench, "figures": rows}, indent=2))


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": _cpu_name(),
    }


def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def fs_type(path: Path) -> str:
    """The filesystem type of ``path`` (SQLite's fsync cost depends on it)."""
    best, kind = "", "?"
    with contextlib.suppress(OSError):
        for line in open("/proc/mounts"):
            parts = line.split()
            mount, fstype = parts[1], parts[2]
            if str(path).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fstype
    return kind


def prepare(args: argparse.Namespace) -> list[str]:
    """Byte-compile (unless told not to); context lines for the report."""
    lines = []
    if not args.no_compile:
        took = compile_everything()
        lines.append(f"byte-compiled roost + site-packages ({took:.1f} s)")
    lines.append(f"python {platform.python_version()}, {os.cpu_count()} cpus, "
                 f"/tmp on {fs_type(Path(tempfile.gettempdir()))}")
    return lines
