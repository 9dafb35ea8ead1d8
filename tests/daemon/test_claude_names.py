"""Claude Code's names for roost's tools and inputs, and its hook matchers (its model names:
test_model_names)."""

from __future__ import annotations

import pytest

from roost.daemon.folder._claude import (
    claude_input,
    roost_input,
    roost_tool,
    tool_matcher,
    tool_name,
    tool_response,
)


def test_tools_go_by_claude_codes_names():
    assert [tool_name(t) for t in ("bash", "read", "edit", "web_fetch", "todo", "task", "time__now", "mine")] == [
        "Bash", "Read", "Edit", "WebFetch", "TodoWrite", "Task", "mcp__time__now", "mine"
    ]


@pytest.mark.parametrize(
    "matcher, matched",
    [
        ("", {"bash", "read", "edit", "time__now"}),
        ("*", {"bash", "read", "edit", "time__now"}),
        ("Bash", {"bash"}),
        ("Edit|Write", {"edit"}),
        ("MultiEdit", {"edit"}),
        ("Read, Bash", {"bash", "read"}),
        ("mcp__time__.*", {"time__now"}),
        ("^Re", {"read"}),
        ("bash", set()),  # Claude Code's matchers are case-sensitive
    ],
)
def test_matchers_read_as_claude_code_reads_them(matcher, matched):
    test = tool_matcher(matcher)
    assert {t for t in ("bash", "read", "edit", "time__now") if test(t)} == matched


def test_a_matcher_that_is_no_regular_expression_is_an_error():
    with pytest.raises(ValueError, match="cannot be used: missing \\)"):
        tool_matcher("Bash(")


def test_inputs_take_claude_codes_field_names_and_back():
    edit = {"path": "src/a.py", "old": "x", "new": "y", "replace_all": True}
    theirs = claude_input("edit", edit, "/p")
    assert theirs == {"file_path": "/p/src/a.py", "old_string": "x", "new_string": "y", "replace_all": True}
    assert roost_input("edit", theirs) == {**edit, "path": "/p/src/a.py"}
    assert claude_input("bash", {"command": "ls", "timeout": 2}, "/p") == {"command": "ls", "timeout": 2000}
    assert roost_input("bash", {"command": "ls", "timeout": 2000}) == {"command": "ls", "timeout": 2.0}
    assert claude_input("grep", {"pattern": "x", "ignore_case": True}, "/p") == {"pattern": "x", "-i": True}
    assert claude_input("time__now", {"zone": "UTC"}, "/p") == {"zone": "UTC"}
    assert tool_response("write", {"path": "a"}, "wrote 1 line", False, "/p") == {
        "output": "wrote 1 line", "success": True, "is_error": False, "filePath": "/p/a"
    }


def test_claude_codes_tool_names_as_roosts():
    assert [roost_tool(n) for n in ("Read", "MultiEdit", "LS", "Agent", "TodoWrite")] == ["read", "edit", "glob", "task", "todo"]
    assert [roost_tool(n) for n in ("NotebookRead", "NotebookEdit")] == ["notebook_read", "notebook_edit"]
    assert roost_tool("ExitPlanMode") == "ExitPlanMode"  # roost has none: reported, not renamed
    assert claude_input("notebook_edit", {"path": "nb.ipynb", "cell_id": "a"}, "/p") == {"notebook_path": "/p/nb.ipynb", "cell_id": "a"}


def test_background_commands_go_by_claude_codes_names_and_fields():
    assert [roost_tool(n) for n in ("BashOutput", "KillShell", "KillBash")] == ["bash_output", "kill_shell", "kill_shell"]
    assert [tool_name(t) for t in ("bash_output", "kill_shell")] == ["BashOutput", "KillShell"]
    assert claude_input("bash_output", {"id": "bg1", "filter": "x"}, "/p") == {"bash_id": "bg1", "filter": "x"}
    assert roost_input("kill_shell", {"shell_id": "bg1"}) == {"id": "bg1"}
    assert claude_input("bash", {"command": "make", "run_in_background": True}, "/p") == {"command": "make", "run_in_background": True}
    assert tool_matcher("BashOutput|KillShell")("kill_shell")
