"""The file list read without git is the one git gives.

Each test builds a repository with the real git, then compares what the daemon reads (the
index and the ignore files, as data: ``work_tree_files``) with what
``git ls-files --cached --others --exclude-standard`` lists, run by the test, keeping of
git's list the files that are files now (what the listing promises). The user's git config
and excludes file live in the test's temporary HOME and XDG_CONFIG_HOME (tests/conftest.py).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.daemon.tools import UnreadableRepository, find_repository, list_files, work_tree_files
from roost.daemon.tools import _gitindex
from roost.daemon.tools._gitindex import DIRECTORY, read_index
from roost.daemon.tools._wildmatch import Wildmatch

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(folder: Path, *args: str) -> bytes:
    done = subprocess.run(["git", *args], cwd=folder, capture_output=True, env={**os.environ, **_IDENTITY})
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def listed_by_git(folder: Path) -> list[str]:
    out = git(folder, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    names = {os.fsdecode(p) for p in out.split(b"\0") if p}
    return sorted(name for name in names if (folder / name).is_file())


def read_natively(folder: Path) -> list[str]:
    repository = find_repository(folder)
    assert repository is not None
    return work_tree_files(folder, repository)


def same_as_git(*folders: Path) -> list[str]:
    """Assert each folder's listing is git's; the first folder's listing."""
    for folder in folders:
        assert read_natively(folder) == listed_by_git(folder), folder
    return read_natively(folders[0])


def files(root: Path, *paths: str | bytes) -> None:
    for path in paths:
        full = os.path.join(os.fsencode(root), os.fsencode(path))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(b"x\n")


def new_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    return root


def test_nested_gitignores_with_negations_anchors_and_double_stars(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text(
        "# a comment\n*.log\n!important.log\n/build\ndocs/**/*.tmp\n**/cache/\na/**/z\n\\#hash\n\\!bang\n"
        "trailing   \nesc\\ \nout/\n!out/keep.txt\n*.o\n[abc].x\n[!abc].y\n?.q\nfoo**/bar\n"
    )
    files(repo, "a.log", "important.log", "keep.c", "build/x.c", "src/build/y.c", "docs/one.tmp", "docs/a/b/two.tmp",
          "docs/keep.md", "cache/c", "src/cache/d", "lib/cache", "a/z", "a/b/c/z", "b/a/z", "#hash", "!bang",
          "trailing", "trailing   ", "esc ", "esc", "out/keep.txt", "out/other", "m.o", "a.x", "d.x", "a.y", "d.y",
          "1.q", "12.q", "foo/bar", "fooo/x/bar", "foox/bar", ".github/workflows/ci.yml", ".github/x.log")
    (repo / "sub").mkdir()
    (repo / "sub" / ".gitignore").write_text("!*.log\n/local.txt\ndeep/*.c\nnested/\n")
    files(repo, "sub/x.log", "sub/local.txt", "sub/more/local.txt", "sub/deep/a.c", "sub/deep/er/b.c", "sub/nested/n",
          "sub/more/nested/n")
    (repo / "sub" / "deeper").mkdir()
    (repo / "sub" / "deeper" / ".gitignore").write_bytes(b"\xef\xbb\xbf*.md\r\n!keep.md\r\n")
    files(repo, "sub/deeper/a.md", "sub/deeper/keep.md", "sub/deeper/a.txt")
    git(repo, "add", ".")
    files(repo, "build/tracked.c")
    git(repo, "add", "-f", "build/tracked.c", "out/other")
    git(repo, "commit", "-qm", "start")
    files(repo, "new.txt", "new.log", "sub/new.log", "build/untracked.c")
    (repo / "keep.c").unlink()  # tracked, gone from disk
    listed = same_as_git(repo, repo / "sub", repo / "sub" / "deeper", repo / "build", repo / "out", repo / "docs",
                         repo / ".github")
    assert "build/tracked.c" in listed and "build/untracked.c" not in listed  # tracked though ignored
    assert "out/other" in listed and "out/keep.txt" not in listed  # a folder's files stay ignored
    assert "keep.c" not in listed and "sub/x.log" in listed


def test_info_exclude_and_the_users_excludes_file(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    files(repo, "a.secret", "b.local", "c.mine", "d.txt", "sub/e.local", "sub/f.mine")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("*.local\n!sub/e.local\n")
    xdg = Path(os.environ["XDG_CONFIG_HOME"])
    (xdg / "git").mkdir()
    (xdg / "git" / "ignore").write_text("*.secret\n")
    assert same_as_git(repo, repo / "sub") == ["c.mine", "d.txt", "sub/e.local", "sub/f.mine"]
    # core.excludesFile in ~/.gitconfig (through an include) takes the default's place.
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[include]\n\tpath = .gitconfig.more\n")
    (home / ".gitconfig.more").write_text('[core]\n\texcludesFile = "~/my ignores"  ; mine\n')
    (home / "my ignores").write_text("*.mine\n")
    assert same_as_git(repo, repo / "sub") == ["a.secret", "d.txt", "sub/e.local"]


def test_names_with_spaces_newlines_unicode_and_stray_bytes(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("ü*\n?.bin\n")
    names: list[str | bytes] = ["a b.txt", "new\nline.txt", "tab\t.txt", "ünï.txt", "über.txt", "a.bin", "é.bin",
                                b"\xff\xfe.txt", "dir with space/x"]
    files(repo, *names)
    git(repo, "add", "-f", "a b.txt", "new\nline.txt", "ünï.txt")  # the last one tracked though ignored
    listed = same_as_git(repo)
    # "?" is one byte, as in git: a two-byte character is not matched by it.
    assert "é.bin" in listed and "a.bin" not in listed and "über.txt" not in listed
    assert os.fsdecode(b"\xff\xfe.txt") in listed and "new\nline.txt" in listed


def test_conflicts_symlinks_fifos_and_deleted_files(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    files(repo, "both.txt", "gone.txt", "target.txt")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    git(repo, "checkout", "-qb", "side")
    (repo / "both.txt").write_text("side\n")
    git(repo, "commit", "-qam", "side")
    git(repo, "checkout", "-q", "-")
    (repo / "both.txt").write_text("main\n")
    git(repo, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "side"], cwd=repo, capture_output=True, env={**os.environ, **_IDENTITY})
    assert git(repo, "ls-files", "-u").count(b"both.txt") == 3  # a conflict: three stages
    (repo / "link-to-file").symlink_to("target.txt")
    (repo / "link-to-dir").symlink_to("sub")
    (repo / "dangling").symlink_to("nowhere")
    files(repo, "sub/x")
    git(repo, "add", "link-to-file", "link-to-dir")
    (repo / "untracked-link").symlink_to("target.txt")
    os.mkfifo(repo / "pipe")
    (repo / "gone.txt").unlink()
    listed = same_as_git(repo)
    assert listed.count("both.txt") == 1 and "link-to-file" in listed and "untracked-link" in listed
    assert "link-to-dir" not in listed and "pipe" not in listed and "gone.txt" not in listed


def test_submodules_and_nested_repositories(tmp_path: Path) -> None:
    library = new_repo(tmp_path / "library")
    files(library, "lib.c")
    git(library, "add", ".")
    git(library, "commit", "-qm", "lib")
    repo = new_repo(tmp_path / "repo")
    files(repo, "top.c")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "mod")
    git(repo, "commit", "-qm", "with a submodule")
    files(repo, "mod/untracked-in-submodule")
    nested = new_repo(repo / "nested")  # an untracked repository: git shows "nested/"
    files(nested, "inner.c")
    files(repo, "tracked/a.c")
    git(repo, "add", "tracked/a.c")
    new_repo(repo / "tracked")  # a repository inside a tracked folder: git still walks it
    files(repo, "tracked/b.c")
    (repo / "not-a-repo" / ".git").mkdir(parents=True)  # no HEAD: an ordinary folder
    files(repo, "not-a-repo/c.c", "fifo/d.c")
    os.mkfifo(repo / "fifo" / ".git")  # neither a gitfile nor a git folder
    listed = same_as_git(repo, repo / "mod", repo / "nested", repo / "tracked")
    assert "top.c" in listed and "tracked/b.c" in listed and "not-a-repo/c.c" in listed and "fifo/d.c" in listed
    assert not any(p.startswith(("mod/", "nested/")) for p in listed)
    assert read_natively(repo / "mod") == ["lib.c", "untracked-in-submodule"]


def test_a_worktree_reads_its_own_index_and_the_shared_excludes(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    files(repo, "a.c", "b.c")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("*.tmp\n")
    git(repo, "worktree", "add", "-q", "-b", "other", str(tmp_path / "wt"))
    worktree = tmp_path / "wt"
    files(worktree, "c.c", "d.tmp")
    git(worktree, "add", "c.c")
    assert (worktree / ".git").is_file()
    assert same_as_git(worktree) == ["a.c", "b.c", "c.c"]
    assert same_as_git(repo) == ["a.c", "b.c"]


def test_index_version_4_and_extended_flags(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    files(repo, "src/module/one.py", "src/module/two.py", "src/other/three.py", "README")
    git(repo, "add", ".")
    git(repo, "update-index", "--index-version", "4")
    git(repo, "commit", "-qm", "start")
    files(repo, "src/module/new.py", "src/later.py")
    git(repo, "add", "-N", "src/later.py")  # intent to add: an extended flag
    git(repo, "update-index", "--skip-worktree", "README")
    assert (repo / ".git" / "index").read_bytes()[4:8] == b"\0\0\0\4"
    assert same_as_git(repo, repo / "src") == ["README", "src/later.py", "src/module/new.py", "src/module/one.py",
                                               "src/module/two.py", "src/other/three.py"]
    git(repo, "update-index", "--index-version", "3")
    assert same_as_git(repo)[0] == "README"


def test_a_sha256_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    files(repo, "a.c", "sub/b.c")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    files(repo, "c.c")
    assert same_as_git(repo) == ["a.c", "c.c", "sub/b.c"]


def test_a_split_index(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    files(repo, *(f"f{i}.txt" for i in range(20)))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    git(repo, "update-index", "--split-index")
    assert list((repo / ".git").glob("sharedindex.*"))
    (repo / "f3.txt").write_text("changed\n")
    git(repo, "add", "f3.txt")  # replaced in the shared index
    git(repo, "rm", "-q", "--cached", "f5.txt")  # deleted from it
    files(repo, "new.txt")
    git(repo, "add", "new.txt")  # added
    link = (repo / ".git" / "index").read_bytes().find(b"link")
    assert link != -1  # a split index: its entries are changes to the shared one
    listed = same_as_git(repo)
    assert "new.txt" in listed and "f3.txt" in listed and "f5.txt" in listed  # f5: untracked now
    git(repo, "rm", "-q", "f7.txt")
    assert "f7.txt" not in same_as_git(repo)


async def test_a_sparse_index_and_what_is_done_when_its_folders_are_on_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = new_repo(tmp_path / "repo")
    files(repo, "in/a.c", "out/b.c", "out/deep/c.c", "top.c")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    git(repo, "sparse-checkout", "init", "--cone", "--sparse-index")
    git(repo, "sparse-checkout", "set", "in")
    paths = read_index(repo / ".git", 20).paths
    assert paths.get(b"out/") == DIRECTORY and not (repo / "out").exists()
    assert same_as_git(repo, repo / "in") == ["in/a.c", "top.c"]
    # A folder the index keeps whole, on disk after all: git would read its tree; this
    # reader cannot, and says so. The search lists the folder's files another way.
    files(repo, "out/b.c", "out/stray.c")
    with pytest.raises(UnreadableRepository, match="sparse index leaves out out/"):
        read_natively(repo)
    assert read_natively(repo / "in") == ["a.c"]
    with caplog.at_level(logging.WARNING):
        assert sorted(await list_files(repo)) == ["in/a.c", "out/b.c", "out/stray.c", "top.c"]
    assert "listed without its git ignore rules" in caplog.text


def test_the_folder_listed_may_be_ignored_or_inside_the_git_folder(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("ignored/\n")
    files(repo, "ignored/tracked.c", "ignored/deep/untracked.c", "ok/x.c")
    git(repo, "add", "-f", "ignored/tracked.c")
    assert same_as_git(repo / "ignored", repo / "ignored" / "deep", repo / "ok") == ["tracked.c"]
    assert find_repository(repo / ".git") is None and find_repository(repo / ".git" / "refs") is None
    # A .git folder that is no repository is passed by, as git passes it: the one above
    # counts, or none.
    (repo / "ok" / ".git").mkdir()
    assert same_as_git(repo / "ok") == ["x.c"]
    (tmp_path / "plain" / ".git").mkdir(parents=True)
    assert find_repository(tmp_path / "plain") is None
    # A .git file that names none stops git; it stops this reader too.
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / ".git").write_text("not a gitfile\n")
    with pytest.raises(UnreadableRepository, match="names no git repository"):
        find_repository(tmp_path / "junk")


def test_pathological_patterns_are_matched_without_backtracking(tmp_path: Path) -> None:
    # Against these patterns a backtracking matcher (a translated regex, and git's own
    # wildmatch for the first and third) runs for minutes: git is not asked here, the
    # outcome is known.
    repo = new_repo(tmp_path / "repo")
    deep = "a/" * 60
    (repo / ".gitignore").write_text(
        "**/" * 40 + "x\n" + "*a" * 30 + "*b\n" + "a/" + "**/" * 30 + "q/**/**/**/c\n" + "[a]*" * 25 + "[b]\n"
    )
    files(repo, f"{deep}x", f"{deep}y", "a" * 200, "a" * 200 + "b", f"{deep}q/c", f"{deep}c")
    assert read_natively(repo) == sorted([".gitignore", "a" * 200, f"{deep}c", f"{deep}y"])
    # Longer still, the matcher alone: each byte costs a lookup once its states are made.
    assert Wildmatch(b"*a" * 50 + b"*b", pathname=False).match(b"a" * 5000 + b"b")
    assert not Wildmatch(b"*a" * 50 + b"*b", pathname=False).match(b"a" * 5000)
    assert Wildmatch(b"**/" * 100 + b"x", pathname=True).match(b"a/" * 2000 + b"x")
    assert not Wildmatch(b"**/" * 100 + b"x", pathname=True).match(b"a/" * 2000 + b"y")
    assert not Wildmatch(b"*/" * 100 + b"x", pathname=True).match(b"a/" * 2000 + b"x")


_NAMES = st.sampled_from(["a", "b", "ab", "A", "a.txt", "b.log", ".hidden", "x y", "ü", "[a]", "#c", "!d", "d ", "*",
                          "a\\b", "-"])
_TOKENS = st.sampled_from(["a", "b", "*", "**", "?", "[ab]", "[!a]", "[a-c]", "[[:alpha:]]", "[]a]", "[a-]", "[!]",
                           "[[:bogus:]]", "/", ".txt", ".log", ".", "\\*", "\\#", "\\[", " ", "ü", "\\"])


@st.composite
def _pattern(draw: st.DrawFn) -> str:
    body = "".join(draw(st.lists(_TOKENS, min_size=1, max_size=5)))
    return draw(st.sampled_from(["", "!", "/", "\\!"])) + body + draw(st.sampled_from(["", "/"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    paths=st.lists(st.lists(_NAMES, min_size=1, max_size=3), min_size=1, max_size=12),
    top=st.lists(_pattern(), max_size=6),
    below=st.lists(_pattern(), max_size=4),
    tracked=st.sets(st.integers(0, 11), max_size=4),
)
def test_any_ignore_rules_list_what_git_lists(
    paths: list[list[str]], top: list[str], below: list[str], tracked: set[int]
) -> None:
    with tempfile.TemporaryDirectory() as where:
        repo = new_repo(Path(where) / "repo")
        made: list[str] = []
        for parts in paths:
            path = "/".join(parts)
            # A name is a file or a folder, not both.
            if any(path == m or path.startswith(m + "/") or m.startswith(path + "/") for m in made):
                continue
            files(repo, path)
            made.append(path)
        for i in sorted(tracked):
            if i < len(made):
                git(repo, "--literal-pathspecs", "add", "-f", "--", made[i])
        (repo / ".gitignore").write_text("\n".join(top) + "\n")
        if (repo / "a").is_dir():
            (repo / "a" / ".gitignore").write_text("\n".join(below) + "\n")
        same_as_git(repo)


async def test_an_index_this_reader_cannot_take_whole_is_refused_with_its_reason_and_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("*.log\n")
    files(repo, "a.c", "b.log")
    git(repo, "add", ".")
    index = repo / ".git" / "index"
    good = index.read_bytes()
    trailer = len(good) - 20
    broken = {
        "has version 5, which roost does not read": good[:4] + b"\0\0\0\5" + good[8:],
        "has an extension roost does not read ('zzzz')": good[:trailer] + b"zzzz\0\0\0\0" + good[trailer:],
        "is cut short": good[:40],
        "is not a git index": b"JUNK" + good[4:],
    }
    for reason, data in broken.items():
        index.write_bytes(data)
        with pytest.raises(UnreadableRepository, match=re.escape(f"the index {reason}")):
            read_natively(repo)
        assert sorted(await list_files(repo)) == [".gitignore", "a.c", "b.log"]  # walked: every file
    monkeypatch.setattr(_gitindex, "INDEX_LIMIT", 100)
    index.write_bytes(good)
    with pytest.raises(UnreadableRepository, match="is larger than"):
        read_natively(repo)
    index.unlink()
    os.mkfifo(index)  # a reader that waited for a writer would hang here
    with trio.fail_after(5):
        with pytest.raises(UnreadableRepository, match="not a regular file"):
            read_natively(repo)
        assert sorted(await list_files(repo)) == [".gitignore", "a.c", "b.log"]
