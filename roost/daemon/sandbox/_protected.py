"""The paths inside a writable folder that say what runs later, outside any sandbox.

A session folder is writable to its commands, but some of its files decide what programs
run when the user (or roost) next works there: a repository's ``.git/config`` names programs
git runs on a plain ``git status`` (``core.fsmonitor``, ``core.pager``, filters), its
``hooks/`` run on a commit, ``info/`` holds attributes and excludes; ``.roost/``,
``.claude/`` and ``.mcp.json`` hold hooks, MCP servers and agents. These are *protected*:
read-only to sandboxed commands (and the folders that hold them cannot be renamed or
replaced), and the file tools ask before writing them, in every mode.

:func:`protected_paths` finds them in each writable folder: at its top, at every
repository root beneath it (nested repositories, submodules' git folders under
``.git/modules``, and each linked worktree's ``commondir``, ``gitdir`` and
``config.worktree``), breadth first and bounded (:data:`WALK_LIMIT` folders, installed
packages and caches skipped), so that a huge tree costs a bounded walk. What a command creates later (a new repository) is its own.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Iterable

#: Files and folders at a project's top that say what runs.
PROJECT_FILES = (".roost", ".claude", ".mcp.json")
#: Of a git folder: what names the programs git runs, or where to find them.
GIT_FILES = ("config", "config.worktree", "hooks", "info")
#: Of a linked worktree's folder under ``.git/worktrees``: where its configuration is.
WORKTREE_FILES = ("commondir", "gitdir", "config.worktree")
#: Markers of a project root besides ``.git``.
_OTHER_MARKERS = (".hg", ".jj")
#: Folders one walk looks into at most (nearest first).
WALK_LIMIT = 4000
#: Folders of installed packages and caches, where nobody keeps a repository to work in:
#: not walked (a virtual environment is known by its ``pyvenv.cfg``).
_SKIPPED = frozenset({"node_modules", "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def protected_paths(writable: Iterable[str], *, limit: int = WALK_LIMIT) -> list[str]:
    """The protected paths (see the module) that exist inside the folders ``writable``
    (absolute, resolved), each once. Blocking: a bounded walk of each folder."""
    found: list[str] = []
    for root in writable:
        found += _walk(root, limit)
    return list(dict.fromkeys(os.path.realpath(p) for p in found))


def _walk(root: str, limit: int) -> list[str]:
    found: list[str] = []
    queue = deque([root])
    seen = 0
    while queue and seen < limit:
        folder = queue.popleft()
        seen += 1
        try:
            entries = {e.name: e for e in os.scandir(folder)}
        except OSError:
            continue
        git = entries.get(".git")
        if folder == root or git is not None or any(m in entries for m in _OTHER_MARKERS):
            found += [os.path.join(folder, name) for name in PROJECT_FILES if name in entries]
        if git is not None:
            found += _git(git.path, is_dir=git.is_dir(follow_symlinks=False))
        if "pyvenv.cfg" in entries and folder != root:
            continue
        for name, entry in sorted(entries.items()):
            if name != ".git" and name not in _SKIPPED and entry.is_dir(follow_symlinks=False):
                queue.append(entry.path)
    return found


def _git(entry: str, *, is_dir: bool) -> list[str]:
    """What to protect of the ``.git`` at ``entry``: a worktree's or submodule's ``.git``
    file (which says where its git folder is) itself; of a git folder, :data:`GIT_FILES`,
    its submodules' folders and its worktrees' pointers."""
    if not is_dir:
        return [entry]
    found = _existing(entry, GIT_FILES)
    modules = os.path.join(entry, "modules")
    stack = [modules]
    while stack:
        folder = stack.pop()
        try:
            children = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for child in children:
            if os.path.exists(os.path.join(child.path, "HEAD")):
                found += _existing(child.path, GIT_FILES)
                stack.append(os.path.join(child.path, "modules"))
            else:  # a submodule named a/b: its folder is modules/a/b
                stack.append(child.path)
    try:
        worktrees = [e.path for e in os.scandir(os.path.join(entry, "worktrees")) if e.is_dir(follow_symlinks=False)]
    except OSError:
        worktrees = []
    for worktree in worktrees:
        found += _existing(worktree, WORKTREE_FILES)
    return found


def _existing(folder: str, names: Iterable[str]) -> list[str]:
    return [path for name in names if os.path.lexists(path := os.path.join(folder, name))]
