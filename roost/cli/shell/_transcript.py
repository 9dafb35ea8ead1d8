"""The transcript: events in, lines to commit to the terminal's scrollback out.

The terminal's own scrollback holds the transcript (so scrolling, searching and copying
work as in any terminal); only what is still changing is drawn by prompt_toolkit under it.
This class decides what is final: a finished tool call, a run's summary, and each complete
line of a streaming reply (rendered as Markdown, line by line, as its deltas arrive). The
unfinished last line of a reply, and reasoning still streaming, are the live tail
(:meth:`Transcript.live`), drawn above the prompt until they are complete.

A reply is streamed by ``text.delta`` events and then stored whole as ``message.assistant``.
A shell that saw the deltas commits only what they missed; one that did not (history
replayed at attach) renders the stored message. If the deltas it saw are not the start of
the stored text (it attached in the middle of a reply), the whole reply is printed again
after what was streamed, so nothing is lost.

Events of sub-agents (with a ``path``) stream separately and are indented under their call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._render import guardrail_warning, learned, media_lines
from . import _display as r
from ._markdown import MarkdownState, render_line

Lines = r.Lines

#: Rows of the terminal a reply's unfinished line may take in the live area; the end of a
#: longer one is shown (the application must stay shorter than the screen).
LIVE_ROWS = 6


@dataclass(slots=True)
class _Stream:
    """A reply streaming at one depth (0: the session's agent, n: a sub-agent n levels down)."""

    depth: int
    #: The text received by deltas for the current reply.
    seen: str = ""
    #: The last, unfinished line of it.
    partial: str = ""
    md: MarkdownState = field(default_factory=MarkdownState)
    #: Whether a non-blank line of this reply has been committed.
    wrote: bool = False
    #: Blank lines held back: trailing ones are dropped, runs of them shown as one.
    blanks: int = 0
    reasoning: str = ""
    reasoning_shown: bool = False


class Transcript:
    """Turns a session's events into committed lines and a live tail."""

    def __init__(self, *, width: int = 100, expand_reasoning: bool = False) -> None:
        #: Terminal width: long tool arguments and results are cut to it.
        self.width = width
        #: Show reasoning in full (else collapsed to one line).
        self.expand_reasoning = expand_reasoning
        #: The latest reasoning committed (shown in full on request).
        self.last_reasoning = ""
        self._streams: dict[int, _Stream] = {}
        self._calls: dict[str, tuple[str, Any]] = {}
        self._requests: dict[str, dict[str, Any]] = {}

    def feed(self, event: dict[str, Any]) -> Lines:
        """One event; the lines it makes final."""
        kind = str(event.get("type"))
        path = event.get("path")
        depth = len(path) if isinstance(path, list) else 0
        handler = getattr(self, "_" + kind.replace(".", "_"), None)
        if handler is None:
            return []
        return r.indent(handler(event, depth), depth)

    def live(self) -> Lines:
        """What is still streaming: reasoning (dimmed) and each reply's unfinished line."""
        out: Lines = []
        for stream in self._streams.values():
            lines: Lines = []
            if stream.reasoning and not stream.reasoning_shown:
                tail = r.clean(stream.reasoning).strip().split("\n")[-3:]
                lines += [[("class:reasoning", r.shorten(line, self.width))] for line in tail]
            partial = r.clean(stream.partial)
            if partial.strip():
                room = self.width * LIVE_ROWS
                if len(partial) > room:
                    partial = "…" + partial[-room + 1:]
                lines.append(render_line(partial, stream.md)[0])
            out += r.indent(lines, stream.depth)
        return out

    def finish(self) -> Lines:
        """Commit whatever is still streaming (the connection is gone, or the run ended)."""
        out: Lines = []
        for depth in list(self._streams):
            out += r.indent(self._close(self._streams[depth]), depth)
        return out

    # -- streaming replies -----------------------------------------------------------------

    def _stream(self, depth: int) -> _Stream:
        stream = self._streams.get(depth)
        if stream is None:
            stream = self._streams[depth] = _Stream(depth)
        return stream

    def _text_delta(self, e: dict[str, Any], depth: int) -> Lines:
        stream = self._stream(depth)
        out = self._show_reasoning(stream)
        text = str(e.get("text", ""))
        stream.seen += text
        return out + self._add_text(stream, text)

    def _reasoning_delta(self, e: dict[str, Any], depth: int) -> Lines:
        self._stream(depth).reasoning += str(e.get("text", ""))
        return []

    def _message_assistant(self, e: dict[str, Any], depth: int) -> Lines:
        blocks = [b for b in e.get("content") or [] if isinstance(b, dict)]
        full = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        thinking = "".join(str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking")
        stream = self._stream(depth)
        if thinking and not stream.reasoning:
            stream.reasoning = thinking
        out = self._show_reasoning(stream)
        if stream.seen and not full.startswith(stream.seen):
            out += self._close(stream)
            out += r.note("(this terminal attached in the middle of that reply; here it is whole)")
            stream = self._stream(depth)
            stream.reasoning_shown = True
        else:
            full = full[len(stream.seen):]
        out += self._add_text(stream, full) + self._close(stream)
        if e.get("partial"):
            out += r.note("(cut off)")
        return out + r.searches(blocks, self.width - 4 * depth)

    def _add_text(self, stream: _Stream, text: str) -> Lines:
        out: Lines = []
        *complete, stream.partial = (stream.partial + text).split("\n")
        for line in complete:
            out += self._commit_line(stream, line)
        return out

    def _commit_line(self, stream: _Stream, line: str) -> Lines:
        if not line.strip():
            if stream.wrote:
                stream.blanks += 1
            return []
        # Inside a code block blank lines are kept as they are; elsewhere a run is one.
        held = stream.blanks if stream.md.fence else min(stream.blanks, 1)
        stream.blanks = 0
        fragments, stream.md = render_line(r.clean(line), stream.md)
        stream.wrote = True
        return [[] for _ in range(held)] + [fragments]

    def _show_reasoning(self, stream: _Stream) -> Lines:
        if not stream.reasoning or stream.reasoning_shown:
            return []
        stream.reasoning_shown = True
        self.last_reasoning = stream.reasoning
        return r.reasoning(stream.reasoning, self.expand_reasoning, self.width)

    def _close(self, stream: _Stream) -> Lines:
        out = self._show_reasoning(stream)
        if stream.partial.strip():
            out += self._commit_line(stream, stream.partial)
        del self._streams[stream.depth]
        return out

    # -- everything else ---------------------------------------------------------------------

    def _session_created(self, e: dict[str, Any], depth: int) -> Lines:
        return r.session_header(str(e.get("session")), str(e.get("cwd", "")), e.get("ts"))

    def _run_started(self, e: dict[str, Any], depth: int) -> Lines:
        return r.run_started(e) + r.hook_failures(e.get("hook_failures") or ())

    def _project_untrusted(self, e: dict[str, Any], depth: int) -> Lines:
        return r.project_untrusted(e)

    def _tools_changed(self, e: dict[str, Any], depth: int) -> Lines:
        return r.tools_changed_line(e)

    def _message_user(self, e: dict[str, Any], depth: int) -> Lines:
        # Steering was shown when it was queued (steer.queued); this is it entering the history.
        if e.get("origin") == "steer":
            return []
        return r.user_message(str(e.get("text", "")), str(e.get("origin", "task")), str(e.get("command") or ""), media_lines(e))

    def _steer_queued(self, e: dict[str, Any], depth: int) -> Lines:
        return r.steer_queued(str(e.get("text", ""))) + [[("", "  "), ("class:dim", line)] for line in media_lines(e)]

    def _tool_started(self, e: dict[str, Any], depth: int) -> Lines:
        self._calls[str(e.get("call_id"))] = (str(e.get("name", "")), e.get("input"))
        return []

    def _tool_finished(self, e: dict[str, Any], depth: int) -> Lines:
        name, tool_input = self._calls.pop(str(e.get("call_id")), (str(e.get("name", "")), None))
        return r.tool_finished(name, tool_input, e, self.width - 4 * depth)

    def _permission_requested(self, e: dict[str, Any], depth: int) -> Lines:
        # The call starts only once approved: a denied one's line comes from its request.
        self._calls.setdefault(str(e.get("call_id")), (str(e.get("tool", "")), e.get("input")))
        return self._human_asked(e, depth)

    def _human_asked(self, e: dict[str, Any], depth: int) -> Lines:
        self._requests[str(e.get("call_id"))] = e
        return []

    def _permission_resolved(self, e: dict[str, Any], depth: int) -> Lines:
        return r.resolved(self._requests.pop(str(e.get("call_id")), None), e, self.width)

    def _human_answered(self, e: dict[str, Any], depth: int) -> Lines:
        return r.answered(self._requests.pop(str(e.get("call_id")), None), e)

    def _memory_learned(self, e: dict[str, Any], depth: int) -> Lines:
        return [line for text in learned(e) for line in r.note(text)]

    def _plan(self, e: dict[str, Any], depth: int) -> Lines:
        return r.plan(e)

    def _stop_hooks_finished(self, e: dict[str, Any], depth: int) -> Lines:
        return r.hook_failures(e.get("failures") or ())

    def _check_started(self, e: dict[str, Any], depth: int) -> Lines:
        return r.check_started(e)

    def _check_finished(self, e: dict[str, Any], depth: int) -> Lines:
        return r.check_finished(e)

    def _subagent_started(self, e: dict[str, Any], depth: int) -> Lines:
        name = e.get("agent") or e.get("name") or "sub-agent"
        return [[("class:subagent", f"◆ {name}: "), ("", r.shorten(r.clean(str(e.get("task", ""))), self.width - 20))]]

    def _subagent_finished(self, e: dict[str, Any], depth: int) -> Lines:
        name = e.get("agent") or e.get("name") or "sub-agent"
        return [[("class:subagent", f"◆ {name} finished"), ("class:dim", f" · {e.get('reason', '')}")]]

    def _guardrail_warned(self, e: dict[str, Any], depth: int) -> Lines:
        return [[("class:warn", r.clean(guardrail_warning(e)))]]

    def _run_stopping(self, e: dict[str, Any], depth: int) -> Lines:
        return r.note(f"(the run ends after this step: {e.get('reason', '')})")

    def _compacted(self, e: dict[str, Any], depth: int) -> Lines:
        return r.compacted(e, self.width)

    def _error(self, e: dict[str, Any], depth: int) -> Lines:
        return r.error(str(e.get("message", "")))

    def _lagged(self, e: dict[str, Any], depth: int) -> Lines:
        return r.note(f"(this terminal fell behind at seq {e.get('last_seq')}; catching up)")

    def _run_finished(self, e: dict[str, Any], depth: int) -> Lines:
        if depth:
            return []
        self._requests.clear()
        return self.finish() + r.run_finished(e)
