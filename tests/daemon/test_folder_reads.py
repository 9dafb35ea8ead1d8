"""A dispatch reads a folder as one pipeline: each file it reads is opened once.

A real daemon process counts its own opens with an audit hook (installed by the command
that starts it, not by roost) while one dispatch of a custom command runs in a trusted
project that has every kind of file roost reads: config, agents, Claude Code's settings,
commands, skills, MCP servers, instructions, memory, a git repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from roost.daemon.folder._files import FileRefused, one_pass, read_bounded, read_head
from roost.protocol.trio_client import open_client

from .conftest import events_until, finished, trust_files, user_dir

#: Starts the daemon with an audit hook counting the opens of files under the folders
#: given, written out as JSON when the daemon exits.
COUNTING_DAEMON = """
import atexit, json, os, sys
under = tuple(sys.argv[1].split(os.pathsep))
counts = {}
def count(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = os.fsdecode(args[0])
        if path.startswith(under):
            counts[path] = counts.get(path, 0) + 1
sys.addaudithook(count)
out = sys.argv[2]
atexit.register(lambda: open(out, "w").write(json.dumps(counts)))
from roost.daemon.__main__ import main
sys.exit(main(sys.argv[3:]))
"""


def project_with_everything(root: Path) -> list[Path]:
    """A project (a git repository) with every kind of file a dispatch reads; the files
    trust records."""
    (root / ".git" / "refs").mkdir(parents=True)
    (root / ".git" / "objects").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    files = {
        ".roost/config.toml": '[permissions]\nallow = ["bash(ls:*)"]\n[mcp.servers.none]\ncommand = "true"\nenabled = false\n',
        ".roost/agents/reviewer.md": "---\nname: reviewer\ndescription: reviews\n---\nReview.\n",
        ".claude/agents/tester.md": "---\nname: tester\ndescription: tests\n---\nTest.\n",
        ".claude/settings.json": json.dumps({"permissions": {"allow": ["Read"]}}),
        ".claude/settings.local.json": json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}}),
        ".claude/commands/hi.md": "---\ndescription: say hi\n---\nSay hi to $ARGUMENTS.\n",
        ".claude/skills/notes/SKILL.md": "---\nname: notes\ndescription: keeps notes\n---\nKeep notes.\n",
        ".mcp.json": json.dumps({"mcpServers": {}}),
        "AGENTS.md": "Be kind.\n",
        "CLAUDE.md": "Be brief.\n",
        "a.txt": "a\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return [root / name for name in (".roost/config.toml", ".roost/agents/reviewer.md", ".claude/agents/tester.md",
                                      ".claude/settings.json", ".claude/settings.local.json", ".mcp.json")]


async def test_one_dispatch_opens_each_file_it_reads_once(tmp_path: Path) -> None:
    project = tmp_path / "project"
    trust_files(project, *project_with_everything(project))
    user = user_dir()
    (user / "agents").mkdir(parents=True, exist_ok=True)
    (user / "config.toml").write_text('[permissions]\nask = ["web_fetch"]\n')
    (user / "agents" / "mine.md").write_text("---\nname: mine\ndescription: my own\n---\nMine.\n")
    (user / "MEMORY.md").write_text("- the user likes short answers\n")
    socket = tmp_path / "counted.sock"
    counts_file = tmp_path / "opens.json"
    under = os.pathsep.join((str(project), str(user)))
    daemon = subprocess.Popen(
        [sys.executable, "-c", COUNTING_DAEMON, under, str(counts_file), "--socket", str(socket)],
        stdin=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(20):
            while not socket.exists():
                await trio.sleep(0.02)
        async with open_client(socket) as client:
            run = await client.call(
                "dispatch", task="/hi there", cwd=str(project), model="scripted/demo", yes=True, attach=True
            )
            events = await events_until(client, finished(run["run"]))
            await client.call("shutdown")
        with trio.fail_after(20):
            while daemon.poll() is None:
                await trio.sleep(0.02)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert events[-1]["reason"] == "done"
    opened = {os.path.relpath(path, tmp_path): n for path, n in json.loads(counts_file.read_text()).items()}
    # What the dispatch had to read, it read (else this test proves nothing) ...
    for name in (".roost/config.toml", ".claude/settings.json", ".claude/settings.local.json", ".mcp.json",
                 ".roost/agents/reviewer.md", ".claude/commands/hi.md", "AGENTS.md", "CLAUDE.md", ".git/HEAD"):
        assert f"project/{name}" in opened, name
    assert any(path.endswith("config.toml") and not path.startswith("project") for path in opened)
    # ... and each file once.
    assert {path: n for path, n in opened.items() if n > 1} == {}


def test_a_pass_serves_a_read_within_a_folder_only_what_was_read_from_where_it_leads(tmp_path: Path) -> None:
    project, secret = tmp_path / "project", tmp_path / "secret"
    project.mkdir()
    secret.write_text("key")
    (project / "inside").write_text("ok")
    link = project / "x"
    link.symlink_to(secret)
    with one_pass():
        assert read_bounded(link) == b"key"  # a read that may leave the folder (trusted)
        with pytest.raises(FileRefused):
            read_bounded(link, within=project)  # kept bytes are no way around the check
        link.unlink()
        link.symlink_to(project / "inside")
        assert read_bounded(link, within=project) == b"ok"  # it leads elsewhere now: read again
        assert read_head(project / "inside", 1) == b"o"
    # Outside the pass nothing is kept.
    (project / "inside").write_text("changed")
    assert read_bounded(link, within=project) == b"changed"
