"""A hostile repository's files reach the terminal as text, never as escape sequences: what
`roost status`, `roost agents`, `roost commands` and `roost prompt` print of a project's
config keys, agents, command files and CLAUDE.md (an OSC 52 sequence would write the clipboard, another could
rewrite what is on the screen)."""

from __future__ import annotations

from .conftest import E2E

#: Escape sequences as the files carry them: OSC 52 (the clipboard), a title, a CSI
#: clearing the screen, and C1's CSI.
OSC = "\x1b]52;c;ZXZpbA==\x07"
HOSTILE = f"{OSC}\x1b]0;pwned\x07\x1b[2J\x9b1A"


def _no_escapes(text: str) -> None:
    for c in ("\x1b", "\x07", "\x9b"):
        assert c not in text, repr(text)


def test_a_projects_files_print_without_escape_sequences(e2e: E2E) -> None:
    roost = e2e.project / ".roost"
    (roost / "agents").mkdir(parents=True)
    commands_dir = e2e.project / ".claude" / "commands"
    commands_dir.mkdir(parents=True)
    toml_escapes = HOSTILE.encode("unicode_escape").decode().replace("\\x", "\\u00")
    (roost / "config.toml").write_text(f'"{toml_escapes}" = 1\n')
    (roost / "agents" / "helper.md").write_text(f"---\nname: helper\ndescription: \"{toml_escapes} helps\"\n---\nHelp.\n")
    (e2e.project / "CLAUDE.md").write_text(f"Build with make. {HOSTILE} Then test.\n")
    (commands_dir / "tidy.md").write_text(f"---\ndescription: \"{toml_escapes} tidies\"\n---\nTidy up.\n")
    e2e.ok("daemon")
    status = e2e.ok("status")
    agents = e2e.ok("agents")
    commands = e2e.ok("commands")
    prompt = e2e.ok("prompt")
    for done in (status, agents, commands, prompt):
        _no_escapes(done.stdout + done.stderr)
    # The words are all there, as text.
    assert "]52;c;ZXZpbA==]0;pwned[2J1A helps" in agents.stdout
    assert "]52;c;ZXZpbA==]0;pwned[2J1A tidies" in commands.stdout
    assert "]52;c;ZXZpbA==]0;pwned[2J1A" in status.stdout
    assert "Build with make. ]52;c;ZXZpbA==]0;pwned[2J1A Then test." in prompt.stdout


def test_a_models_reply_to_roost_chat_prints_without_escape_sequences(e2e: E2E) -> None:
    model = e2e.script([{"type": "text", "text": f"hello {HOSTILE} there"}])
    done = e2e.ok("chat", "hi", "--model", model)
    _no_escapes(done.stdout + done.stderr)
    assert "hello ]52;c;ZXZpbA==]0;pwned[2J1A there" in done.stdout
