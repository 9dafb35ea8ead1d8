"""Plan mode without IO: one model call, no tools, the reply read as steps."""

from __future__ import annotations

from roost.loop import CallModel, FinishRun, RunTool, parse_plan

from ._driver import Driver, only, text, tool_use, types


def test_plan_mode_offers_no_tools_and_ends_after_one_reply():
    d = Driver()
    t = d.submit("add retries", mode="plan", tools=("read", "bash"))
    [call] = [e for e in t.effects if isinstance(e, CallModel)]
    assert call.tools == ()
    t = d.reply(text("1. Change the client. Files: a.py\n2. Test it. Files: test_a.py"), tool_use("c1", "bash"))
    assert types(t) == ["message.assistant", "tool.started", "tool.finished", "step.finished", "plan", "run.finished"]
    assert not any(isinstance(e, (RunTool, CallModel)) for e in t.effects)
    assert t.effects[-1] == FinishRun("r1", "done")
    assert only(t, "plan").data["steps"] == [
        {"step": 1, "text": "Change the client.", "files": ["a.py"]},
        {"step": 2, "text": "Test it.", "files": ["test_a.py"]},
    ]


def test_parse_plan_reads_numbered_and_bulleted_steps():
    steps = parse_plan(
        "Intro line.\n1) Edit `src/x.py` and `src/y.py`\n   carefully.\n- Run tests (files: tests/test_x.py)\n\nDone."
    )
    assert steps == [
        {"step": 1, "text": "Edit `src/x.py` and `src/y.py` carefully.", "files": ["src/x.py", "src/y.py"]},
        {"step": 2, "text": "Run tests.", "files": ["tests/test_x.py"]},
    ]
    assert parse_plan("no steps at all") == []
