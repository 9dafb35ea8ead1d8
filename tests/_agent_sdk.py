"""The clients from npm some tests drive roost with, installed the first time a test needs
them, as the test MCP servers are (``_servers``): Anthropic's Claude Agent SDK for
TypeScript (``@anthropic-ai/claude-agent-sdk``), the Agent Client Protocol's SDK
(``@agentclientprotocol/sdk``) and the MCP Inspector (``@modelcontextprotocol/inspector``,
whose ``--cli`` mode calls an MCP server's tools).

Pinned versions, into ``.cache/test-agent-sdk/`` at the repository root (git ignores it),
without optional packages (the Agent SDK's are Claude Code's own native binary for each
platform: the tests give the SDK roost as the Claude Code executable instead). A file lock
keeps two test processes from installing at once; where npm is missing or an install fails,
the test fails and says why.
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
ACP_PACKAGE = "@agentclientprotocol/sdk@2.4.0"
ACP_SDK = ROOT / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector@2.12.0"
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
#: What the first run installs, as the test run's header says it.
INSTALLS = (
    f"the Claude Agent SDK {PACKAGE} (npm, without its optional native binaries), {ACP_PACKAGE} "
    f"and {INSPECTOR_PACKAGE}, about 210 MB"
)


def installed() -> bool:
    """Whether all three are in place."""
    return SDK.is_file() and ACP_SDK.is_file() and INSPECTOR.is_file()


def ensure_agent_sdk() -> Path:
    """The Claude Agent SDK's entry module (installed now if it is not); fails the test
    otherwise."""
    return _ensure(PACKAGE, SDK)


def ensure_acp_sdk() -> Path:
    """The folder whose ``node_modules`` holds the ACP SDK (installed now if it is not)."""
    _ensure(ACP_PACKAGE, ACP_SDK)
    return ROOT


def ensure_inspector() -> Path:
    """The MCP Inspector's command (installed now if it is not)."""
    return _ensure(INSPECTOR_PACKAGE, INSPECTOR)


def _ensure(package: str, entry: Path) -> Path:
    if entry.is_file():
        return entry
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry.is_file():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail(f"npm is not on PATH: install Node.js 18 or later (with npm) to test with {package}", pytrace=False)
            argv = [npm, "install", "--prefix", str(ROOT), "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error", package]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip()[-2000:]
                pytest.fail(f"installing {package} failed: {' '.join(argv)}\n{said}", pytrace=False)
    return entry
