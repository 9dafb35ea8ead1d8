"""Tools a provider runs itself (Anthropic's web search): their blocks are kept in the reply
as the provider sent them, and a turn the provider paused (``pause_turn``) goes on from the
paused reply, as one turn of the history."""

from __future__ import annotations

from typing import Any

from ._driver import Driver, calls, only, text, types

SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "trio nursery"}}
RESULTS = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "title": "Trio", "url": "https://trio.example/", "encrypted_content": "EqQB"}],
}
CITED = {
    "type": "text",
    "text": "A nursery waits for its children.",
    "citations": [{"type": "web_search_result_location", "url": "https://trio.example/", "title": "Trio",
                   "cited_text": "waits", "encrypted_index": "Eo8B"}],
}


def _searched(d: Driver, **kw: Any) -> None:
    d.submit("what does a trio nursery do?", tools=("read", "web_search"), **kw)


def test_a_paused_turn_is_continued_from_the_paused_reply() -> None:
    d = Driver()
    _searched(d)
    t = d.reply(text("Let me look."), SEARCH, RESULTS, stop_reason="pause_turn")
    assert types(t) == ["message.assistant", "step.finished", "step.started"]
    [call] = calls(t)
    # The paused reply is sent back whole, last, for the model to carry on from.
    assert call.messages[-1] == {"role": "assistant", "content": [text("Let me look."), SEARCH, RESULTS]}

    t = d.reply(CITED)
    done = only(t, "run.finished")
    assert done.data["reason"] == "done"
    assert done.data["text"] == "Let me look.A nursery waits for its children."
    # One turn in the history, every block as the provider sent it (citations included).
    assert [m["role"] for m in d.state.messages] == ["user", "assistant"]
    assert d.state.messages[-1]["content"] == [text("Let me look."), SEARCH, RESULTS, CITED]


def test_a_pause_counts_as_a_turn() -> None:
    d = Driver()
    _searched(d, max_turns=1)
    t = d.reply(SEARCH, RESULTS, stop_reason="pause_turn")
    assert only(t, "run.finished").data["reason"] == "max_turns"
    assert not calls(t)


def test_a_stop_asked_for_during_a_paused_turn_ends_the_run_there() -> None:
    d = Driver()
    _searched(d)
    d.abort(after_step=True)
    t = d.reply(SEARCH, RESULTS, stop_reason="pause_turn")
    assert only(t, "run.finished").data["reason"] == "aborted"
    assert not calls(t)
