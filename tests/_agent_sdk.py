"""Anthropic's Claude Agent SDK for TypeScript (``@anthropic-ai/claude-agent-sdk`` from npm),
installed the first time a test needs it, as the test MCP servers are (``_servers``).

A pinned version, into ``.cache/test-agent-sdk/`` at the repository root (git ignores it),
without its optional packages (they are Claude Code's own native binary for each platform:
the tests give the SDK roost as the Claude Code executable instead). A file lock keeps two
test processes from installing at once; where npm is missing or the install fails, the test
fails and says why.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / ".cache" / "test-agent-sdk"
PACKAGE = "@anthropic-ai/claude-agent-sdk@0.3.332"
SDK = ROOT / "node_modules" / "@anthropic-ai" / "claude-agent-sdk" / "sdk.mjs"
#: What :func:`ensure_agent_sdk` installs, as the test run's header says it.
INSTALLS = f"the Claude Agent SDK {PACKAGE} (npm, without its optional native binaries), about 70 MB"


def ensure_agent_sdk() -> Path:
    """The SDK's entry module (installed now if it is not); fails the test otherwise."""
    if SDK.is_file():
        return SDK
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not SDK.is_file():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not on PATH: install Node.js 18 or later (with npm) to run the Agent SDK test", pytrace=False)
            argv = [npm, "install", "--prefix", str(ROOT), "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error", PACKAGE]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip()[-2000:]
                pytest.fail(f"installing the Agent SDK failed: {' '.join(argv)}\n{said}", pytrace=False)
    return SDK
