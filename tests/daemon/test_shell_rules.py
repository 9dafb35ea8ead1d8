"""The table of shell lines (tests/_shell_lines.py) through a real daemon and real bash:
each line's outcome (ran, denied, asked) under the rules and mode of its run, and what it
did to its own file in the project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from roost.protocol.trio_client import TrioClient

from tests._shell_lines import ALLOW, ASKED, DENIED, DENY, LINES, RAN

from .conftest import bash, text, write_script


async def outcomes(client: TrioClient, project: Path, lines: list[str], **dispatch: Any) -> list[str]:
    """Dispatch one reply that runs ``lines`` (each a bash call); what became of each.

    A call that asks is denied at once, as a person would: the calls that change things run
    one at a time in order, so the ones after it wait for that answer.
    """
    model = write_script(project.parent, [bash(line) for line in lines], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, **dispatch)
    order: list[str] = []
    outcome: dict[str, str] = {}
    with trio.fail_after(60):
        async for note in client.notifications:
            event = note.params[0] if note.params else {}
            if note.method != "event" or event.get("run") != run["run"]:
                continue
            # Each call comes first as started or as asked about, in the reply's order.
            if event["type"] in ("tool.started", "permission.requested") and event["call_id"] not in order:
                order.append(event["call_id"])
            if event["type"] == "permission.requested":
                outcome[event["call_id"]] = ASKED
                await client.call("permission.respond", session=run["session"], call_id=event["call_id"], decision="deny")
            elif event["type"] == "tool.finished" and event["call_id"] not in outcome:
                outcome[event["call_id"]] = DENIED if (event.get("meta") or {}).get("denied") else RAN
            elif event["type"] == "run.finished":
                break
    return [outcome.get(call_id, "?") for call_id in order]


def make_files(project: Path, prefix: str) -> list[str]:
    names = [f"{prefix}{i}" for i in range(len(LINES))]
    for name in names:
        (project / name).write_text("mine\n")
    return names


async def test_the_table_in_full_mode_under_a_deny_rule(client: TrioClient, project: Path) -> None:
    files = make_files(project, "f")
    got = await outcomes(client, project, [e.line(f) for e, f in zip(LINES, files)], mode="full", deny=list(DENY))
    wrong = [(e.template, e.full, o) for e, o in zip(LINES, got) if o != e.full]
    assert not wrong, wrong
    # Refused lines never ran: every file a refused rm named is still there.
    for entry, name in zip(LINES, files):
        if entry.full != RAN:
            assert (project / name).exists(), entry.template
    [find] = [f for e, f in zip(LINES, files) if e.template.endswith("-delete")]
    assert not (project / find).exists()  # deny bash(rm *) says nothing about find -delete


async def test_the_table_in_agent_mode_under_allow_and_deny_rules(client: TrioClient, project: Path) -> None:
    files = make_files(project, "a")
    got = await outcomes(
        client, project, [e.line(f) for e, f in zip(LINES, files)], deny=list(DENY), allow=list(ALLOW)
    )
    wrong = [(e.template, e.agent, o) for e, o in zip(LINES, got) if o != e.agent]
    assert not wrong, wrong
    assert all((project / name).exists() for name in files)
    # A line the rules allow, but for the file it writes: asked, and denied.
    assert not (project / f"{files[[e.template for e in LINES].index('ls > {f}.out')]}.out").exists()


async def test_full_mode_without_a_bash_deny_rule_runs_what_it_cannot_judge(client: TrioClient, project: Path) -> None:
    for name in ("x1", "x2"):
        (project / name).write_text("mine\n")
    got = await outcomes(client, project, ["X=rm; $X -f x1", "f(){ rm -f x2; }; f"], mode="full", deny=["read(~/**)"])
    assert got == [RAN, RAN]
    assert not (project / "x1").exists() and not (project / "x2").exists()
