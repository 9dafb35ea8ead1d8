"""The file tools open what they judged: a file or a folder swapped for a symlink to a secret
while a call runs is never read or written through, and ``/proc``, ``/sys`` and ``/dev`` are
refused by any spelling. A real process swaps real files (``renameat2`` exchanging a real
entry and a symlink) while the tools run, directly and through a daemon; every tool test
runs on ``openat2`` and again on the component-by-component walk that stands in for it on
kernels without it."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import pytest

from roost.daemon.tools import ToolContext, ToolRegistry, ToolResult, _fs
from roost.protocol.trio_client import TrioClient

from .test_paths import call, results, run_calls

SECRET = "ssh-private-key-material"
DECOY = "decoy-key-material"
#: Calls raced against the swapping process, per test (at least).
TRIES = 20

# Exchanges two paths atomically (RENAME_EXCHANGE) until killed, leaving the first as it was
# about two thirds of the time: often enough that calls succeed, swapped often enough that
# a check and a use apart meet the two sides.
_SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
print("ready", flush=True)
while True:
    for pause in (0.0002, 0.0001):
        time.sleep(pause)
        if libc.renameat2(-100, a, -100, b, 2) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")
"""


@contextmanager
def swapping(one: Path, other: Path) -> Iterator[None]:
    """A process exchanging ``one`` and ``other`` (a real entry and a symlink) until the
    block ends."""
    process = subprocess.Popen([sys.executable, "-c", _SWAPPER, one, other], stdout=subprocess.PIPE)
    assert process.stdout is not None
    with process.stdout:
        try:
            assert process.stdout.readline() == b"ready\n"
            yield
        finally:
            process.kill()
            process.wait()
    assert process.returncode == -9, "the swapping process failed"


@pytest.fixture(params=["openat2", "walk"])
def opening(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once with openat2 (where the kernel has it) and once with the walk from a
    folder's descriptor that stands in for it."""
    if request.param == "walk":
        monkeypatch.setattr(_fs, "_openat2", None)
    elif _fs._openat2 is None:
        pytest.skip("this kernel has no openat2")
    return str(request.param)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A secret outside the project, as ``~/.ssh/config`` would be."""
    folder = tmp_path / "home" / ".ssh"
    folder.mkdir(parents=True)
    (folder / "config").write_text(f"{SECRET}\n")
    return folder / "config"


async def race(
    call: Callable[[int], Awaitable[ToolResult]], succeeded: Callable[[ToolResult], bool], tries: int = TRIES
) -> list[ToolResult]:
    """The results of ``call(n)`` made ``tries`` times while a swap runs, and more (up to
    ten times as many) until one of them ``succeeded``: a race in which every call was
    refused would prove nothing."""
    done: list[ToolResult] = []
    while len(done) < tries or not any(map(succeeded, done)):
        assert len(done) < 10 * tries, "no call succeeded while the swap ran"
        done.append(await call(len(done)))
    return done


def decoy(result: ToolResult) -> bool:
    """The call found the file that stands inside the project (not the secret)."""
    return DECOY in result.text


def deny_secrets(secret: Path) -> Any:
    """A read permission as ``--mode full --deny 'read(<secret's folder>/**)'`` gives it."""
    folder = str(secret.parent)
    return lambda path: "deny" if path.startswith(folder + "/") else "allow"


async def test_grep_never_reads_a_file_swapped_for_a_link_to_a_secret(
    tmp_path: Path, project: Path, secret: Path, opening: str
) -> None:
    (project / "notes.txt").write_text(f"{DECOY}\n")
    (tmp_path / "swap").symlink_to(secret)
    tools = ToolRegistry()
    policies = [ToolContext(str(project)), ToolContext(str(project), read_permission=deny_secrets(secret))]
    with swapping(project / "notes.txt", tmp_path / "swap"):
        found = await race(lambda n: tools.call("grep", {"pattern": "material"}, policies[n % 2]), decoy)
    assert not [r.text for r in found if SECRET in r.text]


async def test_grep_never_walks_into_a_folder_swapped_for_a_link_to_secrets(
    tmp_path: Path, project: Path, secret: Path, opening: str
) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "config").write_text(f"{DECOY}\n")
    (tmp_path / "swap").symlink_to(secret.parent)
    tools = ToolRegistry()

    def grep(n: int) -> Awaitable[ToolResult]:
        ctx = ToolContext(str(project), read_permission=deny_secrets(secret) if n % 2 else None)
        return tools.call("grep", {"pattern": "material", "path": "sub" if n % 3 else "."}, ctx)

    with swapping(project / "sub", tmp_path / "swap"):
        found = await race(grep, decoy)
    assert not [r.text for r in found if SECRET in r.text]
    for refused in (r for r in found if r.is_error):  # the folder searched was a link then
        assert "outside the working directory" in refused.text or "symlink" in refused.text, refused.text


async def test_glob_never_lists_a_folder_swapped_for_a_link_to_secrets(
    tmp_path: Path, project: Path, secret: Path, opening: str
) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "notes.txt").write_text(f"{DECOY}\n")
    (tmp_path / "swap").symlink_to(secret.parent)
    tools, ctx = ToolRegistry(), ToolContext(str(project), read_permission=deny_secrets(secret))

    def glob(n: int) -> Awaitable[ToolResult]:
        return tools.call("glob", {"pattern": "*", "path": "sub"}, ctx)

    with swapping(project / "sub", tmp_path / "swap"):
        # More calls: a listing meets the swap in few of them (1 in 20 leaked on the old code).
        found = await race(glob, lambda r: "notes.txt" in r.text, 5 * TRIES)
    # The secret folder's file names are not shown either.
    assert not [r.text for r in found if "config" in r.text]


async def test_read_never_opens_a_file_swapped_for_a_link_to_a_secret(
    tmp_path: Path, project: Path, secret: Path, opening: str
) -> None:
    (project / "notes.txt").write_text(f"{DECOY}\n")
    (tmp_path / "swap").symlink_to(secret)
    tools, ctx = ToolRegistry(), ToolContext(str(project), read_permission=deny_secrets(secret))
    with swapping(project / "notes.txt", tmp_path / "swap"):
        found = await race(lambda n: tools.call("read", {"path": "notes.txt"}, ctx), decoy)
    assert not [r.text for r in found if SECRET in r.text]
    # A refusal says why, in words the model can act on.
    for refused in (r for r in found if r.is_error):
        assert "outside the working directory" in refused.text or "symlink" in refused.text, refused.text


@pytest.mark.parametrize("tool", ["write", "edit"])
async def test_write_and_edit_never_land_outside_through_a_swapped_folder(
    tmp_path: Path, project: Path, opening: str, tool: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_text("v\n")
    (project / "out").mkdir()
    (project / "out" / "f.txt").write_text("v\n")
    (tmp_path / "swap").symlink_to(elsewhere)
    tools, ctx = ToolRegistry(), ToolContext(str(project))

    def change(n: int) -> Awaitable[ToolResult]:
        if tool == "write":
            return tools.call("write", {"path": f"out/new{n}.txt", "content": "written\n"}, ctx)
        return tools.call("edit", {"path": "out/f.txt", "old": "v", "new": f"v{n}"}, ctx)

    with swapping(project / "out", tmp_path / "swap"):
        done = await race(change, lambda r: not r.is_error)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["f.txt"]
    assert (elsewhere / "f.txt").read_text() == "v\n"
    for refused in (r for r in done if r.is_error):
        assert "outside the working directory" in refused.text or "symlink" in refused.text, refused.text


async def test_a_folder_swapped_for_a_link_is_refused_with_a_clear_error(
    tmp_path: Path, project: Path, opening: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / "out").mkdir()
    (project / "out" / "f.txt").write_text("inside\n")
    real = str(project / "out" / "f.txt")
    # What the tools meet when the swap falls between their resolving and their opening.
    (project / "out").rename(tmp_path / "was-out")
    (project / "out").symlink_to(elsewhere)
    (elsewhere / "f.txt").write_text(f"{SECRET}\n")
    with pytest.raises(_fs.PathSwapped) as swapped:
        _fs.open_path(real, os.O_RDONLY)
    assert swapped.value.strerror == (
        f"{real} changed while the call ran: a symlink now stands on its path, where none was when it was "
        "resolved; it is not followed"
    )
    with pytest.raises(_fs.PathSwapped):
        _fs.write_atomic(real, b"x")
    assert (elsewhere / "f.txt").read_text() == f"{SECRET}\n"
    # Below a folder's descriptor, a link out is refused the same way.
    fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(_fs.PathSwapped):
            _fs.open_path("out/f.txt", os.O_RDONLY, dir_fd=fd)
        with pytest.raises(ValueError):
            _fs.open_path("../project/a.txt", os.O_RDONLY, dir_fd=fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "path",
    ["/proc/self/environ", "/proc/../proc/1/environ", "/proc/self/root/proc/self/environ", "env", "fd-link",
     "/dev/fd/{fd}", "/dev/stdin", "/sys/kernel", "/dev"],
)
async def test_proc_sys_and_dev_are_refused_by_any_spelling(
    tmp_path: Path, project: Path, secret: Path, opening: str, path: str
) -> None:
    (project / "env").symlink_to("/proc/self/environ")
    with open(secret) as held:  # a descriptor of the daemon's, on a secret
        (project / "fd-link").symlink_to(f"/dev/fd/{held.fileno()}")
        path = path.format(fd=held.fileno())
        tools, ctx = ToolRegistry(), ToolContext(str(project), outside_ok=True)
        for name, input in [
            ("read", {"path": path}),
            ("grep", {"pattern": "PATH=|material", "path": path}),
            ("glob", {"pattern": "*", "path": path}),
            ("edit", {"path": path, "old": "PATH=", "new": "x"}),
            ("write", {"path": path, "content": "x"}),
        ]:
            result = await tools.call(name, input, ctx)
            assert result.is_error, (name, result.text)
            assert "the file tools do not touch /proc, /sys or /dev" in result.text, (name, result.text)
            assert "PATH=" not in result.text and SECRET not in result.text


async def test_a_search_skips_links_to_proc_sys_and_dev(project: Path, secret: Path, opening: str) -> None:
    (project / "env").symlink_to("/proc/self/environ")
    (project / "kernel").symlink_to("/sys/kernel")
    with open(secret) as held:
        (project / "fd").symlink_to(f"/dev/fd/{held.fileno()}")
        tools, ctx = ToolRegistry(), ToolContext(str(project), read_permission=lambda path: "allow")
        grep = await tools.call("grep", {"pattern": "PATH=|material"}, ctx)
        assert grep.text == "no matches for PATH=|material"
        glob = await tools.call("glob", {"pattern": "*"}, ctx)
        assert sorted(glob.text.split("\n")) == ["a.txt", "b.txt", "c.py"]


# -- through a daemon ----------------------------------------------------------------------


async def test_a_grep_racing_a_swap_never_leaks_under_a_deny_rule(
    client: TrioClient, tmp_path: Path, project: Path, secret: Path
) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "config").write_text(f"{DECOY}\n")
    (project / "notes.txt").write_text(f"{DECOY}\n")
    (tmp_path / "swap-dir").symlink_to(secret.parent)
    (tmp_path / "swap-file").symlink_to(secret)
    calls = [call("grep", pattern="material")] * TRIES
    with swapping(project / "sub", tmp_path / "swap-dir"), swapping(project / "notes.txt", tmp_path / "swap-file"):
        events = await run_calls(client, project, *calls, mode="full", deny=[f"read({secret.parent}/**)"])
    found = results(events)
    assert len(found) == TRIES and not [r for r in found if SECRET in r]
    assert any(DECOY in r for r in found)


async def test_a_write_racing_a_swapped_folder_never_lands_outside(
    client: TrioClient, tmp_path: Path, project: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / "out").mkdir()
    (tmp_path / "swap").symlink_to(elsewhere)
    calls = [call("write", path=f"out/new{n}.txt", content="written\n") for n in range(TRIES)]
    with swapping(project / "out", tmp_path / "swap"):
        # A write decided outside asks; run_calls denies it.
        events = await run_calls(client, project, *calls, allow=["write(out/**)"])
    assert list(elsewhere.iterdir()) == []
    assert len([e for e in events if e["type"] == "tool.finished"]) == TRIES


async def test_proc_self_environ_is_refused_in_full_mode(client: TrioClient, project: Path) -> None:
    (project / "env").symlink_to("/proc/self/environ")
    calls = [call("read", path="/proc/self/environ"), call("read", path="/proc/../proc/1/environ"),
             call("read", path="env"), call("grep", pattern="PATH=", path="/proc/self/environ"),
             call("grep", pattern="PATH=")]  # fmt: skip
    events = await run_calls(client, project, *calls, mode="full", yes=True)
    found = results(events)
    assert not [r for r in found if "PATH=/" in r]
    assert all("the file tools do not touch /proc, /sys or /dev" in r for r in found[:4]), found
    assert found[4] == "no matches for PATH="


async def test_the_change_shown_for_approval_never_holds_proc_self_environ(client: TrioClient, project: Path) -> None:
    (project / "env").symlink_to("/proc/self/environ")
    calls = [call("write", path="/proc/self/environ", content="x"), call("edit", path="env", old="PATH", new="x")]
    events = await run_calls(client, project, *calls)  # agent mode: both ask, and are denied
    asked = [e for e in events if e["type"] == "permission.requested"]
    assert len(asked) == 2 and not [e for e in asked if "PATH=/" in e.get("diff", "")]
