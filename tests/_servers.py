"""The real MCP servers the tests talk to, installed the first time a test needs them.

Pinned versions, into ``.cache/test-servers/`` at the repository root (git ignores it), a
folder the tests own: ``@modelcontextprotocol/server-everything`` from npm (run as ``node
.../dist/index.js``) and ``mcp-server-time`` from PyPI in a venv of its own (it must not
change the project's locked packages). A file lock keeps two test processes from installing
at once; later runs find them in place. Where node or npm is missing, or an install fails,
the test that needs the server fails and says why (never skips).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / ".cache" / "test-servers"
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
TIME = "mcp-server-time==2026.10.19"
EVERYTHING_JS = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TIME_EXE = ROOT / "venv" / "bin" / "mcp-server-time"


#: What :func:`ensure` installs, as the test run's header says it.
INSTALLS = f"the MCP test servers {EVERYTHING} (npm) and {TIME} (PyPI), about 75 MB"


def installed() -> bool:
    """Whether both servers are in place."""
    return EVERYTHING_JS.is_file() and TIME_EXE.is_file()


def ensure() -> None:
    """Both servers in place (installed now if they are not); fails the test otherwise."""
    if installed():
        return
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not EVERYTHING_JS.is_file():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not on PATH: install Node.js 20 or later (with npm) to run the MCP tests", pytrace=False)
            _run([npm, "install", "--prefix", str(ROOT), "--no-audit", "--no-fund", "--loglevel=error", EVERYTHING])
        if not TIME_EXE.is_file():
            _venv_install(ROOT / "venv", TIME)


def _venv_install(venv: Path, requirement: str) -> None:
    # uv, when the tests run under it (it says where it is in $UV), else the stdlib's venv and pip.
    uv = os.environ.get("UV") or shutil.which("uv")
    python = venv / "bin" / "python"
    if uv:
        _run([uv, "venv", "--quiet", "--allow-existing", str(venv)])
        _run([uv, "pip", "install", "--quiet", "--python", str(python), requirement])
    else:
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "--quiet", requirement])


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-2000:]
        pytest.fail(f"installing a test MCP server failed: {' '.join(argv)}\n{said}", pytrace=False)
