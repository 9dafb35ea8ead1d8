"""Socket activation: the daemon serves a listening socket systemd passes as fd 3 (LISTEN_FDS)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from roost.protocol import Client


def _activate(path: str, listener: socket.socket, state: Path) -> subprocess.Popen[bytes]:
    fd = listener.fileno()
    env = {**os.environ, "XDG_STATE_HOME": str(state), "LISTEN_FDS": "1"}
    env.pop("ROOST_SOCKET", None)
    # As systemd does: the socket on fd 3, LISTEN_PID the daemon's own pid (a small
    # launcher moves the socket to fd 3, sets LISTEN_PID and execs the daemon in its place).
    return subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, str(fd)], env=env, pass_fds=(fd,), stderr=subprocess.PIPE
    )


_LAUNCHER = """
import os, sys
os.dup2(int(sys.argv[1]), 3)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.executable, [sys.executable, "-m", "roost.daemon"])
"""


def test_a_passed_socket_is_served_and_left_for_the_next_activation(tmp_path: Path) -> None:
    path = os.environ["ROOST_SOCKET"]
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    try:
        for _ in range(2):
            daemon = _activate(path, listener, tmp_path / "state")
            try:
                with Client.connect(path, timeout=15) as client:
                    assert client.call("status")["socket"] == path
                    run = client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(tmp_path))
                    assert run["session"]
                    client.call("shutdown")
                assert daemon.wait(15) == 0
            finally:
                if daemon.poll() is None:
                    daemon.kill()
                    daemon.wait()
                assert daemon.stderr is not None
                daemon.stderr.close()
            # systemd owns the socket: it is still there, listening, for the next start.
            assert os.path.exists(path)
    finally:
        listener.close()
