"""Hooks: commands that see what a run does as JSON and may change its course.

One runner serves two formats. A hook runs ``bash -c COMMAND`` in the session's folder, in
its own process group, with the session's environment without secrets plus
``CLAUDE_PROJECT_DIR`` (the project's root; a plugin's hook also ``CLAUDE_PLUGIN_ROOT``, its
folder), and a JSON object on stdin. A project's hooks
(a trusted folder's ``.roost/config.toml`` and ``.claude/settings*.json``) run in the run's
sandbox, where the project's files stay writable and the rest is held as for any command;
the user's own run as the user configured them.

roost's own (``[[hooks.pre_tool]]`` / ``[[hooks.post_tool]]`` in config.toml) get
``{"hook", "session", "run", "call_id", "tool", "input", "cwd"}`` (a post hook also
``"result"`` and ``"is_error"``) and may answer:

- pre_tool: nothing (go on), or a JSON object on stdout: ``{"decision": "deny", "reason":
  ...}`` blocks the call (the model sees the reason), ``{"input": {...}}`` replaces its
  input. Exit status 2 also blocks it, with stderr as the reason.
- post_tool: nothing, or ``{"result": "...", "is_error": bool}`` to replace the result.

Claude Code's (from ``settings.json``, see ``_claude_settings``) get Claude Code's payload
(``session_id``, ``transcript_path`` (the session's transcript as Claude Code writes one,
current up to the event: see ``_transcript``),
``cwd``, ``permission_mode``, ``hook_event_name``; ``tool_name``, ``tool_input`` and
``tool_use_id`` in Claude Code's names (see ``_claude``); ``tool_response`` after a call;
``prompt`` for UserPromptSubmit; ``stop_hook_active`` and ``last_assistant_message`` for
Stop) and are read as Claude Code reads them: exit 0 goes on (stdout is read only if it is
a JSON object, and for UserPromptSubmit plain stdout is context for the model); exit 2
blocks, with stderr as the reason; other exits are failures, reported. JSON answers:

- PreToolUse (run before the loop decides the call, as Claude Code runs them before its
  permission check: see ``ToolCalls.pre_hooks``): ``hookSpecificOutput.permissionDecision``
  ``deny`` blocks the call with ``permissionDecisionReason``; ``ask`` has a person approve
  it, in every mode (``--yes`` too); ``allow`` approves a call that would ask, never one a
  deny rule refuses, an ask rule asks about or a protected path (see ``loop.decide``); of
  several hooks, ``ask`` outdoes ``allow``. ``updatedInput`` replaces the input, which is
  what is decided. The older ``{"decision": "block", "reason"}`` blocks and ``"approve"``
  allows.
- PostToolUse: ``{"decision": "block", "reason"}`` (or exit 2) and
  ``hookSpecificOutput.additionalContext`` are added to the result the model sees.
- Other events: see ``_hook_events``.
- Any: ``{"continue": false, "stopReason"}`` ends the run (a prompt is refused, a call not
  run): once the step's calls are answered, before another model call starts; for Stop, it
  lets the run end even if another hook blocked.

Post hooks run only for calls that ran (not one a pre hook blocked). A Claude Code hook's
``if`` (a permission rule: ``Bash(git *)``) narrows the tool calls it runs for; one marked
``async`` runs off the run's way (:func:`run_detached`): the run does not wait, its
decisions are ignored, and what it says for the model (``additionalContext``,
``systemMessage``) reaches it on the next turn (see ``ToolCalls._detached``).

A hook that fails (another exit status, a timeout, a crash, roost's format printing
something that is not JSON) is reported (in the call's result metadata, ``run.started`` or
``stop_hooks.finished``) and in the daemon log; it blocks nothing. Only the hooks that run
can approve: the user's own, and a project's only while its files are trusted (an
untrusted project's never run).
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import trio

from ..folder import _claude as claude
from ..folder._config import Hook
from ..folder._project import claude_user_dir, user_config_file
from roost.loop import call_matches

from ..sandbox import Confinement, RunSandbox, SandboxUnavailable
from ..tools import Process, ProcessLedger, ToolResult, spawn
from ._environ import find_program, tool_environment

log = logging.getLogger(__name__)

#: Exit status of a hook that blocks.
BLOCK_STATUS = 2
_OUTPUT_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class HookEnv:
    """Where a session's hooks run and what they are told of it."""

    session: str
    cwd: str
    #: The project's root (``CLAUDE_PROJECT_DIR``).
    root: str
    #: The run's mode (Claude Code's ``permission_mode``).
    mode: str = "agent"
    #: The session's environment without secrets (None: the daemon's, without them).
    env: Mapping[str, str] | None = None
    ledger: ProcessLedger | None = None
    #: The run's sandbox, where a project's hooks run (None: they run as they are).
    sandbox: RunSandbox | None = None
    #: The session's transcript in Claude Code's format (see ``_transcript``).
    transcript: str = ""
    #: Starts an ``async`` hook off the run's way (see :func:`run_detached`; None: such a
    #: hook runs in line, as the others do).
    detach: Callable[[Hook, Mapping[str, Any], HookEnv], None] | None = None

    def claude_payload(self, event: str, **fields: Any) -> dict[str, Any]:
        """Claude Code's payload of ``event``: the fields every event has, then ``fields``."""
        return {
            "session_id": self.session,
            "transcript_path": self.transcript,
            "cwd": self.cwd,
            "permission_mode": claude.permission_mode(self.mode),
            "hook_event_name": event,
            **fields,
        }


@dataclass(frozen=True, slots=True)
class PreOutcome:
    """What the pre hooks said: a block (its reason), a new input, a stop of the run (its
    reason), failures to report, and Claude Code's ``permissionDecision`` when one said
    ``ask`` (it outdoes ``allow``) or ``allow``, with its reason."""

    blocked: str | None = None
    input: Mapping[str, Any] | None = None
    failures: tuple[str, ...] = field(default=())
    stop: str | None = None
    decision: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PostOutcome:
    """What the post hooks made of a result, a stop of the run (its reason), and failures."""

    result: ToolResult
    failures: tuple[str, ...] = ()
    stop: str | None = None


async def run_pre_hooks(hooks: tuple[Hook, ...], call: Mapping[str, Any], where: HookEnv) -> PreOutcome:
    """Run the pre hooks that apply to ``call`` in order; the first block ends the chain."""
    tool, input = call["tool"], call["input"]
    failures: list[str] = []
    changed = False
    said: dict[str, str] = {}
    for hook in hooks:
        if hook.kind != "pre_tool" or not _applies(hook, tool, input, where):
            continue
        ran = await run_hook(hook, _tool_payload(hook, call, input, where), where)
        if ran.problem is not None:
            failures.append(ran.problem)
            continue
        if ran.status == BLOCK_STATUS:
            return PreOutcome(ran.stderr or blocked_by(hook), None, tuple(failures))
        answer, problem = hook_answer(hook, ran)
        if problem is not None:
            failures.append(problem)
        blocked, new, stop = _claude_pre(hook, answer, said) if hook.event is not None else _roost_pre(hook, answer)
        if blocked is not None or stop is not None:
            return PreOutcome(blocked or stop, None, tuple(failures), stop)
        if new is not None:
            if isinstance(new, dict):
                input, changed = (claude.roost_input(tool, new) if hook.event is not None else new), True
            else:
                failures.append(f"hook {hook.command!r}: the new input must be a JSON object; ignored")
    decision = "ask" if "ask" in said else "allow" if "allow" in said else None
    return PreOutcome(None, input if changed else None, tuple(failures), None, decision, said.get(decision or "", ""))


def _tool_payload(
    hook: Hook, call: Mapping[str, Any], input: Mapping[str, Any], where: HookEnv, result: ToolResult | None = None
) -> dict[str, Any]:
    """What a hook of the call ``call`` (with ``input``, as earlier hooks left it) is given
    in its format: before the call (no ``result``) or after it."""
    tool = call["tool"]
    if hook.event is None:
        done = {"result": result.text, "is_error": result.is_error} if result is not None else {}
        return {**call, "input": input, "hook": hook.kind, **done}
    if result is not None:
        done = {"tool_response": claude.tool_response(tool, input, result.text, result.is_error, where.cwd)}
    else:
        done = {}
    return where.claude_payload(
        hook.event,
        tool_name=claude.tool_name(tool),
        tool_input=claude.claude_input(tool, input, where.cwd),
        tool_use_id=call["call_id"],
        **done,
    )


def _roost_pre(hook: Hook, answer: Mapping[str, Any]) -> tuple[str | None, Any, str | None]:
    """(block reason, new input, stop reason) of roost's own pre hook."""
    if answer.get("decision") == "deny":
        return str(answer.get("reason") or blocked_by(hook)), None, None
    return None, answer.get("input"), None


def _claude_pre(hook: Hook, answer: Mapping[str, Any], said: dict[str, str]) -> tuple[str | None, Any, str | None]:
    """(block reason, new input, stop reason) of a Claude Code PreToolUse hook; its ``ask``
    or ``allow`` (or the older ``approve``) noted in ``said``, with its reason."""
    stop = stop_reason(answer)
    specific = specific_output(answer)
    decision = specific.get("permissionDecision")
    reason = str(specific.get("permissionDecisionReason") or answer.get("reason") or "")
    if decision == "deny" or answer.get("decision") == "block":
        return reason or blocked_by(hook), None, stop
    if decision in ("ask", "allow") or answer.get("decision") == "approve":
        said.setdefault("ask" if decision == "ask" else "allow", reason or f"the hook {hook.command!r}")
    return None, specific.get("updatedInput"), stop


async def run_post_hooks(
    hooks: tuple[Hook, ...], call: Mapping[str, Any], result: ToolResult, where: HookEnv
) -> PostOutcome:
    """Run the post hooks that apply to ``call``; each sees the result the last one left."""
    tool = call["tool"]
    failures: list[str] = []
    stop = None
    for hook in hooks:
        if hook.kind != "post_tool" or not _applies(hook, tool, call["input"], where):
            continue
        ran = await run_hook(hook, _tool_payload(hook, call, call["input"], where, result), where)
        if hook.event is None and ran.problem is None and ran.status != 0:
            ran = Ran(ran.status, ran.stdout, ran.stderr, f"hook {hook.command!r} exited with status {ran.status}")
        if ran.problem is not None:
            failures.append(ran.problem)
            continue
        answer, problem = hook_answer(hook, ran)
        if problem is not None:
            failures.append(problem)
        if hook.event is None:
            if "result" in answer:
                text = answer["result"] if isinstance(answer["result"], str) else json.dumps(answer["result"])
                is_error = answer.get("is_error", result.is_error)
                result = ToolResult(text, bool(is_error), {**result.meta, "changed_by_hook": hook.command})
            continue
        said = [ran.stderr] if ran.status == BLOCK_STATUS else []
        if answer.get("decision") == "block":
            said.append(str(answer.get("reason") or ""))
        said.append(str(specific_output(answer).get("additionalContext") or ""))
        feedback = "\n".join(s for s in said if s)
        if feedback:
            # The call has run: what the hook says goes to the model with its result.
            text = f"{result.text.rstrip()}\n\n[{hook.event} hook] {feedback}"
            result = replace(result, text=text, meta={**result.meta, "hook_feedback": hook.command})
        stop = stop or stop_reason(answer)
    return PostOutcome(result, tuple(failures), stop)


def _applies(hook: Hook, tool: str, input: Mapping[str, Any], where: HookEnv) -> bool:
    """Whether a tool hook runs for the call ``tool(input)``: its matcher, and its ``if``."""
    if not hook.applies(tool):
        return False
    return hook.condition is None or call_matches(hook.condition, tool, input, where.cwd, os.path.expanduser("~"))


async def run_detached(hook: Hook, payload: Mapping[str, Any], where: HookEnv, confinement: Confinement | None) -> str:
    """An ``async`` hook, off the run's way (it may outlast the run), a failure logged; a
    project's in a sandbox of its own under the run's ``confinement``, as the run's may be
    gone first. Bounded by its timeout all the same: the daemon keeps no process unbounded.
    Its decisions are ignored, as Claude Code ignores an async hook's; what it says for the
    model (a Claude Code hook's ``additionalContext`` or ``systemMessage``, which Claude
    Code delivers on the next turn) is returned, labelled ("": nothing)."""
    box = None
    if confinement is not None and _from_project(hook, where):
        shown = (where.transcript, where.transcript.removesuffix(".jsonl")) if where.transcript else ()
        box = RunSandbox(confinement, where.cwd, ledger=where.ledger, shown=shown)
    async with box if box is not None else nullcontext() as sandbox:
        ran = await run_hook(hook, payload, replace(where, sandbox=sandbox, detach=None))
    if ran.problem is not None:
        log.warning("session %s: %s", where.session, ran.problem)
    answer, _ = hook_answer(hook, ran)
    said = [specific_output(answer).get("additionalContext"), answer.get("systemMessage")]
    text = "\n".join(s.strip() for s in said if isinstance(s, str) and s.strip())
    return f"[async {hook.event} hook] {text}" if text and hook.event is not None else ""


def blocked_by(hook: Hook) -> str:
    """The reason a hook that blocked without saying why is shown by."""
    return f"blocked by the hook {hook.command!r}"


def specific_output(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Claude Code answer's ``hookSpecificOutput`` (empty if it has none)."""
    specific = answer.get("hookSpecificOutput")
    return specific if isinstance(specific, dict) else {}


def stop_reason(answer: Mapping[str, Any]) -> str | None:
    """Why a Claude Code answer ends the run (``continue: false``), or None."""
    if answer.get("continue") is not False:
        return None
    return str(answer.get("stopReason") or "a hook stopped the run")


@dataclass(frozen=True, slots=True)
class Ran:
    """How a hook process ended: its exit status, what it printed, and a failure (it could
    not start, timed out, or exited with a status other than 0 and 2)."""

    status: int
    stdout: str
    stderr: str
    problem: str | None = None


def hook_answer(hook: Hook, ran: Ran) -> tuple[dict[str, Any], str | None]:
    """The JSON object a hook that exited 0 printed (else ``{}``), and a failure to report:
    roost's format must print JSON or nothing; Claude Code's may print anything."""
    if ran.status != 0 or not ran.stdout:
        return {}, None
    try:
        answer = json.loads(ran.stdout)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        return answer, None
    if hook.event is not None:
        return {}, None
    what = "printed something that is not JSON" if answer is None else "printed JSON that is not an object"
    return {}, f"hook {hook.command!r} {what}; ignored"


def _from_project(hook: Hook, where: HookEnv) -> bool:
    """Whether ``hook`` is the project's (its ``.roost/config.toml``, ``.claude/settings.json``
    or ``settings.local.json``): the one place this is decided. Only a hook from the user's
    own files (``config.toml`` in the user's config folder, Claude Code's user settings, as
    the loaders name them) or from a plugin the user installed and enabled is the user's;
    any other is the project's."""
    if hook.plugin_root is not None:
        return False
    environ = where.env if where.env is not None else os.environ
    return hook.source not in (str(user_config_file()), str(claude_user_dir(environ) / "settings.json"))


async def run_hook(hook: Hook, payload: Mapping[str, Any], where: HookEnv) -> Ran:
    """Run one hook with ``payload`` on its stdin, for at most its timeout: a project's in
    the run's sandbox, the user's as the user configured it."""
    if hook.background and where.detach is not None:
        where.detach(hook, payload, where)
        return Ran(0, "", "")  # it says nothing here
    name = f"hook {hook.command!r}"
    data = json.dumps(payload, ensure_ascii=False, default=str).encode()
    env = dict(where.env) if where.env is not None else tool_environment(os.environ)
    env["CLAUDE_PROJECT_DIR"] = where.root
    if hook.plugin_root is not None:
        env["CLAUDE_PLUGIN_ROOT"] = hook.plugin_root
    sandbox = where.sandbox if _from_project(hook, where) else None
    # The run's sandbox records its own process group in the ledger.
    ledger = where.ledger if sandbox is None else None
    process: Process
    try:
        process = await (sandbox.spawn if sandbox is not None else spawn)(
            [find_program("bash", env.get("PATH", os.defpath)) or "/bin/bash", "-c", hook.command],
            cwd=where.cwd,
            env=env,
            stdin=True,
            stderr=True,
        )
    except (OSError, SandboxUnavailable) as exc:
        return Ran(1, "", "", f"{name} could not start: {exc}")
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
        process.kill()
        if process.returncode is None:
            with trio.CancelScope(shield=True):
                await process.wait()
        if ledger is not None:
            ledger.remove(process.pid)
    if scope.cancelled_caught:
        return Ran(1, "", "", f"{name} timed out after {hook.timeout:g} s")
    status = await process.wait()  # it has ended: its status at once
    stdout = out.decode("utf-8", "replace").strip()
    stderr = err.decode("utf-8", "replace").strip()
    if status in (0, BLOCK_STATUS):
        return Ran(status, stdout, stderr[-2000:])
    return Ran(status, stdout, stderr, f"{name} exited with status {status}" + (f": {stderr[-500:]}" if stderr else ""))


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
