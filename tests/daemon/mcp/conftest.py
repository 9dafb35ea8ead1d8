"""Real MCP servers for the tests: ``mcp-server-time`` (PyPI) and ``server-everything`` (npm).

They are installed the first time a test needs them (see ``tests/_servers.py``); a test that
cannot get one fails and says why (never skips).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import AsyncIterator

import pytest
import trio

from roost.daemon.mcp import McpManager, McpServerConfig
from tests._servers import EVERYTHING_JS, TIME_EXE, ensure

LOOPBACK = Path(__file__).resolve().parent / "loopback.cjs"


def _need(path: Path) -> None:
    ensure()
    if not path.is_file():
        pytest.fail(f"{path} is missing after installing the test MCP servers", pytrace=False)


def everything(name: str = "everything", **changes: object) -> McpServerConfig:
    """The everything server over stdio (``node .../dist/index.js stdio``)."""
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: install Node.js 20 or later", pytrace=False)
    _need(EVERYTHING_JS)
    fields: dict[str, object] = {"command": "node", "args": (str(EVERYTHING_JS), "stdio"), "source": "test"}
    return McpServerConfig(name=name, transport="stdio", **{**fields, **changes})  # type: ignore[arg-type]


def time_server(name: str = "time", **changes: object) -> McpServerConfig:
    """mcp-server-time over stdio, in UTC."""
    _need(TIME_EXE)
    fields: dict[str, object] = {"command": str(TIME_EXE), "args": ("--local-timezone", "UTC"), "source": "test"}
    return McpServerConfig(name=name, transport="stdio", **{**fields, **changes})  # type: ignore[arg-type]


@pytest.fixture
async def manager(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[McpManager]:
    """An McpManager in the test's nursery, closed at the end."""
    m = McpManager(nursery, tmp_path / "logs")
    yield m
    await m.aclose()


class HttpServer:
    """The everything server in streamable HTTP mode on 127.0.0.1."""

    def __init__(self, process: trio.Process, url: str, stdout: Path) -> None:
        self.process, self.url, self.stdout = process, url, stdout

    def config(self, name: str = "web", **changes: object) -> McpServerConfig:
        return McpServerConfig(name=name, transport="http", url=self.url, source="test", **changes)  # type: ignore[arg-type]


@pytest.fixture
async def http_everything(tmp_path: Path) -> AsyncIterator[HttpServer]:
    """``PORT=0 node --require loopback.cjs .../dist/index.js streamableHttp``; killed after."""
    everything()  # fails with the install hint when something is missing
    stdout, stderr = tmp_path / "http.stdout", tmp_path / "http.stderr"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = await trio.lowlevel.open_process(
            ["node", "--require", str(LOOPBACK), str(EVERYTHING_JS), "streamableHttp"],
            env={**os.environ, "PORT": "0"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    try:
        with trio.fail_after(15):
            while not (found := re.search(r"listening on port (\d+)", stderr.read_text())):
                if process.poll() is not None:
                    raise RuntimeError(f"the HTTP server exited: {stderr.read_text()}")
                await trio.sleep(0.02)
        yield HttpServer(process, f"http://127.0.0.1:{found.group(1)}/mcp", stdout)
    finally:
        process.kill()
        with trio.move_on_after(5):
            await process.wait()
