"""The walk for protected paths: what it finds in a writable folder, and that a walk answered
partly from an earlier one (``Walks``: the folders whose inode and ctime did not change are
not read again) finds exactly what a fresh walk finds, whatever a command changed since.
The attacks are a sandboxed command's: a repository made deep in the tree, a ``.git``
folder swapped for a file, hooks added, a repository moved, a folder swapped for a link."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from roost.daemon.sandbox import _protected
from roost.daemon.sandbox._protected import Walks, protected_paths

#: Short for the tests: their file system's clock ticks in far less (ext4, tmpfs: ns).
SETTLED = 0.03


def settle() -> None:
    time.sleep(SETTLED * 1.5)


def tree(root: Path) -> None:
    for name in (".roost", ".claude"):
        (root / name).mkdir()
    (root / ".mcp.json").write_text("{}")
    repo = root / "libs" / "vendored"
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n")
    (repo / ".claude").mkdir()
    (root / "src" / "deep" / "er").mkdir(parents=True)
    (root / "node_modules" / "pkg" / ".git").mkdir(parents=True)  # skipped: not walked
    venv = root / "venv"
    (venv / "lib" / "repo" / ".git").mkdir(parents=True)  # a virtual environment: not walked
    (venv / "pyvenv.cfg").write_text("home = /usr\n")


def fresh(root: Path, limit: int = _protected.WALK_LIMIT) -> list[str]:
    return protected_paths([str(root)], limit=limit)


def kept(walks: Walks, root: Path, limit: int = _protected.WALK_LIMIT) -> list[str]:
    return protected_paths([str(root)], limit=limit, walks=walks)


def test_the_walk_finds_the_projects_and_every_repositorys_files(tmp_path: Path) -> None:
    tree(tmp_path)
    found = set(fresh(tmp_path))
    assert found == {str(tmp_path / p) for p in (
        ".roost", ".claude", ".mcp.json",
        "libs/vendored/.claude", "libs/vendored/.git/config", "libs/vendored/.git/hooks",
    )}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders the walks read (rather than take as an earlier walk found them)."""
    seen: list[str] = []
    folder = _protected._folder

    def reading(path: str, known: _protected._Folder | None) -> _protected._Folder | None:
        found = folder(path, known)
        if found is not None and found is not known:
            seen.append(path)
        return found

    monkeypatch.setattr(_protected, "_folder", reading)
    return seen


def test_a_walk_from_a_kept_one_reads_only_what_changed_and_finds_what_a_fresh_one_finds(
    tmp_path: Path, reads: list[str]
) -> None:
    tree(tmp_path)
    walks = Walks(settled=SETTLED)
    settle()
    assert kept(walks, tmp_path) == fresh(tmp_path)
    settle()
    reads.clear()
    again = kept(walks, tmp_path)
    assert reads == []  # nothing changed: no folder was read again
    assert again == fresh(tmp_path) and len(reads) > 5

    def changed(change: str) -> None:
        settle()  # the change comes after the kept walk settled
        reads.clear()
        after = kept(walks, tmp_path)
        partial = len(reads)
        assert after == fresh(tmp_path), change
        assert partial < len(reads) - partial, change  # fewer folders read than a fresh walk reads
        settle()

    # A repository made deep in the tree, where nothing was.
    (tmp_path / "src" / "deep" / "er" / "x" / ".git").mkdir(parents=True)
    (tmp_path / "src" / "deep" / "er" / "x" / ".git" / "config").write_text("[core]\nfsmonitor = evil\n")
    changed("a new repository")
    assert str(tmp_path / "src/deep/er/x/.git/config") in kept(walks, tmp_path)
    # Its .git swapped for a file (a worktree's pointer).
    target = tmp_path / "src" / "deep" / "er" / "x" / ".git"
    for child in sorted(target.rglob("*"), reverse=True):
        child.unlink() if child.is_file() else child.rmdir()
    target.rmdir()
    target.write_text("gitdir: /elsewhere\n")
    changed("a .git folder swapped for a file")
    assert str(target) in kept(walks, tmp_path)
    # Hooks and info added inside an existing git folder.
    (tmp_path / "libs" / "vendored" / ".git" / "info").mkdir()
    changed("info added to a git folder")
    assert str(tmp_path / "libs/vendored/.git/info") in kept(walks, tmp_path)
    # A repository moved elsewhere in the tree.
    os.rename(tmp_path / "libs" / "vendored", tmp_path / "src" / "vendored")
    changed("a repository moved")
    assert str(tmp_path / "src/vendored/.git/config") in kept(walks, tmp_path)
    # A folder swapped for a link to a repository outside: not followed, as a fresh walk.
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    (outside / ".git").mkdir(parents=True)
    (outside / ".git" / "config").write_text("[core]\n")
    (tmp_path / "src" / "deep" / "er").rename(tmp_path / "src" / "deep" / "was")
    (tmp_path / "src" / "deep" / "er").symlink_to(outside)
    changed("a folder swapped for a link")
    assert not any(p.startswith(str(outside)) for p in kept(walks, tmp_path))
    # A .claude folder made in a repository's top, and a venv's marker removed.
    (tmp_path / "src" / "vendored" / ".claude").rmdir()
    (tmp_path / "venv" / "pyvenv.cfg").unlink()
    changed("a venv's marker removed")
    assert str(tmp_path / "venv/lib/repo/.git") not in kept(walks, tmp_path)  # an empty .git folder protects nothing
    assert kept(walks, tmp_path, limit=3) == fresh(tmp_path, limit=3)


def test_folders_changed_just_before_a_walk_are_not_kept(tmp_path: Path, reads: list[str]) -> None:
    tree(tmp_path)
    walks = Walks(settled=60)
    kept(walks, tmp_path)
    first = list(reads)
    reads.clear()
    kept(walks, tmp_path)
    # Everything was made within a minute: read again, all of it.
    assert reads == first and len(reads) > 5
