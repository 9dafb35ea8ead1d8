"""The ``glob`` tool, and the one file listing that ``glob`` and ``grep`` share.

Which files a search sees: in a git work tree, the files git would show (tracked, plus
untracked ones not ignored by ``.gitignore`` and friends), read from the index and the
ignore files as data (no git process runs: see ``_gitfiles``); anywhere else, every file
under the folder, ``.git`` folders skipped. Patterns are matched against
paths relative to the searched folder: ``*`` and ``?`` stay within one path segment (and
match dotfiles), ``[...]`` is a character class, and a ``**`` segment spans any number of
folders. A file is listed only where it may be read: a symlink that leads out of the
searched folder needs the permission a read of its target would need, and a deny rule on
reads holds for every file's real path (``readable``). Listing and stat calls run in a
worker thread, so a large tree never blocks the daemon's event loop.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import trio

from roost.loop import PatternError, glob_matcher

from ._base import Tool, ToolContext, ToolResult, locate, readable, truncate
from ._gitfiles import UnreadableRepository, find_repository, work_tree_files

log = logging.getLogger(__name__)

_SCHEMA = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "minLength": 1,
            "description": "glob pattern, e.g. **/*.py or src/*.ts",
        },
        "path": {"type": "string", "minLength": 1, "description": "folder to search (default: the working directory)"},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

#: Most paths one call returns.
_LIMIT = 1000


async def list_files(
    root: Path, keep: Callable[[str], bool] = lambda path: True, *, threads: trio.CapacityLimiter | None = None
) -> list[str]:
    """The files under the folder ``root`` a search should see, as relative POSIX paths.

    ``keep`` filters the paths before any of them is looked at on disk. The listing runs
    in a worker thread of ``threads`` (None: trio's default limiter); see
    :func:`project_files`.
    """
    return await trio.to_thread.run_sync(project_files, root, keep, limiter=threads, abandon_on_cancel=True)


def project_files(root: Path, keep: Callable[[str], bool] = lambda path: True) -> list[str]:
    """The files under the folder ``root`` a search should see: in a git work tree, the
    files git lists that are files now (:func:`work_tree_files`, read without running
    git), anywhere else every file (:func:`walk_files`). Blocking: call it in a thread.

    Error handling: a repository that cannot be read without git (the log says why) is
    walked like any folder; listing never fails because of git.
    """
    try:
        repository = find_repository(root)
        if repository is not None:
            return work_tree_files(root, repository, keep)
    except UnreadableRepository as exc:
        log.warning("%s is listed without its git ignore rules: %s", root, exc)
    return walk_files(root, keep)


def walk_files(
    root: Path,
    keep: Callable[[str], bool] = lambda path: True,
    *,
    descend: Callable[[str], bool] = lambda name: name != ".git",
    limit: int | None = None,
) -> list[str]:
    """Every file under ``root`` that ``keep`` keeps, as sorted relative POSIX paths: the
    listing outside a git work tree. Folders whose name ``descend`` refuses are skipped
    (``.git`` by default); with ``limit``, the walk stops at that many files (the first in
    its sorted order). Blocking: call it in a thread."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if descend(d))
        relative = Path(folder).relative_to(root)
        found += [path for f in sorted(files) if keep(path := (relative / f).as_posix())]
        if limit is not None and len(found) >= limit:
            return found[:limit]
    return found


def display_prefix(root: Path, inside: bool, ctx: ToolContext) -> str:
    """What goes before a path relative to ``root`` so that ``read`` and ``edit`` find it:
    the folder relative to the working directory when inside it, else the absolute folder."""
    if not inside:
        return f"{root}/"
    relative = os.path.relpath(root, os.path.realpath(ctx.cwd))
    return "" if relative == "." else f"{Path(relative).as_posix()}/"


def _newest_first(found: list[tuple[str, str]]) -> list[str]:
    """The paths of ``found`` (each as listed and its real path, from ``readable``), the
    most recently modified first (stat at the real path, following no further link)."""

    def mtime(entry: tuple[str, str]) -> float:
        try:
            return os.stat(entry[1], follow_symlinks=False).st_mtime
        except OSError:
            return 0.0

    return [name for name, _ in sorted(sorted(found), key=mtime, reverse=True)]


async def _run_glob(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    where = input.get("path", ".")
    located = locate(ctx, where)
    if isinstance(located, ToolResult):
        return located
    root, inside = located
    if not root.is_dir():
        problem = "is not a folder" if root.exists() else "does not exist"
        return ToolResult(f"{where} {problem}", is_error=True)
    pattern = input["pattern"]
    if pattern.startswith("/"):
        return ToolResult("pattern must be relative; give the folder as path", is_error=True)
    try:
        matches = glob_matcher(pattern)
    except PatternError as exc:
        return ToolResult(f"invalid glob pattern {pattern!r}: {exc}", is_error=True)
    with trio.move_on_after(ctx.timeout) as scope:
        files = await list_files(root, matches, threads=ctx.threads)
        kept = await ctx.in_thread(readable, root, files, ctx, abandon_on_cancel=True)
        files = await ctx.in_thread(_newest_first, kept, abandon_on_cancel=True)
    if scope.cancelled_caught:
        meta: dict[str, Any] = {"outside": not inside}
        return ToolResult(f"glob timed out after {ctx.timeout:g} s", is_error=True, meta=meta)
    meta = {"matches": len(files), "outside": not inside}
    if not files:
        return ToolResult(f"no files match {pattern}", meta=meta)
    prefix = display_prefix(root, inside, ctx)
    text = "\n".join(prefix + p for p in files[:_LIMIT])
    if len(files) > _LIMIT:
        text += f"\n[{len(files) - _LIMIT} more files not shown; narrow the pattern or the path]"
    return ToolResult(truncate(text, ctx.output_limit), meta=meta)


GLOB = Tool(
    "glob",
    "Find files by name pattern (** spans folders, e.g. **/*.py), newest first. Paths come back "
    "relative to the working directory. In a git repository, files ignored by .gitignore are "
    "skipped; .git is always skipped.",
    _SCHEMA,
    _run_glob,
    read_only=True,
)
