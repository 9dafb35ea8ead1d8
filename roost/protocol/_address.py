"""Where the daemon's socket lives.

``ROOST_SOCKET`` wins; else ``$XDG_RUNTIME_DIR/roost/roost.sock``; else a per-user folder in
the temp dir. Plain strings and ``os.path``, without pathlib, tempfile or platformdirs, so
that the CLI starts fast.
"""

from __future__ import annotations

import os


def default_socket_path() -> str:
    """The socket path a client connects to and the daemon listens on by default."""
    explicit = os.environ.get("ROOST_SOCKET")
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "roost", "roost.sock")
    temp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(temp, f"roost-{os.getuid()}", "roost.sock")
