"""The ``bash`` tool: a real shell in the session's folder, in its own process group.

The process group is killed (SIGKILL) when the call ends, times out or is cancelled
(abort, daemon shutdown), so no child outlives its call. With a sandbox in the call's
context (the run's, :class:`~roost.daemon.sandbox.RunSandbox`) the shell is started inside
it by the run's spawner, which also ends what the call left outside its group, and a
failure the sandbox likely caused gets a note saying so.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import trio

from ..sandbox import SandboxUnavailable
from ._base import Tool, ToolContext, ToolResult, truncate
from ._spawn import Process, spawn

_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1, "description": "the shell command"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "seconds before the command is killed",
        },
        "run_in_background": {
            "type": "boolean",
            "description": "start it and return at once with its id (bash_output reads its output, kill_shell ends it)",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


async def start_command(command: str, ctx: ToolContext) -> tuple[Process, bool] | ToolResult:
    """``bash -c command`` started where the call's commands run (the run's sandbox, if it
    has one), in a process group of its own; and whether its group was put in the ledger
    (the caller removes it once the command is gone). Or the error result the model sees.

    Raises:
        OSError: bash cannot be started here (no such folder).
    """
    argv, env = ["bash", "-c", command], ctx.process_env()
    if ctx.sandbox is not None:
        # The run's sandbox records its own process group in the ledger; a command's pid
        # there is its pid namespace's.
        try:
            return await ctx.sandbox.spawn(argv, cwd=ctx.cwd, env=env), False
        except SandboxUnavailable as exc:
            return ToolResult(f"not run: {exc}", is_error=True, meta={"sandbox": ctx.sandbox.policy.mode})
    process = await spawn(argv, cwd=ctx.cwd, env=env)
    if ctx.ledger is not None:
        ctx.ledger.add(process.pid)
    return process, ctx.ledger is not None


async def _run_bash(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    if input.get("run_in_background"):
        if ctx.shells is None:
            return ToolResult("bash cannot run a command in the background here", is_error=True)
        return await ctx.shells.start(input["command"], ctx)
    timeout = min(float(input.get("timeout", ctx.timeout)), ctx.timeout)
    started = time.monotonic()
    sandbox = {"sandbox": ctx.sandbox.policy.mode} if ctx.sandbox is not None else {}
    begun = await start_command(input["command"], ctx)
    if isinstance(begun, ToolResult):
        return begun
    process, recorded = begun
    ledger = ctx.ledger if recorded else None
    chunks: list[bytes] = []
    kept = total = 0
    timed_out = False
    try:
        assert process.stdout is not None
        with trio.move_on_after(timeout) as scope:
            async with process.stdout:
                while chunk := await process.stdout.receive_some(65536):
                    # Keep what can be shown (bytes may decode to fewer characters); count
                    # the rest so the note says how much was cut.
                    total += len(chunk)
                    if kept <= ctx.output_limit * 4:
                        chunks.append(chunk)
                        kept += len(chunk)
            await process.wait()
        timed_out = scope.cancelled_caught
    finally:
        # Children left in the group (`cmd &`) die with the call, as on a timeout.
        process.kill()
        if process.returncode is None:
            with trio.CancelScope(shield=True):
                await process.wait()
        if ledger is not None:
            ledger.remove(process.pid)
    shown = b"".join(chunks).decode("utf-8", errors="replace")
    output = truncate(shown, ctx.output_limit, total - kept + len(shown))
    status = await process.wait()  # it has ended: its status at once
    latency = time.monotonic() - started
    # After the cut, so that a long output never hides how the command ended.
    if timed_out:
        output += f"\n[killed: timed out after {timeout:g} s]"
    elif status != 0:
        output += f"\n[exit status {status}]"
        note = ctx.sandbox.explain(shown, status, ctx.cwd) if ctx.sandbox is not None else None
        if note is not None:
            output += f"\n{note}"
    return ToolResult(
        output,
        is_error=timed_out or status != 0,
        meta={"exit_status": status, "bytes": total, "latency": latency, "timed_out": timed_out, **sandbox},
    )


BASH = Tool(
    "bash",
    "Run a shell command (bash -c) in the session's working directory. Output is stdout and "
    "stderr together; a non-zero exit status is reported. Processes the command starts end "
    "with the call. With run_in_background the call returns at once with the command's id: "
    "bash_output reads what it wrote since, kill_shell ends it, and it ends with the run. It may run in a sandbox (writes limited to the working directory and "
    "/tmp, no network, credentials hidden): a failure it caused comes with a note.",
    _SCHEMA,
    _run_bash,
)
