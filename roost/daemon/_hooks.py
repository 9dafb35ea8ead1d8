"""Pre- and post-tool hooks: commands that see each call as JSON and may change its course.

A hook runs ``bash -c COMMAND`` in the session's folder, in its own process group, with the
call as a JSON object on stdin: ``{"hook", "session", "run", "call_id", "tool", "input",
"cwd"}`` (a post hook also gets ``"result"`` and ``"is_error"``). What it may answer:

- pre_tool: nothing (go on), or a JSON object on stdout: ``{"decision": "deny", "reason":
  ...}`` blocks the call (the model sees the reason), ``{"input": {...}}`` replaces its
  input. Exit status 2 also blocks it, with stderr as the reason (the convention other agent
  tools use).
- post_tool: nothing, or ``{"result": "...", "is_error": bool}`` to replace the result.

A hook that fails (another exit status, bad JSON, a timeout, a crash) is reported in the
call's result metadata and the daemon log; the call goes on as if it had said nothing.
Hooks run after the permission decision: a hook can block an allowed call, never allow a
call that a rule or a person refused.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any, Mapping

import trio

from ._config import Hook
from ._environ import tool_environment
from .tools import ProcessLedger, ToolResult, kill_group

log = logging.getLogger(__name__)

#: Exit status of a pre hook that blocks the call.
BLOCK_STATUS = 2
_OUTPUT_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class PreOutcome:
    """What the pre hooks said: a block (its reason), a new input, and failures to report."""

    blocked: str | None = None
    input: Mapping[str, Any] | None = None
    failures: tuple[str, ...] = field(default=())


async def run_pre_hooks(
    hooks: tuple[Hook, ...],
    call: Mapping[str, Any],
    cwd: str,
    ledger: ProcessLedger | None,
    env: Mapping[str, str] | None = None,
) -> PreOutcome:
    """Run the pre hooks that apply to ``call`` in order; the first block ends the chain."""
    input = call["input"]
    failures: list[str] = []
    changed = False
    for hook in hooks:
        if hook.kind != "pre_tool" or not hook.applies(call["tool"]):
            continue
        status, answer, problem = await _run(hook, {**call, "input": input, "hook": hook.kind}, cwd, ledger, env)
        if problem is not None:
            failures.append(problem)
        elif status == BLOCK_STATUS:
            return PreOutcome(answer.get("reason") or f"blocked by the hook {hook.command!r}", None, tuple(failures))
        elif answer.get("decision") == "deny":
            reason = str(answer.get("reason") or f"blocked by the hook {hook.command!r}")
            return PreOutcome(reason, None, tuple(failures))
        elif "input" in answer:
            if isinstance(answer["input"], dict):
                input, changed = answer["input"], True
            else:
                failures.append(f"hook {hook.command!r}: input must be a JSON object; ignored")
    return PreOutcome(None, input if changed else None, tuple(failures))


async def run_post_hooks(
    hooks: tuple[Hook, ...],
    call: Mapping[str, Any],
    result: ToolResult,
    cwd: str,
    ledger: ProcessLedger | None,
    env: Mapping[str, str] | None = None,
) -> tuple[ToolResult, tuple[str, ...]]:
    """Run the post hooks that apply to ``call``; each sees the result the last one left."""
    failures: list[str] = []
    for hook in hooks:
        if hook.kind != "post_tool" or not hook.applies(call["tool"]):
            continue
        payload = {**call, "hook": hook.kind, "result": result.text, "is_error": result.is_error}
        status, answer, problem = await _run(hook, payload, cwd, ledger, env)
        if problem is None and status != 0:
            problem = f"hook {hook.command!r} exited with status {status}"
        if problem is not None:
            failures.append(problem)
        elif "result" in answer:
            text = answer["result"] if isinstance(answer["result"], str) else json.dumps(answer["result"])
            is_error = answer.get("is_error", result.is_error)
            result = ToolResult(text, bool(is_error), {**result.meta, "changed_by_hook": hook.command})
    return result, tuple(failures)


async def _run(
    hook: Hook, payload: Mapping[str, Any], cwd: str, ledger: ProcessLedger | None, env: Mapping[str, str] | None
) -> tuple[int, dict[str, Any], str | None]:
    """Run one hook: (exit status, its JSON answer or {"reason": stderr}, a failure or None).

    ``env`` is the session's environment without secrets (None: the daemon's, without them).
    """
    name = f"hook {hook.command!r}"
    data = json.dumps(payload, ensure_ascii=False, default=str).encode()
    try:
        process = await trio.lowlevel.open_process(
            ["bash", "-c", hook.command],
            cwd=cwd,
            env=dict(env) if env is not None else tool_environment(os.environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return 1, {}, f"{name} could not start: {exc}"
    if ledger is not None:
        ledger.add(process.pid)
    out, err = bytearray(), bytearray()
    try:
        with trio.move_on_after(hook.timeout) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_feed, process.stdin, data)
                nursery.start_soon(_drain, process.stdout, out)
                nursery.start_soon(_drain, process.stderr, err)
            await process.wait()
    finally:
        # Whatever the hook left running in its group ends with it.
        kill_group(process.pid)
        if process.returncode is None:
            with trio.CancelScope(shield=True):
                await process.wait()
        if ledger is not None:
            ledger.remove(process.pid)
    if scope.cancelled_caught:
        return 1, {}, f"{name} timed out after {hook.timeout:g} s"
    status = process.returncode
    stderr = err.decode("utf-8", "replace").strip()
    if status == BLOCK_STATUS:
        return status, {"reason": stderr[-2000:]}, None
    if status != 0:
        return status, {}, f"{name} exited with status {status}" + (f": {stderr[-500:]}" if stderr else "")
    text = out.decode("utf-8", "replace").strip()
    if not text:
        return 0, {}, None
    try:
        answer = json.loads(text)
    except ValueError:
        return 0, {}, f"{name} printed something that is not JSON; ignored"
    if not isinstance(answer, dict):
        return 0, {}, f"{name} printed JSON that is not an object; ignored"
    return 0, answer, None


async def _feed(stream: Any, data: bytes) -> None:
    async with stream:
        try:
            await stream.send_all(data)
        except trio.BrokenResourceError:
            pass  # a hook need not read its input


async def _drain(stream: Any, into: bytearray) -> None:
    async with stream:
        while chunk := await stream.receive_some(65536):
            if len(into) < _OUTPUT_LIMIT:
                into += chunk
