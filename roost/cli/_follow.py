"""Following a session's events over one connection, re-attaching after a lag."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from roost.protocol import Client


def follow(
    client: Client,
    session: str,
    on_event: Callable[[dict[str, Any]], None],
    *,
    since: int,
    until_run: str | None = None,
    attached: bool = False,
) -> dict[str, Any] | None:
    """Pass every event of ``session`` to ``on_event``, stored ones after ``since`` first.

    Returns the ``run.finished`` event of ``until_run`` when it arrives; with no
    ``until_run``, follows until the connection ends (returns None). A run may be quiet
    for as long as it likes, but after a silence of the client's timeout the daemon is
    asked for its status: a frozen daemon raises :class:`roost.protocol.Timeout`.
    """
    last = since
    if not attached:
        client.call("attach", session=session, since=since)
    for event in client.events(check_after=client.timeout):
        if event.get("type") == "lagged" and event.get("session") == session:
            on_event(event)
            client.call("attach", session=session, since=last)
            continue
        if event.get("session") != session:
            continue
        seq = event.get("seq")
        if seq is not None:
            if seq <= last:
                continue
            last = seq
        on_event(event)
        if until_run and event.get("type") == "run.finished" and event.get("run") == until_run:
            return event
    return None


def print_json(event: dict[str, Any]) -> None:
    """One event as one line of JSON on stdout, flushed (for pipes into jq)."""
    sys.stdout.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()
