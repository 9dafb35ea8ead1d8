"""The daemon process itself: one per user, its socket, its log, and secrets kept out of files."""

from __future__ import annotations

import re
import secrets
import socket
import stat
import subprocess
import sys
from pathlib import Path

from .conftest import E2E, alive


def started_pid(e2e: E2E) -> int:
    """``roost daemon``: the pid it says it started."""
    out = e2e.ok("daemon").stdout.strip()
    match = re.fullmatch(rf"started roost daemon \(pid (\d+)\) on {re.escape(str(e2e.socket))}", out)
    assert match, out
    return int(match.group(1))


def test_one_daemon_per_user_on_a_private_socket(e2e: E2E) -> None:
    # A socket folder that does not exist yet: the daemon makes it, private.
    e2e.socket = e2e.short / "private" / "s.sock"
    e2e.env["ROOST_SOCKET"] = str(e2e.socket)

    pid = started_pid(e2e)

    assert alive(pid)
    assert e2e.status()["pid"] == pid
    mode = e2e.socket.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(e2e.socket.parent.stat().st_mode) == 0o700
    assert Path(str(e2e.socket) + ".lock").read_text().strip() == str(pid)

    again = e2e.ok("daemon")
    assert again.stdout.strip() == f"a roost daemon is already running (pid {pid})"
    second = subprocess.run(
        [sys.executable, "-m", "roost.daemon", "--socket", str(e2e.socket)],
        env=e2e.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
    )
    assert second.returncode == 1
    assert "already" in second.stderr and f"pid {pid}" in second.stderr
    # The first daemon is untouched and still answers.
    assert e2e.status()["pid"] == pid
    assert e2e.socket.exists()


def test_a_stale_socket_file_does_not_stop_a_new_daemon(e2e: E2E) -> None:
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(e2e.socket))
    left.close()
    assert stat.S_ISSOCK(e2e.socket.stat().st_mode)
    nobody = e2e.roost("status")
    assert nobody.returncode == 10 and "no roost daemon" in nobody.stderr

    pid = started_pid(e2e)

    assert e2e.status()["pid"] == pid


def test_the_log_has_the_daemon_and_never_the_api_key(e2e: E2E) -> None:
    key = "sk-ant-e2e-" + secrets.token_hex(16)
    env = dict(e2e.env, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL="http://127.0.0.1:9")

    # The daemon this starts has the key (and a base URL where nothing listens).
    done = e2e.roost("dispatch", "--yes", "say hello", "--model", "anthropic/claude-test", env=env, timeout=60)

    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("■ error") and "cannot reach" in last
    assert "listening on" in e2e.log_file.read_text()
    e2e.ok("stop")
    files = [
        path
        for folder in (e2e.short, *(Path(e2e.env[v]) for v in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")))
        for path in folder.rglob("*")
        if path.is_file()
    ]
    database = Path(e2e.env["XDG_STATE_HOME"]) / "roost" / "roost.db"
    assert e2e.log_file in files and database in files
    # The run is in the database, so these are the files the daemon wrote.
    assert b"claude-test" in b"".join(p.read_bytes() for p in files if p.name.startswith("roost.db"))
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    assert key not in done.stdout + done.stderr
