"""Claude Code's plugins where Claude Code installs them (~/.claude/plugins: the installed
record, the cache, a marketplace's copy), enabled by enabledPlugins: each enabled plugin's
agents, commands, skills, hooks and MCP servers reach runs as Claude Code names them; a
project may turn a plugin off, and turn one on only when trusted; plugins.list and
`roost plugins` say what each brings."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._command_text import substitute
from roost.daemon.folder._plugins import MAX_PLUGINS
from roost.daemon.folder._setup import FolderSetup, load_folder
from roost.daemon.folder._trust import NO_TRUST, Trust
from roost.daemon.mcp._environment import inherited
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, text, trust, trusting, write, write_script

FIXTURES = Path(__file__).parent / "claude_plugins"
MARKET = "claude-code-plugins"
REVIEW = f"review-kit@{MARKET}"
NOTES = f"notes-kit@{MARKET}"


def claude_dir() -> Path:
    return Path(os.environ["HOME"]) / ".claude"


def cached(name: str, version: str) -> Path:
    """Where Claude Code installs a plugin: the cache's MARKETPLACE/PLUGIN/VERSION folder."""
    return claude_dir() / "plugins" / "cache" / MARKET / name / version


def install(*plugins: tuple[str, str], record: int = 2) -> dict[str, Path]:
    """Install fixture plugins as Claude Code does: copied into the cache, and recorded in
    installed_plugins.json (version 2: a list of installations per plugin; 1: one)."""
    entries: dict[str, Any] = {}
    folders = {}
    for name, version in plugins:
        folder = cached(name, version)
        shutil.copytree(FIXTURES / name, folder)
        folders[name] = folder
        entry = {
            "scope": "user",
            "installPath": str(folder),
            "version": version,
            "installedAt": "2026-01-05T10:00:00.000Z",
            "lastUpdated": "2026-01-05T10:00:00.000Z",
            "gitCommitSha": "0123456789abcdef0123456789abcdef01234567",
        }
        if record == 1:
            del entry["scope"]
        entries[f"{name}@{MARKET}"] = [entry] if record == 2 else entry
    write(claude_dir() / "plugins" / "installed_plugins.json", json.dumps({"version": record, "plugins": entries}, indent=2))
    write(claude_dir() / "plugins" / "known_marketplaces.json", json.dumps({
        MARKET: {
            "source": {"source": "github", "repo": "anthropics/claude-code"},
            "installLocation": str(claude_dir() / "plugins" / "marketplaces" / MARKET),
            "lastUpdated": "2026-01-05T10:00:00.000Z",
        }
    }, indent=2))
    return folders


def enable(settings: Path, **switches: bool) -> Path:
    """A settings file whose enabledPlugins says these (keys: plugin ids)."""
    return write(settings, json.dumps({"enabledPlugins": switches}, indent=2))


def user_settings(switches: dict[str, bool]) -> Path:
    return enable(claude_dir() / "settings.json", **switches)


def setup_of(project: Path, trust: Trust = NO_TRUST) -> FolderSetup:
    return load_folder(str(project), {**os.environ, "PLUGIN_PYTHON": sys.executable}, trust)


def test_an_enabled_plugins_parts_load_named_as_claude_code_names_them(project: Path) -> None:
    folders = install(("review-kit", "1.2.0"), ("notes-kit", "0.1.0"))
    review = folders["review-kit"]
    user_settings({REVIEW: True, NOTES: False})
    setup = setup_of(project)
    assert [(p.id, p.active, p.version) for p in setup.plugins.plugins] == [(REVIEW, True, "1.2.0"), (NOTES, False, "0.1.0")]
    assert setup.plugins.problems == () and setup.plugins.plugins[0].problems == ()
    # Agents: plugin:agent, plugin.json's extra agent file too; a disabled plugin's none.
    agents = setup.agents.agents
    assert sorted(agents) == ["default", "review-kit:auditor", "review-kit:code-explorer"]
    explorer = agents["review-kit:code-explorer"]
    assert explorer.tools == ("glob", "grep", "read") and explorer.model == "sonnet" and not explorer.from_project
    # Commands: /plugin:command, subfolders and plugin.json's extra folder; /review alone finds it.
    commands = setup.commands
    assert sorted(commands.commands) == ["review-kit:git:tidy", "review-kit:review", "review-kit:ship"]
    assert commands.find("review") is commands.find("review-kit:review")
    review_command = commands.find("review")
    assert substitute(review_command.body, "a.txt", review_command.arguments) == "Review a.txt with care and list the problems you find."
    assert commands.find("tidy").scope == "plugin"
    assert f"as {review}/STYLE.md says" in substitute(commands.find("tidy").body, "")
    # Hooks: ${CLAUDE_PLUGIN_ROOT} is the plugin's folder; the hook is the user's own.
    [hook] = setup.hooks
    assert (hook.event, hook.match) == ("PreToolUse", "Bash")
    assert hook.command == f"python3 {review}/hooks/guard.py" and hook.plugin_root == str(review)
    # MCP servers: plugin_PLUGIN_SERVER, ${CLAUDE_PLUGIN_ROOT} and the user's variables expanded.
    [(name, server)] = setup.mcp.items()
    assert name == "plugin_review-kit_probe" and server.command == sys.executable
    # (Its env also holds what every stdio server gets of the client's: see mcp._environment.)
    own = {k: v for k, v in server.env.items() if not inherited(k)}
    assert server.args == (f"{review}/servers/probe.py",) and own == {"CLAUDE_PLUGIN_ROOT": str(review)}
    # Skills: plugin:skill; nothing here is a project's, nothing waits for trust.
    assert setup.place.plugin_skills == (("review-kit", str(review / "skills")),)
    assert setup.widening == ()


def test_version_1_records_a_marketplaces_copy_and_what_is_missing(project: Path) -> None:
    install(("review-kit", "1.2.0"), record=1)
    # A plugin the record does not list, held by the marketplace's copy (as its
    # marketplace.json's relative source says); and one found nowhere.
    market = claude_dir() / "plugins" / "marketplaces" / MARKET
    shutil.copytree(FIXTURES / "notes-kit", market / "plugins" / "notes-kit")
    write(market / ".claude-plugin" / "marketplace.json", json.dumps({
        "name": MARKET, "owner": {"name": "Test"},
        "plugins": [{"name": "notes-kit", "source": "./plugins/notes-kit", "description": "notes"}],
    }))
    user_settings({REVIEW: True, NOTES: True, f"gone-kit@{MARKET}": True})
    setup = setup_of(project)
    found = {p.id: p for p in setup.plugins.plugins}
    assert found[REVIEW].active and found[NOTES].active
    assert found[NOTES].root == str(market / "plugins" / "notes-kit")
    # No plugin.json: named after the id, as Claude Code names it after its folder.
    assert "notes-kit:scribe" in setup.agents.agents and "notes-kit:jot" in setup.commands.commands
    gone = found[f"gone-kit@{MARKET}"]
    assert not gone.active and gone.problems == (f"gone-kit@{MARKET}: enabled, but not installed",)


def test_plugin_json_paths_stay_inside_the_plugin(project: Path, tmp_path: Path) -> None:
    review = install(("review-kit", "1.2.0"))["review-kit"]
    outside = write(tmp_path / "outside" / "steal.md", "---\ndescription: not the plugin's\n---\nx")
    manifest = review / ".claude-plugin" / "plugin.json"
    manifest.write_text(json.dumps({
        "name": "review-kit",
        "commands": ["../../../../../../outside", str(outside.parent)],
        "agents": "./more-agents/../../../../../../../outside/steal.md",
        "hooks": "/etc/hooks.json",
    }))
    (review / "extra-commands" / "escape").symlink_to(outside.parent)
    user_settings({REVIEW: True})
    setup = setup_of(project)
    [plugin] = setup.plugins.plugins
    assert len(plugin.problems) == 4 and all("is not inside the plugin's folder" in p for p in plugin.problems)
    assert not any("steal" in name for name in [*setup.commands.commands, *setup.agents.agents])
    assert "review-kit:review" in setup.commands.commands  # the default folders still load


def test_a_project_may_turn_a_plugin_off_but_turning_one_on_needs_trust(project: Path) -> None:
    install(("review-kit", "1.2.0"), ("notes-kit", "0.1.0"))
    user_settings({REVIEW: True})
    shared = enable(project / ".claude" / "settings.json", **{REVIEW: False, NOTES: True})
    setup = setup_of(project)
    # Off: narrows, applies untrusted. On: the project's say, ignored until trusted.
    assert setup.plugins.active == () and setup.hooks == () and setup.mcp == {}
    [item] = setup.ignored
    assert (item.kind, item.name, item.source) == ("plugin", NOTES, str(shared))
    assert setup.untrusted_notice() is not None
    trusted = setup_of(project, trusting(shared))
    assert [p.id for p in trusted.plugins.active] == [NOTES]
    assert trusted.plugins.active[0].decided_by == str(shared)
    # settings.local.json over settings.json: on again, by the project's say.
    local = enable(project / ".claude" / "settings.local.json", **{REVIEW: True})
    assert [p.id for p in setup_of(project).plugins.active] == []
    assert {p.id for p in setup_of(project, trusting(shared, local)).plugins.active} == {REVIEW, NOTES}


def test_a_bad_record_or_plugin_is_one_line_and_the_rest_load(project: Path) -> None:
    install(("review-kit", "1.2.0"))
    record = claude_dir() / "plugins" / "installed_plugins.json"
    data = json.loads(record.read_text())
    for n in range(MAX_PLUGINS + 5):
        data["plugins"][f"p{n}@{MARKET}"] = [{"scope": "user", "installPath": "/nonexistent", "version": "1"}]
    record.write_text(json.dumps(data))
    review = cached("review-kit", "1.2.0")
    (review / "hooks" / "hooks.json").write_text('{"hooks": {"PreToolUse": "not a list"}}')
    (review / ".mcp.json").write_text('{"mcpServers": {"probe": {"url": "ftp://x"}}}')
    user_settings({REVIEW: True})
    setup = setup_of(project)
    assert setup.plugins.problems == (f"{claude_dir() / 'plugins'}: more than {MAX_PLUGINS} plugins; the rest are not read",)
    assert len(setup.plugins.plugins) == MAX_PLUGINS
    [plugin] = setup.plugins.active
    assert plugin.hooks == () and "hooks.PreToolUse must be a list" in plugin.problems[0]
    assert setup.mcp == {} and "url must start with http" in setup.mcp_config.problems[0]
    assert sorted(setup.agents.agents) == ["default", "review-kit:auditor", "review-kit:code-explorer"]


async def test_a_run_gets_what_the_plugin_brings(client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    review = install(("review-kit", "1.2.0"), ("notes-kit", "0.1.0"))["review-kit"]
    user_settings({REVIEW: True, NOTES: True})
    monkeypatch.setenv("PLUGIN_PYTHON", sys.executable)
    script = [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "rm a.txt"}}], "stop_reason": "tool_use"},
        {"content": [{"type": "tool_use", "id": "toolu_2", "name": "plugin_review-kit_probe__where", "input": {}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "reviewed"}], "stop_reason": "end_turn"},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        started = await client.call(
            "dispatch", task="/review-kit:review a.txt", model="anthropic/claude-test", cwd=str(project), attach=True, yes=True
        )
        events = await events_until(client, finished(started["run"]), timeout=60)
        bodies = [r.body for r in server.requests]
    first = bodies[0]
    # The command, expanded; the agents in task's list; the server's tools; the skill.
    assert first["messages"][0]["content"][0]["text"] == "Review a.txt with care and list the problems you find."
    tools = {t["name"]: t for t in first["tools"]}
    listing = tools["task"]["description"]
    assert "- notes-kit:scribe: Keeps NOTES.md up to date" in listing and "- review-kit:code-explorer: Traces" in listing
    assert "plugin_review-kit_probe__where" in tools
    system = "".join(block["text"] for block in first["system"])
    assert "- review-kit:changelog: Writes a changelog entry" in system
    # The plugin's hook ran with CLAUDE_PLUGIN_ROOT and refused rm; the server runs from
    # the plugin's folder.
    results = {e["call_id"]: e for e in events if e.get("type") == "tool.finished"}
    assert results["toolu_1"]["is_error"] and "review-kit: rm is not allowed" in results["toolu_1"]["result"]
    assert (project / "a.txt").exists()
    [seen] = [json.loads(line) for line in (project / "plugin-hook.jsonl").read_text().splitlines()]
    assert seen == {"tool_input": {"command": "rm a.txt"}, "plugin_root": str(review)}
    assert results["toolu_2"]["result"] == f"plugin root {review} file {review}/servers/probe.py"
    assert events[-1]["reason"] == "done"


async def test_plugins_list_says_what_each_brings_and_what_waits_for_trust(client: TrioClient, project: Path) -> None:
    review = install(("review-kit", "1.2.0"), ("notes-kit", "0.1.0"))["review-kit"]
    user_settings({REVIEW: True})
    shared = enable(project / ".claude" / "settings.json", **{NOTES: True})
    (review / "agents" / "broken.md").write_text("---\ndescription: [unclosed\n---\nx")
    listed = await client.call("plugins.list", cwd=str(project), env={**os.environ, "PLUGIN_PYTHON": sys.executable})
    first, second = listed["plugins"]
    assert first == {
        "id": REVIEW, "name": "review-kit", "marketplace": MARKET, "version": "1.2.0",
        "description": "Review workflow: an explorer agent, review commands, a changelog skill and a guard hook",
        "root": str(review), "enabled": True, "enabled_by": str(claude_dir() / "settings.json"), "active": True,
        "agents": ["review-kit:auditor", "review-kit:code-explorer"],
        "commands": ["review-kit:git:tidy", "review-kit:review", "review-kit:ship"],
        "skills": ["review-kit:changelog"],
        "hooks": [f"PreToolUse Bash: python3 {review}/hooks/guard.py"],
        "mcp_servers": ["plugin_review-kit_probe"],
        "problems": [first["problems"][0]],
    }
    assert first["problems"][0].startswith(f"{review}/agents/broken.md:")
    assert (second["id"], second["active"], second["agents"], second["commands"]) == (NOTES, False, [], [])
    assert [(u["kind"], u["name"], u["source"]) for u in listed["untrusted"]] == [("plugin", NOTES, str(shared))]
    await trust(client, project)
    listed = await client.call("plugins.list", cwd=str(project), env={**os.environ, "PLUGIN_PYTHON": sys.executable})
    assert listed["plugins"][1]["active"] and listed["plugins"][1]["agents"] == ["notes-kit:scribe"]
    assert listed["untrusted"] == []


async def test_an_untrusted_projects_plugin_is_reported_at_dispatch_and_stays_off(client: TrioClient, project: Path) -> None:
    install(("notes-kit", "0.1.0"))
    enable(project / ".claude" / "settings.json", **{NOTES: True})
    model = write_script(project, [text("ok")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(started["run"]))
    [notice] = [e for e in events if e.get("type") == "project.untrusted"]
    assert [(i["kind"], i["name"]) for i in notice["ignored"]] == [("plugin", NOTES)]
    # Its commands are not there either.
    with pytest.raises(RpcError) as refused:
        await client.call("dispatch", task="/jot x", model=model, cwd=str(project))
    assert refused.value.code == ErrorCode.INVALID_PARAMS and "no custom command /jot" in refused.value.message
