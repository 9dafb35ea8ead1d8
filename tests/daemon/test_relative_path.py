"""No program is found through a relative PATH entry.

A program is looked up on a child's PATH from the child's folder, the project: with
``./bin`` (or ``bin``, or an empty entry: the folder itself) on the PATH of the daemon or of
the dispatching terminal, the daemon would start the repository's own ``bin/bwrap``,
``bin/bash`` or ``bin/git``, outside any sandbox. Here a project holds such programs (each
writes a marker outside the project), and a real daemon, started from the project's folder
with that PATH, runs a command (sandboxed and not), a glob and a user's hook for a dispatch
that carries that PATH: the real programs run, the project's never.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.runs._environ import find_program, tool_environment
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import bash, events_until, finished, serving, text, write_script

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)")


def fake(path: Path, markers: Path) -> None:
    """A program that only notes it ran, and says so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{markers / path.name}"\necho "the project\'s {path.name}"\n')
    path.chmod(0o755)


async def run(client: TrioClient, project: Path, env: dict[str, str], **params: Any) -> dict[str, str]:
    """A scripted run calling bash and glob in ``project``; their results by tool."""
    steps = [bash("echo ran-$((40 + 2))"), {"type": "tool_use", "name": "glob", "input": {"pattern": "*.txt"}}]
    model = write_script(project.parent, steps, [text("done")], name=f"script-{params.get('sandbox', 'on')}.json")
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, yes=True, env=env,
                                **params)
    events = await events_until(client, finished(started["run"]), timeout=30)
    return {e["name"]: e["result"] for e in events if e["type"] == "tool.finished"}


@pytest.mark.parametrize("relative", ["./bin", "bin", ""])
async def test_the_projects_own_bash_bwrap_and_git_never_run(
    relative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markers, project = tmp_path / "markers", tmp_path / "project"
    markers.mkdir()
    project.mkdir()
    (project / "tracked.txt").write_text("x\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, env=env)
    for folder in (project / "bin", project):  # "" on PATH is the folder itself
        for name in ("bash", "bwrap", "git"):
            fake(folder / name, markers)
    # The user's own hook, run with bash for every tool call.
    hooked = tmp_path / "hooked"
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    hook = {"matcher": "", "hooks": [{"type": "command", "command": f"echo hook >> {hooked}"}]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [hook]}}))

    path = f"{relative}:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.chdir(project)  # the daemon's own folder: its own lookups would land here
    async with serving(tmp_path / "roost.db") as daemon, open_client(daemon.socket_path) as client:
        status = await client.call("status")
        assert status["sandbox"]["available"] and os.path.isabs(status["sandbox"]["program"])
        sandboxed = await run(client, project, {**os.environ, "PATH": path})
        unsandboxed = await run(client, project, {**os.environ, "PATH": path}, sandbox="off")
    for results in (sandboxed, unsandboxed):
        assert results == {"bash": "ran-42\n", "glob": "tracked.txt"}
    assert hooked.read_text() == "hook\n" * 4
    ran = {marker.name: marker.read_text() for marker in markers.iterdir()}
    assert ran == {}, f"the project's programs ran: {ran}"


def test_the_tool_environment_keeps_the_absolute_path_entries_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tool_environment({"PATH": "./bin:bin::/usr/bin:/bin:", "A": "1"}) == {"PATH": "/usr/bin:/bin", "A": "1"}
    assert tool_environment({"PATH": "bin:."})["PATH"] == tool_environment({})["PATH"] == os.defpath
    fake(tmp_path / "bin" / "only-here", tmp_path)
    fake(tmp_path / "only-here", tmp_path)
    monkeypatch.chdir(tmp_path)
    assert find_program("only-here", "bin:./bin::.") is None
    assert find_program("only-here", f"bin:{tmp_path / 'bin'}") == str(tmp_path / "bin" / "only-here")
