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

Every run in a folder walks it again, and reading thousands of folders takes 40 to 60 ms
(a home folder, a large monorepo). :class:`Walks` keeps what each folder held, with the
folder's inode and change time (``ctime``), and the next walk reads only the folders whose
``lstat`` says otherwise. A folder's ctime changes whenever an entry in it is made, removed
or renamed (and on chmod, chown or touch): nothing a command can do changes what the walk
sees there and leaves it as it was, and no program can set it back (unlike the
modification time). A folder changed within :data:`SETTLED` seconds of a walk is not kept:
two changes in one tick of the file system's clock can share a ctime. What lies inside a
git folder (its config, hooks, submodules, worktrees) is read at every walk.
"""

from __future__ import annotations

import os
import stat as stat_mode
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
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


#: Seconds a folder must have been left unchanged before a walk for :class:`Walks` to keep
#: what it held: more than any file system's timestamp granularity (FAT's is 2 s).
SETTLED = 3.0
#: Writable folders :class:`Walks` remembers a walk of, the most recently walked kept.
WALKS_KEPT = 4
#: What a walk looks for among a folder's entries.
_MARKS = frozenset({".git", "pyvenv.cfg", *PROJECT_FILES, *_OTHER_MARKERS})


@dataclass(frozen=True, slots=True)
class _Folder:
    """What a walk needs of one folder, and what says that it has not changed since."""

    #: ``st_dev``, ``st_ino`` and ``st_ctime_ns`` of the folder, taken before it was read.
    stat: tuple[int, int, int]
    #: The paths of its folders a walk goes on into, sorted by name.
    subfolders: tuple[str, ...]
    #: Which of :data:`_MARKS` are among its entries.
    marks: frozenset[str]
    #: Its ``.git``: a folder (True), a file (False), or none (None).
    git_dir: bool | None


class Walks:
    """What the last walk of each writable folder found in each folder it read, so that the
    next walk reads only those that changed (see the module).

    Thread safety: walks run in worker threads, several at a time; the table is locked,
    the walks are not (two walks of one folder at once each read it, and the later one
    is kept).
    """

    def __init__(self, kept: int = WALKS_KEPT, settled: float = SETTLED) -> None:
        self._kept = kept
        self._settled_ns = int(settled * 1e9)
        self._lock = threading.Lock()
        self._walks: OrderedDict[tuple[str, int], dict[str, _Folder]] = OrderedDict()

    def walk(self, root: str, limit: int) -> list[str]:
        """The protected paths in ``root`` (see :func:`protected_paths`). Blocking."""
        key = (root, limit)
        with self._lock:
            known = self._walks.get(key)
        settled_before = time.time_ns() - self._settled_ns
        found, read = _walk(root, limit, known or {}, settled_before)
        with self._lock:
            self._walks[key] = read
            self._walks.move_to_end(key)
            while len(self._walks) > self._kept:
                self._walks.popitem(last=False)
        return found


def protected_paths(writable: Iterable[str], *, limit: int = WALK_LIMIT, walks: Walks | None = None) -> list[str]:
    """The protected paths (see the module) that exist inside the folders ``writable``
    (absolute, resolved), each once. Blocking: a bounded walk of each folder (``walks``:
    from what an earlier walk read, where nothing changed)."""
    found: list[str] = []
    for root in writable:
        found += walks.walk(root, limit) if walks is not None else _walk(root, limit, {}, 0)[0]
    return list(dict.fromkeys(os.path.realpath(p) for p in found))


def _walk(root: str, limit: int, known: dict[str, _Folder], settled_before: int) -> tuple[list[str], dict[str, _Folder]]:
    """The protected paths in ``root``, and what was found in each folder read that had not
    changed since ``settled_before`` (ns): the ``known`` record of a folder that did not
    change is used instead of reading it again."""
    found: list[str] = []
    read: dict[str, _Folder] = {}
    queue = deque([root])
    seen = 0
    while queue and seen < limit:
        folder_path = queue.popleft()
        seen += 1
        folder = _folder(folder_path, known.get(folder_path))
        if folder is None:
            continue
        if 0 < folder.stat[2] < settled_before:  # (a file system that keeps no ctime says 0)
            read[folder_path] = folder
        marks = folder.marks
        if folder_path == root or folder.git_dir is not None or not marks.isdisjoint(_OTHER_MARKERS):
            found += [os.path.join(folder_path, name) for name in PROJECT_FILES if name in marks]
        if folder.git_dir is not None:
            found += _git(os.path.join(folder_path, ".git"), is_dir=folder.git_dir)
        if "pyvenv.cfg" in marks and folder_path != root:
            continue
        queue.extend(folder.subfolders)
    return found, read


def _folder(path: str, known: _Folder | None) -> _Folder | None:
    """What the walk needs of the folder ``path``: ``known`` if the folder is as it was when
    that was read, else read now (None: it cannot be read)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat_mode.S_ISDIR(st.st_mode):
        return None  # swapped for a link since its parent was read: not followed
    stat = (st.st_dev, st.st_ino, st.st_ctime_ns)
    if known is not None and known.stat == stat:
        return known
    try:
        with os.scandir(path) as listing:
            entries = {e.name: e for e in listing}
    except OSError:
        return None
    git = entries.get(".git")
    subfolders = tuple(
        entry.path for name, entry in sorted(entries.items())
        if name != ".git" and name not in _SKIPPED and entry.is_dir(follow_symlinks=False)
    )
    return _Folder(
        stat, subfolders, _MARKS.intersection(entries), None if git is None else git.is_dir(follow_symlinks=False)
    )


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
