"""Slash commands and completion in the shell's input, on fixed inputs."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from roost.cli.shell._complete import Names, ShellCompleter
from roost.cli.shell._slash import builtin, find, parse


def test_parse_and_find() -> None:
    assert parse("/model  anthropic/x ") == ("model", "anthropic/x")
    assert parse("/help") == ("help", "")
    assert parse("//etc is a folder") is None and parse("hello /x") is None
    assert [c.name for c in find("mo")] == ["mode", "model"]
    assert [c.name for c in find("mode")] == ["mode"]
    assert [c.name for c in find("ab")] == ["abort"]
    assert find("zz") == []


def test_custom_commands_come_after_the_builtins_of_their_exact_name() -> None:
    custom = {"review", "compactor", "frontend:component"}
    assert [c.name for c in builtin("model", custom) or []] == ["model"]
    assert builtin("review", custom) is None  # not /report, which "re" begins
    assert builtin("frontend:component", custom) is None and builtin("x:y", set()) is None
    assert [c.name for c in builtin("rep", custom) or []] == ["report"]
    assert [c.name for c in builtin("mo", custom) or []] == ["mode", "model"]
    # A name no built-in begins goes to the daemon, which says whether it has such a command.
    assert builtin("deploy", set()) is None


def complete(text: str, cwd: Path, names: Names | None = None) -> list[tuple[str, int]]:
    completer = ShellCompleter(names or Names(), lambda: str(cwd))
    found = completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
    return [(c.text, c.start_position) for c in found]


def test_slash_commands_and_their_arguments(tmp_path: Path) -> None:
    assert complete("/mo", tmp_path) == [("mode", -2), ("model", -2)]
    assert complete("/mode e", tmp_path) == [("exec", -1)]
    names = Names(agents=["default", "reviewer"], models=["anthropic/a", "scripted/demo"],
                  sessions=[("3f2a", "done · /p")])
    assert complete("/agent r", tmp_path, names) == [("reviewer", -1)]
    assert complete("/model s", tmp_path, names) == [("scripted/demo", -1)]
    assert complete("/sw 3", tmp_path, names) == [("3f2a", -1)]
    assert complete("/approve ", tmp_path) == [("once", 0), ("session", 0), ("session_any", 0)]
    assert complete("/help x", tmp_path) == []
    # Not a command: text that merely contains a slash.
    assert complete("fix a/b", tmp_path) == []
    names.commands[:] = [("review", "FILE", "Review a file"), ("component", "", "Make one"), ("help", "", "mine")]
    assert complete("/re", tmp_path, names) == [("rewind", -2), ("report", -2), ("review", -2)]
    assert complete("/c", tmp_path, names) == [("compact", -1), ("component", -1)]
    assert complete("/he", tmp_path, names) == [("help", -2)]
    assert complete("/review ", tmp_path, names) == []


def test_at_mentions_complete_paths_under_the_session_folder(tmp_path: Path) -> None:
    tmp_path = tmp_path / "project"
    (tmp_path / "src").mkdir(parents=True)
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".hidden").write_text("")
    assert complete("look at @s", tmp_path) == [("@setup.cfg", -2), ("@src/", -2)]
    assert complete("look at @src/m", tmp_path) == [("@src/main.py", -6)]
    assert complete("@", tmp_path) == [("@setup.cfg", -1), ("@src/", -1)]
    assert complete("@.h", tmp_path) == [("@.hidden", -3)]
    assert complete("@nowhere/x", tmp_path) == []
