"""Trust binds what a trusted entry runs: a hook's ``.claude/hooks/check.sh``, an MCP
server's ``server.py``. Rewriting, removing or creating such a file makes the entry someone
else's word again, as a change to its own file would; the folder's setup names every file a
run must not change (``FolderSetup.protected``).

Real files, a real trust store, a real daemon: the hook writes which version of its script
ran into a marker file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roost.daemon._paths import state_dir
from roost.daemon.folder._setup import FolderSetup, load_folder
from roost.daemon.folder._trust import ABSENT, NO_TRUST, TrustStore
from roost.protocol.trio_client import TrioClient

from .conftest import bash, events_until, finished, text, trust, write, write_script

HOOK = 'bash "$CLAUDE_PROJECT_DIR"/.claude/hooks/check.sh'


def hook_settings(project: Path, *commands: str, name: str = "settings.json") -> Path:
    """``.claude/settings.json`` with a PreToolUse hook on Bash for each command."""
    groups = [{"matcher": "Bash", "hooks": [{"type": "command", "command": c} for c in commands]}]
    return write(project / ".claude" / name, json.dumps({"hooks": {"PreToolUse": groups}}))


def check_script(project: Path, version: str, name: str = "check.sh") -> Path:
    """The hook's script: it writes ``version`` into the marker."""
    return write(project / ".claude" / "hooks" / name, f'echo {version} >> "$CLAUDE_PROJECT_DIR/marker"\n')


def marker(project: Path) -> list[str]:
    path = project / "marker"
    return path.read_text().split() if path.exists() else []


def of_type(events: list[dict[str, Any]], type: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == type]


async def run_bash(client: TrioClient, project: Path, command: str) -> list[dict[str, Any]]:
    """A run whose model runs one bash command (approved ahead), then ends."""
    model = write_script(project, [bash(command)], [text("done")], name=f"s-{os.urandom(4).hex()}.json")
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, yes=True)
    return await events_until(client, finished(started["run"]), timeout=30)


def store() -> TrustStore:
    """The trust store the daemon reads."""
    return TrustStore(state_dir() / "trust.json")


def setup(cwd: Path) -> FolderSetup:
    """The folder's setup under the trust store as it is now."""
    return load_folder(str(cwd), dict(os.environ), store().snapshot())


def trust_now(root: Path) -> FolderSetup:
    """Trust ``root`` as ``roost trust --yes`` does: what its setup shows, recorded."""
    shown = load_folder(str(root), dict(os.environ), NO_TRUST)
    store().add(str(root), shown.trust_files)
    return setup(root)


def runs(found: FolderSetup, detail: str) -> dict[str, tuple[str, bool]]:
    """The files the item whose detail is ``detail`` runs: {path: (state, trusted)}."""
    [item] = [i for i in found.widening if i.detail == detail]
    return {s.path: (s.state, s.trusted) for s in item.runs}


def trusted(found: FolderSetup, detail: str) -> bool:
    [item] = [i for i in found.widening if i.detail == detail]
    return item.trusted


async def test_a_rewritten_hook_script_stops_the_hook_until_trusted_again(client: TrioClient, project: Path) -> None:
    settings = hook_settings(project, HOOK)
    script = check_script(project, "v1")
    await trust(client, project)
    # A command of the run (sandboxed, as a model's command is) rewrites the script the
    # trusted hook runs; the hook ran v1 before it.
    rewrite = f"printf '%s\\n' 'echo pwned >> \"$CLAUDE_PROJECT_DIR/marker\"' > {script}"
    await run_bash(client, project, rewrite)
    assert marker(project) == ["v1"]
    # Whether the sandbox let it or not, the rewritten script never runs.
    await run_bash(client, project, "true")
    assert "pwned" not in marker(project)

    # Rewritten from outside any run (a pull, an editor): the hook waits for the user.
    check_script(project, "v2")
    before = marker(project)
    events = await run_bash(client, project, "echo hi")
    assert marker(project) == before and of_type(events, "tool.finished")[0]["result"] == "hi\n"
    [notice] = of_type(events, "project.untrusted")
    [item] = notice["ignored"]
    assert (item["kind"], item["detail"], item["source"]) == ("hook", HOOK, str(settings))
    assert item["runs"] == [{"path": str(script), "state": "file", "trusted": False, "bound": True}]
    # The listing says which file changed: the script, not the settings.
    [entry] = (await client.call("trust.list"))["folders"]
    files = {f["path"]: f["current"] for f in entry["files"]}
    assert files == {str(settings): True, str(script): False}
    shown = await client.call("trust.show", cwd=str(project))
    assert shown["trusted"] and not shown["current"] and shown["files"][str(script)] != shown["files"][str(settings)]

    await trust(client, project)
    await run_bash(client, project, "echo hi")
    assert marker(project) == [*before, "v2"]


async def test_a_trusted_mcp_servers_script_is_bound(client: TrioClient, project: Path) -> None:
    server = write(project / "server.py", "print('v1')\n")
    mcp = write(project / ".mcp.json", json.dumps({"mcpServers": {"local": {"command": "python", "args": ["server.py"]}}}))
    shown = await client.call("trust.show", cwd=str(project))
    await trust(client, project)
    listed = {s["name"]: s for s in (await client.call("mcp.list", cwd=str(project)))["servers"]}
    assert listed["local"]["state"] != "untrusted"

    server.write_text("print('v2')\n")
    listed = {s["name"]: s for s in (await client.call("mcp.list", cwd=str(project)))["servers"]}
    assert listed["local"]["state"] == "untrusted"
    [entry] = (await client.call("trust.list"))["folders"]
    assert {f["path"]: f["current"] for f in entry["files"]} == {str(mcp): True, str(server): False}
    [item] = (await client.call("trust.show", cwd=str(project)))["items"]
    assert not item["trusted"] and item["runs"] == [{"path": str(server), "state": "file", "trusted": False, "bound": True}]
    # Before the folder was trusted, a bare word's file was shown and recorded, not yet bound.
    [item] = shown["items"]
    assert item["runs"] == [{"path": str(server), "state": "file", "trusted": True, "bound": False}]
    assert set(shown["files"]) == {str(mcp), str(server)}

    await trust(client, project)
    listed = {s["name"]: s for s in (await client.call("mcp.list", cwd=str(project)))["servers"]}
    assert listed["local"]["state"] != "untrusted"


def test_every_spelling_of_a_project_script_is_bound(project: Path) -> None:
    (project / ".git").mkdir()
    spellings = {
        "dollar": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/dollar.sh',
        "braces": "bash ${CLAUDE_PROJECT_DIR}/.claude/hooks/braces.sh --fast",
        "quoted": 'python3 "$CLAUDE_PROJECT_DIR/.claude/hooks/quoted.py"',
        "dotted": "./scripts/dotted.sh && echo done > log.txt",
        "relative": "bash scripts/relative.sh",
        "option": "lint --config=./scripts/option.toml",
        "in-cd": "cd scripts && ./in-cd.sh",
        "bare": "python3 bare.py",
    }
    paths = {
        "dollar": ".claude/hooks/dollar.sh", "braces": ".claude/hooks/braces.sh", "quoted": ".claude/hooks/quoted.py",
        "dotted": "scripts/dotted.sh", "relative": "scripts/relative.sh", "option": "scripts/option.toml",
        "in-cd": "scripts/in-cd.sh", "bare": "bare.py",
    }
    for name, path in paths.items():
        write(project / path, f"# {name}\n")
    hook_settings(project, *spellings.values())
    found = trust_now(project)
    assert all(trusted(found, command) for command in spellings.values())
    for name, command in spellings.items():
        assert runs(found, command)[str(project / paths[name])] == ("file", True), name
    # What a redirection writes is no script; the words of a command are.
    assert str(project / "log.txt") not in runs(found, spellings["dotted"])
    assert set(found.protected) >= {os.path.realpath(project / p) for p in paths.values()}

    # Each one rewritten: only the hook that runs it waits for the user.
    for name, path in paths.items():
        (project / path).write_text(f"# {name}, rewritten\n")
        now = setup(project)
        assert not trusted(now, spellings[name]), name
        assert all(trusted(now, c) for n, c in spellings.items() if n != name), name
        assert len(now.claude.hooks) == len(spellings) - 1
        (project / path).write_text(f"# {name}\n")
    # From a subfolder, a relative word is taken from the session's folder too.
    sub = project / "scripts"
    assert trusted(setup(sub), spellings["dollar"])
    assert runs(setup(sub), spellings["relative"])[str(project / "scripts" / "relative.sh")] == ("file", True)


def test_what_is_outside_the_project_is_not_bound_nor_protected(project: Path, tmp_path: Path) -> None:
    (project / ".git").mkdir()
    home_tool = write(Path.home() / "bin" / "x", "#!/bin/sh\n")
    outside = write(tmp_path / "elsewhere" / "tool.sh", "echo outside\n")
    (project / "tool").symlink_to(outside)
    commands = ["/usr/bin/env true", "~/bin/x", "./tool --check", "bash ../elsewhere/tool.sh"]
    hook_settings(project, *commands)
    found = trust_now(project)
    assert all(trusted(found, c) for c in commands)
    assert runs(found, "/usr/bin/env true") == {} and runs(found, "~/bin/x") == {}
    assert runs(found, "bash ../elsewhere/tool.sh") == {}
    # A link in the project that leads out is bound to where it leads, not to what is there.
    assert runs(found, "./tool --check") == {str(project / "tool"): ("outside", True)}
    assert [p for p in found.protected if not p.startswith(os.path.realpath(project) + os.sep)] == []
    assert os.path.realpath(outside) not in found.protected and str(home_tool) not in found.protected
    outside.write_text("echo changed outside\n")
    home_tool.write_text("#!/bin/sh\necho changed\n")
    assert all(trusted(setup(project), c) for c in commands)
    # Pointed elsewhere, the link is a change.
    (project / "tool").unlink()
    (project / "tool").symlink_to(home_tool)
    assert not trusted(setup(project), "./tool --check")
    # Pointed into the project, it is a project file that trust never saw.
    (project / "tool").unlink()
    (project / "tool").symlink_to(write(project / "inner.sh", "echo inner\n"))
    assert runs(setup(project), "./tool --check") == {str(project / "tool"): ("file", False)}


def test_a_missing_script_that_appears_later_untrusts_its_entry(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".claude" / "hooks").mkdir(parents=True)
    commands = ['"$CLAUDE_PROJECT_DIR"/.claude/hooks/later.sh', "./build/hook.js", "touch hook-ran"]
    hook_settings(project, *commands)
    found = trust_now(project)
    assert runs(found, commands[0]) == {str(project / ".claude" / "hooks" / "later.sh"): ("missing", True)}
    assert runs(found, commands[1]) == {str(project / "build" / "hook.js"): ("missing", True)}
    assert runs(found, commands[2]) == {}
    assert store().snapshot().folders[str(project)][str(project / "build" / "hook.js")] == ABSENT
    assert all(trusted(found, c) for c in commands)
    write(project / ".claude" / "hooks" / "later.sh", "echo planted\n")
    write(project / "build" / "hook.js", "planted()\n")
    # A bare word's file made later (the hook's own marker) binds nothing.
    write(project / "hook-ran", "")
    now = setup(project)
    assert [trusted(now, c) for c in commands] == [False, False, True]
    assert [h.command for h in now.claude.hooks] == ["touch hook-ran"]
    # Removing a script that was there is a change too.
    trust_now(project)
    (project / "build" / "hook.js").unlink()
    assert not trusted(setup(project), "./build/hook.js")


def test_a_script_that_cannot_be_bound_keeps_its_entry_untrusted(project: Path) -> None:
    (project / ".git").mkdir()
    os.mkfifo(project / "fifo.sh")
    script = write(project / "scripts" / "run.sh", "echo run\n")
    commands = ["bash ./fifo.sh", "bash ./scripts/run.sh"]
    hook_settings(project, *commands)
    found = trust_now(project)
    assert runs(found, commands[0]) == {str(project / "fifo.sh"): ("unreadable", False)}
    assert [trusted(found, c) for c in commands] == [False, True]
    assert str(project / "fifo.sh") not in found.trust_files
    # A file swapped for a folder (python3 ./run.sh would run its __main__.py) is a change.
    script.unlink()
    write(script / "__main__.py", "print('planted')\n")
    assert runs(setup(project), commands[1]) == {str(script): ("unreadable", False)}


def test_a_roost_config_hook_and_an_mcp_server_are_bound_too(project: Path) -> None:
    (project / ".git").mkdir()
    lint = write(project / "scripts" / "lint.py", "print('lint')\n")
    server = write(project / "tools" / "server.js", "// v1\n")
    config = write(project / ".roost" / "config.toml", '[[hooks.pre_tool]]\ncommand = "python3 scripts/lint.py"\n')
    mcp = write(project / ".mcp.json", json.dumps({"mcpServers": {
        "js": {"command": "node", "args": ["./server.js"], "cwd": "tools"},
        "npx": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
    }}))
    untrusted = setup(project)
    assert untrusted.config.hooks == () and untrusted.mcp == {}
    # Protected before the folder is trusted: its entries may be trusted one day.
    assert set(untrusted.protected) == {os.path.realpath(p) for p in (lint, server, config, mcp)}
    found = trust_now(project)
    assert [h.command for h in found.config.hooks] == ["python3 scripts/lint.py"]
    assert set(found.mcp) == {"js", "npx"} and runs(found, "npx -y @modelcontextprotocol/server-everything") == {}
    identity = found.mcp["js"].identity
    lint.write_text("print('planted')\n")
    server.write_text("// v2\n")
    now = setup(project)
    assert now.config.hooks == () and set(now.mcp) == {"npx"} and set(now.mcp_config.untrusted) == {"js"}
    assert not trusted(now, "python3 scripts/lint.py") and not trusted(now, "node ./server.js")
    # The other items of the file still apply: only the entry that runs the script waits.
    assert all(i.trusted for i in now.widening if i.detail not in ("python3 scripts/lint.py", "node ./server.js"))
    # Trusted again, the changed server is another server (a new process, not the old one).
    again = trust_now(project)
    assert set(again.mcp) == {"js", "npx"} and again.mcp["js"].identity != identity
