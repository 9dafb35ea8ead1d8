"""Every test runs with its own socket, config, state and log dirs, and no provider keys."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests import _agent_sdk, _servers
from tests._disk import small_disk  # noqa: F401  (a fixture for every test folder)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Say, before the first test (even with -q), what the tests that need them will
    install (once)."""
    missing = [
        what
        for what, there in ((_servers.INSTALLS, _servers.installed()), (_agent_sdk.INSTALLS, _agent_sdk.installed()))
        if not there
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing and reporter is not None:
        reporter.write_line(f"first run: the tests that need them install {'; '.join(missing)}, into .cache/ (later runs reuse them)")


@pytest.fixture(autouse=True)
def roost_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Point ROOST_SOCKET and the XDG dirs at temp folders; drop provider keys and the
    user's ROOST_MODEL and ROOST_TIMEOUT.

    The socket lives in a short folder under /tmp because AF_UNIX paths are limited to
    about 107 bytes and pytest's tmp paths are long.
    """
    short = Path(tempfile.mkdtemp(prefix="roost-", dir="/tmp"))
    monkeypatch.setenv("ROOST_SOCKET", str(short / "s.sock"))
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for var in list(os.environ):
        if var.startswith(("ANTHROPIC_", "OPENAI_", "ROOST_MODEL", "ROOST_TIMEOUT")):
            monkeypatch.delenv(var)
    try:
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)
