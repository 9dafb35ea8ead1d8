"""The ``grep`` tool: a Python regular expression over the lines of text files.

The files searched are those ``glob`` would list (the same helpers, so ``.gitignore`` is
respected the same way, and a symlink out of the searched folder is followed only where a
read of its target would be allowed); files with a NUL byte in their first 8 KiB are binary and
skipped. Output is ``path:line:text`` for a matching line and ``path-line-text`` for a
context line, groups apart separated by ``--``, as grep prints them. Line numbers count as
``read`` counts them. Files are read and matched in a worker thread, so a large tree never
blocks the daemon's event loop; a cancelled call tells the thread to stop.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import trio

from roost.loop import glob_matcher

from ._base import Tool, ToolContext, ToolResult, outside_result, readable, resolve_path, truncate
from ._glob import display_prefix, list_files

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
    files: list[str],
    prefix: str,
    regex: re.Pattern[str],
    context: int,
    max_results: int,
    stop: threading.Event,
) -> _Found:
    found = _Found()
    for name in files:
        if stop.is_set():
            break
        try:
            with open(root / name, "rb") as file:
                data = file.read(_BINARY_PROBE)
                if b"\0" in data:
                    continue
                data += file.read()
        except OSError:
            continue
        lines = data.decode("utf-8", errors="replace").splitlines()
        hits = [n for n, line in enumerate(lines) if regex.search(line)]
        if not hits:
            continue
        found.matches += len(hits)
        found.files += 1
        shown = hits[: max_results - found.shown]
        found.shown += len(shown)
        hit_set = set(hits)
        chosen = sorted(
            {n for hit in shown for n in range(max(0, hit - context), min(len(lines), hit + context + 1))}
        )
        previous = None
        for n in chosen:
            if context and found.lines and (previous is None or n != previous + 1):
                found.lines.append("--")
            mark = ":" if n in hit_set else "-"
            line = lines[n]
            if len(line) > _LINE_LIMIT:
                line = f"{line[:_LINE_LIMIT]}[... {len(line) - _LINE_LIMIT} more characters]"
            found.lines.append(f"{prefix}{name}{mark}{n + 1}{mark}{line}")
            previous = n
    return found


def _file_filter(pattern: str | None) -> Callable[[str], bool]:
    if pattern is None:
        return lambda path: True
    matches = glob_matcher(pattern)
    if "/" in pattern:
        return matches
    return lambda path: matches(path.rpartition("/")[2])


async def _run_grep(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    pattern, where = input["pattern"], input.get("path", ".")
    root, inside = resolve_path(ctx, where)
    refused = None if inside else outside_result(where, root, ctx)
    if refused is not None:
        return refused
    try:
        regex = re.compile(pattern, re.IGNORECASE if input.get("ignore_case") else 0)
    except re.error as exc:
        return ToolResult(f"invalid regex {pattern!r}: {exc}", is_error=True)
    try:
        keep = _file_filter(input.get("glob"))
    except re.error as exc:
        return ToolResult(f"invalid glob pattern {input['glob']!r}: {exc}", is_error=True)
    if not root.exists():
        return ToolResult(f"{where} does not exist", is_error=True)
    max_results = input.get("max_results", _DEFAULT_MAX_RESULTS)
    stop = threading.Event()
    with trio.move_on_after(ctx.timeout) as scope:
        if root.is_dir():
            files = sorted(await list_files(root, keep))
        else:
            # One file, named on purpose: searched whatever the glob and .gitignore say.
            root, files = root.parent, [root.name]
        files = await trio.to_thread.run_sync(readable, root, files, ctx, abandon_on_cancel=True)
        try:
            found = await trio.to_thread.run_sync(
                _search,
                root,
                files,
                display_prefix(root, inside, ctx),
                regex,
                input.get("context", 0),
                max_results,
                stop,
                abandon_on_cancel=True,
            )
        finally:
            stop.set()
    if scope.cancelled_caught:
        meta = {"outside": not inside}
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
