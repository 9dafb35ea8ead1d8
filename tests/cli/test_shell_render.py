"""The shell's rendering functions on fixed inputs: toolbar, prompts, panels, reports."""

from __future__ import annotations

from typing import Any

from roost.cli import _approval_keys as keys
from roost.cli._report import report_rows
from roost.cli.shell import _display as r
from roost.cli.shell._view import Request, SessionView, ToolCall


def text(lines: list[list[tuple[str, str]]]) -> list[str]:
    return [r.plain(line) for line in lines]


def view_with(*events: dict[str, Any]) -> SessionView:
    view = SessionView("3f2a91c0", "/p")
    for event in events:
        view.apply({"session": "3f2a91c0", "run": "r1", "ts": 100.0, **event})
    return view


def test_helpers() -> None:
    assert r.seconds(0.5) == "0.50s" and r.seconds(12.34) == "12.3s" and r.seconds(245) == "4m05s"
    assert r.shorten("a  b\nc", 10) == "a b c" and r.shorten("abcdefghijk", 5) == "abcd…"
    assert r.clean("a\x1b[1mb\rc\td") == "a[1mbc   d"
    assert r.brief_input({"command": "ls  -l\n x"}, 50) == "ls -l x"
    assert r.brief_input({"a": 1, "b": "x"}, 50) == 'a=1, b="x"'
    assert r.spinner(0.0) == "⠋" and r.spinner(0.1) == "⠙"


def test_toolbar_says_what_the_run_is_doing() -> None:
    idle = view_with()
    assert r.plain(r.toolbar(idle, 0.0, connected=True)) == (
        " 3f2a91c0  idle │ 0 tokens │ default · agent · default model ")
    busy = view_with(
        {"type": "run.started", "seq": 1, "model": "m", "agent": "a", "mode": "full"},
        {"type": "step.started", "seq": 2, "ts": 101.0},
    )
    busy.clients = 2
    assert r.plain(r.toolbar(busy, 103.5, connected=True, model="other")) == (
        " 3f2a91c0  ⠴ thinking 2.50s │ 0 tokens · 2 clients │ a · full · other ")
    busy.apply({"type": "tool.started", "seq": 3, "ts": 102.0, "call_id": "c", "name": "bash", "input": {}})
    busy.apply({"type": "step.finished", "seq": 4, "usage": {"input_tokens": 1000, "output_tokens": 234}, "cost": 0.5})
    assert r.status(busy, 104.0, True) == ("class:toolbar.busy", "⠋ running bash 2.00s")
    assert "│ 1,234 tokens · $0.5000 · 2 clients │" in r.plain(r.toolbar(busy, 104.0, connected=True))
    busy.apply({"type": "permission.requested", "seq": 5, "ts": 103.0, "call_id": "c", "tool": "bash"})
    assert r.status(busy, 104.0, True) == ("class:toolbar.warn", "waiting for approval 1.00s")
    assert r.status(busy, 104.0, False)[1] == "⠋ reconnecting to the daemon"


def test_a_long_model_name_is_cut_to_fit_the_toolbar() -> None:
    view = view_with()
    line = r.plain(r.toolbar(view, 0.0, connected=True, width=60, model="scripted//tmp/a/long/path/script.json"))
    assert len(line) == 60 and line.endswith("· agent · …script.json ")


def test_the_toolbar_shows_the_checklist() -> None:
    view = view_with({"type": "run.started", "seq": 1, "model": "m", "agent": "a", "mode": "agent"})
    todos = [
        {"content": "Look", "status": "completed"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
        {"content": "Test", "status": "pending"},
    ]
    view.apply({"type": "tool.finished", "seq": 2, "call_id": "c", "name": "todo", "meta": {"todos": todos}})
    line = r.plain(r.toolbar(view, 100.0, connected=True))
    assert "│ 1/3 ✓ · now: Fixing the bug │ 0 tokens │" in line
    assert r.checklist(todos[:1] + [{"content": "x" * 80, "status": "in_progress"}], 20) == "1/2 ✓ · now: " + "x" * 19 + "…"
    assert r.checklist([{"content": "Look", "status": "completed"}], 20) == "1/1 ✓"
    assert r.brief_input({"todos": todos}, 50) == "3 items"


def test_an_approval_panel_names_the_call_and_the_keys() -> None:
    request = Request("c1", "permission", "r1", 100.0, tool="bash", input={"command": "rm -rf build"},
                      reason="bash asks in agent mode", session_rules=("bash(rm -rf build)",), deadline=130.0)
    # What the session would add is said once, with the key that adds it.
    assert text(r.request_panel(request, 110.0, 100, position="  (1 of 2)")) == [
        "╭ approve bash? rm -rf build",
        "│ bash asks in agent mode",
        "╰ y approve once · s/a for the session: bash(rm -rf build) · n deny  (1 of 2)  ⏱ 20.0s left",
    ]


def test_an_approval_panel_writes_out_what_could_disguise_the_command() -> None:
    hostile = "echo safe \u202e\x1b]52;c;ZXZpbA==\x07 #"
    request = Request("c1", "permission", "r1", 100.0, tool="bash", input={"command": hostile},
                      session_rules=(f"bash({hostile})",), session_rules_any=("bash(echo *)",))
    shown = "\n".join(text(r.request_panel(request, 110.0, 200)) + text(r.request_panel(request, 110.0, 200, choosing=True)))
    assert "\u202e" not in shown and "\x1b" not in shown and "\x07" not in shown
    assert "╭ approve bash? echo safe \\u202e]52;c;ZXZpbA== #" in shown
    assert "exactly this: bash(echo safe \\u202e\\x1b]52;c;ZXZpbA==\\x07 #)" in shown


def test_an_approval_panel_offers_two_scopes_for_the_session_and_says_what_the_wider_allows() -> None:
    request = Request("c1", "permission", "r1", 100.0, tool="bash", input={"command": "echo  'a  b'"},
                      reason="bash asks in agent mode", session_rules=("bash(echo a  b)",),
                      session_rules_any=("bash(echo *)",))
    assert text(r.request_panel(request, 110.0, 100))[-1] == (
        "╰ y approve once · s/a for the session (exactly this, or with any arguments) · n deny"
    )
    assert text(r.request_panel(request, 110.0, 100, choosing=True))[2:] == [
        "│ for the session:",
        "│   1  exactly this: bash(echo a  b)",
        "│   2  with any arguments: bash(echo *)  (also allows echo with any other arguments)",
        "╰ 1 / 2 · Esc back",
    ]


def test_an_approval_panel_keeps_the_diffs_indentation() -> None:
    diff = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+\treturn  2"
    request = Request("c1", "permission", "r1", 100.0, tool="edit", input={"path": "f.py"}, diff=diff)
    assert text(r.request_panel(request, 110.0, 100))[1:7] == [
        "│ --- a/f.py", "│ +++ b/f.py", "│ @@ -1,2 +1,2 @@", "│  def f():", "│ -    return 1", "│ +    return  2",
    ]


def test_an_approval_panel_with_nothing_for_the_session_offers_once_only() -> None:
    request = Request("c1", "permission", "r1", 100.0, tool="bash", input={"command": "eval x"},
                      reason="roost cannot judge this line whole (eval runs a string as commands)")
    assert text(r.request_panel(request, 110.0, 100))[-1] == (
        "╰ y approve once · n deny (nothing can be approved for the session)"
    )


def test_the_command_line_says_what_a_session_approval_adds() -> None:
    assert keys.offer({"session_rules": ["bash(npm test)", "write(/tmp/x)"]}) == (
        "for the session: bash(npm test)  write(/tmp/x)"
    )
    assert keys.offer({"session_rules": ["bash(npm test)"], "session_rules_any": ["bash(npm *)"]}) == (
        "for the session: bash(npm test) (exactly this) or bash(npm *) (with any arguments)"
    )
    assert keys.offer({"session_rules": []}) == "nothing can be approved for the session: approve once"


def test_a_question_panel_numbers_its_choices() -> None:
    request = Request("q1", "question", "r1", 100.0, question="Which db?", choices=("sqlite", "postgres"), depth=1)
    assert text(r.request_panel(request, 100.0, 100)) == [
        "  │ ╭ question: Which db?",
        "  │ │ 1) sqlite  2) postgres",
        "  │ ╰ type the answer or its number, then Enter",
    ]


def test_a_running_tool_line() -> None:
    call = ToolCall("c1", "bash", {"command": "sleep 5"}, 100.0)
    assert r.plain(r.running_tool(call, 101.25, 80)) == "⠹ bash sleep 5 · 1.25s"


def test_prompts() -> None:
    assert r.plain(r.prompt("normal", busy=False)) == "› "
    assert r.plain(r.prompt("normal", busy=True)) == "steer › "
    assert r.plain(r.prompt("answer", busy=True)) == "answer › "
    assert r.plain(r.prompt("deny", busy=True)).startswith("deny")


def _report(**extra: Any) -> dict[str, Any]:
    usage = {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 50}
    step = {"step": 1, "model_time": 3.0, "ttft": None, "retries": None, "usage": usage, "cost": None,
            "duration": 4.0, "tools": [{"name": "bash", "time": 0.5, "is_error": True, "call_id": "c1"}]}
    return {
        "run": "r1", "task": "count the files", "model": "m", "agent": "default", "mode": "agent",
        "reason": "done", "duration": 4.0, "steps": [step], "model_time": 3.0, "ttft": None, "retries": None,
        "tool_time": 0.5, "tools": {"bash": {"calls": 1, "errors": 1, "time": 0.5}}, "usage": usage, "cost": None,
        "approvals": [{"tool": "bash", "call_id": "c1", "decision": "approve", "client": "cli#2", "waited": 12.5}],
        "questions": [], "compactions": [], "checks": [], "subagents": [], "total": {"usage": usage, "cost": None},
        **extra,
    }


def test_the_daemons_report_as_the_shell_shows_it() -> None:
    # What an older daemon did not record (first token, retries, a price) shows as unknown.
    assert text(r.table(report_rows(_report()))) == [
        "  run       r1 · done · default · agent · m · 4.00s",
        "  task      count the files",
        "  model     1 call · 3.00s · first token unknown (mean) · retries unknown",
        "  tools     0.50s: bash ×1 0.50s, 1 failed",
        "  tokens    1,550 (1,200 in, 300 out, 50 cache read, 0 cache write)",
        "  cost      unknown (no price for this model)",
        "  approval  bash (c1): approve by cli#2, waited 12.5s",
        "  step 1    model 3.00s (first token unknown, retries unknown) · 1,550 tokens · cost unknown · bash 0.50s ✗ "
        "· 4.00s in all",
    ]


def test_a_sub_agents_report_is_indented_under_its_callers() -> None:
    sub = _report(run="r2", agent="helper", call_id="c7", approvals=[], cost=0.5)
    rows = report_rows(_report(subagents=[sub], total={"usage": {"output_tokens": 600}, "cost": None}))
    names = [name for name, _ in rows]
    assert ("with sub-agents", "600 (0 in, 600 out, 0 cache read, 0 cache write) · unknown (no price for this model)") in rows
    at = names.index("sub-agent")
    assert rows[at][1] == "helper for call c7" and rows[at + 1][0] == "  run" and "r2" in rows[at + 1][1]
    assert ("  cost", "$0.5000") in rows


def test_sessions_table_marks_the_current_one() -> None:
    rows = [{"id": "aaa", "created": 0, "status": "done", "events": 5, "cwd": "/x", "clients": 1},
            {"id": "bbb", "created": 0, "status": "new", "events": 1, "cwd": "/y"}]
    out = text(r.sessions_table(rows, "bbb"))
    assert out[1].startswith("  aaa ") and out[1].endswith("done           5       1  /x")
    assert out[2].startswith("* bbb ")


def test_sessions_table_puts_forks_under_their_parents() -> None:
    def row(id: str, parent: str | None = None, at: int | None = None) -> dict[str, Any]:
        return {"id": id, "created": 0, "status": "done", "events": 5, "cwd": "/x", "parent": parent, "forked_at": at}

    # Listed oldest first; a fork's parent is always older, a fork of a fork deeper.
    rows = [row("aaa"), row("bbb"), row("ccc", "aaa", 3), row("ddd", "ccc", 4), row("eee", "aaa", 2)]
    out = text(r.sessions_table(rows, "ddd"))
    assert [line[:16] for line in out[1:]] == [
        "  aaa           ", "  └ ccc @3      ", "*   └ ddd @4    ", "  └ eee @2      ", "  bbb           ",
    ]
    # A fork whose parent is not listed is shown as a root.
    assert text(r.sessions_table([row("ccc", "gone", 3)], ""))[1].startswith("  ccc ")


def test_help_lists_commands_and_keys() -> None:
    out = text(r.help_lines([("abort", "", "abort it"), ("deny", "[REASON]", "deny it")]))
    assert "  /abort          abort it" in out and "  /deny [REASON]  deny it" in out
    assert any(line.startswith("  Ctrl-C") for line in out)


def test_prompt_layers_under_headings() -> None:
    result = {"agent": "default", "mode": "agent",
              "layers": [{"name": "agent", "text": "You are helpful.\n", "source": "built-in"},
                         {"name": "mode", "text": "Use tools."}]}
    assert text(r.prompt_layers(result)) == [
        "── agent (16 chars · built-in)", "You are helpful.",
        "── mode (10 chars)", "Use tools.",
        "── agent default · agent mode",
    ]
    assert text(r.prompt_layers({"text": "x"})) == ["  text  x"]
