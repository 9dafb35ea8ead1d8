"""The conductor's model calls: a run's next reply, and a compaction's summary.

Each call streams from the track's resolved model, publishes its deltas live, and comes back
as one input for the loop (``ModelFinished``, ``Summarized`` or, for any failure,
``ModelFailed``). Before a reply is fed back, the paths its tool calls name are resolved
(and, where a person may be asked, the diffs of its edits made), off the event loop.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from operator import countOf, itemgetter
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

import trio

from roost.loop import (
    REASONING_DELTA,
    TEXT_DELTA,
    Abort,
    CallModel,
    Event,
    HookVerdict,
    Input,
    ModelFailed,
    ModelFinished,
    SessionState,
    Summarize,
    Summarized,
    Transition,
    paths_named,
    safe_text,
)

from ..folder._prompt import summary_text
from ..providers import ModelReply, ModelRequest, ProviderError, ToolSpec
from ..tools import ToolRegistry, change_preview, real_path
from ._sessions import Session, Track
from ._media import MediaMemo

log = logging.getLogger(__name__)

#: Worker threads that find the real paths a reply's tool calls name (and the diffs a
#: person is shown), all sessions together. Their own, so that a running step never waits
#: behind other sessions' dispatches reading their folders in the daemon's shared threads;
#: few, for the reason ``_server.WORKER_THREADS`` gives. At 1,000 sessions (bench/scale.py,
#: runs taking turns) a step's overhead p99 was 108-183 ms with them, 129-508 ms without.
LOOK_THREADS = 2
#: Compaction: what the summarizing call is told, and how the summary is introduced to
#: later calls (the last layer of their system prompt).
SUMMARIZER = (
    "You condense an agent's working conversation so that the agent can go on with less "
    "context. Keep what it needs to continue: the task and the user's wishes, decisions made "
    "and why, files read and changed (paths), commands run and what they showed, errors still "
    "open, and what was about to happen next. Leave out what no longer matters. Plain text, "
    "no preamble."
)
SUMMARIZE_REQUEST = "Summarize the conversation above for yourself, to continue the task from it."

#: Feeds what an effect brought back to the track's run (see ``Conductor.feed_result``).
FeedResult = Callable[[Session, Track, str, Input], Awaitable[None]]
#: The specs of the named tools, as the track's model is offered them.
ToolSpecs = Callable[[tuple[str, ...], Track], list[ToolSpec]]
#: A call's messages with the bytes of their media parts (see ``_media.MediaFill``).
ResolveMedia = Callable[
    [Sequence[Mapping[str, Any]], MediaMemo | None, trio.Event | None], Awaitable[tuple[Mapping[str, Any], ...]]
]
#: The PreToolUse hooks of a reply's calls: what they said, and why the run must stop (see
#: ``ToolCalls.pre_hooks``).
PreHooks = Callable[[Session, Track, tuple[Mapping[str, Any], ...]], Awaitable[tuple[dict[str, HookVerdict], str | None]]]


#: Deltas of a call started ahead held as they came before its step's events are published;
#: those after are joined: a reply quicker than the commit keeps its pieces, and a flood of
#: them cannot overrun a client's outbox (``rpc._connection.OUTBOX_SIZE``) when they go out.
HELD_APART = 256


@dataclass
class CallAhead:
    """A model call started while the events of the step that asked for it are being
    stored (see ``Conductor.feed``), and what it must wait for: it sends its request at
    once, but shows nothing and feeds nothing back before those events are stored and
    published."""

    #: The session's state once those events are stored: what the call was decided on.
    state: SessionState
    #: Set once they are stored and published.
    stored: trio.Event = field(default_factory=trio.Event)
    #: The call's deltas that came before (published right after the events), each with
    #: the texts joined to it (kept apart until then: joining as they come would copy the
    #: text so far at every delta).
    held: list[tuple[dict[str, Any], list[str]]] = field(default_factory=list)
    #: Cancelled when the events could not be stored: the run ends without the call.
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    def hold(self, delta: dict[str, Any]) -> None:
        """Keep ``delta`` until the events are published; past :data:`HELD_APART`, joined
        to the one before it when that is of its kind."""
        if len(self.held) >= HELD_APART and self.held[-1][0]["type"] == delta["type"]:
            self.held[-1][1].append(delta["text"])
        else:
            self.held.append((delta, []))

    def release(self, publish: Callable[[dict[str, Any]], None]) -> None:
        """The events are stored and published: the call's deltas so far follow them, and
        the call goes on."""
        self.stored.set()
        for delta, joined in self.held:
            publish({**delta, "text": delta["text"] + "".join(joined)} if joined else delta)
        self.held.clear()


class ModelCalls:
    """Performs CallModel and Summarize."""

    def __init__(
        self,
        publish: Callable[[dict[str, Any]], None],
        feed_result: FeedResult,
        tool_specs: ToolSpecs,
        pre_hooks: PreHooks,
        compact_hooks: Callable[[Session, Track, str], Awaitable[None]],
        resolve_media: ResolveMedia,
    ) -> None:
        self._publish = publish
        self._feed_result = feed_result
        self._tool_specs = tool_specs
        self._pre_hooks = pre_hooks
        #: The PreCompact hooks, before a summary (see ``ToolCalls.compact_hooks``).
        self._compact_hooks = compact_hooks
        self._look_threads = trio.CapacityLimiter(LOOK_THREADS)
        #: The messages with their media parts' bytes put in (see ``_media.MediaFill``).
        self._resolve_media = resolve_media

    def start_ahead(self, session: Session, track: Track, transition: Transition) -> CallAhead | None:
        """Start the model call ``transition`` asks for, if it asks for one, while its
        events are being stored: one commit less between a tool's result and the next
        request, and between a dispatch and its first (bench/scale.py). A model call changes
        nothing outside the daemon: after a crash before the events were stored, it is made
        again (a tool never is). What it brings back waits for them (see :class:`CallAhead`)."""
        call = next((e for e in transition.effects if isinstance(e, CallModel)), None)
        if call is None:
            return None
        assert track.live is not None
        ahead = CallAhead(transition.state)
        track.live.streamed = []
        track.live.nursery.start_soon(self._call_ahead, session, track, call, ahead)
        return ahead

    async def _call_ahead(self, session: Session, track: Track, effect: CallModel, ahead: CallAhead) -> None:
        with ahead.scope:
            await self.call_model(session, track, effect, ahead)

    async def call_model(self, session: Session, track: Track, effect: CallModel, ahead: CallAhead) -> None:
        """The run's next reply, started before the events that asked for it were stored
        (see :class:`CallAhead`)."""
        started = time.monotonic()
        path = {"path": list(track.path)} if track.path else {}
        # A new list for each call (see start_ahead): an abort keeps what it holds.
        streamed = track.live.streamed if track.live is not None else []
        state = ahead.state

        def on_delta(kind: str, text: str) -> None:
            if kind == "text":
                streamed.append(text)
            type = TEXT_DELTA if kind == "text" else REASONING_DELTA
            delta = Event(type, session.id, effect.run, time.time(), {"text": safe_text(text), **path}).to_map()
            if not ahead.stored.is_set():
                ahead.hold(delta)
            else:
                self._publish(delta)

        plan = track.plan
        settings = plan.settings if plan is not None else None
        reply = await self._stream(
            session,
            track,
            effect.model,
            on_delta,
            system=plan.system if plan else "",
            # What changes between runs (the similar memories) or within one (the summary):
            # after the part a provider caches.
            system_tail="\n\n".join(p for p in (plan.recalled if plan else "", summary_text(effect.summary)) if p),
            messages=effect.messages,
            memo=track.live.media if track.live is not None else None,
            tools=tuple(self._tool_specs(effect.tools, track)),
            think=settings.think if settings is not None else None,
            web_search=plan.web_search if plan is not None else None,
            **({"max_tokens": settings.max_tokens} if settings is not None and settings.max_tokens else {}),
            number=countOf(map(itemgetter("role"), state.messages), "assistant"),
            cwd=state.cwd,
            stored=ahead.stored,
        )
        if not ahead.stored.is_set():  # a reply quicker than the commit (the stream checkpointed)
            await ahead.stored.wait()
        if isinstance(reply, ModelFailed):
            result: Input = reply
        else:
            latency = time.monotonic() - started
            # Claude Code runs PreToolUse hooks before its permission check: what they say
            # is weighed when the loop decides.
            hooks, stop = await self._pre_hooks(session, track, reply.content) if reply.stop_reason != "max_tokens" else ({}, None)
            if stop is not None:
                ending = Abort(time.time(), f"a hook stopped the run: {stop}", after_step=True)
                await self._feed_result(session, track, effect.run, ending)
            # The paths decided are those of the input that runs.
            content = tuple(_hooked(block, hooks) for block in reply.content)
            resolved: Mapping[str, str] = {}
            diffs: Mapping[str, str] = {}
            if _names_paths(content):
                run = track.state.run
                previews = run is not None and run.settings.previews()
                resolved, diffs = await trio.to_thread.run_sync(
                    _look, track.state.cwd, content, previews, limiter=self._look_threads
                )
            result = ModelFinished(
                reply.content,
                reply.stop_reason,
                time.time(),
                reply.usage,
                latency,
                resolved,
                diffs,
                ttft=reply.first_token,
                retries=reply.retries,
                hooks=hooks,
            )
        await self._feed_result(session, track, effect.run, result)

    async def summarize(self, session: Session, track: Track, effect: Summarize) -> None:
        """A compaction's summary of the older history, after the PreCompact hooks; the
        person's instructions for it (``roost compact --instructions``) end the request, as
        Claude Code adds those of ``/compact [instructions]`` to its own."""
        await self._compact_hooks(session, track, effect.instructions)
        messages = [dict(m) for m in effect.messages]
        request = SUMMARIZE_REQUEST
        if effect.instructions.strip():
            request += f"\n\nAdditional instructions for this summary:\n{effect.instructions.strip()}"
        ask = {"type": "text", "text": request}
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], ask]}
        previous = f"\n\nThe summary of what came before these messages:\n{effect.previous}" if effect.previous else ""
        reply = await self._stream(
            session,
            track,
            effect.model,
            lambda kind, text: None,
            system=SUMMARIZER + previous,
            messages=tuple(messages),
            purpose="summary",
            number=track.state.compactions,
            cwd=track.state.cwd,
        )
        if isinstance(reply, ModelFailed):
            result: Input = reply
        else:
            text = "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
            result = Summarized(text, time.time(), reply.usage)
        await self._feed_result(session, track, effect.run, result)

    async def _stream(
        self,
        session: Session,
        track: Track,
        model: str,
        on_delta: Any,
        memo: MediaMemo | None = None,
        stored: trio.Event | None = None,
        **request: Any,
    ) -> ModelReply | ModelFailed:
        """One call of the track's resolved model (its media filled in, knowing what the
        track sent last from ``memo``, once ``stored`` is set when the newest may still be
        being stored); every failure comes back as ModelFailed."""
        try:
            resolved = track.plan.model if track.plan is not None else None
            if resolved is None or resolved.model_id != model:
                raise ProviderError(f"{model}: no provider resolved for this run")
            request["messages"] = await self._resolve_media(request["messages"], memo, stored)
            call = ModelRequest(model=resolved.model, **request)
            return await resolved.provider.stream(call, on_delta)
        except ProviderError as exc:
            return ModelFailed(exc.message, time.time())
        except Exception as exc:
            log.exception("session %s: model call failed", session.id)
            return ModelFailed(f"internal error in the model call: {type(exc).__name__}: {exc}", time.time())


def tool_specs(tools: ToolRegistry, mcp: Any, names: tuple[str, ...], track: Track) -> list[ToolSpec]:
    """The specs of ``names`` as the track's model is offered them: built-ins, its agents,
    and the MCP tools of its own servers (looked up at each call: a server's tool list may
    change)."""
    plan = track.plan
    servers = plan.mcp_servers if plan is not None else {}
    agents = plan.agent_specs if plan is not None else {}
    found = {t.name: t for t in mcp.tools(servers, names)} if mcp is not None else {}
    specs = []
    for name in names:
        spec = tools.spec(name)
        if spec is not None:
            specs.append(spec)
        elif name in agents:
            specs.append(agents[name])
        elif name in found:
            specs.append(ToolSpec(name, found[name].description, found[name].input_schema))
    return specs


def _calls(content: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        block
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "tool_use" and isinstance(block.get("input"), Mapping)
    ]


def _hooked(block: Mapping[str, Any], hooks: Mapping[str, HookVerdict]) -> Mapping[str, Any]:
    """A reply's block with the input its hooks gave it, if they gave it one."""
    call_id = block.get("id")
    verdict = hooks.get(call_id) if block.get("type") == "tool_use" and isinstance(call_id, str) else None
    return {**block, "input": verdict.input} if verdict is not None and verdict.input is not None else block


def _names_paths(content: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a reply's calls name paths (most replies don't: no thread hop for them)."""
    return any(paths_named(str(call.get("name", "")), call["input"]) for call in _calls(content))


def _look(cwd: str, content: Iterable[Mapping[str, Any]], diffs: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Where the paths that a reply's calls name really lead (with the working directory and
    the home folder), for ``step`` to decide on; and, with ``diffs``, what each edit or write
    would change. Blocking: a few lstat calls, and reads of the files edited."""
    calls = _calls(content)
    named = {path for call in calls for path in paths_named(str(call.get("name", "")), call["input"])}
    resolved = {}
    for path in (*named, cwd, os.path.expanduser("~")):
        try:
            resolved[path] = real_path(cwd, path)
        except (OSError, ValueError):
            continue  # an impossible path (a NUL in it): decided as named, refused by the tool
    changes = {}
    if diffs:
        for call in calls:
            diff = change_preview(cwd, str(call.get("name", "")), call["input"])
            if diff:
                changes[str(call.get("id"))] = diff
    return resolved, changes
