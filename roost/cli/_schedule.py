"""``roost schedule``: tasks the daemon runs by itself, on a cron schedule."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from roost.protocol import MODES

from ._connect import daemon, target, workdir
from ._render import when
from ._safe_text import visible


@click.group()
def schedule() -> None:
    """Run a task on a schedule. The daemon starts each due task as a run in a new session
    (in the schedule's folder, with the daemon's environment: provider keys must be there);
    any client can attach to it, and its approvals wait for a person as any run's do (use
    --mode full or exec for runs nobody watches). A schedule whose last run still goes is
    not started again; a time due while the daemon was down runs once when it starts
    (--missed skip: not at all). Keep the daemon up with the systemd unit or launchd agent
    in contrib/.

    \b
    Examples:
      roost schedule add "0 7 * * 1-5" "run the tests and summarize failures" --mode exec
      roost schedule add "@daily" "update the changelog" --name changelog --tz Europe/Paris
      roost schedule list
      roost schedule run changelog
    """


@schedule.command()
@click.argument("cron")
@click.argument("task")
@click.option("--name", help="The schedule's name (default: from the task's first words).")
@click.option("--cwd", help="The folder its runs work in (default: here).")
@click.option("--agent", "-a", help="The agent its runs use.")
@click.option("--model", "-m", help="The model its runs use.")
@click.option("--mode", type=click.Choice(MODES), default="agent", show_default=True, help="Its runs' mode.")
@click.option("--tz", help="The time zone CRON is read in (default: this machine's).")
@click.option("--missed", type=click.Choice(["once", "skip"]), default="once", show_default=True,
              help="A time due while the daemon was down: run once when it starts, or skip.")
@click.pass_obj
def add(obj: dict[str, Any], cron: str, task: str, name: str | None, cwd: str | None, agent: str | None,
        model: str | None, mode: str, tz: str | None, missed: str) -> None:
    """Run TASK whenever CRON says (minute hour day month weekday, or @daily, @hourly...)."""
    with daemon(obj) as client:
        params: dict[str, Any] = {"cron": cron, "task": task, "cwd": workdir(target(obj), client, cwd),
                                  "mode": mode, "missed": missed}
        if tz is None and target(obj).host is None:
            tz = os.environ.get("TZ", "").removeprefix(":") or None  # this terminal's zone (else the daemon's)
        for key, value in (("name", name), ("agent", agent), ("model", model), ("tz", tz)):
            if value:
                params[key] = value
        added = client.call("schedules.add", params)["schedule"]
    click.echo(f"schedule {added['name']}: next run {when(added['next_due'])} ({added['tz']})")


@schedule.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as JSON.")
@click.pass_obj
def listed(obj: dict[str, Any], as_json: bool) -> None:
    """The schedules: when each is next due, and how its last run went."""
    with daemon(obj) as client:
        schedules = client.call("schedules.list")["schedules"]
    if as_json:
        click.echo(json.dumps(schedules))
        return
    if not schedules:
        click.echo('no schedules: roost schedule add "0 7 * * *" TASK adds one')
        return
    for s in schedules:
        state = "paused" if s["paused"] else f"next {when(s['next_due'])}"
        click.echo(f"{s['name']}  {s['cron']} ({s['tz']})  {state}  · {s['mode']} · {visible(s['cwd'])}")
        click.echo(f"    {visible(s['task'])[:100]}")
        if s["last_run"] is not None:
            last = f"session {s['last_session']}" if s["last_error"] is None else visible(s["last_error"])
            click.echo(f"    last {when(s['last_run'])}: {last} · {s['runs']} run{'s' if s['runs'] != 1 else ''}")
        elif s["last_error"]:
            click.echo(f"    {visible(s['last_error'])}")


def _one(method: str, doc: str) -> click.Command:
    @click.command(help=doc)
    @click.argument("name")
    @click.pass_obj
    def command(obj: dict[str, Any], name: str) -> None:
        with daemon(obj) as client:
            result = client.call(method, name=name)
        s = result.get("schedule")
        if method == "schedules.run":
            said = f"started: session {s['last_session']}" if s["last_error"] is None else visible(s["last_error"])
            click.echo(f"schedule {name}: {said}")
        elif method == "schedules.remove":
            click.echo(f"removed schedule {name}")
        else:
            click.echo(f"schedule {name}: {'paused' if s['paused'] else 'next run ' + when(s['next_due'])}")

    return command


schedule.add_command(_one("schedules.remove", "Delete schedule NAME."), "rm")
schedule.add_command(_one("schedules.run", "Run schedule NAME's task now (its next time stays)."), "run")
schedule.add_command(_one("schedules.pause", "Stop schedule NAME from coming due until resumed."), "pause")
schedule.add_command(_one("schedules.resume", "Let schedule NAME come due again."), "resume")
