"""A real daemon (in this process, on a real Unix socket) and helpers to script its model."""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator

import pytest
import trio

from roost.daemon._paths import state_dir
from roost.daemon.folder._trust import Trust, TrustStore, Widening, digest
from roost.daemon.rpc._server import Daemon
from roost.protocol.trio_client import TrioClient, open_client
from tests.fakes.anthropic_server import serve_anthropic


@pytest.fixture
async def daemon(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Daemon]:
    """A daemon serving on ROOST_SOCKET with its database in the test's temp dir."""
    d = Daemon(Path(os.environ["ROOST_SOCKET"]), tmp_path / "roost.db")
    done = trio.Event()

    async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await d.serve(task_status=task_status)
        finally:
            done.set()

    await nursery.start(serve)
    yield d
    d.stopping.set()
    with trio.fail_after(10):
        await done.wait()


@pytest.fixture
async def client(daemon: Daemon) -> AsyncIterator[TrioClient]:
    """A trio client connected to the daemon."""
    async with open_client(daemon.socket_path) as c:
        yield c


@asynccontextmanager
async def serving(db: Path) -> AsyncIterator[Daemon]:
    """A daemon on ROOST_SOCKET over ``db``, stopped (gracefully) on exit."""
    d = Daemon(Path(os.environ["ROOST_SOCKET"]), db)
    async with trio.open_nursery() as nursery:
        await nursery.start(d.serve)
        try:
            yield d
        finally:
            d.stopping.set()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project folder for sessions to work in."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("a.txt", "b.txt", "c.py"):
        (root / name).write_text(f"{name}\n")
    return root


def trusting(*files: Path) -> Trust:
    """A trust snapshot in which ``files`` are trusted with their content as it is now."""
    return Trust({"/": {str(f): digest(f.read_bytes()) for f in files}})


def trusting_shown(widening: Iterable[Widening]) -> Trust:
    """A trust snapshot in which what ``widening`` reports is trusted as it is now: its
    files and the project files its entries run, as ``roost trust`` records them."""
    files = {item.source: item.digest for item in widening}
    files |= {s.path: s.digest for item in widening for s in item.runs}
    return Trust({"/": files})


def trust_files(root: Path, *files: Path) -> None:
    """Record ``files`` of the project ``root`` as trusted as they are now, in the store the
    daemon reads (what ``roost trust --yes`` records for them)."""
    TrustStore(state_dir() / "trust.json").add(str(root), {str(f): digest(f.read_bytes()) for f in files})


async def trust(client: TrioClient, folder: Path) -> dict[str, Any]:
    """Trust ``folder``'s files as they are now, as ``roost trust --yes`` does."""
    shown = await client.call("trust.show", cwd=str(folder))
    return await client.call("trust.add", cwd=str(folder), files=shown["files"])


def user_dir() -> Path:
    """The user's roost config folder (``~/.config/roost``) under the test's XDG folders."""
    return Path(os.environ["XDG_CONFIG_HOME"]) / "roost"


def write(path: Path, content: str) -> Path:
    """Write ``content`` to ``path``, making its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def write_script(folder: Path, *responses: list[dict[str, Any]], name: str = "script.json", delay: float = 0) -> str:
    """Write a scripted-provider file; return its model id (``scripted/ABSOLUTE_PATH``).
    ``delay``: seconds each reply waits before it starts."""
    path = folder / name
    path.write_text(json.dumps({"responses": [{"content": list(r), "delay": delay} for r in responses]}))
    return f"scripted/{path}"


def text(t: str) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": t}


def bash(command: str, **extra: Any) -> dict[str, Any]:
    """A tool_use block calling bash."""
    return {"type": "tool_use", "name": "bash", "input": {"command": command, **extra}}


async def events_until(client: TrioClient, predicate: Any, *, timeout: float = 15) -> list[dict[str, Any]]:
    """Collect event maps from the client's notifications until ``predicate(event)``."""
    seen: list[dict[str, Any]] = []
    with trio.fail_after(timeout):
        async for note in client.notifications:
            if note.method != "event":
                seen.append({"type": note.method, **(note.params[0] if note.params else {})})
                continue
            event = note.params[0]
            seen.append(event)
            if predicate(event):
                return seen
    raise AssertionError(f"connection ended before the expected event; saw {[e['type'] for e in seen]}")


def finished(run: str) -> Any:
    """Predicate: the run.finished event of ``run``."""
    return lambda e: e.get("type") == "run.finished" and e.get("run") == run


def stored(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the stored events (those with a seq)."""
    return [e for e in events if e.get("seq") is not None]


@pytest.fixture
def anthropic(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fake Messages API answering "ok" to every call, which the daemon's Anthropic
    provider reaches (its key and URL in the test's environment, which dispatches send)."""
    reply = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}}
    with serve_anthropic([], default=reply) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server
