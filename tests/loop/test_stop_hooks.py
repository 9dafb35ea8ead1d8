"""Hooks as the loop sees them: Stop hooks before a run ends, context that
UserPromptSubmit hooks add, and the custom command a task came from."""

from __future__ import annotations

from roost.loop import (
    CallModel,
    FinishRun,
    Guardrail,
    Phase,
    RunCheck,
    RunStopHooks,
    StopHooksFinished,
    fold,
)

from ._driver import Driver, calls, only, text, types


def stop(d: Driver, reason: str | None = None, failures: tuple[str, ...] = ()):
    return d.feed(StopHooksFinished(d.tick(), reason, failures))


def test_a_run_with_stop_hooks_asks_them_before_it_ends():
    d = Driver()
    assert only(d.submit(stop_hooks=True), "run.started").data["stop_hooks"] is True
    t = d.reply(text("all done"))
    assert types(t)[-1] == "stop_hooks.started" and d.state.phase is Phase.STOP
    [effect] = t.effects
    assert effect == RunStopHooks("r1", False, "all done")
    t = stop(d)
    assert types(t) == ["stop_hooks.finished", "run.finished"]
    assert only(t, "run.finished").data["reason"] == "done"
    assert isinstance(t.effects[-1], FinishRun)


def test_a_stop_hook_that_blocks_makes_the_run_go_on_with_its_reason():
    d = Driver()
    d.submit(stop_hooks=True)
    d.reply(text("done?"))
    t = stop(d, "the tests still fail", ("hook 'x' exited with status 1",))
    finished = only(t, "stop_hooks.finished").data
    assert finished == {"reason": "the tests still fail", "failures": ["hook 'x' exited with status 1"]}
    message = only(t, "message.user").data
    assert message == {"text": "the tests still fail", "origin": "hook"}
    [call] = calls(t)
    assert call.messages[-1]["content"][-1] == text("the tests still fail")
    # The second time the hooks are told a Stop hook already made the run go on.
    t = d.reply(text("fixed"))
    assert only(t, "stop_hooks.started").data == {"active": True}
    assert t.effects == (RunStopHooks("r1", True, "fixed"),)
    t = stop(d)
    assert only(t, "run.finished").data["reason"] == "done" and d.state.run is None
    assert fold(d.log) == d.state


def test_stop_hooks_never_run_past_max_turns():
    d = Driver()
    d.submit(stop_hooks=True, max_turns=1)
    d.reply(text("done"))
    t = stop(d, "go on")
    assert "message.user" not in types(t)
    assert only(t, "run.finished").data["reason"] == "max_turns"


def test_steering_queued_while_the_hooks_run_goes_to_the_model():
    d = Driver()
    d.submit(stop_hooks=True)
    d.reply(text("done"))
    d.steer("one more thing")
    t = stop(d)
    assert [e.data.get("origin") for e in t.events if e.type == "message.user"] == ["steer"]
    assert isinstance(t.effects[0], CallModel)


def test_a_stop_hook_reason_passes_the_input_guardrails():
    d = Driver()
    rail = Guardrail("no-prod", "input", "prod[.]example[.]com", "the production host")
    d.submit(stop_hooks=True, guardrails=(rail,))
    d.reply(text("done"))
    t = stop(d, "deploy to prod.example.com now")
    assert only(t, "message.user").data["text"].startswith("[withheld:")
    assert only(t, "run.finished").data["reason"] == "guardrail"


def test_an_exec_attempt_asks_the_stop_hooks_before_its_check():
    d = Driver()
    d.submit(mode="exec", check="bash ./check.sh", stop_hooks=True)
    t = d.reply(text("done"))
    assert isinstance(t.effects[-1], RunStopHooks)
    t = stop(d)
    assert types(t)[-1] == "check.started" and isinstance(t.effects[-1], RunCheck)


def test_hooks_interrupted_by_a_restart_end_the_run_or_run_again_in_exec_mode():
    d = Driver()
    d.submit(stop_hooks=True)
    d.reply(text("done"))
    t = d.interrupted()
    assert only(t, "run.finished").data["reason"] == "error"
    d = Driver()
    d.submit(mode="exec", check="bash ./check.sh", stop_hooks=True)
    d.reply(text("done"))
    t = d.interrupted()
    assert RunStopHooks("r1", False, "done") in t.effects and d.state.phase is Phase.STOP


def test_a_run_without_stop_hooks_ends_as_it_always_did():
    d = Driver()
    d.submit()
    t = d.reply(text("done"))
    assert types(t)[-1] == "run.finished" and "stop_hooks" not in d.log[1].data


def test_prompt_hook_context_follows_the_task_as_messages_of_their_own():
    d = Driver()
    t = d.submit("fix it", context=("branch: main", "today is Monday"))
    messages = [e.data for e in t.events if e.type == "message.user"]
    assert messages == [
        {"text": "fix it", "origin": "task"},
        {"text": "branch: main", "origin": "hook"},
        {"text": "today is Monday", "origin": "hook"},
    ]
    [call] = calls(t)
    assert [b["text"] for b in call.messages[-1]["content"]] == ["fix it", "branch: main", "today is Monday"]


def test_prompt_hook_context_passes_the_input_guardrails():
    d = Driver()
    rail = Guardrail("no-prod", "input", "prod[.]example[.]com", "the production host")
    t = d.submit("fix it", context=("see prod.example.com",), guardrails=(rail,))
    assert only(t, "run.finished").data["reason"] == "guardrail"
    assert "prod.example.com" not in str([e.data for e in t.events if e.type == "message.user"])


def test_a_custom_command_is_recorded_with_the_task_it_became():
    d = Driver()
    command = {"name": "review", "arguments": "src/a.py", "source": "/p/.claude/commands/review.md",
               "typed": "/review src/a.py"}
    t = d.submit("Review src/a.py carefully.", command=command)
    assert only(t, "run.started").data["command"] == command
    assert only(t, "message.user").data == {
        "text": "Review src/a.py carefully.", "origin": "task", "command": "/review src/a.py"
    }
