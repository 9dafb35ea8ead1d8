"""What a Claude Code user brings, through the real CLI: custom slash commands and hooks."""

from __future__ import annotations

import json

from .conftest import E2E, bash, text
from .test_shell import Tmux, tmux  # noqa: F401  (the fixture)


def test_dispatch_runs_a_custom_command(e2e: E2E) -> None:
    commands = e2e.project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "count.md").write_text("---\ndescription: Count files\n---\nCount the files matching $0.\n")
    model = e2e.script([text("There are two.")])
    done = e2e.ok("dispatch", "/count *.txt", "--model", model)
    assert "task: /count *.txt\nCount the files matching *.txt.\n" in done.stdout
    unknown = e2e.roost("dispatch", "/cuont *.txt", "--model", model)
    assert unknown.returncode == 10 and "no custom command /cuont (commands here: /count)" in unknown.stderr
    listed = e2e.json_out("sessions", "--json")
    assert len(listed) == 1


def test_roost_commands_lists_commands_skills_and_the_files_skipped(e2e: E2E) -> None:
    commands = e2e.project / ".claude" / "commands"
    (commands / "svelte").mkdir(parents=True)
    (commands / "fix-issue.md").write_text(
        "---\ndescription: Fix an issue: read, fix, test\nargument-hint: [issue-number] [priority]\n---\nFix #$0.\n"
    )
    (commands / "svelte" / "svelte:storybook.md").write_text("Write stories for $ARGUMENTS.\n")
    (commands / "broken.md").write_text("---\ndescription: fine\nno field here\n---\nx\n")
    skill = e2e.project / ".claude" / "skills" / "explain" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: explain\ndescription: Explain code\n---\nExplain $ARGUMENTS.\n")
    listed = e2e.roost("commands")
    assert listed.returncode == 0
    assert "/fix-issue [issue-number] [priority]  (project command)\n  Fix an issue: read, fix, test\n" in listed.stdout
    assert "/svelte:storybook  (project command)" in listed.stdout and "/explain  (project skill)" in listed.stdout
    [skipped] = listed.stderr.splitlines()
    assert skipped.startswith(f"skipped: {commands / 'broken.md'}:3: bad YAML")
    data = e2e.json_out("commands", "--json")
    by_name = {c["name"]: c for c in data["commands"]}
    assert by_name["svelte:svelte:storybook"]["short"] == "svelte:storybook"
    assert by_name["fix-issue"]["argument_hint"] == "[issue-number] [priority]"
    assert by_name["explain"]["kind"] == "skill" and len(data["problems"]) == 1
    # The refused file, typed: one line naming it and why.
    refused = e2e.roost("dispatch", "/broken", "--model", "scripted/demo")
    assert refused.returncode == 10
    assert f"/broken cannot be used: {commands / 'broken.md'}:3: bad YAML" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_claude_code_hook_guards_bash_once_the_project_is_trusted(e2e: E2E) -> None:
    hook = e2e.project / ".claude" / "hooks" / "guard.sh"
    hook.parent.mkdir(parents=True)
    hook.write_text(
        '#!/bin/bash\ncommand=$(python3 -c \'import json,sys; print(json.load(sys.stdin)["tool_input"]["command"])\')\n'
        'case "$command" in rm\\ *) echo "no rm, use trash" >&2; exit 2;; esac\n'
    )
    hook.chmod(0o755)
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh'}]}]}}
    (e2e.project / ".claude" / "settings.json").write_text(json.dumps(settings))
    model = e2e.script([bash("rm a.txt")], [text("done")])
    untrusted = e2e.ok("dispatch", "clean up", "--model", model, "--yes")
    assert "hook PreToolUse Bash" in untrusted.stdout and not (e2e.project / "a.txt").exists()
    (e2e.project / "a.txt").write_text("a\n")
    shown = e2e.ok("trust", "--yes")
    assert "hook PreToolUse Bash" in shown.stdout
    trusted = e2e.ok("dispatch", "clean up", "--model", e2e.script([bash("rm a.txt")], [text("done")]), "--yes")
    assert "blocked by a hook: no rm, use trash" in trusted.stdout and (e2e.project / "a.txt").exists()


def test_a_commands_lines_that_would_ask_are_asked_about_at_a_terminal(e2e: E2E, tmux: Tmux) -> None:
    commands = e2e.project / ".claude" / "commands"
    commands.mkdir(parents=True, exist_ok=True)
    (commands / "branch.md").write_text("Branch: !`echo plain`\nTell me about it.\n")
    model = e2e.script([text("Noted.")])
    pane = tmux.open("dispatch", "/branch", "--model", model)
    pane.wait("Run them? [y/N]")
    assert "!`echo plain`" in pane.screen()
    pane.keys("n", "Enter")
    pane.wait("[exit 10]")
    assert "not run: the command's lines were not approved" in pane.screen()
    assert e2e.json_out("sessions", "--json") == []
    pane = tmux.open("dispatch", "/branch", "--model", model)
    pane.wait("Run them? [y/N]")
    pane.keys("y", "Enter")
    pane.wait("[exit 0]")
    [row] = e2e.json_out("sessions", "--json")
    started = next(e for e in e2e.events(row["id"]) if e["type"] == "run.started")
    assert started["task"].startswith("Branch: plain\nTell me about it.")
    # With nobody to ask, it says how to allow them and runs nothing.
    piped = e2e.roost("dispatch", "/branch", "--model", model)
    assert piped.returncode == 10 and "would need approval" in piped.stderr and "[APPROVAL_NEEDED]" in piped.stderr


def test_the_shell_asks_about_a_commands_lines_too(e2e: E2E, tmux: Tmux) -> None:
    commands = e2e.project / ".claude" / "commands"
    commands.mkdir(parents=True, exist_ok=True)
    (commands / "branch.md").write_text("Branch: !`echo plain`\n")
    pane = tmux.open("shell", "--model", e2e.script([text("Noted.")]))
    pane.wait("  idle │ ")
    pane.submit("/branch")
    pane.wait("run them? y / N ›")
    assert "!`echo plain`" in pane.screen()
    pane.submit("n")
    pane.wait("(not run: the command's lines were not approved)")
    pane.submit("/branch")
    pane.wait("run them? y / N ›")
    pane.submit("y")
    pane.wait("Noted.")
    session = e2e.json_out("sessions", "--json")[0]["id"]
    started = next(e for e in e2e.events(session) if e["type"] == "run.started")
    assert started["task"] == "Branch: plain"
