"""A folder is read as one pipeline: one dispatch opens each of the folder's files once.

The daemon runs in a process of its own, started through a few lines that install an audit
hook (``sys.addaudithook``: every ``open`` and ``os.open`` raises an ``open`` event) writing
each opened path to a log before they run the daemon's own ``main``; nothing in roost knows it
is counted.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import AsyncIterator

import pytest
import trio

from roost.protocol.trio_client import TrioClient, open_client

from .conftest import events_until, finished, text, trust, user_dir, write, write_script

#: Runs the daemon with every path it opens for reading written to the log (argv[1]) as it
#: opens it (what the daemon writes, such as a session's transcript, is not a read of the
#: folder). The log is opened before the hook is installed, and written with os.write,
#: which raises no audit event: the hook never sees its own writes.
_COUNTING = """\
import os, sys
log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
def opened(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        if isinstance(args[2], int) and args[2] & os.O_ACCMODE != os.O_RDONLY:
            return
        os.write(log, os.fsencode(os.path.abspath(args[0])) + b"\\n")
sys.addaudithook(opened)
from roost.daemon.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


class Opens:
    """The log of the paths a daemon opened, read from a mark on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mark = 0

    def mark(self) -> None:
        """Count from here on."""
        self._mark = self.path.stat().st_size

    def since(self, folder: Path) -> collections.Counter[str]:
        """How often each file under ``folder`` was opened since the mark."""
        with self.path.open("rb") as log:
            log.seek(self._mark)
            paths = [os.fsdecode(line) for line in log.read().splitlines()]
        # Folders opened (to check and set their modes) are not files read.
        return collections.Counter(p for p in paths if Path(p).is_relative_to(folder) and not Path(p).is_dir())


@pytest.fixture
async def counted(tmp_path: Path, roost_env: Path) -> AsyncIterator[tuple[TrioClient, Opens]]:
    """A daemon in a process of its own that logs every path it opens, and a client of it."""
    log = tmp_path / "opens.log"
    socket = Path(os.environ["ROOST_SOCKET"])
    argv = [sys.executable, "-c", _COUNTING, str(log), "--socket", str(socket), "--database", str(roost_env / "roost.db")]
    daemon = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        with trio.fail_after(20):
            while not socket.exists():
                assert daemon.poll() is None, daemon.communicate()[1].decode()
                await trio.sleep(0.02)
        async with open_client(socket) as client:
            yield client, Opens(log)
    finally:
        daemon.terminate()
        daemon.communicate(timeout=10)


def a_whole_project(project: Path) -> None:
    """A project with every kind of file roost reads from a folder, and the user's own."""
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    write(project / ".roost" / "config.toml", """\
[permissions]
allow = ["read(**)"]
deny = ["bash(rm *)"]
[[hooks.pre_tool]]
match = "bash"
command = "bash .roost/hooks/check.sh"
[mcp.servers.notes]
command = "node"
args = ["tools/notes.js"]
""")
    write(project / ".roost" / "hooks" / "check.sh", "exit 0\n")
    write(project / "tools" / "notes.js", "// a server\n")
    write(project / ".roost" / "agents" / "reviewer.md", "---\ntools: [read, skill]\n---\nYou review.\n")
    write(project / ".claude" / "agents" / "helper.md", "---\ndescription: helps\n---\nYou help.\n")
    write(project / ".claude" / "settings.json", json.dumps({
        "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Bash(curl:*)"]},
        "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "bash .claude/hooks/after.sh"}]}]},
    }))
    write(project / ".claude" / "settings.local.json", json.dumps({"permissions": {"ask": ["Bash(git push:*)"]}}))
    write(project / ".claude" / "hooks" / "after.sh", "exit 0\n")
    write(project / ".claude" / "commands" / "review.md", "---\ndescription: Review a file\n---\nReview $1 for $2.\n")
    write(project / ".claude" / "commands" / "team" / "lint.md", "Lint everything.\n")
    write(project / ".mcp.json", json.dumps({"mcpServers": {"docs": {"command": "node", "args": ["server/index.js"]}}}))
    write(project / "server" / "index.js", "// another server\n")
    write(project / "AGENTS.md", "Run the tests before you finish.\n")
    write(project / "CLAUDE.md", "See @docs/style.md for the style.\n")
    write(project / "docs" / "style.md", "Short functions.\n")
    write(project / ".roost" / "MEMORY.md", "The tests live in tests/.\n")
    write(project / ".claude" / "skills" / "changelog" / "SKILL.md", "---\ndescription: Write a changelog\n---\nHow.\n")
    write(project / ".roost" / "skills" / "release" / "SKILL.md", "---\ndescription: Cut a release\n---\nHow.\n")
    write(project / "src" / "app.py", "def main():\n    pass\n")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    home = Path.home()
    write(user_dir() / "config.toml", '[permissions]\ndeny = ["bash(sudo *)"]\n')
    write(user_dir() / "MEMORY.md", "I like short answers.\n")
    write(home / ".claude" / "settings.json", json.dumps({"permissions": {"deny": ["Bash(shutdown:*)"]}}))
    write(home / ".claude" / "CLAUDE.md", "Be brief.\n")
    write(home / ".claude" / "commands" / "mine.md", "Mine.\n")
    write(home / ".claude" / "agents" / "planner.md", "---\ndescription: plans\n---\nYou plan.\n")
    write(home / ".claude" / "skills" / "notes" / "SKILL.md", "---\ndescription: Take notes\n---\nHow.\n")


#: The files of :func:`a_whole_project` a dispatch reads, each once.
READ = (
    ".roost/config.toml", ".roost/hooks/check.sh", "tools/notes.js", ".roost/agents/reviewer.md",
    ".claude/agents/helper.md", ".claude/settings.json", ".claude/settings.local.json", ".claude/hooks/after.sh",
    ".claude/commands/review.md", ".mcp.json", "server/index.js", "AGENTS.md", "CLAUDE.md", "docs/style.md",
    ".roost/MEMORY.md", ".claude/skills/changelog/SKILL.md", ".roost/skills/release/SKILL.md", "src/app.py",
    ".git/HEAD",
)
#: The user's files a dispatch reads, each once.
READ_OF_THE_USER = (
    "config/roost/config.toml", "config/roost/MEMORY.md", "home/.claude/settings.json", "home/.claude/CLAUDE.md",
    "home/.claude/commands/mine.md", "home/.claude/agents/planner.md", "home/.claude/skills/notes/SKILL.md",
)


async def test_one_dispatch_opens_each_file_of_the_folder_once(
    counted: tuple[TrioClient, Opens], project: Path, tmp_path: Path
) -> None:
    client, opens = counted
    a_whole_project(project)
    shown = await trust(client, project)
    assert shown["folder"] == str(project)
    model = write_script(tmp_path, [text("looks fine")], [text("still fine")])
    opens.mark()
    started = await client.call(
        "dispatch", task="/review src/app.py speed", agent="reviewer", model=model, cwd=str(project), attach=True
    )
    events = await events_until(client, finished(started["run"]))
    run = next(e for e in events if e["type"] == "run.started")
    assert run["command"]["name"] == "review" and run["agent"] == "reviewer"
    assert [layer["name"] for layer in run["prompt"]] == [
        "agent", "mode", "bootstrap", "instructions", "skills", "memory", "repo map", "tools",
    ]
    assert not [e for e in events if e["type"] == "project.untrusted"]
    counts = opens.since(tmp_path)
    assert {str(project / name) for name in READ} | {str(tmp_path / name) for name in READ_OF_THE_USER} <= set(counts)
    assert {path: n for path, n in counts.items() if n > 1} == {}

    # The next dispatch of the session reads the folder again, each file once again (the
    # prompt's files only if they changed, or may have: see PromptCache).
    opens.mark()
    again = await client.call("dispatch", task="and again", session=started["session"], agent="reviewer", model=model)
    await events_until(client, finished(again["run"]))
    counts = opens.since(tmp_path)
    assert str(project / ".roost" / "config.toml") in counts
    assert {path: n for path, n in counts.items() if n > 1} == {}
