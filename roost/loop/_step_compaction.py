"""Compaction: ``Compact`` starts a run that only summarizes the older history, and
``Summarized`` stores a summary shorter than what it replaces (``compacted``) or skips it.
When a compaction starts before a model call is :meth:`Builder.start_compaction`'s rule."""

from __future__ import annotations

from . import _events as ev
from ._context import messages_tokens
from ._inputs import Compact, Summarized
from ._modes import COMPACT_MODE
from ._settings import RunSettings
from ._step_builder import Builder


def compact(b: Builder, input: Compact) -> None:
    b.require(input.keep_turns >= 0, "keep_turns must not be negative")
    settings = RunSettings(input.model, mode=COMPACT_MODE, max_turns=1, keep_turns=input.keep_turns)
    asked = {"instructions": input.instructions} if input.instructions else {}
    b.emit_run_started(input.run, task="compact the history", **settings.to_map(), keep_turns=input.keep_turns, **asked)
    if not b.start_compaction(force=True, instructions=input.instructions):
        b.emit_run_finished("done", text="nothing to compact: the history is shorter than the replies kept")


def summarized(b: Builder, input: Summarized) -> None:
    run, state = b.run, b.state
    start, upto = state.compacted_upto, run.compact_upto
    replaced = messages_tokens(state.messages[start:upto]) + messages_tokens(
        [{"content": [{"type": "text", "text": state.summary}]}]
    )
    summary = input.summary.strip()
    size = messages_tokens([{"content": [{"type": "text", "text": summary}]}])
    if summary and size < replaced:
        b.emit(ev.COMPACTED, summary=summary, upto=upto, replaced_tokens=replaced, summary_tokens=size,
               usage=dict(input.usage))
        note = f"compacted {replaced:,} tokens of history into a {size:,}-token summary"
    else:
        b.emit(ev.COMPACTION_SKIPPED, reason=f"the summary ({size:,} tokens) would not be shorter than the history ({replaced:,})")
        note = "nothing compacted"
    if run.settings.mode == COMPACT_MODE:
        b.emit_run_finished("done", text=note)
    else:
        b.start_model_call(compact=False)
