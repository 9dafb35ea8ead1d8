"""The ``roost`` command line: click commands that talk to the daemon over its socket."""

from ._main import cli, main

__all__ = ["cli", "main"]
