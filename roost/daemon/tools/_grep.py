"""The ``grep`` tool: a Python regular expression over the lines of text files.

The files searched are those ``glob`` would list (the same helpers, so ``.gitignore`` is
respected the same way, and a symlink out of the searched folder is followed only where a
read of its target would be allowed); files with a NUL byte in their first 8 KiB are binary and
skipped. Output is ``path:line:text`` for a matching line and ``path-line-text`` for a
context line, groups apart separated by ``--``, as grep prints them. Line numbers count as
``read`` counts them (the same line reader: a file is read a block at a time, never
whole, and a line past 65,536 characters is cut). Only regular files are searched, opened
without blocking: a FIFO or a device in the tree is skipped, never waited on. Files are
read and matched in a worker thread of the tools' own, so a large tree never blocks the
daemon's event loop; a cancelled call tells the thread to stop. Each file is opened at the
real path it was judged on, following no link (``_fs.open_path``), beneath the searched
folder's descriptor when it lies in it: a file or a folder swapped for a symlink during
the search is skipped, never followed out.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping

import trio

from roost.loop import PatternError, Regex, glob_matcher, linear_regex

from ..folder._files import open_regular
from ._base import Tool, ToolContext, ToolResult, locate, readable, truncate
from ._fs import open_folder, open_path
from ._glob import display_prefix, list_files
from ._lines import LINE_LIMIT, text_lines

_SCHEMA = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "minLength": 1, "description": "regular expression (Python re syntax)"},
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "file or folder to search (default: the working directory)",
        },
        "glob": {
            "type": "string",
            "minLength": 1,
            "description": "only files matching this glob; without a / it matches the file name at any depth",
        },
        "ignore_case": {"type": "boolean", "description": "match regardless of case"},
        "context": {"type": "integer", "minimum": 0, "description": "lines shown before and after each match"},
        "max_results": {"type": "integer", "minimum": 1, "description": "most matching lines shown (default 200)"},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

_DEFAULT_MAX_RESULTS = 200
#: A NUL byte within this many bytes from the start marks a binary file.
_BINARY_PROBE = 8192
#: Characters of one line shown; minified files must not fill the output with one line.
_LINE_LIMIT = 500


@dataclass(slots=True)
class _Found:
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    shown: int = 0
    files: int = 0


def _search(
    root: Path,
    files: list[tuple[str, str]],
    prefix: str,
    regex: Regex,
    context: int,
    max_results: int,
    stop: threading.Event,
) -> _Found:
    """Search ``files`` (each as listed and its real path, from :func:`readable`) in the
    folder ``root`` (blocking).

    Raises:
        PathSwapped: ``root`` itself was swapped for a symlink since it was resolved.
    """
    found = _Found()
    base = str(root).rstrip("/") + "/"
    folder = open_folder(str(root))
    try:
        # A file in the folder is opened beneath its descriptor, by its path in it; one
        # that a link took out of it, by its real path (absolute: from the root).
        opener = partial(open_path, dir_fd=folder)
        for name, real in files:
            if stop.is_set():
                break
            try:
                fd = open_regular(real[len(base) :] if real.startswith(base) else real, opener=opener)
            except OSError:
                # Gone or swapped since it was judged, unreadable, or not a file (never
                # waited on).
                continue
            with open(fd, "rb") as file:
                if b"\0" in os.pread(fd, _BINARY_PROBE, 0):
                    continue
                _search_file(file, f"{prefix}{name}", regex, context, max_results, found, stop)
    finally:
        os.close(folder)
    return found


def _search_file(
    file: BinaryIO,
    label: str,
    regex: Regex,
    context: int,
    max_results: int,
    found: _Found,
    stop: threading.Event,
) -> None:
    """Add one file's matches to ``found``, reading it line by line (memory: ``context``
    lines). Every match is counted; those past ``max_results`` are not shown, unless they
    fall among the context lines of one that is."""
    before: deque[tuple[int, str, bool]] = deque(maxlen=context)
    after = 0
    previous: int | None = None
    hits = 0

    def show(n: int, text: str, cut: bool, mark: str) -> None:
        nonlocal previous
        if context and found.lines and (previous is None or n != previous + 1):
            found.lines.append("--")
        if cut:
            text = f"{text[:_LINE_LIMIT]}[... the line goes on past {LINE_LIMIT:,} characters]"
        elif len(text) > _LINE_LIMIT:
            text = f"{text[:_LINE_LIMIT]}[... {len(text) - _LINE_LIMIT} more characters]"
        found.lines.append(f"{label}{mark}{n + 1}{mark}{text}")
        previous = n

    for n, (text, cut) in enumerate(text_lines(file, stop=stop)):
        hit = regex.search(text) is not None
        hits += hit
        if hit and found.shown < max_results:
            found.shown += 1
            for m, earlier, earlier_cut in before:
                show(m, earlier, earlier_cut, "-")
            before.clear()
            show(n, text, cut, ":")
            after = context
        elif after:
            # A match past max_results is still marked as one among a shown match's context.
            show(n, text, cut, ":" if hit else "-")
            after -= 1
        elif context and found.shown < max_results:
            before.append((n, text, cut))
    if hits:
        found.matches += hits
        found.files += 1


def _file_filter(pattern: str | None) -> Callable[[str], bool]:
    if pattern is None:
        return lambda path: True
    matches = glob_matcher(pattern)
    if "/" in pattern:
        return matches
    return lambda path: matches(path.rpartition("/")[2])


async def _run_grep(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    pattern, where = input["pattern"], input.get("path", ".")
    located = locate(ctx, where)
    if isinstance(located, ToolResult):
        return located
    root, inside = located
    try:
        # Linear time: a model's (a+)+$ must not hold the interpreter lock for seconds.
        regex = linear_regex(pattern, ignore_case=bool(input.get("ignore_case")))
    except PatternError as exc:
        return ToolResult(f"invalid regex {pattern!r}: {exc}", is_error=True)
    try:
        keep = _file_filter(input.get("glob"))
    except PatternError as exc:
        return ToolResult(f"invalid glob pattern {input['glob']!r}: {exc}", is_error=True)
    if not root.exists():
        return ToolResult(f"{where} does not exist", is_error=True)
    if not (root.is_dir() or root.is_file()):
        return ToolResult(f"{where} is not a regular file (a FIFO, a device or a socket); grep searches files", is_error=True)
    max_results = input.get("max_results", _DEFAULT_MAX_RESULTS)
    stop = threading.Event()
    with trio.move_on_after(ctx.timeout) as scope:
        if root.is_dir():
            files = sorted(await list_files(root, keep, threads=ctx.threads))
        else:
            # One file, named on purpose: searched whatever the glob and .gitignore say.
            root, files = root.parent, [root.name]
        kept = await ctx.in_thread(readable, root, files, ctx, abandon_on_cancel=True)
        try:
            found = await ctx.in_thread(
                _search,
                root,
                kept,
                display_prefix(root, inside, ctx),
                regex,
                input.get("context", 0),
                max_results,
                stop,
                abandon_on_cancel=True,
            )
        except OSError as exc:  # the folder is gone, or a link stands where it was
            text = f"cannot search {where}: {exc.strerror or exc}"
            return ToolResult(text, is_error=True, meta={"outside": not inside})
        finally:
            stop.set()
    if scope.cancelled_caught:
        meta: dict[str, Any] = {"outside": not inside}
        return ToolResult(f"grep timed out after {ctx.timeout:g} s", is_error=True, meta=meta)
    meta = {"matches": found.matches, "files": found.files, "outside": not inside}
    if not found.matches:
        return ToolResult(f"no matches for {pattern}", meta=meta)
    text = truncate("\n".join(found.lines), ctx.output_limit)
    if (more := found.matches - found.shown) > 0:
        lines = "line" if more == 1 else "lines"
        text += f"\n[{more} more matching {lines} not shown; narrow the search or raise max_results]"
    return ToolResult(text, meta=meta)


GREP = Tool(
    "grep",
    "Search file contents with a regular expression (Python re), line by line. Prints "
    "path:line:text for each match (path-line-text for context lines). In a git repository, "
    "files ignored by .gitignore are skipped; binary files are always skipped. Use glob to "
    "pick files (e.g. *.py) and max_results to see more.",
    _SCHEMA,
    _run_grep,
    read_only=True,
)
