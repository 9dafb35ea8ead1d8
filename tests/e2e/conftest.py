"""End to end: the real ``roost`` command and a real daemon process, as subprocesses.

Every command runs with ``os.environ`` as the autouse fixture left it (socket, XDG dirs and
HOME in temp folders, no provider keys). The :func:`e2e` fixture stops every daemon a test
started (found through the ``.lock`` files next to the sockets, which hold the pid), every
process the test opened, and every process group the test registered, so nothing outlives
the test even when it fails halfway.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

from tests._procs import alive

#: The ``roost`` script of the venv that runs the tests.
ROOST = str(Path(sys.executable).parent / "roost")

T = TypeVar("T")


def text(t: str) -> dict[str, Any]:
    """A text block of a scripted response."""
    return {"type": "text", "text": t}


def bash(command: str, **extra: Any) -> dict[str, Any]:
    """A tool_use block calling bash."""
    return {"type": "tool_use", "name": "bash", "input": {"command": command, **extra}}


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def wait_until(fn: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> T:
    """Call ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or fn}")
        time.sleep(interval)


class LineReader:
    """Reads a pipe's lines on a thread, so a test can wait for one with a timeout."""

    def __init__(self, pipe: Any) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(pipe,), daemon=True)
        self._thread.start()

    def _pump(self, pipe: Any) -> None:
        try:
            for line in iter(pipe.readline, ""):
                self._queue.put(line)
        except (OSError, ValueError):
            pass
        self._queue.put(None)

    def until(self, predicate: Callable[[str], bool], timeout: float = 10.0) -> str:
        """Lines up to and including the first that satisfies ``predicate``; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no expected line within {timeout} s; got {self.lines!r}")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"output ended before the expected line; got {self.lines!r}")
            self.lines.append(line)
            if predicate(line):
                return line

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)


_IDS = re.compile(r"^session ([0-9a-f]+) run (r[0-9a-f]+)$")


def detach(e2e: E2E, *args: str) -> tuple[str, str]:
    """``roost dispatch ARGS --detach``: the session and run ids it prints."""
    out = e2e.ok("dispatch", "--yes", *args, "--detach").stdout.strip()
    match = _IDS.match(out)
    assert match, out
    return match.group(1), match.group(2)


class E2E:
    """A test's view of the world: its env, socket, project folder, and the roost command."""

    def __init__(self, short: Path, tmp: Path) -> None:
        self.short = short
        self.tmp = tmp
        self.env = dict(os.environ)
        self.socket = Path(self.env["ROOST_SOCKET"])
        self.project = tmp / "project"
        self.project.mkdir()
        for name in ("a.txt", "b.txt", "c.py"):
            (self.project / name).write_text(f"{name}\n")
        self.log_file = Path(self.env["XDG_STATE_HOME"]) / "roost" / "log" / "roostd.log"
        self._popens: list[subprocess.Popen[str]] = []
        self._groups: list[int] = []
        self._scripts = 0

    # -- running the command -------------------------------------------------------------

    def roost(self, *args: str, timeout: float = 20.0, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``roost ARGS`` to completion (in the project folder), capturing its output."""
        return subprocess.run(
            [ROOST, *args],
            cwd=cwd or self.project,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """``roost ARGS``, which must exit 0."""
        done = self.roost(*args, **kwargs)
        assert done.returncode == 0, f"roost {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        """Start a process that teardown kills (if still running) and reaps."""
        kwargs.setdefault("cwd", self.project)
        kwargs.setdefault("env", self.env)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        process = subprocess.Popen(argv, text=True, **kwargs)
        self._popens.append(process)
        return process

    def json_out(self, *args: str) -> Any:
        """``roost ARGS`` (exit 0) with its stdout parsed as one JSON document."""
        return json.loads(self.ok(*args).stdout)

    def events(self, session: str) -> list[dict[str, Any]]:
        """The stored events of ``session`` (``roost logs SESSION --json``)."""
        out = self.ok("logs", session, "--json").stdout
        return [json.loads(line) for line in out.splitlines()]

    def wait_event(self, session: str, predicate: Callable[[dict[str, Any]], bool],
                   timeout: float = 10.0) -> list[dict[str, Any]]:
        """Poll the stored events until one satisfies ``predicate``; return them all."""
        return wait_until(
            lambda: (lambda evs: evs if any(predicate(e) for e in evs) else None)(self.events(session)),
            timeout,
            what="a stored event",
        )

    def session_row(self, session: str) -> dict[str, Any]:
        """The row of ``session`` in ``roost sessions --json``."""
        rows = self.json_out("sessions", "--json")
        (row,) = [r for r in rows if r["id"] == session]
        return row

    def status(self) -> dict[str, Any]:
        return self.json_out("status", "--json")

    def script(self, *responses: list[dict[str, Any]]) -> str:
        """Write a scripted-provider file; its model id (``scripted/ABSOLUTE_PATH``)."""
        self._scripts += 1
        path = self.tmp / f"script{self._scripts}.json"
        path.write_text(json.dumps({"responses": [{"content": list(r)} for r in responses]}))
        return f"scripted/{path}"

    def kill_group_at_teardown(self, pgid: int) -> None:
        """Make sure process group ``pgid`` is killed when the test ends."""
        self._groups.append(pgid)

    def lock_pids(self) -> list[int]:
        """Pids written in the lock files of every socket under the test's socket dir."""
        pids = []
        for lock in self.short.rglob("*.lock"):
            try:
                pids.append(int(lock.read_text().strip()))
            except (OSError, ValueError):
                pass
        return pids

    # -- teardown ------------------------------------------------------------------------

    def cleanup(self) -> None:
        for process in self._popens:
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
        daemons = [p for p in self.lock_pids() if alive(p) and _is_daemon(p)]
        for pid in daemons:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and any(alive(p) for p in daemons):
            time.sleep(0.05)
        for pid in daemons:
            if alive(pid):
                _signal(pid, signal.SIGKILL)
        for pgid in self._groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _is_daemon(pid: int) -> bool:
    try:
        return b"roost.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


@pytest.fixture
def e2e(roost_env: Path, tmp_path: Path) -> Iterator[E2E]:
    """The test's world; every daemon and process it started is stopped at the end."""
    world = E2E(roost_env, tmp_path)
    try:
        yield world
    finally:
        world.cleanup()
