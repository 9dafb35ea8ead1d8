"""Claude Code's flags as roost reads them: rule lists split as Claude Code splits them, and
every permission mode the command offers mapped onto roost's."""

from __future__ import annotations

from roost.cli._headless import PERMISSION_MODES, tool_rules
from roost.cli._run import _PERMISSION_MODES
from roost.protocol import MODES


def test_rule_lists_split_on_commas_and_spaces_outside_parentheses() -> None:
    assert tool_rules(["Bash(git log:*) Bash(git diff:*)", "Read,Edit", "  Bash(npm run test:*) , mcp__github"]) == [
        "Bash(git log:*)", "Bash(git diff:*)", "Read", "Edit", "Bash(npm run test:*)", "mcp__github",
    ]
    assert tool_rules(["Bash(echo a,b)"]) == ["Bash(echo a,b)"]
    assert tool_rules(["", " , "]) == []


def test_every_permission_mode_offered_is_a_roost_mode_with_its_rules() -> None:
    assert set(_PERMISSION_MODES) == set(PERMISSION_MODES)
    assert all(mode in MODES for mode, _ in PERMISSION_MODES.values())
    assert PERMISSION_MODES["acceptEdits"] == ("agent", ("write|edit(**)",))
