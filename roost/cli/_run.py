"""Commands that start and steer runs: dispatch, steer, abort."""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from roost.protocol import MODES, SANDBOX_MODES, Client, ConnectionClosed, RpcError

from ._connect import DaemonError, daemon, env_param, last_session, resolve_session, target, workdir
from ._render import EXIT_STATUS, Renderer, exit_status

_EXITS = ", ".join(f"{status} {reason}" for reason, status in EXIT_STATUS.items())


@click.command(
    epilog=f"Exit status: {_EXITS}; 2 bad usage; 10 refused by the daemon or no daemon. "
    "With --detach: 0 once the run has started."
)
@click.argument("task")
@click.option("--session", "-s", help="Run in this session (id or unique prefix); default: a new one.")
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
@click.option("--detach", "-d", is_flag=True, help="Print the session and run ids and return; the run goes on.")
@click.option("--request-id", help="Idempotency key: repeating it returns the first run.")
@click.pass_obj
def dispatch(
    obj: dict[str, Any],
    task: str,
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
    detach: bool,
    request_id: str | None,
) -> None:
    """Run TASK through an agent and show the run as it happens.

    \b
    Examples:
      roost dispatch "list the files here and count them"
      roost dispatch "..." --model scripted/demo --json | jq .type
      roost dispatch "fix the tests" --detach
      git diff | roost dispatch "review this change"
      roost dispatch - < task.md
      roost dispatch -c "and now the docs"

    Input piped to the command follows TASK in the task (TASK "-": the input is the task).

    In agent mode, writes and shell commands wait for approval: at a terminal you are
    asked here; otherwise, or from any other terminal, answer with `roost approve` or
    `roost deny` (see `roost pending`). Ctrl-C aborts the run (a second Ctrl-C leaves it
    running); closing the terminal does not stop it: follow it again with
    `roost logs SESSION --follow`.
    """
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
        for key, rules in (("allow", allow), ("ask", ask), ("deny", deny)):
            if rules:
                params[key] = list(rules)
        if yes:
            params["yes"] = True
        if request_id:
            params["request_id"] = request_id
        params["attach"] = not detach
        started = client.call("dispatch", params)
        # Imported once the daemon is at work: json alone takes ~1 ms to load, and the
        # run need not wait for this process's printer.
        from ._follow import print_json

        if detach:
            if as_json:
                print_json(started)
            else:
                click.echo(f"session {started['session']} run {started['run']}")
            return
        on_event: Callable[[dict[str, Any]], None] = print_json if as_json else Renderer().render
        if not as_json and not started.get("repeated") and sys.stdin.isatty():
            on_event = _answering(client, on_event)
        try:
            finished = _watch(client, started, on_event)
        except ConnectionClosed as exc:
            host = target(obj).host
            if host is None:
                raise
            # A dropped ssh connection ends this command, not the run on the other machine.
            raise DaemonError(
                f"{exc}; the run goes on there: roost --host {host.label} logs {started['session']} --follow"
            ) from None
    raise SystemExit(exit_status(finished["reason"]) if finished else 1)


def _with_piped_input(task: str) -> str:
    """TASK with what was piped to the command after it (TASK ``-``: the input alone), as
    ``llm`` does."""
    if task == "-":
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
@click.pass_obj
def steer(obj: dict[str, Any], session: str, text: str) -> None:
    """Add TEXT to the run in flight in SESSION; the next model call sees it.

    \b
    Example:
      roost steer 3f2a "also count hidden files"
    """
    with daemon(obj) as client:
        client.call("steer", session=resolve_session(client, session), text=text)
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



