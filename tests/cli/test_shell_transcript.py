"""The transcript: which lines fixed events commit, and what stays live."""

from __future__ import annotations

from typing import Any

from roost.cli.shell._display import plain
from roost.cli.shell._transcript import Transcript


def ev(type: str, **fields: Any) -> dict[str, Any]:
    return {"type": type, "session": "s1", "run": "r1", "ts": 100.0, **fields}


def lines(out: list[list[tuple[str, str]]]) -> list[str]:
    return [plain(line) for line in out]


def assistant(text: str, **fields: Any) -> dict[str, Any]:
    return ev("message.assistant", content=[{"type": "text", "text": text}], **fields)


def test_complete_lines_commit_as_they_stream_and_the_rest_stays_live() -> None:
    t = Transcript()
    assert lines(t.feed(ev("text.delta", text="# Ti"))) == []
    assert lines(t.live()) == ["Ti"]
    assert lines(t.feed(ev("text.delta", text="tle\n\nSome **bo"))) == ["Title"]
    assert lines(t.live()) == ["Some **bo"]
    assert lines(t.feed(ev("text.delta", text="ld** text"))) == []
    # The stored message commits only what the deltas had not completed.
    assert lines(t.feed(assistant("# Title\n\nSome **bold** text"))) == ["", "Some bold text"]
    assert t.live() == []


def test_a_very_long_unfinished_line_shows_its_end() -> None:
    t = Transcript(width=10)
    t.feed(ev("text.delta", text="x" * 100 + "END"))
    assert lines(t.live()) == ["…" + "x" * 56 + "END"]


def test_a_code_block_streams_with_its_state_across_lines() -> None:
    t = Transcript()
    out = t.feed(ev("text.delta", text="```python\ndef f():\n\n\n    return 1\n```\n"))
    assert lines(out) == ["```python", "def f():", "", "", "    return 1", "```"]
    assert ("class:md.codeblock class:code.keyword", "def") in out[1]


def test_a_reply_from_the_history_is_rendered_whole() -> None:
    t = Transcript()
    out = t.feed(assistant("\n\nFirst.\n\n\n\n- item\n\n"))
    # Leading and trailing blank lines dropped, a run of them shown as one.
    assert lines(out) == ["First.", "", "• item"]


def test_a_reply_joined_midway_is_printed_whole_after_what_streamed() -> None:
    t = Transcript()
    t.feed(ev("text.delta", text="second half\n"))
    out = lines(t.feed(assistant("first half\nsecond half\n")))
    assert out[0].startswith("(this terminal attached in the middle")
    assert out[1:] == ["first half", "second half"]


def test_reasoning_is_collapsed_before_the_text_or_shown_in_full() -> None:
    t = Transcript()
    t.feed(ev("reasoning.delta", text="think\nharder"))
    assert lines(t.live()) == ["think", "harder"]
    out = lines(t.feed(ev("text.delta", text="Answer\n")))
    assert out[0].startswith("✻ thought (2 words): think harder") and out[1] == "Answer"
    assert t.last_reasoning == "think\nharder"
    t = Transcript(expand_reasoning=True)
    out = lines(t.feed(ev("message.assistant", content=[{"type": "thinking", "thinking": "a\nb"},
                                                        {"type": "text", "text": "Hi"}])))
    assert out == ["✻ ", "a", "b", "Hi"]


def test_a_tool_call_is_one_line_with_its_result_folded() -> None:
    t = Transcript(width=60)
    assert t.feed(ev("tool.started", call_id="c1", name="bash", input={"command": "ls -1"})) == []
    out = lines(t.feed(ev("tool.finished", call_id="c1", name="bash", result="a\nb\nc\nd\ne\n",
                          is_error=False, latency=0.25)))
    assert out == ["● bash ls -1 · 0.25s", "  ⎿ a", "    b", "    c", "    … +2 lines"]
    t.feed(ev("tool.started", call_id="c2", name="read", input={"path": "x"}))
    out = lines(t.feed(ev("tool.finished", call_id="c2", name="read", result="", is_error=True, latency=12.0)))
    assert out == ["✗ read x · 12.0s", "  ⎿ (no output)"]


def test_a_call_denied_before_it_started_shows_what_it_would_have_run() -> None:
    t = Transcript(width=60)
    t.feed(ev("permission.requested", call_id="c1", tool="bash", input={"command": "rm -rf build"}))
    t.feed(ev("permission.resolved", call_id="c1", decision="deny", scope="once", client="cli#1"))
    out = lines(t.feed(ev("tool.finished", call_id="c1", name="bash", result="denied by cli#1",
                          is_error=True, latency=0.0)))
    assert out[0] == "✗ bash rm -rf build · 0.00s"


def test_control_characters_in_results_are_not_printed() -> None:
    t = Transcript()
    t.feed(ev("tool.started", call_id="c1", name="bash", input={"command": "x"}))
    out = lines(t.feed(ev("tool.finished", call_id="c1", name="bash", result="\x1b[31mred\x1b[0m\r\tx",
                          is_error=False, latency=0.0)))
    assert out[1] == "  ⎿ [31mred[0m    x"


def test_answers_say_who_gave_them() -> None:
    t = Transcript()
    assert t.feed(ev("permission.requested", call_id="c1", tool="bash", input={"command": "rm x"})) == []
    out = lines(t.feed(ev("permission.resolved", call_id="c1", decision="approve", scope="session",
                          client="shell#2")))
    assert out == ["✓ approved for the session by shell#2: bash rm x"]
    t.feed(ev("permission.requested", call_id="c2", tool="bash", input={"command": "rm y"}))
    out = lines(t.feed(ev("permission.resolved", call_id="c2", decision="deny", scope="once",
                          client="cli#5", reason="not now")))
    assert out == ["✗ denied by cli#5: bash rm y · not now"]
    t.feed(ev("human.asked", call_id="q1", question="Which db?", choices=["a", "b"]))
    out = lines(t.feed(ev("human.answered", call_id="q1", answer="b", client="shell#3")))
    assert out == ["✓ Which db? → b  (answered by shell#3)"]


def test_sub_agent_lines_are_indented_under_their_call() -> None:
    t = Transcript()
    path = {"path": ["c1"]}
    assert lines(t.feed(ev("text.delta", text="sub text\nmore", **path))) == ["  │ sub text"]
    assert lines(t.live()) == ["  │ more"]
    t.feed(ev("tool.started", call_id="c2", name="read", input={"path": "a"}, **path))
    out = lines(t.feed(ev("tool.finished", call_id="c2", name="read", result="x", is_error=False,
                          latency=0.0, **path)))
    assert out == ["  │ ● read a · 0.00s", "  │   ⎿ x"]


def test_run_finished_commits_what_was_streaming_then_the_summary() -> None:
    t = Transcript()
    t.feed(ev("text.delta", text="cut sho"))
    out = lines(t.feed(ev("run.finished", reason="aborted", turns=1, duration=2.0,
                          usage={"input_tokens": 3, "output_tokens": 4}, error="aborted by the user")))
    assert out == ["cut sho", "■ aborted · 1 turns · 7 tokens (3 in, 4 out) · 2.0s · aborted by the user"]
    assert t.live() == []


def test_user_messages_runs_and_steering() -> None:
    t = Transcript()
    assert lines(t.feed(ev("run.started", run="r1", agent="default", mode="agent", model="m"))) == [
        "", "▶ run r1 · default · agent · m"]
    assert lines(t.feed(ev("message.user", text="do it\nwell", origin="task"))) == ["› do it", "  well"]
    assert lines(t.feed(ev("steer.queued", text="faster"))) == ["» faster  (steering)"]
    # Steering entering the history was already shown when it was queued.
    assert t.feed(ev("message.user", text="faster", origin="steer")) == []


def test_a_custom_command_hook_context_and_hook_failures() -> None:
    t = Transcript()
    expanded = "Review a.py\nfor:\n- speed\n- memory"
    out = lines(t.feed(ev("message.user", text=expanded, origin="task", command="/review a.py")))
    assert out == ["› /review a.py", "  Review a.py", "  for:", "  - speed", "  … +1 lines"]
    assert lines(t.feed(ev("message.user", text="run the tests first", origin="hook"))) == [
        "◆ hook: run the tests first"]
    assert lines(t.feed(ev("stop_hooks.finished", failures=["hook 'x' exited with status 1"]))) == [
        "hook failed: hook 'x' exited with status 1"]
    assert lines(t.feed(ev("stop_hooks.finished", reason="go on"))) == []


def test_a_plan_is_a_numbered_list_with_its_files() -> None:
    out = lines(Transcript().feed(ev("plan", steps=[{"step": 1, "text": "Read it", "files": ["a.py"]},
                                                    {"step": 2, "text": "Fix it"}])))
    assert out == ["plan:", "1. Read it  [a.py]", "2. Fix it"]


def test_a_change_of_tools_shows_in_the_transcript() -> None:
    out = lines(Transcript().feed(ev("tools.changed", added=[], removed=["time__now"], note="...")))
    assert out == ["⚙ tools changed since the last run (the model is told) · gone: time__now"]
