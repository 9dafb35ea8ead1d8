"""The scripted provider: replays a script of responses (the offline demo and the test double).

``scripted/demo`` is a built-in script; ``scripted/PATH`` reads a JSON file (``PATH`` absolute,
or relative to the session's cwd)::

    {"responses": [{"content": [{"type": "text", "text": "..."},
                                {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}],
                    "usage": {...}, "stop_reason": "..."}, ...]}

A script file is read only if it is a regular file of at most 16 MiB, in a worker thread (a
FIFO or ``/dev/zero`` named as a script is an error, never a frozen or bloated daemon).

The n-th model call of a session gets the n-th response; n is the number of assistant
messages already in the history, so a restarted daemon carries on where the last one stopped.
The stop reason is ``tool_use`` when the response has tool_use blocks, else ``end_turn``,
unless the response names one. Text streams as deltas, a few words at a time. A response's
``"delay"`` (seconds) is waited before it starts, as a real model takes time to answer
(bench/scale.py gives its runs a model's pace this way).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import trio

from ..folder._files import read_bounded
from ._base import DeltaCallback, ModelReply, ModelRequest, ProviderError, ProviderUnavailable

#: Deltas published between two yields to the scheduler (like one network read's worth).
_DELTAS_PER_READ = 32
#: Bytes a script file may have.
SCRIPT_LIMIT = 16 << 20
#: Histories whose size is remembered (see :meth:`ScriptedProvider._input_chars`).
_SIZED_LIMIT = 4096

DEMO_SCRIPT: Mapping[str, Any] = {
    "responses": [
        {
            "content": [
                {"type": "text", "text": "I'll list the files in this folder first."},
                {"type": "tool_use", "name": "bash", "input": {"command": "ls -1A"}},
            ]
        },
        {
            "content": [
                {"type": "text", "text": "Now I'll count them."},
                {"type": "tool_use", "name": "bash", "input": {"command": "ls -1A | wc -l"}},
            ]
        },
        {
            "content": [
                {
                    "type": "text",
                    "text": "Done. The listing and the count are in the tool results above. "
                    "(This was the offline scripted/demo model: no network, no API key.)",
                }
            ]
        },
    ]
}


def check_script(provider: object, name: str, cwd: str) -> None:
    """For a scripted ``provider``: that ``name``'s script is there, seen from ``cwd``;
    checked when a run is prepared, before a session is made for it.

    Raises:
        ProviderUnavailable: no such script file (the name meant, when close to demo).
    """
    if not isinstance(provider, ScriptedProvider) or name == "demo":
        return
    path = Path(name) if Path(name).is_absolute() else Path(cwd) / name
    if os.path.exists(path):
        return  # what kind of file it is, reading it says
    near = difflib.get_close_matches(name, ["demo"], n=1)
    hint = f"; did you mean scripted/{near[0]}?" if near else " (scripted/demo is the built-in one)"
    raise ProviderUnavailable(f"scripted: no script file at {path}{hint}")


#: The list of the script a call of each purpose answers from (others: ``responses``).
_KEYS = {"summary": "summaries", "learn": "learned"}


class ScriptedProvider:
    """Replays responses from the demo script or a JSON file."""

    def __init__(self) -> None:
        # Parsed scripts by path, kept while the file's size and mtime stay the same.
        self._cache: dict[Path, tuple[tuple[int, int], Mapping[str, Any]]] = {}
        # Where each (name, cwd) leads (pathlib's joins cost more than the stat, every call).
        self._paths: dict[tuple[str, str], Path] = {}
        # The last request's messages and their made-up size, by its first message's identity.
        self._sizes: dict[int, tuple[Sequence[Mapping[str, Any]], int]] = {}

    async def stream(self, request: ModelRequest, on_delta: DeltaCallback) -> ModelReply:
        """Return the response whose index is the number of assistant turns so far (for a
        compaction's summary: the entry of ``summaries`` for the compactions so far; for what
        a run learned: the first of ``learned``)."""
        started = time.monotonic()
        script = await self._load(request.model, request.cwd)
        key = _KEYS.get(request.purpose, "responses")
        responses = script.get(key)
        if not isinstance(responses, list):
            raise ProviderUnavailable(f"scripted/{request.model}: no \"{key}\" list in the script")
        if request.number is not None:
            index = request.number
        else:
            index = sum(1 for m in request.messages if m.get("role") == "assistant")
        if index >= len(responses):
            raise ProviderError(
                f"scripted/{request.model}: the script has {len(responses)} {key} "
                f"and this is call {index + 1}"
            )
        response = responses[index]
        if not isinstance(response, dict) or not isinstance(response.get("content", []), list):
            raise ProviderError(f"scripted/{request.model}: response {index + 1} is not {{\"content\": [...]}}")
        delay = response.get("delay", 0)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay < float("inf"):
            raise ProviderError(f"scripted/{request.model}: response {index + 1}: delay must be seconds, not {delay!r}")
        if delay:
            await trio.sleep(delay)
        first = time.monotonic() - started
        content = []
        for i, block in enumerate(response.get("content", [])):
            block = dict(block)
            if block.get("type") == "text":
                pieces = re.findall(r"\S+\s*|\s+", block.get("text", ""))
                for n, piece in enumerate(pieces, start=1):
                    on_delta("text", piece)
                    # A real stream yields between network reads, a few deltas at a time; so
                    # does the replay, so connection writers drain (and coalesce) as it goes.
                    if n % _DELTAS_PER_READ == 0:
                        await trio.lowlevel.checkpoint()
                await trio.lowlevel.checkpoint()
            elif block.get("type") == "tool_use":
                block.setdefault("id", f"toolu_s{index + 1}_{i}")
                block.setdefault("input", {})
            content.append(block)
        has_tools = any(b.get("type") == "tool_use" for b in content)
        stop = response.get("stop_reason") or ("tool_use" if has_tools else "end_turn")
        usage = response.get("usage") or {
            "input_tokens": max(1, self._input_chars(request.messages) // 4),
            "output_tokens": max(1, _chars(content) // 4),
        }
        return ModelReply(tuple(content), stop, usage, first_token=first)

    async def aclose(self) -> None:
        """Nothing to release."""

    def _input_chars(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """``_chars`` of the messages' contents, measuring only those added since the last
        request of the same history: a run's requests repeat it (the same message objects,
        kept unchanged by the session's state but the last, which may grow), so measuring
        it whole at every call cost a run time quadratic in its length."""
        if not messages:
            return 0
        key = id(messages[0])
        known = self._sizes.pop(key, None)
        total, start = 0, 0
        if known is not None:
            before, size = known
            if before[0] is messages[0] and len(before) <= len(messages) and before[-1] is messages[len(before) - 1]:
                total, start = size, len(before)
        total += sum(_chars(m["content"]) for m in messages[start:])
        if len(self._sizes) >= _SIZED_LIMIT:
            self._sizes.clear()
        self._sizes[key] = (messages, total)
        return total

    async def _load(self, name: str, cwd: str) -> Mapping[str, Any]:
        if name == "demo":
            return DEMO_SCRIPT
        path = self._paths.get((name, cwd))
        if path is None:
            if len(self._paths) >= _SIZED_LIMIT:
                self._paths.clear()
            path = self._paths[name, cwd] = Path(name) if Path(name).is_absolute() else Path(cwd) / name
        try:
            info = os.stat(path)
            key = (info.st_size, info.st_mtime_ns)
            cached = self._cache.get(path)
            if cached is not None and cached[0] == key:
                return cached[1]
            script = json.loads(await trio.to_thread.run_sync(read_bounded, path, SCRIPT_LIMIT))
        except FileNotFoundError:
            raise ProviderUnavailable(f"scripted: no script file at {path}") from None
        except OSError as exc:
            raise ProviderUnavailable(f"scripted: cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ProviderUnavailable(f"scripted: cannot read {path}: {exc}") from None
        if not isinstance(script, dict):
            raise ProviderUnavailable(f"scripted: {path} does not hold a JSON object")
        self._cache[path] = (key, script)
        return script


def _chars(blocks: Any) -> int:
    # A rough size for the made-up token counts: the text in the blocks.
    total = 0
    for block in blocks:
        for key in ("text", "content", "input"):
            value = block.get(key)
            if value is not None:
                total += len(value) if isinstance(value, str) else len(str(value))
    return total


