"""Commands that move a session in and out of the daemon: export, import."""

from __future__ import annotations

import json
import sys
from typing import Any, BinaryIO, Iterator

import click

from roost.protocol import ErrorCode, RpcError

from ._connect import DaemonError, daemon, resolve_session

#: Bytes of lines sent in one part of an import (each part is one request).
PART_BYTES = 1 << 20
#: A line longer than this cannot be sent in one request (the daemon's frame limit is
#: 16 MiB), and no event roost stores is that long.
MAX_LINE = 15 << 20


@click.command(name="export")
@click.argument("session")
@click.pass_obj
def export(obj: dict[str, Any], session: str) -> None:
    """Write SESSION as JSON lines to standard output (a header line, then one event per
    line), for roost import here or on another machine.

    A fork is written whole, with the history it shares. A run in flight is written up to
    its last stored event.

    \b
    Example:
      roost export 3f2a > 3f2a.jsonl
    """
    out = sys.stdout.buffer
    with daemon(obj) as client:
        session = resolve_session(client, session)
        params: dict[str, Any] = {"session": session}
        while True:
            part = client.call("sessions.export", params)
            out.write("".join(line + "\n" for line in part["lines"]).encode())
            if part["next"] is None:
                break
            params = {"session": session, "since": part["next"], "upto": part["upto"]}
    out.flush()


@click.command(name="import")
@click.argument("file", type=click.File("rb"))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def import_(obj: dict[str, Any], file: BinaryIO, as_json: bool) -> None:
    """Import a session from FILE (made by roost export; - for standard input) and print
    its id: the one in the file, or a new one if that is taken here.

    A file that is damaged, cut short or not a roost export is refused with the number of
    the line at fault, and nothing is imported.
    """
    name = getattr(file, "name", "-")
    with daemon(obj) as client:
        # Parts go one after another; the daemon keeps them until the last, then stores
        # the session whole.
        upload: dict[str, Any] = {}
        try:
            parts = _parts(file, name)
            part = next(parts)
            for following in parts:
                upload = {"upload": client.call("sessions.import", lines=part, **upload)["upload"]}
                part = following
            result = client.call("sessions.import", lines=part, done=True, **upload)
        except RpcError as exc:
            if exc.code == ErrorCode.IMPORT_INVALID:
                raise DaemonError(f"{name}: {exc.message}; nothing was imported [IMPORT_INVALID]") from None
            raise
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(result["session"])
    if result["session"] != result["original"]:
        click.echo(f"(its id {result['original']} is taken here: imported as {result['session']})", err=True)


def _parts(file: BinaryIO, name: str) -> Iterator[list[bytes]]:
    """FILE's lines (without their newline) in parts of about :data:`PART_BYTES`; at least
    one part, empty for an empty file."""
    part: list[bytes] = []
    size = 0
    for n, line in enumerate(file, start=1):
        if line.endswith(b"\n"):
            line = line[:-1]
        if len(line) > MAX_LINE:
            raise DaemonError(f"{name}: line {n}: longer than any event roost stores; nothing was imported")
        if part and size + len(line) > PART_BYTES:
            yield part
            part, size = [], 0
        part.append(line)
        size += len(line)
    yield part
