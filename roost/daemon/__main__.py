"""``python -m roost.daemon``: run the daemon in the foreground (``roost daemon`` execs this)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import logging
import logging.handlers
import os
import sys
from pathlib import Path

import trio

from roost.protocol import NotPrivate

from ._paths import ensure_private_dir, log_dir, private_opener, socket_path, state_dir
from .rpc._server import AlreadyRunning, Daemon, default_database


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, set up logging, serve until stopped. Returns the exit status."""
    parser = argparse.ArgumentParser(prog="roost daemon", description="The roost daemon.")
    parser.add_argument("--socket", help="socket path (default: ROOST_SOCKET or the runtime dir)")
    parser.add_argument("--database", help="SQLite file (default: in the user state dir)")
    parser.add_argument("--foreground", action="store_true", help="also log to stderr")
    parser.add_argument(
        "--sync",
        choices=("normal", "full"),
        default=os.environ.get("ROOST_SYNC", "normal"),
        help="SQLite durability: normal survives a killed daemon; full also survives power "
        "loss, at an fsync per commit (default: $ROOST_SYNC or normal)",
    )
    args = parser.parse_args(argv)
    if args.sync not in ("normal", "full"):
        parser.error(f"--sync (or ROOST_SYNC) must be normal or full, not {args.sync!r}")
    try:
        _setup_logging(args.foreground)
        path = socket_path(args.socket)
        if args.database:
            database = Path(args.database)
        else:
            ensure_private_dir(state_dir())
            database = default_database()
        _settle_collector()
        trio.run(Daemon(path, database, sync=args.sync).serve)
    except (AlreadyRunning, NotPrivate, PermissionError) as exc:
        print(f"roost daemon: {exc}", file=sys.stderr)
        return 1
    return 0


def _settle_collector() -> None:
    """Short pauses of the cycle collector in a process that lives long and holds many
    sessions: what is imported is never scanned again (``gc.freeze``), and each collection
    scans few objects.

    A pause lasts as long as the scan of what is alive in the generations collected, and
    while many runs wait for their models, most of what a step makes is alive: the model
    call in flight. With 1,000 sessions running (bench/scale.py), young collections after
    10,000 allocations took up to 18 ms, and the middle generation (after 10 of them) 47 to
    62 ms, held every run; after 2,000 and 5, at most 4 ms and 14 ms, for about the same time
    in all (0.7 s over the 50 s run). The oldest generation is collected after as many
    allocations as before (5,000 middle collections: 50 million), so full scans of every
    session's history come no more often.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(2_000, 5, 5_000)


class _PrivateLog(logging.handlers.RotatingFileHandler):
    """``roostd.log`` and its rotations, each 0600.

    A record that cannot be written (a full disk) is dropped, and said once on stderr
    until writing works again, instead of a traceback on stderr for every record.
    """

    #: Writing failed, and was said so; ``_dropped``: the record being written was dropped.
    failing = False
    _dropped = False

    def _open(self) -> io.TextIOWrapper:
        # The handler opens every new file (at start and after each rotation) here, to append
        # (a rotating handler's mode is always "a").
        return open(self.baseFilename, "a", encoding=self.encoding, errors=self.errors, opener=private_opener)

    def emit(self, record: logging.LogRecord) -> None:
        self._dropped = False
        super().emit(record)
        if not self._dropped:
            self.failing = False

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self._dropped = True
        if not self.failing:
            self.failing = True
            with contextlib.suppress(OSError):
                print(f"roost daemon: cannot write the log {self.baseFilename}: {error.strerror or error}; "
                      "records may be lost until it works again", file=sys.stderr, flush=True)


def _setup_logging(foreground: bool) -> None:
    folder = log_dir()
    handlers: list[logging.Handler] = []
    try:
        ensure_private_dir(folder)
        handlers.append(_PrivateLog(folder / "roostd.log", maxBytes=5 * 2**20, backupCount=3))
    except OSError as exc:
        # A full disk must not keep the daemon from starting: it logs to stderr only.
        print(f"roost daemon: cannot open the log in {folder}: {exc.strerror or exc}; logging to stderr", file=sys.stderr)
        foreground = True
    if foreground:
        handlers.append(logging.StreamHandler())
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    # httpx logs every request at INFO ("HTTP Request: POST ... 200 OK"): a line per model
    # call says nothing the run's events do not, and formatting it is ~5% of the daemon's
    # CPU in a step. A failed call is logged by the provider that made it.
    logging.getLogger("httpx2").setLevel(logging.WARNING)


if __name__ == "__main__":
    sys.exit(main())
