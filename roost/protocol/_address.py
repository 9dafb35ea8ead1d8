"""Where the daemon's socket lives.

``ROOST_SOCKET`` wins; else ``$XDG_RUNTIME_DIR/roost/roost.sock``; else a per-user folder in
the temp dir. Computed without platformdirs so that the CLI starts fast.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def default_socket_path() -> Path:
    """The socket path a client connects to and the daemon listens on by default."""
    explicit = os.environ.get("ROOST_SOCKET")
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "roost" / "roost.sock"
    return Path(tempfile.gettempdir()) / f"roost-{os.getuid()}" / "roost.sock"
