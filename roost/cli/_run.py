"""Commands that start and steer runs: dispatch, steer, abort."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import click

from roost.protocol import DISPATCH_IMAGE_BYTES, MODES, SANDBOX_MODES, Client, ConnectionClosed, ErrorCode, RpcError

from ._connect import DaemonError, daemon, env_param, last_session, resolve_session, target, workdir
from ._exits import EXIT_APPROVAL_TIMEOUT, EXIT_STATUS, exit_status

_EXITS = ", ".join(f"{status} {reason}" for reason, status in EXIT_STATUS.items())
#: Claude Code's names for its print mode's formats and permission modes (``_headless``
#: maps them; it is imported only by a dispatch that uses them).
_FORMATS = ("text", "json", "stream-json")
_PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions")


@click.command(
    epilog=f"Exit status: {_EXITS}; {EXIT_APPROVAL_TIMEOUT} a call was denied because nobody "
    "answered within --approval-timeout (a run that would exit 0); 2 bad usage; 10 refused "
    "by the daemon or no daemon. With --detach: 0 once the run has started."
)
@click.argument("task", required=False)
@click.option("--session", "-s", "--resume", "-r", "session", help="Run in this session (id or unique prefix); default: a new one.")
@click.option("--continue", "-c", "continue_", is_flag=True, help="Run in this folder's last session.")
@click.option("--model", "-m", envvar="ROOST_MODEL", help="provider/model, a Claude model name or alias, or a [models] alias, e.g. scripted/demo, anthropic/claude-sonnet-4-6, claude-opus-4-1-20250805, sonnet, opusplan (default: ANTHROPIC_MODEL, else config default_model).  [env: ROOST_MODEL]")
@click.option("--cwd", metavar="DIR", help="Working directory of a new session (default: here; with --host, a folder there, relative to the home).")
@click.option("--max-turns", type=click.IntRange(min=1), help="Model calls allowed in this run (default 12).")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Output tokens each reply may have (default: the agent's, else 8192).")
@click.option("--agent", "-a", help="The agent to run (default: default); see roost agents.")
@click.option("--think", callback=lambda ctx, param, value: think_value(value), help="Thinking: off, low, medium, high, or a budget in tokens.")
@click.option("--mode", type=click.Choice(MODES), help="plan: one reply, a plan, no tools; agent (default): writes and commands ask; full: nothing asks; exec: attempts until the project's check.sh passes. Default: the agent's mode.")
@click.option("--sandbox", type=click.Choice(SANDBOX_MODES), envvar="ROOST_SANDBOX", help="Where commands run: workspace (the folder and a private /tmp writable, the rest read-only, credentials hidden, no network), read-only, or off. Default: the agent's, else [sandbox] mode in config.toml, else workspace; a project's config may narrow it.  [env: ROOST_SANDBOX]")
@click.option("--yes", "-y", is_flag=True, help="Approve every call that no deny rule refuses.")
@click.option("--allow", multiple=True, metavar="RULE", help="Allow calls matching RULE in this run, e.g. 'bash(npm test)' (repeatable).")
@click.option("--ask", multiple=True, metavar="RULE", help="Ask before calls matching RULE (repeatable).")
@click.option("--deny", multiple=True, metavar="RULE", help="Refuse calls matching RULE, e.g. 'bash(git push*)' (repeatable).")
@click.option("--approval-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds a request waits before it counts as denied (default: for ever).")
@click.option("--attempts", type=click.IntRange(min=1), help="exec: attempts allowed (default 6).")
@click.option("--time-box", type=click.FloatRange(min=0, min_open=True), help="exec: seconds for the whole run (default 1800).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@click.option("--output-format", "output_format", type=click.Choice(_FORMATS), help="As claude -p prints: text (the final text), json (one result object) or stream-json (Claude Code's messages, one per line).")
@click.option("--input-format", "input_format", type=click.Choice(("text", "stream-json")), help="As claude -p reads: text (TASK, and what is piped after it) or stream-json (the task as an Agent SDK sends it on standard input; needs --output-format stream-json).")
@click.option("--allowedTools", "--allowed-tools", "allowed_tools", multiple=True, metavar="RULES", help="Claude Code's allow rules, e.g. 'Bash(git diff:*),Read' (as --allow).")
@click.option("--disallowedTools", "--disallowed-tools", "disallowed_tools", multiple=True, metavar="RULES", help="Claude Code's deny rules, e.g. 'Bash(git push:*)' (as --deny).")
@click.option("--permission-mode", type=click.Choice(_PERMISSION_MODES), help="Claude Code's modes: default (agent), acceptEdits (agent; edits inside the folder do not ask, commands do), plan, bypassPermissions (full).")
@click.option("--append-system-prompt", metavar="TEXT", help="Add TEXT to the end of the run's system prompt.")
@click.option("--image", "images", multiple=True, metavar="FILE", type=click.Path(exists=True, dir_okay=False), help="Send the image FILE (png, jpg, gif, webp) with the task, scaled down when large (repeatable; 12 MiB in all).")
@click.option("--print", "-p", "print_", is_flag=True, help="Accepted as claude -p takes it: dispatch is always one task.")
@click.option("--verbose", is_flag=True, help="Accepted as claude -p takes it: the stream is always whole.")
@click.option("--detach", "-d", is_flag=True, help="Print the session and run ids and return; the run goes on.")
@click.option("--request-id", help="Idempotency key: repeating it returns the first run.")
@click.pass_obj
def dispatch(
    obj: dict[str, Any],
    task: str | None,
    session: str | None,
    continue_: bool,
    model: str | None,
    cwd: str | None,
    max_turns: int | None,
    max_tokens: int | None,
    agent: str | None,
    think: int | str | None,
    mode: str | None,
    sandbox: str | None,
    yes: bool,
    allow: tuple[str, ...],
    ask: tuple[str, ...],
    deny: tuple[str, ...],
    approval_timeout: float | None,
    attempts: int | None,
    time_box: float | None,
    as_json: bool,
    output_format: str | None,
    input_format: str | None,
    allowed_tools: tuple[str, ...],
    disallowed_tools: tuple[str, ...],
    permission_mode: str | None,
    append_system_prompt: str | None,
    images: tuple[str, ...],
    print_: bool,
    verbose: bool,
    detach: bool,
    request_id: str | None,
) -> None:
    """Run TASK through an agent and show the run as it happens.

    \b
    Examples:
      roost dispatch "list the files here and count them"
      roost dispatch "..." --model scripted/demo --json | jq .type
      roost dispatch "fix the tests" --detach
      roost dispatch "why does the page look like this?" --image shot.png
      git diff | roost dispatch "review this change"
      echo "fix the lint" | roost dispatch
      roost dispatch -c "and now the docs"
      roost dispatch -p "fix the lint" --output-format json --allowedTools "Bash(npm run lint:*),Edit"

    Input piped to the command follows TASK in the task; with no TASK (or TASK "-"), the
    input is the task.

    In agent mode, writes and shell commands wait for approval: at a terminal you are
    asked here, one key answers (y once, s or a for the session, n deny); otherwise, or from any other terminal, answer with `roost approve` or
    `roost deny` (see `roost pending`); with no terminal, how to answer is printed to stderr
    at once. Ctrl-C aborts the run (a second Ctrl-C leaves it
    running); closing the terminal does not stop it: follow it again with
    `roost logs SESSION --follow`.
    """
    if output_format and (as_json or detach):
        raise click.UsageError("--output-format prints the run as it goes: not with --json or --detach")
    if mode and permission_mode:
        raise click.UsageError("give --mode or --permission-mode, not both")
    sent: list[dict[str, Any]] = []
    if input_format == "stream-json":
        task, sent = _stream_task(task, output_format)
    else:
        task = _with_piped_input(task)
    with daemon(obj) as client:
        # The session's commands run with this terminal's environment (less its secrets),
        # or on a remote host, with its daemon's.
        here = workdir(target(obj), client, cwd)
        params: dict[str, Any] = {"task": task, "cwd": here, **env_param(target(obj))}
        if session and continue_:
            raise click.UsageError("give --session or --continue, not both")
        if session:
            params["session"] = resolve_session(client, session)
        elif continue_:
            params["session"] = last_session(client, here)
        if model:
            params["model"] = model
        if max_turns:
            params["max_turns"] = max_turns
        for key, value in (
            ("agent", agent),
            ("max_tokens", max_tokens),
            ("think", think),
            ("mode", mode),
            ("sandbox", sandbox),
            ("attempts", attempts),
            ("time_box", time_box),
            ("approval_timeout", approval_timeout),
        ):
            if value is not None:
                params[key] = value
        claude = _claude_params(allowed_tools, disallowed_tools, permission_mode)
        if claude.get("mode"):
            params["mode"] = claude["mode"]
        for key, rules in (("allow", allow), ("ask", ask), ("deny", deny)):
            if rules or claude.get(key):
                params[key] = list(rules) + claude.get(key, [])
        if append_system_prompt:
            params["append_system_prompt"] = append_system_prompt
        if images or sent:
            params["images"] = sent + _image_files(images)
        if yes:
            params["yes"] = True
        if request_id:
            params["request_id"] = request_id
        params["attach"] = not detach
        started = _dispatched(client, params, ask=sys.stdin.isatty() and not (as_json or output_format))
        for warning in started.get("warnings") or []:
            click.secho(f"warning: {warning}", fg="yellow", err=True)
        # Imported once the daemon is at work: json and the renderer take ~3 ms to load,
        # and the run need not wait for this process's printer.
        from ._follow import print_json
        from ._render import Renderer

        if detach:
            if as_json:
                print_json(started)
            else:
                click.echo(f"session {started['session']} run {started['run']}")
            return
        headless = None
        readable = not (as_json or output_format)
        # The person at this terminal is asked about each request (one key answers).
        asking = readable and not started.get("repeated") and sys.stdin.isatty()
        if output_format:
            from ._headless import ClaudeOutput

            cwd_of_run = here if "session" not in params else _session_cwd(client, params["session"])
            headless = ClaudeOutput(output_format, started["run"], cwd_of_run, permission_mode)
            on_event: Callable[[dict[str, Any]], None] = headless.on_event
        else:
            on_event = print_json if as_json else Renderer(answering=asking).render
        if asking:
            on_event = _answering(client, on_event)
        elif not started.get("repeated"):
            # Nobody can be asked here: say at once how to answer, rather than wait in silence.
            on_event = _guiding(on_event, shown=readable and sys.stdout.isatty())
        timed_out = _TimedOut(on_event)
        try:
            finished = _watch(client, started, timed_out)
        except ConnectionClosed as exc:
            host = target(obj).host
            if host is None:
                raise
            # A dropped ssh connection ends this command, not the run on the other machine.
            raise DaemonError(
                f"{exc}; the run goes on there: roost --host {host.label} logs {started['session']} --follow"
            ) from None
    if headless is not None:
        headless.finish(finished)
    status = exit_status(finished["reason"]) if finished else 1
    raise SystemExit(EXIT_APPROVAL_TIMEOUT if status == 0 and timed_out.denied else status)


def _dispatched(client: Client, params: dict[str, Any], *, ask: bool) -> dict[str, Any]:
    """``dispatch``; when a custom command's ``!`command``` lines need approval and a person
    is here (``ask``), they are shown and asked about, and the dispatch made again with
    them approved."""
    try:
        return client.call("dispatch", params)
    except RpcError as exc:
        lines = (exc.data or {}).get("lines") if isinstance(exc.data, dict) else None
        if exc.code != ErrorCode.APPROVAL_NEEDED or not ask or not lines:
            raise
    from ._safe_text import printable

    click.echo("The command runs these lines before its task is sent:")
    for line in lines:
        # Escaped: a control character must not hide what would run.
        shown = line if printable(line) == line else line.encode("unicode_escape").decode()
        click.echo(click.style(f"  !`{shown}`", fg="cyan"))
    if not click.confirm("Run them?", default=False):
        raise DaemonError("not run: the command's lines were not approved")
    return client.call("dispatch", {**params, "approved_lines": lines})


def _claude_params(allowed: tuple[str, ...], disallowed: tuple[str, ...], permission_mode: str | None) -> dict[str, Any]:
    """Claude Code's ``--allowedTools``, ``--disallowedTools`` and ``--permission-mode`` as
    dispatch params (``mode``, ``allow``, ``deny``); the rules keep Claude Code's syntax,
    which the daemon reads."""
    if not (allowed or disallowed or permission_mode):
        return {}
    from ._headless import PERMISSION_MODES, tool_rules

    params: dict[str, Any] = {"allow": tool_rules(allowed), "deny": tool_rules(disallowed)}
    if permission_mode:
        mode, rules = PERMISSION_MODES[permission_mode]
        params["mode"] = mode
        params["allow"] += rules
    return params


def _session_cwd(client: Client, session: str) -> str:
    """The working directory of an existing session."""
    rows = client.call("sessions.list")["sessions"]
    return next((str(r.get("cwd", "")) for r in rows if r["id"] == session), "")


def _stream_task(task: str | None, output_format: str | None) -> tuple[str, list[dict[str, Any]]]:
    """The task an Agent SDK host writes to standard input, and its images (see
    ``_stream_input``)."""
    if output_format != "stream-json":
        raise click.UsageError("--input-format stream-json needs --output-format stream-json")
    if task:
        raise click.UsageError("with --input-format stream-json the task comes from standard input, not TASK")
    from ._stream_input import StreamInputError, read_task

    def write(line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()

    try:
        return read_task(sys.stdin, write)
    except StreamInputError as exc:
        raise click.UsageError(str(exc)) from None


def _with_piped_input(task: str | None) -> str:
    """TASK with what was piped to the command after it (no TASK, or ``-``: the input
    alone), as ``llm`` does."""
    if task is None or task == "-":
        if sys.stdin.isatty():
            raise click.UsageError("give a TASK, or pipe one in: echo TASK | roost dispatch")
        task = sys.stdin.read()
    elif not sys.stdin.isatty():
        piped = sys.stdin.read()
        if piped.strip():
            task = f"{task}\n\n{piped}"
    if not task.strip():
        raise click.UsageError("the task is empty")
    return task


def think_value(value: str | None) -> int | str | None:
    """``--think``: a number of tokens as an int; a level (off, low, ...) as it is."""
    return int(value) if value is not None and value.isdigit() else value


def _answering(client: Client, show: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """``show``, then, for a request the run waits on, ask the person at this terminal."""

    def on_event(event: dict[str, Any]) -> None:
        show(event)
        if event.get("type") in ("permission.requested", "human.asked"):
            # Only a run that asks pays for importing the approval commands.
            from ._approvals import prompt_answer

            prompt_answer(client, event)

    return on_event


def _guiding(show: Callable[[dict[str, Any]], None], *, shown: bool) -> Callable[[dict[str, Any]], None]:
    """``show``, then, for a request the run waits on, tell stderr how to answer it (unless
    ``shown``: the readable output, at a terminal, says so already)."""

    def on_event(event: dict[str, Any]) -> None:
        show(event)
        if event.get("type") in ("permission.requested", "human.asked") and not shown:
            from ._approvals import answer_hint, describe_request

            row = {**event, "kind": "human"} if event["type"] == "human.asked" else event
            advance = (
                ""
                if event["type"] == "human.asked"
                else "\n  (--yes approves such calls in advance; --approval-timeout SECONDS denies them after a wait)"
            )
            click.echo(
                f"roost: waiting for an answer; no terminal here to ask at:\n  {describe_request(row)}\n"
                f"  {answer_hint(row)}{advance}",
                err=True,
            )

    return on_event


class _TimedOut:
    """``show`` each event; remember whether a call was denied because nobody answered in
    time (the run may end done, but what was asked of it was not done)."""

    def __init__(self, show: Callable[[dict[str, Any]], None]) -> None:
        self._show = show
        self.denied = False

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "permission.resolved" and event.get("client") == "timeout" and event.get("decision") == "deny":
            self.denied = True
        self._show(event)


def _watch(client: Any, started: dict[str, Any], on_event: Any) -> dict[str, Any] | None:
    from ._follow import follow

    session, run = started["session"], started["run"]
    # A repeated request_id returns an earlier run: replay the session so it is shown whole.
    since = 0 if started.get("repeated") else None
    try:
        return follow(
            client, session, on_event, since=since or 0, until_run=run, attached=since is None
        )
    except KeyboardInterrupt:
        click.echo("\naborting the run (Ctrl-C again to leave it running)", err=True)
    try:
        try:
            client.call("abort", session=session)
        except RpcError:
            pass
        return follow(client, session, on_event, since=0, until_run=run, attached=True)
    except KeyboardInterrupt:
        click.echo(f"\nleft run {run} of session {session} running in the daemon", err=True)
        raise SystemExit(130) from None


@click.command()
@click.argument("session")
@click.argument("text")
@click.option("--image", "images", multiple=True, metavar="FILE", type=click.Path(exists=True, dir_okay=False), help="Send the image FILE with TEXT, as dispatch --image does (repeatable).")
@click.pass_obj
def steer(obj: dict[str, Any], session: str, text: str, images: tuple[str, ...]) -> None:
    """Add TEXT to the run in flight in SESSION; the next model call sees it.

    \b
    Examples:
      roost steer 3f2a "also count hidden files"
      roost steer 3f2a "it looks like this now" --image after.png
    """
    extra = {"images": _image_files(images)} if images else {}
    with daemon(obj) as client:
        client.call("steer", session=resolve_session(client, session), text=text, **extra)
    click.echo("steering queued")


@click.command()
@click.argument("session")
@click.option("--after-step", is_flag=True, help="Let the step in flight finish (the model's reply and its tool calls), then end the run.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def abort(obj: dict[str, Any], session: str, after_step: bool, as_json: bool) -> None:
    """Abort the run in flight in SESSION: at once (its model stream is cut, its tool
    processes are killed), or with --after-step once the step in flight is done (its
    results stored; calls that would wait for a person are refused). Either way the run
    ends aborted.

    \b
    Examples:
      roost abort 3f2a
      roost abort 3f2a --after-step
    """
    with daemon(obj) as client:
        params = {"session": resolve_session(client, session), **({"after_step": True} if after_step else {})}
        result = client.call("abort", params)
    if as_json:
        from ._follow import print_json

        print_json(result)
    elif after_step:
        click.echo(f"run {result['run']} ends after the step in flight")
    else:
        click.echo(f"aborted run {result['run']}")


def _image_files(paths: tuple[str, ...]) -> list[dict[str, Any]]:
    """``--image`` files as ``dispatch`` takes them (read here: with ``--host``, this
    machine's files), refused at once over the bytes a dispatch carries."""
    total = sum(os.path.getsize(path) for path in paths)
    if total > DISPATCH_IMAGE_BYTES:
        raise click.UsageError(
            f"the images are {total / 2**20:.1f} MiB in all; a dispatch carries at most "
            f"{DISPATCH_IMAGE_BYTES / 2**20:.0f} MiB (scale them down first)"
        )
    images = []
    for path in paths:
        with open(path, "rb") as file:
            images.append({"name": os.path.basename(path), "data": file.read(DISPATCH_IMAGE_BYTES + 1)})
    if sum(len(image["data"]) for image in images) > DISPATCH_IMAGE_BYTES:  # a file grew since
        raise click.UsageError(f"the images are over the {DISPATCH_IMAGE_BYTES / 2**20:.0f} MiB a dispatch carries")
    return images
