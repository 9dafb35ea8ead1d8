"""Approving in the shell, for real (tmux): the keys dispatch uses too, nothing typed sent
as steering while an approval is open, the two scopes for the session, and diffs shown with
their indentation, in the approval and after the edit."""

from __future__ import annotations

from typing import Any

from .conftest import E2E, bash, text
from .test_shell import IDLE, Tmux, runs_done, session_of, tmux  # noqa: F401 (the fixture)


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": "edit", "input": {"path": path, "old": old, "new": new}}


def test_approving_in_the_shell_keeps_the_diff_whole_and_never_steers_by_accident(e2e: E2E, tmux: Tmux) -> None:
    (e2e.project / "f.py").write_text("def f(x):\n    if x:\n        return 1\n    return 0\n")
    model = e2e.script(
        [edit("f.py", "        return 1", "        return  2")],
        [bash("echo one")],
        [bash("echo two words")],
        [text("Done.")],
    )
    pane = tmux.open("shell", "--model", model)  # agent mode: edits and bash ask
    pane.wait(IDLE)
    session = session_of(e2e)
    pane.submit("change it")
    # The diff in the box keeps its indentation (no whitespace collapsed).
    # (The key line may wrap at the pane's width: the project's path is long.)
    screen = pane.wait(lambda s: "╰ y approve once · s/a for the session: edit(" in s and "n deny" in s)
    assert f"edit({e2e.project}/**)" in screen
    assert "╭ approve edit? f.py\n│ edit asks in agent mode\n" in screen
    assert "│ -        return 1\n│ +        return  2\n│      return 0\n" in screen
    # Text typed while the approval is open (its first key not an answer) is not sent: it
    # stays in the input.
    pane.submit("please steer")
    pane.wait("(an approval is open: y once · s/a for the session · n deny at an empty prompt;")
    assert pane.input_line().endswith("please steer")
    pane.keys("C-u")
    pane.wait(lambda s: pane.input_line().rstrip().endswith("›"))
    pane.keys("y")
    # The command: s asks which scope; 2 adds the command with any arguments.
    screen = pane.wait("╭ approve bash? echo one")
    assert "s/a for the session (exactly this, or with any arguments)" in screen
    pane.keys("s")
    screen = pane.wait("╰ 1 / 2 · Esc back")
    assert "│   1  exactly this: bash(echo one)\n" in screen
    assert "│   2  with any arguments: bash(echo *)  (also allows echo with any other arguments)\n" in screen
    pane.keys("Escape")
    pane.wait(lambda s: "╰ y approve once" in s.split("╭ approve bash? echo one")[-1])
    pane.keys("a")
    pane.wait("╰ 1 / 2 · Esc back")
    pane.keys("2")
    screen = pane.wait(runs_done(1))
    assert "Done." in screen and "╭ approve" not in screen
    # The edit made is in the transcript, indented as in the file.
    assert "    -        return 1\n    +        return  2\n" in screen.split("● edit f.py")[-1]
    events = e2e.events(session)
    assert not [e for e in events if e["type"] == "steer.queued" or e.get("origin") == "steer"]
    resolved = [e for e in events if e["type"] == "permission.resolved"]
    assert [(e["decision"], e["scope"], e.get("rules")) for e in resolved] == [
        ("approve", "once", None), ("approve", "session", ["bash(echo *)"]),
    ]
    # echo two words ran without asking.
    assert [e["tool"] for e in events if e["type"] == "permission.requested"] == ["edit", "bash"]


def test_a_shell_in_full_mode_shows_each_edit_made(e2e: E2E, tmux: Tmux) -> None:
    (e2e.project / "g.py").write_text("class A:\n    def m(self):\n        pass\n")
    model = e2e.script([edit("g.py", "        pass", "        return 42")], [text("Edited.")])
    pane = tmux.open("shell", "--model", model, "--mode", "full")
    pane.wait(IDLE)
    pane.submit("edit g")
    screen = pane.wait(runs_done(1))
    assert "    -        pass\n    +        return 42\n" in screen.split("● edit g.py")[-1]
