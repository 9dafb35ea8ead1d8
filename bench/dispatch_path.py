"""The path of a dispatch: the stops between the RPC handler and the first model request.

A daemon runs in this process (a real socket, a real store, the scripted model) and a
client dispatches one task. A profiler records, from the moment ``RunsApi.dispatch`` is
entered until a provider's ``stream`` is, the causal chain of the model call: the stack of
roost frames (daemon and loop) at ``stream``, with, in front of it, the stack that spawned
each trio task on the way (the task that runs the model call was started by a run's
nursery, which was started by the handler's ``start_run``). Frames in a row in one file are
one stop. Helpers that were called and returned (reading the folder, settling, composing
the prompt) are not on the chain: they are listed apart as the planner's sub-steps.

Figures: the stops on the chain (target: at most 8), and the files entered twice on it
(target: none).

    uv run python bench/dispatch_path.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PACKAGE = str(ROOT / "roost")
OURS = (os.path.join(PACKAGE, "daemon"), os.path.join(PACKAGE, "loop"))
MAX_STOPS = 8
PLANNER = os.path.join("runs", "_plan.py")


def _ours(frame: FrameType | None) -> bool:
    return frame is not None and frame.f_code.co_filename.startswith(OURS)


def _stack(frame: FrameType | None) -> list[tuple[str, str]]:
    """(file, function) of our frames from the outermost to ``frame``."""
    out = []
    while frame is not None:
        if _ours(frame):
            out.append((os.path.relpath(frame.f_code.co_filename, PACKAGE), frame.f_code.co_qualname))
        frame = frame.f_back
    return out[::-1]


class Tracer:
    """Follows the dispatch from its handler to the first model request."""

    def __init__(self) -> None:
        self.on = False
        #: The stack that spawned each coroutine (by its code), as it was at the spawn.
        self.spawned: dict[CodeType, list[tuple[str, str]]] = {}
        #: The chain at the first model request (None: not reached yet).
        self.chain: list[tuple[str, str]] | None = None
        #: What the planner called in other files (and which returned to it).
        self.planning: list[tuple[str, str]] = []

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_qualname == "RunsApi.dispatch":
            self.on = True
        if not self.on or self.chain is not None:
            return
        if code.co_name in ("start_soon", "start") and "trio" in code.co_filename and _ours(frame.f_back):
            fn = frame.f_locals.get("async_fn")
            target = getattr(fn, "__code__", None) or getattr(getattr(fn, "__func__", None), "__code__", None)
            if target is not None:
                self.spawned[target] = self._full(frame.f_back)
        elif code.co_name == "stream" and code.co_filename.startswith(os.path.join(PACKAGE, "daemon", "providers")):
            self.chain = self._full(frame)
            self.on = False
        elif _ours(frame) and frame.f_back is not None and frame.f_back.f_code.co_filename.endswith(PLANNER):
            called = _stack(frame)[-1]
            if called[0] != os.path.join("daemon", "runs", "_plan.py") and called not in self.planning:
                self.planning.append(called)

    def _full(self, frame: FrameType | None) -> list[tuple[str, str]]:
        """The stack of ``frame``, behind the stack that spawned its task."""
        stack = _stack(frame)
        if not stack:
            return []
        root = frame
        while root is not None and root.f_back is not None and _ours(root.f_back):
            root = root.f_back
        assert root is not None
        return self.spawned.get(root.f_code, []) + stack


def stops(chain: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """The chain as stops: frames in a row in one file are one."""
    out: list[tuple[str, list[str]]] = []
    for file, function in chain:
        if out and out[-1][0] == file:
            if function not in out[-1][1]:
                out[-1][1].append(function)
        else:
            out.append((file, [function]))
    return out


async def follow(tracer: Tracer, home: Path) -> None:
    from roost.daemon.rpc._server import Daemon
    from roost.protocol.trio_client import open_client

    project = home / "project"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    socket = home / "roost.sock"
    daemon = Daemon(socket, home / "roost.db")
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.serve)
        async with open_client(socket) as client:
            sys.setprofile(tracer.profile)
            try:
                await client.call("dispatch", task="say hi", cwd=str(project), model="scripted/demo", yes=True)
                with trio.fail_after(10):
                    while tracer.chain is None:
                        await trio.sleep(0.01)
            finally:
                sys.setprofile(None)
        daemon.stopping.set()


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for name, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data")):
            os.environ[name] = str(home / sub)
        os.environ["HOME"] = str(home)
        tracer = Tracer()
        trio.run(follow, tracer, home)
    assert tracer.chain is not None
    path = stops(tracer.chain)
    files = [file for file, _ in path]
    again = sorted({f for f in files if files.count(f) > 1})
    print("dispatch path: RPC handler -> first model request")
    for n, (file, functions) in enumerate(path, 1):
        print(f"  {n}. {file}: {', '.join(functions)}")
    print("  the planner's sub-steps (each returns to it):")
    for file, function in tracer.planning:
        print(f"     {file}: {function}")
    print(f"stops: {len(path)} (target <= {MAX_STOPS}); files entered twice: {again or 'none'}")
    return 0 if len(path) <= MAX_STOPS and not again else 1


if __name__ == "__main__":
    raise SystemExit(main())
