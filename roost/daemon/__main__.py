"""``python -m roost.daemon``: run the daemon in the foreground (``roost daemon`` execs this)."""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import sys
from pathlib import Path

import trio

from ._paths import log_dir, socket_path
from ._server import AlreadyRunning, Daemon, default_database


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
    _setup_logging(args.foreground)
    path = socket_path(args.socket)
    database = Path(args.database) if args.database else default_database()
    try:
        trio.run(Daemon(path, database, sync=args.sync).serve)
    except AlreadyRunning as exc:
        print(f"roost daemon: {exc}", file=sys.stderr)
        return 1
    except PermissionError as exc:
        print(f"roost daemon: {exc}", file=sys.stderr)
        return 1
    return 0


def _setup_logging(foreground: bool) -> None:
    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [
        logging.handlers.RotatingFileHandler(folder / "roostd.log", maxBytes=5 * 2**20, backupCount=3)
    ]
    if foreground:
        handlers.append(logging.StreamHandler())
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )


if __name__ == "__main__":
    sys.exit(main())
