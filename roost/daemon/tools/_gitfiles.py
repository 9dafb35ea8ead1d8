"""The files ``git ls-files --cached --others --exclude-standard`` lists, read without git.

A repository's ``.git/config`` names programs git runs (``core.fsmonitor`` runs at a mere
``git ls-files``, ``include.path`` pulls in more config, ``filter.*`` comes with a tracked
``.gitattributes``): running git on a project's behalf outside its sandbox would run them.
So the daemon runs no git: it reads what it needs as data.

- The repository: the nearest ``.git`` at or above the folder that is one (a folder, or a
  file ``gitdir: PATH`` as worktrees and submodules have, whose folder may hold
  ``commondir`` naming the shared one), as git finds it. The daemon's own ``GIT_*``
  variables are not consulted.
- Tracked files: the index (:mod:`._gitindex`), each path once.
- Untracked files: a walk of the work tree that never enters a ``.git``, nor a folder that
  holds another repository and nothing tracked (git shows those as ``sub/``, not a file),
  nor an ignored folder (what is in one cannot be re-included), applying the ignore rules
  as git does (:mod:`._gitignore`). Only regular files and symlinks are listed (git lists
  no FIFO or socket).

What comes back is the files that are files now (a regular file, or a symlink to one):
tracked files deleted from disk, submodules and nested repositories (folders) are not in
it. Every file is read bounded and only if it is a regular file; the walk runs in the
caller's worker thread.

Not read, where git would: a repository's own config beyond its object format (its
``core.excludesFile``, ``core.ignoreCase``, ``core.worktree``: what a repository names is
not followed; matching is case-sensitive, as git's default on Linux), ``includeIf`` in the
user's config, and a ``.gitignore`` that only the index holds (a sparse checkout's).

Error handling: a repository this module cannot read whole (see :mod:`._gitindex`, and a
sparse index whose folders are on disk) raises :class:`UnreadableRepository` saying why;
the caller lists the folder another way and logs the reason. A folder the walk cannot open
is skipped, as git skips it.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Mapping

from ..folder._files import FileRefused, read_head
from ._gitconfig import config_values, last_value
from ._gitignore import Chain, PatternList, excluded, read_patterns, repository_patterns
from ._gitindex import DIRECTORY, GITLINK, UnreadableIndex, read_index

#: Bytes of a ``.git`` file, ``HEAD`` or ``commondir`` read at most.
_SMALL_FILE = 4096

#: A path's bytes as ``os.fsdecode`` makes them a name (without its Python-level call).
_decode = partial(bytes.decode, encoding=sys.getfilesystemencoding(), errors=sys.getfilesystemencodeerrors())


class UnreadableRepository(Exception):
    """A repository whose file list cannot be read without git; the message says why."""


@dataclass(frozen=True, slots=True)
class Repository:
    """Where a repository's parts are (real paths)."""

    #: The top of the work tree (the folder that holds ``.git``).
    work_tree: Path
    #: The work tree's own git folder: ``HEAD``, ``index`` (a worktree's is its own).
    git_dir: Path
    #: What the work trees share: ``config``, ``info/exclude``, objects and refs.
    common_dir: Path
    #: What ``HEAD`` held when the repository was found (``ref: refs/heads/main``, or an
    #: object name), stripped; "" when ``HEAD`` is a symbolic link.
    head: str = ""


def find_repository(folder: Path) -> Repository | None:
    """The repository whose work tree holds ``folder``, found as git finds it: the nearest
    ``.git`` at or above it that is a repository (a ``.git`` folder that is none is passed
    by). None when there is none, or when ``folder`` is inside a git folder (no work tree
    there). Blocking.

    Raises:
        UnreadableRepository: the nearest ``.git`` is a file that names no repository
            (git stops there too).
    """
    real = Path(os.path.realpath(folder))
    for top in (real, *real.parents):
        entry = top / ".git"
        if not os.path.lexists(entry):
            continue
        if ".git" in real.relative_to(top).parts:
            return None
        try:
            git_dir = _git_dir(entry)
        except OSError as exc:
            raise UnreadableRepository(f"{entry} cannot be read: {exc}") from None
        found = _repository(top, git_dir) if git_dir is not None else None
        if found is not None:
            return found
        if not entry.is_dir():
            raise UnreadableRepository(f"{entry} names no git repository")
    return None


def work_tree_files(folder: Path, repository: Repository, keep: Callable[[str], bool] = lambda path: True,
                    *, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The files under ``folder`` (in ``repository``'s work tree) that git lists, as sorted
    relative POSIX paths, those ``keep`` keeps (it sees each path before the disk is asked
    about it), that are files now. ``environ`` gives ``HOME`` and ``XDG_CONFIG_HOME``,
    where the user's git config and excludes file are. Blocking: run it in a thread.

    Raises:
        UnreadableRepository: see the module docstring.
    """
    top = os.fsencode(repository.work_tree)
    real = os.path.realpath(folder)
    # Where the folder is in the work tree: "" at the top, else "a/b/".
    relative = os.path.relpath(real, repository.work_tree)
    prefix = b"" if relative == "." else os.fsencode(relative) + b"/"
    try:
        paths = read_index(repository.git_dir, _hash_size(repository.common_dir)).paths
    except UnreadableIndex as exc:
        raise UnreadableRepository(str(exc)) from None
    index = _Tracked(paths)
    for folder_entry in index.sparse:
        if (folder_entry.startswith(prefix) or prefix.startswith(folder_entry)) and os.path.lexists(
            top + b"/" + folder_entry
        ):
            raise UnreadableRepository(
                f"its sparse index leaves out {os.fsdecode(folder_entry)}, which is on disk"
            )
    outer = repository_patterns(repository.common_dir, Path(real), environ)
    walk = _Walk(top, index, outer)
    walked, chain = walk.leading(prefix)
    if walked:
        walk.run(prefix, chain)
    cut = len(prefix)
    listed = [name for path in walk.files if keep(name := _decode(path[cut:]))]
    unseen = (path for path in index.files if path.startswith(prefix) and path not in walk.seen)
    for path in (*walk.maybe, *unseen):
        name = _decode(path[cut:])
        if keep(name) and os.path.isfile(top + b"/" + path):
            listed.append(name)
    return sorted(listed)


class _Tracked:
    """The index's paths, sorted by what the walk asks of them."""

    def __init__(self, paths: dict[bytes, int]) -> None:
        #: Tracked files and symlinks (what ``--cached`` lists that can be a file).
        self.files: set[bytes] = set()
        #: Submodules (folders git never enters).
        self.gitlinks: set[bytes] = set()
        #: A sparse index's folders ("dir/", their files not listed one by one).
        self.sparse: list[bytes] = []
        #: Every folder something tracked is in ("a/", "a/b/").
        self.folders: set[bytes] = set()
        clean = _all_clean(paths)
        for path, kind in paths.items():
            if not clean and not _clean(path):
                continue  # a path no checkout makes: never joined to a folder
            if kind == GITLINK:
                self.gitlinks.add(path)
            elif kind == DIRECTORY:
                self.sparse.append(path)
            else:
                self.files.add(path)
            cut = path.rfind(b"/", 0, len(path) - 1)
            while cut > 0 and (folder := path[: cut + 1]) not in self.folders:
                self.folders.add(folder)
                cut = path.rfind(b"/", 0, cut)


class _Walk:
    """The untracked part of the listing: git's walk of the work tree."""

    def __init__(self, top: bytes, index: _Tracked, outer: list[PatternList]) -> None:
        self._top = top
        self._index = index
        self._outer = outer
        #: Paths known to be regular files, and paths that may be files (symlinks): the
        #: tracked ones the walk met, and the untracked ones git lists.
        self.files: list[bytes] = []
        self.maybe: list[bytes] = []
        #: The tracked files the walk met.
        self.seen: set[bytes] = set()

    def leading(self, prefix: bytes) -> tuple[bool, Chain]:
        """Whether git would walk the folder ``prefix`` (it is not ignored, a submodule or
        another repository's, nor is a folder above it: git's ``treat_leading_path``),
        and the patterns that hold in it (its own too), gathered from the top down."""
        chain = self._patterns(b"", None)
        at = b""
        for part in prefix.split(b"/")[:-1]:
            path = at + part
            if excluded(path, part, True, chain, self._outer) or path in self._index.gitlinks:
                return False, chain
            if path + b"/" not in self._index.folders and _is_repository(self._top + b"/" + path + b"/.git"):
                return False, chain
            at = path + b"/"
            chain = self._patterns(at, chain)
        return True, chain

    def run(self, prefix: bytes, chain: Chain) -> None:
        """Walk the folder ``prefix`` (relative to the top, "" or ending in a slash), whose
        patterns are ``chain``."""
        index, outer = self._index, self._outer
        pending: list[tuple[bytes, Chain, bool]] = [(prefix, chain, False)]
        while pending:
            folder, chain, untracked = pending.pop()
            try:
                with os.scandir(self._top + b"/" + folder if folder else self._top) as found:
                    entries = list(found)
            except OSError:
                continue  # git warns and goes on
            names = {entry.name for entry in entries}
            if untracked and b".git" in names and _is_repository(self._top + b"/" + folder + b".git"):
                continue  # another repository: git shows "folder/", no file of it
            if b".gitignore" in names and folder != prefix:
                chain = self._patterns(folder, chain)
            for entry in entries:
                name = entry.name
                if name == b".git":
                    continue
                path = folder + name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    regular = not is_dir and entry.is_file(follow_symlinks=False)
                    link = not is_dir and not regular and entry.is_symlink()
                except OSError:
                    continue
                if is_dir:
                    if not excluded(path, name, True, chain, outer) and path not in index.gitlinks:
                        folder_path = path + b"/"
                        pending.append((folder_path, chain, folder_path not in index.folders))
                elif path in index.files:
                    self.seen.add(path)
                    (self.files if regular else self.maybe).append(path)
                elif (regular or link) and not excluded(path, name, False, chain, outer):
                    (self.files if regular else self.maybe).append(path)

    def _patterns(self, folder: bytes, chain: Chain) -> Chain:
        """``chain`` with the ``.gitignore`` of ``folder`` (relative to the top) first."""
        where = self._top + b"/" + folder + b".gitignore"
        patterns = read_patterns(Path(os.fsdecode(where)), folder, follow=False)
        return (patterns, chain) if patterns else chain


#: What shows a path no checkout makes (an empty, ``.`` or ``..`` part, a leading slash),
#: among paths each put between NULs.
_UNCLEAN = (b"\0/", b"//", b"/./", b"\0./", b"/.\0", b"\0.\0", b"/../", b"\0../", b"/..\0", b"\0..\0", b"\0\0")


def _all_clean(paths: dict[bytes, int]) -> bool:
    """Whether every index path is clean (:func:`_clean`): one search of them all."""
    joined = b"\0" + b"\0".join(path.rstrip(b"/") for path in paths) + b"\0"
    return not any(mark in joined for mark in _UNCLEAN)


def _clean(path: bytes) -> bool:
    """Whether an index path is one a checkout could make: relative, no empty, ``.`` or
    ``..`` part."""
    return _all_clean({path: 0})


def _git_dir(entry: Path) -> Path | None:
    """The git folder a ``.git`` stands for: itself, or what its ``gitdir:`` line names
    (relative to the file's folder); None for a file that names none.

    Raises:
        OSError: a ``.git`` file that cannot be read.
    """
    if entry.is_dir():
        return Path(os.path.realpath(entry))
    text = read_head(entry, _SMALL_FILE).decode("utf-8", "surrogateescape")
    line = text.rstrip("\r\n")
    if not line.startswith("gitdir: "):
        return None
    return Path(os.path.realpath(entry.parent / line.removeprefix("gitdir: ")))


def _common_dir(git_dir: Path) -> Path:
    """The folder a worktree's git folder shares with the main one (``commondir``)."""
    try:
        text = read_head(git_dir / "commondir", _SMALL_FILE).decode("utf-8", "surrogateescape").strip()
    except OSError:
        return git_dir
    return Path(os.path.realpath(git_dir / text)) if text else git_dir


def _repository(work_tree: Path, git_dir: Path) -> Repository | None:
    """The repository whose git folder is ``git_dir``, if it is one as git tells one: a
    ``HEAD`` that is a ref or an object name, and the (common) folders ``objects`` and
    ``refs``; else None. Reads ``HEAD`` and ``commondir`` once each."""
    head = git_dir / "HEAD"
    text = b""
    try:
        if stat.S_ISLNK(os.lstat(head).st_mode):
            valid = os.readlink(head).startswith("refs/")
        else:
            text = read_head(head, _SMALL_FILE)
            ref = text.startswith(b"ref:") and text[4:].lstrip().startswith(b"refs/")
            valid = ref or (len(text) >= 40 and all(c in b"0123456789abcdef" for c in text[:40]))
    except OSError:
        return None
    common = _common_dir(git_dir)
    if not (valid and (common / "objects").is_dir() and (common / "refs").is_dir()):
        return None
    return Repository(work_tree, git_dir, common, text.decode("utf-8", "replace").strip())


def _is_repository(dot_git: bytes) -> bool:
    """Whether the ``.git`` at ``dot_git`` makes its folder another repository, as git's
    ``is_nonbare_repository_dir`` tells (a ``.git`` file git cannot read counts)."""
    path = Path(os.fsdecode(dot_git))
    if not os.path.lexists(path):
        return False
    try:
        git_dir = _git_dir(path)
    except FileRefused:  # a FIFO, a socket: no gitfile, no git folder
        return False
    except OSError:
        return True
    return git_dir is not None and _repository(path.parent, git_dir) is not None


def _hash_size(common_dir: Path) -> int:
    """How many bytes an object name has in this repository (SHA-256 or SHA-1)."""
    pairs = config_values(common_dir / "config", includes=False)
    return 32 if (last_value(pairs, "extensions.objectformat") or "").lower() == "sha256" else 20
