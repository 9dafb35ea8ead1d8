"""The Chat Completions wire format without IO: request bodies, the fold of recorded SSE
streams, error bodies (roost.daemon.providers._openai_wire).

tests/fakes/transcripts/openai_text.sse and openai_parallel_tools.sse are streams in the
shape OpenAI documents (``stream_options.include_usage``: ``usage: null`` on every chunk,
then one with ``choices: []`` and the usage, then ``[DONE]``). Other streams are written out
here chunk by chunk, in the same shape, with the variants of compatible servers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from roost.daemon.providers._base import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
)
from roost.daemon.providers._openai_wire import OpenAIFold, error_fields, request_body, status_error
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
from tests.fakes.openai_server import transcript_events

TRANSCRIPTS = ("openai_text.sse", "openai_parallel_tools.sse")


def sent(request: ModelRequest, limit_field: str = "max_tokens") -> Any:
    """The body as the server reads it: the mapping, written as the provider writes it."""
    return json.loads(json_body(request_body(request, "openai", limit_field)))


def call(id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": args}


# -- the request --------------------------------------------------------------------------------


def test_request_is_built_from_the_neutral_request() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ModelRequest(
        model=MODEL,
        system="You are roost.",
        messages=(
            {"role": "user", "content": [{"type": "text", "text": "read a.txt"},
                                         {"type": "text", "text": "and b.txt"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},  # dropped
                {"type": "redacted_thinking", "data": "abc"},  # dropped
                {"type": "text", "text": ""},
                call("call_1", "read", {"path": "a.txt"}),
                call("call_2", "read", {"path": "b.txt"}),
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "no such file",
                 "is_error": True},
                {"type": "tool_result", "tool_use_id": "call_2",
                 "content": [{"type": "text", "text": "B1"}, {"type": "text", "text": "B2"}]},
                {"type": "tool_result", "tool_use_id": "call_3", "content": "", "is_error": True},
                {"type": "text", "text": "now summarize"},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ),
        tools=(ToolSpec("read", "Read a file.", schema),),
        max_tokens=1234,
    )

    body = sent(request)

    assert body["model"] == MODEL
    assert body["max_tokens"] == 1234
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "reasoning_effort" not in body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "read", "description": "Read a file.", "parameters": schema}}]
    assert body["messages"] == [
        {"role": "system", "content": "You are roost."},
        {"role": "user", "content": "read a.txt\n\nand b.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "b.txt"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: no such file"},
        {"role": "tool", "tool_call_id": "call_2", "content": "B1\nB2"},
        {"role": "tool", "tool_call_id": "call_3", "content": "Error"},
        {"role": "user", "content": "now summarize"},
        {"role": "assistant", "content": "Done."},
    ]


def test_no_system_and_no_tools_are_left_out() -> None:
    body = sent(ModelRequest(model=MODEL, system="", messages=HI.messages))
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_an_assistant_message_of_nothing_sendable_has_empty_content() -> None:
    body = sent(ModelRequest(model=MODEL, system="", messages=(
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "text", "text": ""}]},)))
    assert body["messages"] == [{"role": "assistant", "content": ""}]


@pytest.mark.parametrize(
    ("think", "effort"),
    [(1024, "low"), (4095, "low"), (4096, "medium"), (16383, "medium"), (16384, "high"),
     (64000, "high")],
)
def test_reasoning_effort_comes_from_think(think: int, effort: str) -> None:
    body = sent(ModelRequest(model=MODEL, system="", messages=HI.messages, think=think))
    assert body["reasoning_effort"] == effort


@pytest.mark.parametrize("limit_field", ["max_tokens", "max_completion_tokens"])
def test_the_length_limit_goes_by_the_name_given(limit_field: str) -> None:
    body = sent(ModelRequest(model=MODEL, system="", messages=HI.messages, max_tokens=99,
                             think=2048), limit_field)
    assert list(body) == ["model", "messages", "stream", "stream_options", "reasoning_effort",
                          limit_field]
    assert body[limit_field] == 99


@pytest.mark.parametrize(("message", "error"), [
    ({"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]},
     "cannot send a image block in a user message"),
    ({"role": "assistant", "content": [{"type": "image", "source": {}}]},
     "cannot send a image block in an assistant message"),
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
                                   "content": [{"type": "image", "source": {}}]}]},
     "cannot send a image block in a tool result"),
    ({"role": "assistant", "content": [{"type": "tool_use", "name": "ls", "input": {}}]},
     "cannot send a tool_use block without 'id'"),
    ({"role": "user", "content": [{"type": "tool_result", "content": "A"}]},
     "cannot send a tool_result block without 'tool_use_id'"),
])
def test_an_unsendable_block_is_a_provider_error(message: dict[str, Any], error: str) -> None:
    request = ModelRequest(model=MODEL, system="", messages=(message,))
    with pytest.raises(ProviderError, match=f"^local: {error}$"):
        request_body(request, "local")


# -- streams, written out as servers send them --------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, *,
          index: int = 0, usage: dict[str, Any] | None = None) -> tuple[str, str]:
    """One ``chat.completion.chunk`` event."""
    return "message", json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
        "model": "gpt-test", "choices": [{"index": index, "delta": delta or {}, "logprobs": None,
                                          "finish_reason": finish}],
        "usage": usage})


def usage_chunk(usage: dict[str, Any]) -> tuple[str, str]:
    return "message", json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                                  "choices": [], "usage": usage})


DONE = ("message", "[DONE]")
ROLE = chunk({"role": "assistant", "content": "", "refusal": None})


def tool_piece(index: int | None, id: str | None = None, name: str | None = None,
               arguments: Any = None) -> dict[str, Any]:
    piece: dict[str, Any] = {"function": {}}
    if index is not None:
        piece["index"] = index
    if id is not None:
        piece.update(id=id, type="function")
    if name is not None:
        piece["function"]["name"] = name
    if arguments is not None:
        piece["function"]["arguments"] = arguments
    return piece


def fold(events: list[tuple[str, str]], name: str = "openai") -> tuple[Deltas, ModelReply]:
    folding = OpenAIFold(name)
    deltas = fold_events(folding, events)
    return deltas, folding.reply()


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_is_streamed_but_not_kept(key: str) -> None:
    deltas, result = fold([ROLE, chunk({key: "The user "}), chunk({key: "says hi."}),
                           chunk({"content": "Hi"}), chunk({"content": "!"}), chunk({}, "stop"),
                           DONE])
    assert deltas == [("reasoning", "The user "), ("reasoning", "says hi."),
                      ("text", "Hi"), ("text", "!")]
    assert result.content == ({"type": "text", "text": "Hi!"},)


def test_interleaved_tool_calls_are_assembled_by_index() -> None:
    a = {"path": "src/é.py", "lines": [1, 20], "opts": {"note": "a \"q\" \\ b"}}
    b = {"command": "ls -la"}
    ta, tb = json.dumps(a), json.dumps(b)
    events = [ROLE, chunk({"content": "Let me look."}),
              chunk({"tool_calls": [tool_piece(0, "call_a", "read", "")]}),
              chunk({"tool_calls": [tool_piece(1, "call_b", "bash", "")]}),
              chunk({"tool_calls": [tool_piece(2, "call_c", "ls", "")]})]
    # Uneven pieces, cutting through strings, escapes and numbers, the calls alternating.
    for pa, pb in zip([ta[:3], ta[3:11], ta[11:12], ta[12:30], ta[30:]], [tb[:1], tb[1:], "", "", ""]):
        events.append(chunk({"tool_calls": [tool_piece(0, arguments=pa)]}))
        events.append(chunk({"tool_calls": [tool_piece(1, arguments=pb)]}))
    events += [chunk({}, "tool_calls"), DONE]

    deltas, result = fold(events)

    assert result.stop_reason == "tool_use"
    assert result.content == ({"type": "text", "text": "Let me look."}, call("call_a", "read", a),
                              call("call_b", "bash", b), call("call_c", "ls", {}))
    assert deltas == [("text", "Let me look.")]  # tool arguments are not reported as deltas


def test_tool_call_quirks_of_compatible_servers() -> None:
    raw = [
        # Ollama: every parallel call at index 0, whole, told apart by id.
        [{"index": 0, "id": "call_o1", "type": "function",
          "function": {"name": "read", "arguments": '{"path": "a"}'}}],
        [{"index": 0, "id": "call_o2", "type": "function",
          "function": {"name": "read", "arguments": '{"path": "b"}'}}],
        # Gemini: no index at all.
        [{"id": "call_g1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        # LM Studio: a new id with every piece of one call; explicit nulls; a name in pieces.
        [{"index": 3, "id": "call_l1", "type": "function",
          "function": {"name": "web_", "arguments": '{"q": '}}],
        [{"index": 3, "id": "call_l2", "type": None, "function": {"name": "search",
                                                                 "arguments": '"x"}'}}],
        # No id at all (one is made up); the name repeated; arguments as an object.
        [{"index": 4, "function": {"name": "bash", "arguments": None}}],
        [{"index": 4, "function": {"name": "bash", "arguments": {"command": "true"}}}],
    ]
    _, result = fold([ROLE, *(chunk({"tool_calls": pieces}) for pieces in raw),
                      chunk({}, "stop"), DONE])
    assert result.stop_reason == "tool_use"  # "stop" with tool calls
    *named, made_up = result.content
    assert named == [call("call_o1", "read", {"path": "a"}), call("call_o2", "read", {"path": "b"}),
                     call("call_g1", "ls", {}), call("call_l1", "web_search", {"q": "x"})]
    assert made_up["name"] == "bash" and made_up["input"] == {"command": "true"}
    assert made_up["id"].startswith("call_") and len(made_up["id"]) > 10


def test_gemini_calls_without_index_or_id_continue_the_last_one() -> None:
    _, result = fold([ROLE,
                      chunk({"tool_calls": [tool_piece(None, "call_g1", "read", '{"path"')]}),
                      chunk({"tool_calls": [tool_piece(None, arguments=': "a"}')]}),
                      chunk({"tool_calls": [tool_piece(None, "call_g1", arguments="")]}),
                      chunk({}, "tool_calls"), DONE])
    assert result.content == (call("call_g1", "read", {"path": "a"}),)


@pytest.mark.parametrize(("pieces", "message"), [
    (['{"pa', "th"], r"^openai: tool call 'read' arguments are not JSON \("),
    (["[1, 2]"], r"^openai: tool call 'read' arguments are not a JSON object$"),
])
def test_tool_call_with_broken_arguments_is_a_provider_error(pieces: list[str], message: str) -> None:
    events = [ROLE, chunk({"tool_calls": [tool_piece(0, "call_1", "read", "")]}),
              *(chunk({"tool_calls": [tool_piece(0, arguments=p)]}) for p in pieces),
              chunk({}, "tool_calls"), DONE]
    with pytest.raises(ProviderError, match=message):
        fold(events)


def test_a_tool_call_without_a_name_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="^openai: a tool call came without a name$"):
        fold([ROLE, chunk({"tool_calls": [tool_piece(0, "call_1", arguments="{}")]}),
              chunk({}, "tool_calls"), DONE])


@pytest.mark.parametrize("pieces", [['{"text": "aaaa'], ["[1]"]])
def test_tool_call_cut_at_max_tokens_keeps_an_empty_input(pieces: list[str]) -> None:
    _, result = fold([ROLE, chunk({"content": "Writing"}),
                      chunk({"tool_calls": [tool_piece(0, "call_1", "write", "")]}),
                      *(chunk({"tool_calls": [tool_piece(0, arguments=p)]}) for p in pieces),
                      chunk({}, "length"), DONE])
    assert result.stop_reason == "max_tokens"
    assert result.content == ({"type": "text", "text": "Writing"}, call("call_1", "write", {}))


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal"),
     ("tool_calls", "tool_use"), ("function_call", "tool_use"),
     ("something_new", "something_new")],
)
def test_finish_reason_is_mapped(finish: str, stop_reason: str) -> None:
    _, result = fold([ROLE, chunk({"content": "partial"}), chunk({}, finish), DONE])
    assert result.stop_reason == stop_reason
    assert result.content == ({"type": "text", "text": "partial"},)


def test_done_without_a_finish_reason_is_an_end_turn() -> None:
    _, result = fold([ROLE, chunk({"content": "ok"}), DONE])
    assert result.stop_reason == "end_turn"


def test_usage_without_cache_details_and_without_usage() -> None:
    text = [ROLE, chunk({"content": "a"}), chunk({}, "stop")]
    _, first = fold([*text, usage_chunk({"prompt_tokens": 3, "completion_tokens": 4}), DONE])
    assert first.usage == {"input_tokens": 3, "output_tokens": 4}
    assert all(type(v) is int for v in first.usage.values())
    _, second = fold([*text, DONE])
    assert second.usage == {}


def test_running_usage_totals_keep_the_last() -> None:
    _, result = fold([ROLE, chunk({"content": "a"}, usage={"prompt_tokens": 9, "completion_tokens": 1}),
                      chunk({}, "stop", usage={"prompt_tokens": 9, "completion_tokens": 2}), DONE])
    assert result.usage == {"input_tokens": 9, "output_tokens": 2}


def test_fold_reads_deepseek_cache_hits_and_refusals() -> None:
    folding = OpenAIFold("deepseek")
    deltas = folding.feed("message", json.dumps({"choices": [
        {"index": 0, "delta": {"refusal": "I can't help with that."}, "finish_reason": None}]}))
    assert deltas == [("text", "I can't help with that.")]
    folding.feed("message", json.dumps({"choices": [{"index": 0, "delta": {},
                                                     "finish_reason": "content_filter"}],
                                        "usage": {"prompt_tokens": 100, "completion_tokens": 7,
                                                  "prompt_cache_hit_tokens": 64}}))
    folding.feed("message", "[DONE]")
    assert folding.reply() == ModelReply(
        content=({"type": "text", "text": "I can't help with that."},), stop_reason="refusal",
        usage={"input_tokens": 36, "output_tokens": 7, "cache_read_input_tokens": 64})


def test_choices_other_than_the_first_are_ignored() -> None:
    deltas, result = fold([ROLE, chunk({"content": "one"}), chunk({"content": "two"}, index=1),
                           chunk({}, "stop"), DONE])
    assert deltas == [("text", "one")]
    assert result.content == ({"type": "text", "text": "one"},)


def test_content_starts_with_the_first_text_reasoning_or_call() -> None:
    folding = OpenAIFold("openai")
    folding.feed(*ROLE)
    assert not folding.content_started  # the role chunk's empty content is not content
    folding.feed(*chunk({"reasoning_content": "hm"}))
    assert folding.content_started


def test_a_whole_completion() -> None:
    folding = OpenAIFold("openai")
    deltas = folding.feed_completion(json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "whole", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2}}))
    assert deltas == [("text", "whole")]
    assert folding.done
    assert folding.reply() == ModelReply(
        content=({"type": "text", "text": "whole"}, call("call_1", "ls", {})),
        stop_reason="tool_use", usage={"input_tokens": 5, "output_tokens": 2})


# -- the documented transcripts -----------------------------------------------------------------


def test_text_transcript_streams_deltas_and_usage() -> None:
    deltas, result = read_transcript(OpenAIFold("openai"), "openai_text.sse")
    pieces = ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"]
    assert deltas == [("text", p) for p in pieces]
    assert result == ModelReply(
        content=({"type": "text", "text": "Hello! How can I help you today?"},),
        stop_reason="end_turn",
        usage={"input_tokens": 19, "output_tokens": 10, "cache_read_input_tokens": 0},
    )


def test_parallel_tool_calls_transcript() -> None:
    deltas, result = read_transcript(OpenAIFold("openai"), "openai_parallel_tools.sse")
    assert deltas == []  # tool arguments are not reported as deltas
    assert result.stop_reason == "tool_use"
    assert result.content == (
        call("call_Pn2tX0cG6mHq1rVb9sKe4WdA", "get_weather", {"location": "Paris, France"}),
        call("call_7JcR3vUy5QeT8nLw2aZf0XmB", "get_weather", {"location": "Bogotá, Colombia"}),
        call("call_Ka9sD4fG1hJ6kL3zX8cV5bNm", "send_email",
             {"to": "bob@email.com", "body": "Hi bob\n"}),
    )
    # prompt_tokens (143) counts the cached tokens (128); input_tokens does not.
    assert result.usage == {"input_tokens": 15, "output_tokens": 62,
                            "cache_read_input_tokens": 128}


def test_transcripts_are_shaped_as_documented() -> None:
    for name in TRANSCRIPTS:
        events = transcript_events(name)
        assert events[-1] == b"data: [DONE]\n\n"
        chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
        assert all(c["usage"] is None for c in chunks[:-1])  # include_usage: null until the end
        assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]].count(None) == len(chunks) - 2


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_a_transcript_folds_the_same_however_its_bytes_are_cut(name: str) -> None:
    deltas, result = read_transcript(OpenAIFold("openai"), name)
    for size in (1, 2, 7, 64):
        folding = OpenAIFold("openai")
        assert fold_sse(folding, transcript(name), size) == deltas, size
        assert folding.reply() == result, size


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_a_stream_cut_off_before_its_finish_is_a_provider_error(name: str) -> None:
    raw = transcript(name)
    whole, result = read_transcript(OpenAIFold("openai"), name)
    # The end of the chunk with the finish reason: after it, what the reply needs has come.
    finish = raw.index(b"\n\n", raw.index(b'"finish_reason":"')) + 2
    for cut in [*range(0, finish, 97), finish - 1]:
        folding = OpenAIFold("openai")
        deltas = fold_sse(folding, raw[:cut])
        assert deltas == whole[:len(deltas)]  # what came is reported, in order
        with pytest.raises(ProviderError, match=r"^openai: stream ended before \[DONE\]$"):
            folding.reply()
    # Cut after it (before the usage, or before [DONE]): the reply stands, usage or not.
    folding = OpenAIFold("openai")
    fold_sse(folding, raw[:finish])
    assert folding.reply().content == result.content


# -- errors inside the stream -------------------------------------------------------------------


def test_fold_reports_an_error_event() -> None:
    with pytest.raises(ProviderError, match="^x: rate_limit_exceeded during the stream: slow down$"):
        OpenAIFold("x").feed("message", '{"error": {"message": "slow down", "type": "requests", '
                                        '"code": "rate_limit_exceeded"}}')


def test_fold_reports_an_error_event_that_is_not_json() -> None:
    with pytest.raises(ProviderError, match="^x: error during the stream: upstream went away$"):
        OpenAIFold("x").feed("error", "upstream went away")


def test_fold_reports_an_error_in_a_whole_completion() -> None:
    with pytest.raises(ProviderError, match="^x: server_error: boom$"):
        OpenAIFold("x").feed_completion('{"error": {"message": "boom", "type": "server_error"}}')


def test_an_error_event_after_some_text() -> None:
    folding = OpenAIFold("openai")
    assert fold_events(folding, [ROLE, chunk({"content": "a"})]) == [("text", "a")]
    with pytest.raises(ProviderError, match="^openai: server_error during the stream: Overloaded$"):
        folding.feed("message", json.dumps({"error": {"message": "Overloaded", "type": "server_error",
                                                      "param": None, "code": None}}))


@pytest.mark.parametrize(("data", "message"), [
    ('{"id": "chatcmpl-fake", "choices": [{"ind',
     r"^openai: malformed event in the stream \(not JSON: '\{\"id\": \"chatcmpl-fake\", "),
    ('[1, 2]', r"^openai: malformed event in the stream \(not an object: '\[1, 2\]'\)$"),
    ('{"choices": [{"index": 0, "delta": "x"}]}',
     r"^openai: malformed chunk in the stream \(AttributeError: "),
    ('{"choices": [], "usage": {"prompt_tokens": "many"}}',
     r"^openai: malformed chunk in the stream \(ValueError: "),
])
def test_a_malformed_event_is_a_provider_error(data: str, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        OpenAIFold("openai").feed("message", data)


def test_a_malformed_whole_completion_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match=r"^openai: malformed completion \(JSONDecodeError: "):
        OpenAIFold("openai").feed_completion("<html>")


# -- error statuses -----------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "fields"), [
    ({"error": {"message": "m", "type": "invalid_request_error", "code": "invalid_type"}},
     ("invalid_type", "m")),
    ({"error": {"message": "m", "type": "invalid_request_error", "code": None}},
     ("invalid_request_error", "m")),
    ({"error": {"message": "m", "type": "server_error", "code": 500}}, ("server_error", "m")),
    ({"error": "model not loaded"}, ("error", "model not loaded")),  # llama.cpp and others
    ({"message": "m", "type": "BadRequestError", "code": 400}, ("BadRequestError", "m")),  # vLLM
    ({"error": {}}, ("error", "")),
    ("not a body", ("error", "")),
])
def test_error_fields_are_read_from_openai_and_its_cousins(body: Any, fields: tuple[str, str]) -> None:
    assert error_fields(body) == fields


@pytest.mark.parametrize("status", [401, 403, 404])
def test_bad_key_no_access_or_unknown_model_is_unavailable(status: int) -> None:
    raw = json.dumps({"error": {"message": "Incorrect API key provided",
                                "type": "invalid_request_error", "code": "invalid_api_key"}})
    error = status_error("openai", status, "Unauthorized", raw.encode(), 0)
    assert isinstance(error, ProviderUnavailable)
    assert error.message == f"openai: {status} invalid_api_key: Incorrect API key provided"


def test_other_statuses_are_errors_naming_the_retries() -> None:
    raw = b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
    error = status_error("local", 429, "Too Many Requests", raw, 2)
    assert type(error) is ProviderError
    assert error.message == "local: 429 rate_limit_exceeded: Rate limit reached (after 2 retries)"


@pytest.mark.parametrize(("raw", "message"), [
    (b"<html><h1>502 Bad Gateway</h1></html>",
     "openai: 502 Bad Gateway: <html><h1>502 Bad Gateway</h1></html> (after 1 retry)"),
    (b"", "openai: 502 Bad Gateway (after 1 retry)"),
    (b"{}", "openai: 502 Bad Gateway: {} (after 1 retry)"),
])
def test_an_error_body_that_is_not_an_error_object_is_quoted(raw: bytes, message: str) -> None:
    assert status_error("openai", 502, "Bad Gateway", raw, 1).message == message


def test_a_status_without_a_reason_phrase() -> None:
    assert status_error("openai", 599, "", b"", 0).message == "openai: 599 error"


def test_media_parts_become_image_urls_or_notes() -> None:
    image = {"type": "image", "media_type": "image/png", "sha256": "ab", "bytes": 3, "width": 2, "height": 1, "data": "AAAA"}
    pdf = {"type": "document", "media_type": "application/pdf", "sha256": "cd", "bytes": 3, "data": "BBBB"}
    messages = (
        {"role": "user", "content": [{"type": "text", "text": "look"}, image, pdf]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "a.png"}, image]}]},
    )
    request = ModelRequest(model=MODEL, system="", messages=messages)
    url = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    first, _, tool, after = request_body(request, "local")["messages"]
    assert first["content"] == [
        {"type": "text", "text": "look"}, url,
        {"type": "text", "text": "[document (application/pdf) not sent: local is sent text and images only]"},
    ]
    # A tool message takes text only: its image follows in a user message.
    assert tool == {"role": "tool", "tool_call_id": "c1", "content": "a.png"}
    assert after == {"role": "user", "content": [{"type": "text", "text": "[media of tool call c1]"}, url]}
    without = request_body(request, "local", images=False)["messages"]
    assert without[0]["content"] == (
        "look\n\n[image 2x1 (image/png) not sent: local's model takes no images]\n\n"
        "[document (application/pdf) not sent: local is sent text and images only]"
    )
