"""Connections from another user are refused (SO_PEERCRED), even when the socket is reachable."""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import pytest
import trio

from roost.daemon._paths import ensure_private_dir
from roost.daemon.rpc._server import Daemon
from roost.protocol import ErrorCode, NotPrivate
from roost.protocol.trio_client import open_client

_SYSTEM_PYTHON = "/usr/bin/python3"

_AS_NOBODY = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
data = b""
try:
    s.sendall(bytes([0x94, 0, 1, 0xa6]) + b"status" + bytes([0x90]))
    while chunk := s.recv(65536):
        data += chunk
except ConnectionError:
    pass  # the daemon may close before or while we send
sys.stdout.buffer.write(data)
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(_SYSTEM_PYTHON),
    reason="needs root to connect as another user",
)
async def test_another_user_is_refused(daemon: Daemon) -> None:
    # Open the way to the socket so that only the uid check stands between.
    os.chmod(daemon.socket_path.parent, 0o755)
    os.chmod(daemon.socket_path, 0o777)
    result = await trio.run_process(
        [_SYSTEM_PYTHON, "-c", _AS_NOBODY, str(daemon.socket_path)],
        capture_stdout=True,
        capture_stderr=True,
        preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)),
        cwd="/",
    )
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(result.stdout)
    messages = list(unpacker)
    assert len(messages) == 1, messages
    kind, method, params = messages[0]
    assert (kind, method) == (2, "error")
    assert params[0]["code"] == ErrorCode.INVALID_MESSAGE
    assert "other users" in params[0]["message"]
    # The owner is still served.
    async with open_client(daemon.socket_path) as client:
        assert (await client.call("status"))["pid"] == os.getpid()


def test_private_folder_modes(tmp_path: Path) -> None:
    """The folder is created 0700 and a folder others can write to is refused."""
    private = tmp_path / "p"
    ensure_private_dir(private)
    assert private.stat().st_mode & 0o777 == 0o700
    open_dir = tmp_path / "o"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(NotPrivate):
        ensure_private_dir(open_dir)
