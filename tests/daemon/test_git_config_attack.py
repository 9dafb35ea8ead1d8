"""A repository's git config names programs; the daemon runs none of them.

Each project below arrives with a ``.git/config`` (or a tracked ``.gitattributes``) that
makes git run a program writing a marker outside the project: ``core.fsmonitor`` (git runs
it at a mere ``git ls-files``), ``core.hooksPath``, ``core.pager``, ``core.sshCommand``,
``diff.external``, a ``filter.<name>.clean`` that ``.gitattributes`` names, an
``include.path`` to a file setting ``core.fsmonitor``, and an alias. One real daemon then
dispatches in every project: a plan, untrusted (the repo map lists the files), a run in the
folder once trusted, and an agent run calling glob and grep. No marker may appear, and the
listings must still be git's (tracked and untracked files, ignored ones left out).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, text, trust, write_script

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
#: Hooks git knows; core.hooksPath points at a folder holding each of them.
_HOOKS = (
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit prepare-commit-msg commit-msg "
    "post-commit pre-rebase post-checkout post-merge pre-push pre-receive update proc-receive post-receive "
    "post-update reference-transaction push-to-checkout pre-auto-gc post-rewrite sendemail-validate "
    "fsmonitor-watchman p4-changelist p4-prepare-changelist p4-post-changelist p4-pre-submit post-index-change"
).split()


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, env={**os.environ, **_IDENTITY})


def program(where: Path, name: str, markers: Path) -> str:
    """An executable that notes it ran (in ``markers``, outside every project)."""
    path = where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{markers / name.replace("/", "-")}"\nexit 0\n')
    path.chmod(0o755)
    return str(path)


def project(root: Path, name: str, tools: Path, markers: Path) -> Path:
    """A committed project whose git config then runs ``tools/<name>`` the way ``name`` says."""
    folder = root / name
    folder.mkdir(parents=True)
    git(folder, "init", "-q")
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("def main():\n    return 'needle'\n")
    (folder / ".gitignore").write_text("*.log\n")
    (folder / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git(folder, "add", ".")
    git(folder, "commit", "-qm", "start")
    (folder / "notes.txt").write_text("needle, untracked\n")
    (folder / "debug.log").write_text("needle, ignored\n")
    evil = program(tools, name, markers)
    configs = {
        "fsmonitor": f'[core]\n\tfsmonitor = "{evil}"\n',
        "hooksPath": f'[core]\n\thooksPath = "{tools / "hooks"}"\n',
        "pager": f'[core]\n\tpager = "{evil}"\n[pager]\n\tls-files = "{evil}"\n\tstatus = "{evil}"\n',
        "sshCommand": f'[core]\n\tsshCommand = "{evil}"\n[remote "origin"]\n\turl = ssh://example.invalid/x\n',
        "diff.external": f'[diff]\n\texternal = "{evil}"\n[diff "evil"]\n\tcommand = "{evil}"\n\ttextconv = "{evil}"\n',
        "filter": f'[filter "evil"]\n\tclean = "{evil}"\n\tsmudge = "{evil}"\n\tprocess = "{evil}"\n',
        "include.path": f'[include]\n\tpath = "{tools / "included"}"\n',
        "alias": f'[alias]\n\tls = "!{evil}"\n\tst = "!{evil}"\n\tfiles = "!{evil}"\n',
    }
    with open(folder / ".git" / "config", "a") as f:
        f.write(configs[name])
    if name == "hooksPath":
        for hook in _HOOKS:
            program(tools / "hooks", hook, markers)
    if name == "include.path":
        (tools / "included").write_text(f'[core]\n\tfsmonitor = "{evil}"\n')
    return folder


async def run(client: TrioClient, folder: Path, *responses: list[dict[str, Any]], **params: Any) -> list[dict[str, Any]]:
    """A scripted run in ``folder`` (the script beside it, not in the listing); its events."""
    count = len(list(folder.parent.glob("script-*")))
    model = write_script(folder.parent, *responses, name=f"script-{folder.name}-{count}.json")
    started = await client.call("dispatch", task="look around", model=model, cwd=str(folder), attach=True, **params)
    return await events_until(client, finished(started["run"]), timeout=30)


def call(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


async def test_a_repositorys_git_config_runs_nothing_at_dispatch_glob_grep_or_the_repo_map(
    client: TrioClient, tmp_path: Path
) -> None:
    markers, tools = tmp_path / "markers", tmp_path / "tools"
    markers.mkdir()
    names = ["fsmonitor", "hooksPath", "pager", "sshCommand", "diff.external", "filter", "include.path", "alias"]
    folders = [project(tmp_path / "projects", name, tools, markers) for name in names]
    for folder in folders:
        plan = await run(client, folder, [text("1. Nothing to do. Files: src/app.py")], mode="plan")
        started = next(e for e in plan if e["type"] == "run.started")
        assert any(layer["name"] == "repo map" for layer in started["prompt"])
        prompt = await client.call("prompt", cwd=str(folder), mode="plan")
        assert "src/app.py\n  def main()" in prompt["text"] and "notes.txt" in prompt["text"]
        assert "debug.log" not in prompt["text"]

        await trust(client, folder)
        await run(client, folder, [text("Trusted, and nothing to do.")], yes=True)

        agent = await run(
            client, folder, [call("glob", pattern="**/*"), call("grep", pattern="needle")], [text("done")], yes=True
        )
        results = {e["name"]: e["result"] for e in agent if e["type"] == "tool.finished"}
        assert sorted(results["glob"].splitlines()) == [".gitattributes", ".gitignore", "notes.txt", "src/app.py"]
        assert sorted(results["grep"].splitlines()) == [
            "notes.txt:1:needle, untracked", "src/app.py:2:    return 'needle'"
        ]
    ran = {marker.name: marker.read_text() for marker in markers.iterdir()}
    assert ran == {}, f"programs a repository named ran outside the sandbox: {ran}"
