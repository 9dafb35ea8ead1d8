"""The Anthropic Messages wire format without IO: request bodies, the fold of recorded SSE
streams, error statuses (roost.daemon.providers._anthropic_wire).

tests/fakes/transcripts/anthropic_text.sse, anthropic_tool_use.sse and anthropic_thinking.sse
are the examples of Anthropic's "Streaming Messages" page (the thinking signature, elided
there, is completed); anthropic_web_search_paused.sse and anthropic_web_search_cited.sse
follow the web search tool's streaming example (server_tool_use, its result, citations); anthropic_parallel_tools.sse has the usage of today's API, with cache
counts, the nested cache_creation object and service_tier. Other streams are written out
here event by event, in the same documented shape.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from roost.daemon.providers._anthropic_wire import AnthropicFold, request_params, status_error
from roost.daemon.providers._base import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
    WebSearch,
)
from roost.daemon.providers._wire import json_body
from tests.daemon.providers._vendors import (
    HI,
    MODEL,
    Deltas,
    fold_events,
    fold_sse,
    read_transcript,
    transcript,
)

EPHEMERAL = {"type": "ephemeral"}
TOOLS = (
    ToolSpec("read", "Read a file.", {"type": "object",
                                      "properties": {"path": {"type": "string"}}}),
    ToolSpec("bash", "Run a command.", {"type": "object",
                                        "properties": {"command": {"type": "string"}}}),
)


def sent(request: ModelRequest) -> Any:
    """The body as the server reads it: the params, written as the provider writes them."""
    return json.loads(json_body(request_params(request)))


# -- the request --------------------------------------------------------------------------------


def test_request_is_built_from_the_neutral_request() -> None:
    request = ModelRequest(
        model=MODEL,
        system="You are roost.",
        messages=(
            {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": ""},  # empty text: the API rejects it, so dropped
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file",
                 "is_error": True},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B", "is_error": False},
            ]},
        ),
        tools=TOOLS[:1],
        max_tokens=1234,
    )

    body = sent(request)

    assert list(body) == ["max_tokens", "messages", "model", "stream", "system", "tools"]
    assert body["model"] == MODEL
    assert body["max_tokens"] == 1234
    assert body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "You are roost.",
                               "cache_control": EPHEMERAL}]
    assert body["tools"] == [{"name": "read", "description": "Read a file.",
                              "input_schema": {"type": "object",
                                               "properties": {"path": {"type": "string"}}},
                              "cache_control": EPHEMERAL}]
    assert "thinking" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file",
             "is_error": True},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B",
             "cache_control": EPHEMERAL},
        ]},
    ]


def test_no_system_and_no_tools_are_left_out() -> None:
    body = sent(ModelRequest(model=MODEL, system="", messages=HI.messages))
    assert "system" not in body and "tools" not in body


@pytest.mark.parametrize(
    ("think", "max_tokens", "budget", "sent_max_tokens"),
    [
        (2000, 8192, 2000, 8192),     # fits: sent as is
        (500, 8192, 1024, 8192),      # below the API's minimum: raised to 1024
        (1, 8192, 1024, 8192),
        (8192, 8192, 8192, 16384),    # max_tokens must be above the budget, not equal
        (10000, 4096, 10000, 14096),  # budget + the room the caller asked for
        (2000, 1000, 2000, 3000),
    ],
)
def test_think_becomes_a_thinking_budget_below_max_tokens(
    think: int, max_tokens: int, budget: int, sent_max_tokens: int,
) -> None:
    body = sent(ModelRequest(model=MODEL, system="s", messages=HI.messages,
                             max_tokens=max_tokens, think=think))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == sent_max_tokens
    assert body["max_tokens"] > body["thinking"]["budget_tokens"]


@pytest.mark.parametrize("think", [None, 0, -5])
def test_no_think_sends_no_thinking(think: int | None) -> None:
    body = sent(ModelRequest(model=MODEL, system="s", messages=HI.messages, max_tokens=1000,
                             think=think))
    assert "thinking" not in body
    assert body["max_tokens"] == 1000


@pytest.mark.parametrize(("block", "field"), [
    ({"type": "tool_use", "name": "read", "input": {}}, "id"),
    ({"type": "tool_result", "content": "A"}, "tool_use_id"),
    ({"type": "thinking", "thinking": "hm"}, "signature"),
    ({"type": "redacted_thinking"}, "data"),
    ({"type": "text"}, "text"),
])
def test_a_block_without_a_field_the_api_needs_is_not_sent(block: dict[str, Any], field: str) -> None:
    request = ModelRequest(model=MODEL, system="", messages=({"role": "user", "content": [block]},))
    with pytest.raises(ProviderError, match=(
        rf"^anthropic: cannot send a {block['type']} block without '{field}'$"
    )):
        request_params(request)


# -- prompt caching -----------------------------------------------------------------------------


def cache_marks(value: Any, path: str = "") -> list[str]:
    """Where ``cache_control`` appears in a request body, as paths like ``tools.1``."""
    found: list[str] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            assert value["cache_control"] == EPHEMERAL
            found.append(path)
        for key, item in value.items():
            found += cache_marks(item, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += cache_marks(item, f"{path}.{i}".lstrip("."))
    return found


def without_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_marks(v) for v in value]
    return value


def test_cache_breakpoints_on_last_tool_system_and_last_block() -> None:
    messages = (
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "text", "text": "and now b"},
        ]},
    )
    request = ModelRequest(model=MODEL, system="You are roost.", messages=messages, tools=TOOLS)
    before = copy.deepcopy(request.messages)

    body = sent(request)

    assert cache_marks(body) == ["messages.2.content.1", "system.0", "tools.1"]
    assert len(cache_marks(body)) <= 4  # the API's limit
    assert body["system"] == [{"type": "text", "text": "You are roost.",
                               "cache_control": EPHEMERAL}]
    assert body["messages"][2]["content"][1] == {"type": "text", "text": "and now b",
                                                 "cache_control": EPHEMERAL}
    assert request.messages == before  # marked on the copies sent, not on the history


def test_a_string_last_message_becomes_a_marked_text_block() -> None:
    body = sent(HI)
    assert cache_marks(body) == ["messages.0.content.0", "system.0"]  # no tools: 2 marks
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}]
    assert HI.messages == ({"role": "user", "content": "hi"},)


def test_cache_mark_skips_thinking_and_drops_marks_from_elsewhere() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="},
             "cache_control": EPHEMERAL}  # a mark we did not place: dropped
    request = ModelRequest(model=MODEL, system="", messages=(
        {"role": "user", "content": [image, {"type": "text", "text": "what is it?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "It is"},
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "abc"},
        ]},
    ))
    params = request_params(request)
    # Thinking blocks cannot carry cache_control: the last block that can is marked.
    assert cache_marks(params) == ["messages.1.content.0"]
    # The image goes as it came, in the API's own shape, less the mark.
    assert params["messages"][0]["content"][0] == {k: v for k, v in image.items()
                                                   if k != "cache_control"}
    assert "cache_control" in image  # the request's own block is left alone


def test_a_long_session_reads_its_history_from_the_cache() -> None:
    turns = [
        ({"input_tokens": 20, "output_tokens": 30, "cache_creation_input_tokens": 5000,
          "cache_read_input_tokens": 0}, "toolu_1"),
        ({"input_tokens": 3, "output_tokens": 25, "cache_creation_input_tokens": 90,
          "cache_read_input_tokens": 5000}, "toolu_2"),
        ({"input_tokens": 3, "output_tokens": 10, "cache_creation_input_tokens": 70,
          "cache_read_input_tokens": 5090}, None),
    ]
    history: list[Any] = [{"role": "user", "content": "list the files, twice"}]
    bodies, usages = [], []
    for usage, tool_id in turns:
        request = ModelRequest(model=MODEL, system="You are roost. " * 200,
                               messages=tuple(history), tools=TOOLS)
        bodies.append(sent(request))
        block = ({"type": "text", "text": "done"} if tool_id is None else
                 {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": "ls"}})
        fold = AnthropicFold()
        fold_events(fold, reply_events(block, stop_reason="end_turn" if tool_id is None
                                       else "tool_use", usage=usage))
        result = fold.reply()
        usages.append(result.usage)
        history.append({"role": "assistant", "content": result.content})
        if tool_id is not None:
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "a b c"}]})

    assert usages == [usage for usage, _ in turns]  # the server's counts, mapped as sent
    for body in bodies:
        last = len(body["messages"]) - 1
        assert cache_marks(body) == [f"messages.{last}.content.0", "system.0", "tools.1"]
    # Each request starts with the previous one, marks aside: the cached prefix is reusable.
    for before, after in zip(bodies, bodies[1:]):
        previous = without_marks(before)
        assert without_marks(after)["messages"][:len(previous["messages"])] == previous["messages"]
        assert without_marks(after)["system"] == previous["system"]
        assert without_marks(after)["tools"] == previous["tools"]


# -- streams, written out as the API sends them -------------------------------------------------


def event(name: str, **fields: Any) -> tuple[str, str]:
    """One SSE event: its name and its data."""
    return name, json.dumps({"type": name, **fields})


def reply_events(*blocks: dict[str, Any], stop_reason: str = "end_turn",
                 usage: dict[str, int] | None = None) -> list[tuple[str, str]]:
    """A whole reply's events. Text and thinking come as their ``deltas`` (or in one piece),
    a tool's input as its ``partial_json`` pieces (or whole)."""
    usage = usage or {"input_tokens": 10, "output_tokens": 5}
    events = [event("message_start", message={
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": MODEL,
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}),
        event("ping")]
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t}
                      for t in block.get("deltas", [block.get("text")])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": t}
                      for t in block.get("deltas", [block.get("thinking")])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            parts = block.get("partial_json", ["", json.dumps(block.get("input"))])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
        else:
            start, deltas = block, []
        events.append(event("content_block_start", index=i, content_block=start))
        events += [event("content_block_delta", index=i, delta=d) for d in deltas]
        events.append(event("content_block_stop", index=i))
    events.append(event("message_delta", delta={"stop_reason": stop_reason, "stop_sequence": None},
                        usage={"output_tokens": usage["output_tokens"]}))
    events.append(event("message_stop"))
    return events


def fold(events: list[tuple[str, str]]) -> tuple[Deltas, ModelReply]:
    folding = AnthropicFold()
    deltas = fold_events(folding, events)
    return deltas, folding.reply()


def test_thinking_comes_back_with_signature_and_is_sent_back_unchanged() -> None:
    deltas, first = fold(reply_events(
        {"type": "thinking", "deltas": ["The user ", "wants a ", "file."],
         "signature": "EqQBCkYIARgCKkD+sig=="},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "deltas": ["Reading ", "it."]},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        stop_reason="tool_use",
    ))

    thinking = {"type": "thinking", "thinking": "The user wants a file.",
                "signature": "EqQBCkYIARgCKkD+sig=="}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    assert first.content[:2] == (thinking, redacted)
    assert deltas == [("reasoning", "The user "), ("reasoning", "wants a "), ("reasoning", "file."),
                      ("text", "Reading "), ("text", "it.")]

    second = ModelRequest(model=MODEL, system="be brief", messages=(
        *HI.messages,
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "A"}]},
    ))
    assert sent(second)["messages"][1]["content"] == [
        thinking, redacted, {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}]


def test_tool_use_input_is_assembled_from_json_chunks() -> None:
    args = {"path": "src/é.py", "lines": [1, 20], "opts": {"follow": True, "note": "a \"q\""}}
    text = json.dumps(args)
    parts = ["", text[:3], text[3:11], text[11:12], text[12:30], text[30:]]
    deltas, result = fold(reply_events(
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "partial_json": parts},
        {"type": "tool_use", "id": "toolu_10", "name": "list", "partial_json": [""]},
        {"type": "tool_use", "id": "toolu_11", "name": "ls", "partial_json": []},
        stop_reason="tool_use",
    ))
    assert result.content == (
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "input": args},
        {"type": "tool_use", "id": "toolu_10", "name": "list", "input": {}},
        {"type": "tool_use", "id": "toolu_11", "name": "ls", "input": {}},
    )
    assert deltas == [("text", "Let me look.")]  # tool JSON is not reported as deltas


def test_usage_includes_cache_tokens() -> None:
    usage = {"input_tokens": 12, "output_tokens": 34, "cache_read_input_tokens": 5000,
             "cache_creation_input_tokens": 700}
    _, result = fold(reply_events({"type": "text", "text": "ok"}, usage=usage))
    assert result.usage == usage
    assert all(type(v) is int for v in result.usage.values())


def test_usage_leaves_out_absent_cache_counts() -> None:
    _, result = fold(reply_events({"type": "text", "text": "ok"},
                                  usage={"input_tokens": 3, "output_tokens": 4}))
    assert result.usage == {"input_tokens": 3, "output_tokens": 4}


@pytest.mark.parametrize(
    "stop_reason",
    ["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"],
)
def test_stop_reason_is_passed_through(stop_reason: str) -> None:
    _, result = fold(reply_events({"type": "text", "text": "partial"}, stop_reason=stop_reason))
    assert result.stop_reason == stop_reason
    assert result.content == ({"type": "text", "text": "partial"},)


def test_unknown_events_and_deltas_are_ignored_and_unknown_blocks_kept() -> None:
    events = reply_events({"type": "text", "text": "ok"},
                          {"type": "container_upload", "file_id": "file_1"})
    events.insert(3, event("content_block_delta", index=0,
                           delta={"type": "something_delta", "detail": {}}))
    events.insert(1, event("something_new", detail=1))
    deltas, result = fold(events)
    assert deltas == [("text", "ok")]
    assert result.content == ({"type": "text", "text": "ok"},
                              {"type": "container_upload", "file_id": "file_1"})


# -- web search: the server tool, its blocks, a paused turn ---------------------------------------


ASK = {"role": "user", "content": "what does a nursery do?"}


def test_web_search_is_offered_as_the_server_tool_after_the_client_tools() -> None:
    search = WebSearch(max_uses=3, allowed_domains=("docs.python.org",))
    body = sent(ModelRequest(model=MODEL, system="", messages=(ASK,), tools=TOOLS, web_search=search))
    assert [t.get("name") for t in body["tools"]] == ["read", "bash", "web_search"]
    assert body["tools"][-1] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 3,
                                 "allowed_domains": ["docs.python.org"], "cache_control": EPHEMERAL}
    assert "cache_control" not in body["tools"][1]
    alone = sent(ModelRequest(model=MODEL, system="", messages=(ASK,),
                              web_search=WebSearch(blocked_domains=("example.com",))))
    assert alone["tools"] == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5,
                               "blocked_domains": ["example.com"], "cache_control": EPHEMERAL}]
    assert "tools" not in sent(ModelRequest(model=MODEL, system="", messages=(ASK,)))


def test_a_paused_web_search_folds_into_blocks_the_api_takes_back() -> None:
    deltas, paused = read_transcript(AnthropicFold(), "anthropic_web_search_paused.sse")
    assert deltas == [("text", "I'll search for "), ("text", "that.")]
    assert paused.stop_reason == "pause_turn"
    text, search, results = paused.content
    assert text == {"type": "text", "text": "I'll search for that."}
    assert search == {"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UZnddRT5X",
                      "name": "web_search", "input": {"query": "trio nursery cancel scope"}}
    assert results["type"] == "web_search_tool_result"
    assert [r["url"] for r in results["content"]] == [
        "https://trio.readthedocs.io/en/stable/reference-core.html",
        "https://vorpus.org/blog/notes-on-structured-concurrency/",
    ]
    assert paused.usage == {"input_tokens": 2679, "output_tokens": 46, "web_search_requests": 1}

    # Sent back last, as the API continues a paused turn: every block as it came (the
    # encrypted contents unchanged), the cache mark on the last.
    body = sent(ModelRequest(model=MODEL, system="", messages=(ASK, {"role": "assistant", "content": paused.content})))
    back = body["messages"][-1]
    assert back["role"] == "assistant"
    assert back["content"][:2] == [text, search]
    assert back["content"][2] == {**results, "cache_control": EPHEMERAL}


def test_citations_are_kept_on_their_text_and_sent_back() -> None:
    deltas, cited = read_transcript(AnthropicFold(), "anthropic_web_search_cited.sse")
    assert "".join(t for _, t in deltas) == "Here is what I found. A nursery waits for all of its children before it exits."
    first, second = cited.content
    assert first == {"type": "text", "text": "Here is what I found. "}
    assert second["text"] == "A nursery waits for all of its children before it exits."
    [source] = second["citations"]
    assert source["type"] == "web_search_result_location"
    assert source["url"] == "https://trio.readthedocs.io/en/stable/reference-core.html"
    assert source["encrypted_index"] == "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm"
    assert cited.usage["web_search_requests"] == 0

    body = sent(ModelRequest(model=MODEL, system="", messages=(
        ASK, {"role": "assistant", "content": cited.content}, {"role": "user", "content": "thanks"})))
    assert body["messages"][1]["content"][1] == {"type": "text", "text": second["text"], "citations": [source]}


def test_a_server_tool_input_that_is_not_json_is_an_error() -> None:
    events = reply_events({"type": "text", "text": "ok"})
    events.insert(-2, event("content_block_start", index=1,
                            content_block={"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}))
    events.insert(-2, event("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": "{\"query"}))
    events.insert(-2, event("content_block_stop", index=1))
    with pytest.raises(ProviderError, match="server_tool_use 'web_search' input is not JSON"):
        fold(events)


# -- the documented transcripts -----------------------------------------------------------------


def test_text_transcript() -> None:
    deltas, result = read_transcript(AnthropicFold(), "anthropic_text.sse")
    assert deltas == [("text", "Hello"), ("text", "!")]
    assert result == ModelReply(content=({"type": "text", "text": "Hello!"},),
                                stop_reason="end_turn",
                                usage={"input_tokens": 25, "output_tokens": 15})


def test_tool_use_transcript() -> None:
    deltas, result = read_transcript(AnthropicFold(), "anthropic_tool_use.sse")
    text = "Okay, let's check the weather for San Francisco, CA:"
    assert "".join(t for _, t in deltas) == text
    assert {kind for kind, _ in deltas} == {"text"}
    assert result.stop_reason == "tool_use"
    assert result.content == (
        {"type": "text", "text": text},
        {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
         "input": {"location": "San Francisco, CA", "unit": "fahrenheit"}},
    )
    assert result.usage == {"input_tokens": 472, "output_tokens": 89}


def test_parallel_tools_transcript_with_cache_usage() -> None:
    _, result = read_transcript(AnthropicFold(), "anthropic_parallel_tools.sse")
    assert result.stop_reason == "tool_use"
    assert result.content == (
        {"type": "text", "text": "I'll check the weather in both cities."},
        {"type": "tool_use", "id": "toolu_01HpVbD3LnWq8tKy2mRz6sUe", "name": "get_weather",
         "input": {"location": "Paris, France"}},
        {"type": "tool_use", "id": "toolu_01Xq4NfT7cJrGm9wAe2yBk5D", "name": "get_weather",
         "input": {"location": "Tokyo, Japan", "unit": "celsius"}},
    )
    assert result.usage == {"input_tokens": 37, "output_tokens": 118,
                            "cache_read_input_tokens": 4830,
                            "cache_creation_input_tokens": 312}


def transcript_thinking() -> tuple[str, str]:
    """The thinking text and signature of anthropic_thinking.sse, read without the fold."""
    thinking, signature = [], ""
    for line in transcript("anthropic_thinking.sse").decode().splitlines():
        if line.startswith("data: "):
            delta = json.loads(line[6:]).get("delta", {})
            if delta.get("type") == "thinking_delta":
                thinking.append(delta["thinking"])
            elif delta.get("type") == "signature_delta":
                signature = delta["signature"]
    return "".join(thinking), signature


def test_thinking_transcript_and_its_signature_round_trip_byte_for_byte() -> None:
    thinking, signature = transcript_thinking()
    assert "×" in thinking and "\n" in thinking and "+" in signature and "/" in signature
    request = ModelRequest(model=MODEL, system="s", think=2048, messages=(
        {"role": "user", "content": "What is the GCD of 1071 and 462?"},))

    deltas, first = read_transcript(AnthropicFold(), "anthropic_thinking.sse")

    answer = "The greatest common divisor of 1071 and 462 is **21**."
    assert [kind for kind, _ in deltas] == ["reasoning", "reasoning", "text"]
    assert "".join(t for k, t in deltas if k == "reasoning") == thinking
    assert first.content == ({"type": "thinking", "thinking": thinking, "signature": signature},
                             {"type": "text", "text": answer})
    assert first.stop_reason == "end_turn"
    assert first.usage == {}  # the documented example carries no usage

    second = ModelRequest(model=MODEL, system="s", think=2048, messages=(
        *request.messages,
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "thanks"},
    ))
    body = json_body(request_params(second))
    back = json.loads(body)["messages"][1]["content"][0]
    assert back == {"type": "thinking", "thinking": thinking, "signature": signature}
    # As the API sent them: UTF-8 as is, nothing escaped that was not.
    assert json.dumps(signature, ensure_ascii=False).encode() in body
    assert json.dumps(thinking, ensure_ascii=False).encode() in body


@pytest.mark.parametrize("name", ["anthropic_text.sse", "anthropic_tool_use.sse",
                                  "anthropic_thinking.sse", "anthropic_parallel_tools.sse"])
def test_a_transcript_folds_the_same_however_its_bytes_are_cut(name: str) -> None:
    deltas, result = read_transcript(AnthropicFold(), name)
    for size in (1, 2, 7, 64):
        fold = AnthropicFold()
        assert fold_sse(fold, transcript(name), size) == deltas, size
        assert fold.reply() == result, size


# -- streams that fail --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["anthropic_text.sse", "anthropic_tool_use.sse",
                                  "anthropic_thinking.sse", "anthropic_parallel_tools.sse"])
def test_a_stream_cut_off_before_its_end_is_a_provider_error(name: str) -> None:
    raw = transcript(name)
    whole, _ = read_transcript(AnthropicFold(), name)
    for cut in range(0, len(raw), 37):
        fold = AnthropicFold()
        deltas = fold_sse(fold, raw[:cut])
        assert deltas == whole[:len(deltas)]  # what came is reported, in order
        with pytest.raises(ProviderError, match="^anthropic: stream ended before message_stop$"):
            fold.reply()


def test_error_event_inside_the_stream() -> None:
    events = reply_events({"type": "text", "deltas": ["a", "b"]})
    fold = AnthropicFold()
    assert fold_events(fold, events[:4]) == [("text", "a")]
    with pytest.raises(ProviderError,
                       match="^anthropic: overloaded_error during the stream: Overloaded$"):
        fold.feed("error", json.dumps({"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}}))


def test_an_error_event_without_details() -> None:
    with pytest.raises(ProviderError, match="^anthropic: error during the stream: $"):
        AnthropicFold().feed("error", '{"type": "error"}')


_START = event("message_start", message={"usage": {"input_tokens": 5, "output_tokens": 1}})
_TEXT_START = event("content_block_start", index=0, content_block={"type": "text", "text": ""})
_HELLO = event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hello"})


@pytest.mark.parametrize(
    ("events", "message", "reported"),
    [
        pytest.param([("message_start", '{"type":"message_start","message":')],
                     r"^anthropic: malformed message_start event \(JSONDecodeError: ",
                     [], id="bad-json-first"),
        pytest.param([_START, _TEXT_START, _HELLO,
                      ("content_block_delta", '{"type":"content_block_delta","index":0,'
                                              '"delta":{"type":"text_delta","text":"wor'), _HELLO],
                     r"^anthropic: malformed content_block_delta event \(JSONDecodeError: ",
                     [("text", "Hello")], id="bad-json-midway"),
        pytest.param([_START, _TEXT_START,
                      ("content_block_delta", '{"type":"content_block_delta","index":0}')],
                     r"^anthropic: malformed content_block_delta event \(KeyError: 'delta'\)$",
                     [], id="missing-field"),
        pytest.param([("message", "<html><body>502 Bad Gateway</body></html>")],
                     r"^anthropic: malformed message event \(JSONDecodeError: ",
                     [], id="not-sse-json"),
    ],
)
def test_malformed_events_are_provider_errors(
    events: list[tuple[str, str]], message: str, reported: list[tuple[str, str]],
) -> None:
    fold = AnthropicFold()
    deltas = Deltas()
    with pytest.raises(ProviderError, match=message):
        fold_events(fold, events, deltas)
    assert deltas == reported


def test_a_body_that_is_not_sse_ends_before_message_stop() -> None:
    fold = AnthropicFold()
    assert fold_sse(fold, b"<html><body>502 Bad Gateway</body></html>\n") == []
    with pytest.raises(ProviderError, match="^anthropic: stream ended before message_stop$"):
        fold.reply()


def test_a_reply_without_a_stop_reason() -> None:
    events = [e for e in reply_events({"type": "text", "text": "ok"}) if e[0] != "message_delta"]
    with pytest.raises(ProviderError, match="^anthropic: reply has no stop_reason$"):
        fold(events)


# -- error statuses -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403, 404])
def test_bad_key_no_access_or_unknown_model_is_unavailable(status: int) -> None:
    error = status_error(status, "authentication_error", "invalid x-api-key", 0)
    assert isinstance(error, ProviderUnavailable)
    assert error.message == f"anthropic: {status} authentication_error: invalid x-api-key"


def test_other_statuses_are_errors_naming_the_retries() -> None:
    error = status_error(529, "overloaded_error", "Overloaded", 2)
    assert type(error) is ProviderError
    assert error.message == "anthropic: 529 overloaded_error: Overloaded (after 2 retries)"
    assert status_error(500, None, "Internal", 1).message == "anthropic: 500 error: Internal (after 1 retry)"


def test_media_parts_become_base64_blocks_and_audio_a_note() -> None:
    image = {"type": "image", "media_type": "image/png", "sha256": "ab", "bytes": 3, "width": 2, "height": 1, "data": "AAAA"}
    pdf = {"type": "document", "media_type": "application/pdf", "sha256": "cd", "bytes": 3, "data": "BBBB"}
    audio = {"type": "audio", "media_type": "audio/wav", "sha256": "ef", "bytes": 3, "data": "CCCC"}
    messages = (
        {"role": "user", "content": [{"type": "text", "text": "look"}, pdf]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "a.png"}, image, audio]}]},
    )
    params = request_params(ModelRequest(model="claude-test", system="", messages=messages))
    assert params["messages"][0]["content"][1] == {
        "type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "BBBB"}
    }
    result = params["messages"][2]["content"][0]
    assert result["content"] == [
        {"type": "text", "text": "a.png"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "text", "text": "[audio audio/wav: not sent, Anthropic models take no audio]"},
    ]


def test_the_system_prompts_tail_comes_after_the_cache_breakpoint() -> None:
    body = sent(ModelRequest(model=MODEL, system="You are roost.", system_tail="Similar memories: ...", messages=(ASK,)))
    assert body["system"] == [
        {"type": "text", "text": "You are roost.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "Similar memories: ..."},
    ]
    # Two requests that differ in their tail share the cached part byte for byte.
    other = sent(ModelRequest(model=MODEL, system="You are roost.", system_tail="Something else.", messages=(ASK,)))
    assert other["system"][0] == body["system"][0]
    assert sent(ModelRequest(model=MODEL, system="", system_tail="only", messages=(ASK,)))["system"] == [{"type": "text", "text": "only"}]
