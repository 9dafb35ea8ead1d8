"""`roost plugins`: the Claude Code plugins installed for the user, from the command line."""

from __future__ import annotations

import json

from tests.daemon.test_plugins import MARKET, NOTES, REVIEW, claude_dir, enable, install, user_settings

from .conftest import E2E


def test_roost_plugins_lists_each_plugin_and_what_it_brings(e2e: E2E) -> None:
    review = install(("review-kit", "1.2.0"), ("notes-kit", "0.1.0"))["review-kit"]
    user_settings({REVIEW: True, f"gone-kit@{MARKET}": True})
    enable(e2e.project / ".claude" / "settings.json", **{NOTES: True})
    shown = e2e.ok("plugins")
    lines = shown.stdout.splitlines()
    assert f"review-kit 1.2.0 @ {MARKET}  (enabled by {claude_dir() / 'settings.json'})" in lines
    assert "  commands: /review-kit:git:tidy, /review-kit:review, /review-kit:ship" in lines
    assert "  agents: review-kit:auditor, review-kit:code-explorer" in lines
    assert "  skills: review-kit:changelog" in lines
    assert f"  hook PreToolUse Bash: python3 {review}/hooks/guard.py" in lines
    assert f"notes-kit 0.1.0 @ {MARKET}  (installed, not enabled)" in lines
    assert f"gone-kit @ {MARKET}  (enabled by {claude_dir() / 'settings.json'}, but not found)" in lines
    assert f"  problem: gone-kit@{MARKET}: enabled, but not installed" in lines
    untrusted = f"{e2e.project / '.claude' / 'settings.json'} turns on {NOTES}, but it is not trusted: roost trust to let it"
    assert untrusted in shown.stderr
    listed = json.loads(e2e.ok("plugins", "--json").stdout)
    assert [p["id"] for p in listed["plugins"]] == [REVIEW, NOTES, f"gone-kit@{MARKET}"]
