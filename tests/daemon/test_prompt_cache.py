"""The prompt cache: what did not change is not read again, and every change is seen."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from roost.daemon.folder import _prompt
from roost.daemon.folder._agents import BUILTIN_AGENTS, DEFAULT_AGENT
from roost.daemon.folder._prompt import PromptCache, compose
from roost.daemon.folder._reading import FolderFiles
from roost.daemon.tools import list_files

AGENT = BUILTIN_AGENTS[DEFAULT_AGENT]


@pytest.fixture(autouse=True)
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by a test count as settled at once (the cache keeps nothing changed
    within RACY_SECONDS, which would be all of them)."""
    monkeypatch.setattr(_prompt, "RACY_SECONDS", 0.0)


def counting(monkeypatch: pytest.MonkeyPatch, name: str, owner: Any = _prompt) -> list[Any]:
    """Record the first argument of every call of ``owner.name``."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


async def layers(cwd: Path, cache: PromptCache) -> dict[str, str]:
    """The layers of a run in ``cwd``, its folder found as a dispatch finds it."""
    place = FolderFiles(str(cwd), os.environ).place
    return {layer.name: layer.text for layer in await compose(AGENT, "agent", place, tools=("skill",), cache=cache)}


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def set_mtime(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


async def test_an_unchanged_file_is_read_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "AGENTS.md").write_text("Use tabs.")
    (project / "mod.py").write_text("def f(a):\n    pass\n")
    reads, outlines = counting(monkeypatch, "_read"), counting(monkeypatch, "_outline")
    cache = PromptCache()
    first, second = await layers(project, cache), await layers(project, cache)
    assert first == second and "Use tabs." in first["instructions"] and "def f(a)" in first["repo map"]
    assert reads.count(project / "AGENTS.md") == 1 and outlines.count(project / "mod.py") == 1


async def test_a_changed_instruction_file_is_seen(project: Path) -> None:
    path = project / "AGENTS.md"
    path.write_text("Use tabs.")
    cache = PromptCache()
    assert "Use tabs." in (await layers(project, cache))["instructions"]
    path.write_text("Use spaces, four of them.")  # another size
    assert "Use spaces, four of them." in (await layers(project, cache))["instructions"]
    before = path.stat().st_mtime_ns
    path.write_text("Use spaces, five of them.")  # the same size, a later time
    set_mtime(path, before + 1_000_000)
    assert "five of them" in (await layers(project, cache))["instructions"]
    path.unlink()
    assert "instructions" not in await layers(project, cache)
    path.write_text("Back again.")
    assert "Back again." in (await layers(project, cache))["instructions"]


async def test_a_file_changed_without_a_new_mtime_is_seen_by_its_ctime(project: Path) -> None:
    path = project / "AGENTS.md"
    path.write_text("Version one.")
    cache = PromptCache()
    await layers(project, cache)
    kept = path.stat()
    path.write_text("Version two.")  # the same size, and the old mtime put back
    os.utime(path, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    if path.stat().st_ctime_ns == kept.st_ctime_ns:
        # The coarse clock did not tick between the writes: wait for it, as a real edit would.
        while path.stat().st_ctime_ns == kept.st_ctime_ns:
            os.utime(path, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert "Version two." in (await layers(project, cache))["instructions"]


async def test_a_file_changed_just_now_is_read_at_every_run(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_prompt, "RACY_SECONDS", 3600.0)
    (project / "AGENTS.md").write_text("Fresh.")
    reads = counting(monkeypatch, "_read")
    cache = PromptCache()
    await layers(project, cache)
    await layers(project, cache)
    assert reads.count(project / "AGENTS.md") == 2


async def test_memory_and_outlines_follow_their_files(project: Path) -> None:
    memory, module = project / ".roost" / "MEMORY.md", project / "mod.py"
    memory.parent.mkdir()
    memory.write_text("- a fact\n")
    module.write_text("def old(a):\n    pass\n")
    cache = PromptCache()
    first = await layers(project, cache)
    assert "- a fact" in first["memory"] and "def old(a)" in first["repo map"]
    memory.write_text("- a fact\n- another fact\n")
    module.write_text("def new(a, b):\n    pass\n")
    second = await layers(project, cache)
    assert "- another fact" in second["memory"]
    assert "def new(a, b)" in second["repo map"] and "def old" not in second["repo map"]


async def test_the_file_list_of_a_git_project_follows_its_index(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "start")
    listed = counting(monkeypatch, "work_tree_files")  # read only when something changed
    cache = PromptCache()
    assert "c.py" in (await layers(project, cache))["repo map"]
    assert "c.py" in (await layers(project, cache))["repo map"]
    assert len(listed) == 1  # nothing changed: listed once

    (project / "pkg").mkdir()
    (project / "pkg" / "new.py").write_text("def made(x):\n    pass\n")
    git(project, "add", "pkg/new.py")  # the index changes
    assert "pkg/new.py\n  def made(x)" in (await layers(project, cache))["repo map"]

    (project / "top.py").write_text("")  # untracked, in the top folder: the folder changes
    set_mtime(project, project.stat().st_mtime_ns + 1_000_000)  # as the clock would, a moment later
    assert "top.py" in (await layers(project, cache))["repo map"]

    (project / "pkg" / "deep.py").write_text("")  # untracked, deeper: seen once the list expires
    monkeypatch.setattr(_prompt, "LISTING_MAX_AGE", 0.0)
    assert "pkg/deep.py" in (await layers(project, cache))["repo map"]


async def test_no_git_runs_to_list_a_folder_in_a_git_work_tree_or_not(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `git` first on PATH that notes each call, then runs the real one.
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir, log = tmp_path / "bin", tmp_path / "git-calls"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$PWD" >> {log}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    assert sorted(await list_files(project)) == ["a.txt", "b.txt", "c.py"]
    subprocess.run([real, "init", "-q"], cwd=project, check=True)
    (project / ".gitignore").write_text("a.txt\n")
    assert sorted(await list_files(project)) == [".gitignore", "b.txt", "c.py"]
    assert "c.py" in (await layers(project, PromptCache()))["repo map"]
    assert not log.exists()  # the index and the ignore files were read, not asked of git


async def test_a_folder_outside_git_is_walked_once_and_only_where_the_map_looks(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A home folder, say: hidden and vendored trees sorted before the source, more files
    # than the walk gathers.
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.setattr(_prompt, "WALK_LIMIT", 4)
    for folder in (".cache", "node_modules/left-pad"):
        (project / folder).mkdir(parents=True)
        for i in range(10):
            (project / folder / f"f{i}.js").write_text("")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("def run(x):\n    pass\n")
    walks = counting(monkeypatch, "walk_files")
    cache = PromptCache()
    first = (await layers(project, cache))["repo map"]
    # Four files gathered, none of them hidden or vendored: the source is still found.
    assert "src/app.py\n  def run(x)" in first and "node_modules" not in first and ".cache" not in first
    assert "a.txt" in first and "c.py" in first
    assert (await layers(project, cache))["repo map"] == first
    assert walks == [project]  # the second run was given the list kept

    (project / "src" / "new.py").write_text("")  # deeper: the folder itself is unchanged
    monkeypatch.setattr(_prompt, "WALK_LIMIT", 10)
    monkeypatch.setattr(_prompt, "LISTING_MAX_AGE", 0.0)
    assert "src/new.py" in (await layers(project, cache))["repo map"]
    assert walks == [project, project]


async def test_a_prompt_looks_for_its_project_once_and_sees_a_new_repository(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roost.daemon.folder import _project

    work = project / "work"
    work.mkdir()
    looks = counting(monkeypatch, "_look_for_root", _project)
    cache = PromptCache()
    assert "Project: " + str(work) in (await layers(work, cache))["bootstrap"]
    # The folder is looked for once; the layers, the skills and the memory files start
    # from what was found.
    assert looks == [str(work)]
    (project / ".git").mkdir()
    assert "Project: " + str(project) in (await layers(work, cache))["bootstrap"]


async def test_the_branch_is_what_head_says_at_each_run(project: Path) -> None:
    git(project, "init", "-q", "-b", "feature-x")
    cache = PromptCache()
    assert "Git branch: feature-x" in (await layers(project, cache))["bootstrap"]
    git(project, "checkout", "-q", "-b", "other")
    assert "Git branch: other" in (await layers(project, cache))["bootstrap"]
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "first")
    git(project, "checkout", "-q", "--detach")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout
    assert f"Git branch: {head[:12]}" in (await layers(project, cache))["bootstrap"]
