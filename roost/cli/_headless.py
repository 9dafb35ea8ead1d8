"""``roost dispatch`` as ``claude -p``: Claude Code's flags mapped onto roost's, and its
print-mode output (``--output-format text|json|stream-json``) made from a run's events.

The shapes are Claude Code's (its headless and Agent SDK references): ``stream-json`` is one
JSON object a line, a ``system`` ``init`` message when the run starts (session, cwd, model,
tools, MCP servers, permission mode), an ``assistant`` message for each complete reply (the
Anthropic message, its content blocks as the model gave them), a ``user`` message carrying
each tool's result, a sub-agent's messages with the call that runs it as
``parent_tool_use_id``, and a final ``result`` (``subtype`` success or ``error_*``,
``is_error``, the final text, cost, turns, durations, usage, the calls that were denied).
``json`` prints that ``result`` alone, ``text`` the final text alone. Roost's names stay
roost's: tools are named as the model was offered them, the model by roost's id.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any, Callable, Iterable

from roost.protocol import SUCCESS_REASONS

#: Claude Code's ``--permission-mode`` values as roost's mode and the allow rules they add:
#: ``acceptEdits`` is agent mode with writes and edits inside the folder allowed (a command
#: still asks), as a settings file's ``defaultMode`` is read.
PERMISSION_MODES: dict[str, tuple[str, tuple[str, ...]]] = {
    "default": ("agent", ()),
    "acceptEdits": ("agent", ("write|edit(**)",)),
    "plan": ("plan", ()),
    "bypassPermissions": ("full", ()),
}
#: roost's modes by Claude Code's names, for a run whose permission mode was not given.
_CLAUDE_MODES = {"agent": "default", "plan": "plan", "full": "bypassPermissions", "exec": "bypassPermissions"}
#: The usage counts Claude Code reports.
_USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def tool_rules(values: Iterable[str]) -> list[str]:
    """The rules of ``--allowedTools`` / ``--disallowedTools`` values, each a rule or a
    list of them separated by commas or spaces as Claude Code takes them (``"Bash(git
    diff:*),Read"``); a separator inside parentheses belongs to the rule."""
    rules: list[str] = []
    for value in values:
        depth, word = 0, ""
        for char in value:
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth <= 0 and (char == "," or char.isspace()):
                depth = 0
                if word:
                    rules.append(word)
                word = ""
            else:
                word += char
        if word:
            rules.append(word)
    return rules


class ClaudeOutput:
    """Prints a run's events in one of Claude Code's print-mode formats.

    ``on_event`` takes every event the dispatch follows; ``finish`` prints the result once
    the run's ``run.finished`` arrived (None: the run's end was not seen).
    """

    def __init__(
        self,
        fmt: str,
        run: str,
        cwd: str,
        permission_mode: str | None = None,
        write: Callable[[str], None] | None = None,
    ) -> None:
        self.fmt = fmt
        self.run = run
        self.cwd = cwd
        self.permission_mode = permission_mode
        self._write = write or _stdout
        self._model = ""
        #: The run's own tool calls: a sub-agent's events carry a path starting with one.
        self._calls: set[str] = set()
        #: Each call's tool and input, as the model gave them.
        self._inputs: dict[str, tuple[str, Any]] = {}
        self.denials: list[dict[str, Any]] = []
        self._api_seconds = 0.0
        #: Usage and cost of the run's sub-agents (its own come with its run.finished).
        self._usage: dict[str, int] = {}
        self._cost = 0.0

    def on_event(self, event: dict[str, Any]) -> None:
        """Take one event of the session (others' runs and live deltas are skipped)."""
        path = event.get("path") or []
        if event.get("run") != self.run and not (path and path[0] in self._calls):
            return
        kind = event.get("type")
        parent = path[-1] if path else None
        if kind == "run.started" and not path:
            self._model = str(event.get("model", ""))
            self._emit(self._init(event))
        elif kind == "message.assistant":
            self._assistant(event, parent)
        elif kind == "tool.finished":
            self._tool_finished(event, parent)
        elif kind == "permission.resolved" and event.get("decision") == "deny":
            self._deny(event["call_id"])
        elif kind == "run.finished" and path:
            _add(self._usage, event.get("usage"))
            self._cost += event.get("cost") or 0.0

    def finish(self, finished: dict[str, Any] | None) -> None:
        """Print the result as the format has it: the ``result`` message (stream-json,
        json) or the final text (text; an error goes to stderr)."""
        result = self.result(finished)
        if self.fmt != "text":
            self._emit(result)
            return
        if result.get("result"):
            self._write(result["result"] + "\n")
        for error in result.get("errors", ()):
            sys.stderr.write(f"roost: {error}\n")

    def result(self, finished: dict[str, Any] | None) -> dict[str, Any]:
        """The ``result`` message of the run that ended with ``finished``."""
        finished = finished or {"reason": "error", "error": "the run's end was not seen"}
        reason = finished.get("reason", "error")
        usage = dict(self._usage)
        _add(usage, finished.get("usage"))
        ok = reason in SUCCESS_REASONS
        message: dict[str, Any] = {
            "type": "result",
            "subtype": "success" if ok else "error_max_turns" if reason == "max_turns" else "error_during_execution",
            "is_error": not ok,
            "duration_ms": round((finished.get("duration") or 0.0) * 1000),
            "duration_api_ms": round(self._api_seconds * 1000),
            "num_turns": finished.get("turns", 0),
            "session_id": finished.get("session", ""),
            "total_cost_usd": self._cost + (finished.get("cost") or 0.0),
            "usage": {key: usage.get(key, 0) for key in _USAGE},
            "permission_denials": self.denials,
            "uuid": str(uuid.uuid4()),
        }
        if ok:
            message["result"] = finished.get("text") or ""
        else:
            error = finished.get("error")
            message["errors"] = [f"{reason}: {error}" if error else reason]
            if finished.get("text"):
                message["result"] = finished["text"]
        return message

    def _init(self, event: dict[str, Any]) -> dict[str, Any]:
        tools = list(event.get("tools") or [])
        servers = sorted({name.split("__", 1)[0] for name in tools if "__" in name})
        return {
            "type": "system",
            "subtype": "init",
            "cwd": self.cwd,
            "session_id": event["session"],
            "tools": tools,
            # A server whose tools the run was offered was listening when it started.
            "mcp_servers": [{"name": name, "status": "connected"} for name in servers],
            "model": self._model,
            "permissionMode": self.permission_mode or _CLAUDE_MODES.get(str(event.get("mode")), "default"),
            "uuid": str(uuid.uuid4()),
        }

    def _assistant(self, event: dict[str, Any], parent: str | None) -> None:
        self._api_seconds += event.get("latency") or 0.0
        content = list(event.get("content") or [])
        for block in content:
            if block.get("type") == "tool_use" and "id" in block:
                self._inputs[block["id"]] = (str(block.get("name", "")), block.get("input"))
                if parent is None:
                    self._calls.add(block["id"])
        self._emit({
            "type": "assistant",
            "message": {
                "id": f"msg_{event['session']}_{event.get('seq', 0)}",
                "type": "message",
                "role": "assistant",
                "model": self._model,
                "content": content,
                "stop_reason": event.get("stop_reason"),
                "stop_sequence": None,
                "usage": event.get("usage") or {},
            },
            "parent_tool_use_id": parent,
            "session_id": event["session"],
            "uuid": str(uuid.uuid4()),
        })

    def _tool_finished(self, event: dict[str, Any], parent: str | None) -> None:
        call = event["call_id"]
        if (event.get("meta") or {}).get("denied"):
            # Refused by the policy (a deny rule); a person's denial came before.
            self._deny(call)
        result = event.get("result")
        block = {
            "type": "tool_result",
            "tool_use_id": call,
            "content": result if isinstance(result, (str, list)) else json.dumps(result),
            "is_error": bool(event.get("is_error")),
        }
        self._emit({
            "type": "user",
            "message": {"role": "user", "content": [block]},
            "parent_tool_use_id": parent,
            "session_id": event["session"],
            "uuid": str(uuid.uuid4()),
        })

    def _deny(self, call: str) -> None:
        if any(denial["tool_use_id"] == call for denial in self.denials):
            return
        tool, input = self._inputs.get(call, ("", None))
        self.denials.append({"tool_name": tool, "tool_use_id": call, "tool_input": input or {}})

    def _emit(self, message: dict[str, Any]) -> None:
        if self.fmt == "stream-json" or message["type"] == "result":
            self._write(json.dumps(message, ensure_ascii=False, default=str) + "\n")


def _add(total: dict[str, int], usage: dict[str, Any] | None) -> None:
    for key, value in (usage or {}).items():
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
