"""Built-in tools run for real (bash in its process group, read, write, edit, glob, grep over
real files and a real git repository), and the process ledger."""

from __future__ import annotations

import io
import os
import signal
import subprocess
from pathlib import Path
from unittest.mock import patch

import trio
from hypothesis import given
from hypothesis import strategies as st

from roost.daemon.tools import ProcessLedger, ToolContext, ToolRegistry, _lines
from tests._procs import alive


async def test_bash_output_status_and_truncation(tmp_path: Path) -> None:
    tools = ToolRegistry()
    ok = await tools.call("bash", {"command": "echo out; echo err >&2"}, ToolContext(str(tmp_path)))
    assert (ok.text, ok.is_error, ok.meta["exit_status"]) == ("out\nerr\n", False, 0)
    big = await tools.call(
        "bash", {"command": "yes x | head -c 5000"}, ToolContext(str(tmp_path), output_limit=100)
    )
    assert big.text.startswith("x\nx\n") and "4900 more characters not shown" in big.text
    assert big.meta["bytes"] == 5000
    failed = await tools.call(
        "bash", {"command": "yes y | head -c 5000; exit 4"}, ToolContext(str(tmp_path), output_limit=100)
    )
    assert failed.is_error and failed.text.endswith("not shown]\n[exit status 4]")


async def test_bash_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    ledger = ProcessLedger(tmp_path / "ledger")
    result = await ToolRegistry().call(
        "bash",
        {"command": f"sleep 30 & echo $! > {pidfile}; wait", "timeout": 0.3},
        ToolContext(str(tmp_path), ledger=ledger),
    )
    assert result.is_error and "timed out after 0.3 s" in result.text and result.meta["timed_out"]
    # SIGKILL is sent before the call returns; the child's end follows a moment later.
    with trio.fail_after(2):
        while alive(int(pidfile.read_text())):
            await trio.sleep(0.01)
    assert ledger.recorded() == {} and ledger.journal.read_text() == ""


async def test_processes_started_by_a_call_end_with_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    result = await ToolRegistry().call(
        "bash", {"command": f"sleep 30 > /dev/null 2>&1 & echo $! > {pidfile}"}, ToolContext(str(tmp_path))
    )
    assert not result.is_error
    with trio.fail_after(2):
        while alive(int(pidfile.read_text())):
            await trio.sleep(0.01)


def test_the_ledger_kills_leftover_groups_but_never_a_recycled_pid(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger")
    sleeps = [subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(6)]
    leftover, stranger, older, oldest, finished, rebooted = sleeps
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    try:
        ledger.add(leftover.pid)
        ledger.add(finished.pid)
        ledger.remove(finished.pid)  # its group ended: not a leftover
        with open(ledger.journal, "a") as journal:
            # The pid was reused: the live process started after the leader must have.
            journal.write(f"+{stranger.pid} {start_time(stranger.pid) - 1} {boot}\n")
            # Another boot's line: the process with that pid now is another.
            journal.write(f"+{rebooted.pid} {start_time(rebooted.pid) + 1} {'0' * 8}-0000-0000-0000-{'0' * 12}\n")
            # The former format (the exact start time), once right and once not.
            journal.write(f"+{older.pid} {start_time(older.pid)}\n+{finished.pid} 1\n")
            # A line cut short by the crash.
            journal.write(f"+{finished.pid} {start_time(finished.pid) + 1} {boot}")
        # A file of the layout before (one per group, holding the exact start time).
        (ledger.folder / str(oldest.pid)).write_text(str(start_time(oldest.pid)))
        (ledger.folder / "notes").write_text("ignored")
        ledger.close()  # the daemon was killed; the next one opens the same folder

        nxt = ProcessLedger(tmp_path / "ledger")
        assert sorted(nxt.end_leftovers()) == sorted([leftover.pid, older.pid, oldest.pid])
        assert leftover.wait(5) == older.wait(5) == oldest.wait(5) == -signal.SIGKILL
        assert stranger.poll() is None and finished.poll() is None and rebooted.poll() is None
        assert sorted(p.name for p in nxt.folder.iterdir()) == ["journal", "notes"]
        assert nxt.recorded() == {} and nxt.journal.read_text() == ""
        nxt.close()
    finally:
        for process in sleeps:
            if process.poll() is None:
                process.kill()
            process.wait()


def start_time(pid: int) -> int:
    """A process's start time, in clock ticks since boot (``/proc/PID/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def test_the_ledger_journal_keeps_only_groups_in_flight(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger")
    long, short = (subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(2))
    try:
        ledger.add(long.pid)
        with patch("roost.daemon.tools._ledger._COMPACT_AFTER", 5):
            for _ in range(10):  # many short calls while a long one runs
                ledger.add(short.pid)
                ledger.remove(short.pid)
                assert list(ledger.recorded()) == [long.pid]
            assert len(ledger.journal.read_text().splitlines()) <= 5
        ledger.remove(long.pid)
        assert ledger.journal.read_text() == ""
    finally:
        ledger.close()
        for process in (long, short):
            process.kill()
            process.wait()


async def test_read_resolves_paths_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_text("one\ntwo\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    assert (await tools.call("read", {"path": "sub/f.txt"}, ctx)).text == "1\tone\n2\ttwo"
    assert "is a directory" in (await tools.call("read", {"path": "sub"}, ctx)).text
    bad = await tools.call("read", {"path": "sub/f.txt", "offset": 0}, ctx)
    assert bad.is_error and "offset" in bad.text


async def test_reads_outside_the_working_directory_only_when_allowed_there(tmp_path: Path) -> None:
    work = _folder(tmp_path / "work")
    (tmp_path / "outside.txt").write_text("far\n")
    (work / "in.txt").write_text("near\n")
    (work / "sneaky").symlink_to(tmp_path / "outside.txt")
    tools = ToolRegistry()
    allowed = ToolContext(str(work), outside_ok=True)
    far = await tools.call("read", {"path": "../outside.txt"}, allowed)
    assert (far.text, far.is_error, far.meta["outside"]) == ("1\tfar", False, True)
    assert (await tools.call("read", {"path": "in.txt"}, allowed)).meta["outside"] is False
    # Without that permission, a path a symlink takes outside is refused, for every reader.
    ctx = ToolContext(str(work))
    refused = await tools.call("read", {"path": "sneaky"}, ctx)
    assert refused.is_error and refused.meta["outside"]
    assert f"resolves to {tmp_path / 'outside.txt'}, outside the working directory" in refused.text
    for name in ("glob", "grep"):
        listed = await tools.call(name, {"pattern": "x", "path": ".."}, ctx)
        assert listed.is_error and listed.meta["outside"], name


async def test_write_creates_folders_and_replaces_atomically(tmp_path: Path) -> None:
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    created = await tools.call("write", {"path": "a/b/f.txt", "content": "héllo\n"}, ctx)
    assert (created.text, created.is_error) == ("created a/b/f.txt (7 bytes)", False)
    assert (created.meta["bytes"], created.meta["created"]) == (7, True)
    target = tmp_path / "a" / "b" / "f.txt"
    target.chmod(0o640)
    replaced = await tools.call("write", {"path": "a/b/f.txt", "content": "new"}, ctx)
    assert (replaced.text, replaced.meta["created"]) == ("overwrote a/b/f.txt (3 bytes)", False)
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o640
    # The temporary file went into place; nothing is left beside it.
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]
    folder = await tools.call("write", {"path": "a/b", "content": "x"}, ctx)
    assert folder.is_error and "is a directory" in folder.text
    under_file = await tools.call("write", {"path": "a/b/f.txt/g", "content": "x"}, ctx)
    assert under_file.is_error and "a folder on its path is a file" in under_file.text
    extra = await tools.call("write", {"path": "x", "content": "", "mode": "w"}, ctx)
    assert extra.is_error and "Additional properties" in extra.text


async def test_write_and_edit_refuse_paths_outside_the_working_directory(tmp_path: Path) -> None:
    work, elsewhere = _folder(tmp_path / "work"), _folder(tmp_path / "elsewhere")
    (elsewhere / "keep.txt").write_text("keep")
    (work / "dir-link").symlink_to(elsewhere)
    (work / "file-link").symlink_to(elsewhere / "keep.txt")
    (work / "inner.txt").write_text("inner")
    (work / "inner-link").symlink_to(work / "inner.txt")
    tools, ctx = ToolRegistry(), ToolContext(str(work))
    for path in ("../escape.txt", str(elsewhere / "abs.txt"), "~/home.txt", "dir-link/new.txt", "file-link"):
        wrote = await tools.call("write", {"path": path, "content": "x"}, ctx)
        assert wrote.is_error and wrote.meta["outside"], path
        assert f"outside the working directory ({work}); name that path in the call" in wrote.text
    edited = await tools.call("edit", {"path": "file-link", "old": "keep", "new": "lost"}, ctx)
    assert edited.is_error and "outside the working directory" in edited.text
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "home" / "home.txt").exists()
    # A link that stays inside is written through, and stays a link.
    assert not (await tools.call("write", {"path": "inner-link", "content": "changed"}, ctx)).is_error
    assert (work / "inner-link").is_symlink() and (work / "inner.txt").read_text() == "changed"
    # A call that a person approved for a path outside goes there.
    approved = ToolContext(str(work), outside_ok=True)
    assert not (await tools.call("write", {"path": "../escape.txt", "content": "ok"}, approved)).is_error
    assert (tmp_path / "escape.txt").read_text() == "ok"


async def test_edit_replaces_exact_text_and_shows_the_change(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_bytes(b"".join(b"line %d\n" % n for n in range(1, 11)) + b"odd \xff byte\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    one = await tools.call("edit", {"path": "f.py", "old": "line 6\n", "new": "six\nand a half\n"}, ctx)
    assert not one.is_error and one.meta["replacements"] == 1
    assert one.text == "\n".join(
        ["replaced 1 occurrence in f.py"]
        + [f"{n:>2}\tline {n}" for n in (3, 4, 5)]
        + [" 6\tsix", " 7\tand a half"]
        + [f"{n + 1:>2}\tline {n}" for n in (7, 8, 9, 10)]
    )
    every = await tools.call("edit", {"path": "f.py", "old": "line", "new": "L", "replace_all": True}, ctx)
    assert every.text.startswith("replaced 9 occurrences in f.py\n1\tL 1\n")
    # Bytes that are not UTF-8 survive; the temporary file is gone.
    assert source.read_bytes().endswith(b"L 10\nodd \xff byte\n")
    assert b"six\nand a half\n" in source.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert every.meta["bytes"] == source.stat().st_size
    before = source.read_bytes()
    for input, message in [
        ({"path": "f.py", "old": "nowhere", "new": "x"}, "old string not found in f.py"),
        (
            {"path": "f.py", "old": "L", "new": "x"},
            "old string appears 9 times in f.py; give more context or replace_all",
        ),
        ({"path": "f.py", "old": "", "new": "x"}, "old is empty"),
        ({"path": "f.py", "old": "six", "new": "six"}, "old and new are the same"),
        ({"path": "missing.py", "old": "a", "new": "b"}, "no such file: missing.py"),
        ({"path": ".", "old": "a", "new": "b"}, ". is a directory, not a file"),
    ]:
        failed = await tools.call("edit", input, ctx)
        assert failed.is_error and failed.text.startswith(message), (input, failed.text)
    assert source.read_bytes() == before


async def test_glob_lists_newest_first_and_skips_dot_git(tmp_path: Path) -> None:
    work = _folder(tmp_path / "work")
    for age, name in enumerate(["new.py", "src/mid.py", "src/deep/old.py", "notes.txt", ".git/hook.py"]):
        _file(work / name, "x", age=age)
    tools, ctx = ToolRegistry(), ToolContext(str(work))
    everywhere = await tools.call("glob", {"pattern": "**/*.py"}, ctx)
    assert everywhere.text.split("\n") == ["new.py", "src/mid.py", "src/deep/old.py"]
    assert (everywhere.meta["matches"], everywhere.meta["outside"]) == (3, False)
    assert (await tools.call("glob", {"pattern": "*.py"}, ctx)).text == "new.py"
    below = await tools.call("glob", {"pattern": "**/*.py", "path": "src"}, ctx)
    assert below.text.split("\n") == ["src/mid.py", "src/deep/old.py"]
    assert (await tools.call("glob", {"pattern": "src/*/[!x]*.py"}, ctx)).text == "src/deep/old.py"
    none = await tools.call("glob", {"pattern": "*.rs"}, ctx)
    assert (none.text, none.is_error) == ("no files match *.rs", False)
    missing = await tools.call("glob", {"pattern": "*", "path": "nope"}, ctx)
    assert missing.is_error and missing.text == "nope does not exist"
    for pattern, message in [("/etc/*", "pattern must be relative"), ("[z-a]", "invalid glob pattern")]:
        bad = await tools.call("glob", {"pattern": pattern}, ctx)
        assert bad.is_error and bad.text.startswith(message)


async def test_glob_and_grep_end_at_the_call_timeout(tmp_path: Path) -> None:
    _file(tmp_path / "a.txt", "x\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path), timeout=0)
    for name in ("glob", "grep"):
        late = await tools.call(name, {"pattern": "*"} if name == "glob" else {"pattern": "x"}, ctx)
        assert late.is_error and late.text == f"{name} timed out after 0 s"


async def test_glob_stops_at_a_thousand_paths(tmp_path: Path) -> None:
    for n in range(1003):
        (tmp_path / f"f{n:04}.txt").touch()
    result = await ToolRegistry().call("glob", {"pattern": "*.txt"}, ToolContext(str(tmp_path)))
    lines = result.text.split("\n")
    assert len(lines) == 1001 and lines[-1] == "[3 more files not shown; narrow the pattern or the path]"
    assert result.meta["matches"] == 1003


async def test_glob_and_grep_respect_gitignore(tmp_path: Path) -> None:
    repo = _folder(tmp_path / "repo")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    _file(repo / ".gitignore", "*.log\nbuild/\n")
    for name in ["app.py", "debug.log", "build/out.py", "src/lib.py", "src/trace.log"]:
        _file(repo / name, "needle\n")
    tools, ctx = ToolRegistry(), ToolContext(str(repo))
    listed = await tools.call("glob", {"pattern": "**"}, ctx)
    assert sorted(listed.text.split("\n")) == [".gitignore", "app.py", "src/lib.py"]
    below = await tools.call("glob", {"pattern": "*", "path": "src"}, ctx)
    assert below.text == "src/lib.py"
    found = await tools.call("grep", {"pattern": "needle"}, ctx)
    assert found.text == "app.py:1:needle\nsrc/lib.py:1:needle"
    # Naming an ignored file searches it all the same.
    named = await tools.call("grep", {"pattern": "needle", "path": "debug.log"}, ctx)
    assert named.text == "debug.log:1:needle"


async def test_grep_context_case_limits_binaries_and_bad_regexes(tmp_path: Path) -> None:
    _file(tmp_path / "a.txt", "\n".join(["zero", "Alpha", "one", "two", "three", "alpha", "four"]) + "\n")
    _file(tmp_path / "b.md", "alpha\n")
    (tmp_path / "blob.bin").write_bytes(b"alpha\0alpha\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    plain = await tools.call("grep", {"pattern": "alpha"}, ctx)
    assert plain.text == "a.txt:6:alpha\nb.md:1:alpha"
    assert (plain.meta["matches"], plain.meta["files"]) == (2, 2)
    context = await tools.call("grep", {"pattern": "alpha", "ignore_case": True, "context": 1}, ctx)
    assert context.text.split("\n") == [
        "a.txt-1-zero", "a.txt:2:Alpha", "a.txt-3-one", "--",
        "a.txt-5-three", "a.txt:6:alpha", "a.txt-7-four", "--", "b.md:1:alpha",
    ]  # fmt: skip
    merged = await tools.call("grep", {"pattern": "^t", "context": 1, "glob": "*.txt"}, ctx)
    assert merged.text.split("\n") == ["a.txt-3-one", "a.txt:4:two", "a.txt:5:three", "a.txt-6-alpha"]
    limited = await tools.call("grep", {"pattern": "o", "max_results": 2}, ctx)
    assert limited.text == (
        "a.txt:1:zero\na.txt:3:one\n[2 more matching lines not shown; narrow the search or raise max_results]"
    )
    assert limited.meta["matches"] == 4
    none = await tools.call("grep", {"pattern": "omega"}, ctx)
    assert (none.text, none.is_error, none.meta["matches"]) == ("no matches for omega", False, 0)
    bad = await tools.call("grep", {"pattern": "alpha("}, ctx)
    assert bad.is_error and bad.text.startswith("invalid regex 'alpha(': missing ): alpha(")
    missing = await tools.call("grep", {"pattern": "x", "path": "nope"}, ctx)
    assert missing.is_error and missing.text == "nope does not exist"


async def test_grep_default_limit_and_output_limit(tmp_path: Path) -> None:
    _file(tmp_path / "many.txt", "hit\n" * 250)
    tools = ToolRegistry()
    many = await tools.call("grep", {"pattern": "hit"}, ToolContext(str(tmp_path)))
    assert many.text.count("\n") == 200
    assert many.text.endswith("[50 more matching lines not shown; narrow the search or raise max_results]")
    cut = await tools.call("grep", {"pattern": "hit"}, ToolContext(str(tmp_path), output_limit=100))
    assert "more characters not shown]\n[50 more matching lines" in cut.text


def _folder(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def _file(path: Path, text: str, age: int = 0) -> None:
    """Write ``path`` (and its folders), modified ``age`` hours ago."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    when = 1_700_000_000 - age * 3600
    os.utime(path, (when, when))


async def test_read_goes_only_as_far_as_its_lines_and_says_where_to_read_on(tmp_path: Path) -> None:
    (tmp_path / "ten.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    (tmp_path / "empty.txt").write_text("")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    some = await tools.call("read", {"path": "ten.txt", "offset": 3, "limit": 2}, ctx)
    assert some.text == "3\tline 3\n4\tline 4\n[more lines follow; read on with offset 5]"
    assert (some.meta["lines"], some.meta["more"], some.meta["bytes"]) == (2, True, 71)
    last = await tools.call("read", {"path": "ten.txt", "offset": 9, "limit": 2}, ctx)
    assert last.text == " 9\tline 9\n10\tline 10" and last.meta["more"] is False
    past = await tools.call("read", {"path": "ten.txt", "offset": 12}, ctx)
    assert past.text == "[the file has 10 lines; offset 12 is past the end]"
    assert (await tools.call("read", {"path": "empty.txt"}, ctx)).text == "[empty file]"
    # No more lines than the output limit shows: the note says where the next one starts.
    narrow = await tools.call("read", {"path": "ten.txt"}, ToolContext(str(tmp_path), output_limit=40))
    assert narrow.text.endswith("[more lines follow; read on with offset 4]"), narrow.text


async def test_read_cuts_a_huge_line_and_stops_after_it(tmp_path: Path) -> None:
    with open(tmp_path / "one-line.log", "wb") as f:
        f.write(b"head\n")
        f.truncate(200 << 20)  # a 200 MB line of NUL bytes, never loaded
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    # Line 2 does not fit in what the output shows after line 1: the read stops before it.
    first = await tools.call("read", {"path": "one-line.log"}, ctx)
    assert first.text == "1\thead\n[more lines follow; read on with offset 2]"
    result = await tools.call("read", {"path": "one-line.log", "offset": 2}, ctx)
    assert not result.is_error and result.text.startswith("2\t\0")
    assert result.text.endswith("[line 2 is longer than 65,536 characters and was cut there; read on with offset 3]")
    assert "output truncated" in result.text and result.meta["cut"] and result.meta["bytes"] == 200 << 20
    after = await tools.call("read", {"path": "one-line.log", "offset": 3}, ctx)
    assert after.text == "[the file has 2 lines; offset 3 is past the end]"


async def test_read_edit_and_grep_never_wait_on_a_fifo_or_a_device(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    _file(tmp_path / "a.txt", "needle\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path), outside_ok=True)
    with trio.fail_after(5):
        read = await tools.call("read", {"path": "pipe"}, ctx)
        assert read.is_error and read.text == f"cannot read pipe: {tmp_path}/pipe is not a regular file (a FIFO); it is not read"
        # A device is refused before it is opened: the file tools do not touch /dev.
        device = await tools.call("read", {"path": "/dev/zero"}, ctx)
        assert device.is_error and device.text == "/dev/zero leads into /dev: the file tools do not touch /proc, /sys or /dev"
        edit = await tools.call("edit", {"path": "pipe", "old": "a", "new": "b"}, ctx)
        assert edit.is_error and edit.text.startswith("cannot edit pipe:") and "FIFO" in edit.text
        # Not a git work tree: the plain walk lists the FIFO, and the search skips it.
        found = await tools.call("grep", {"pattern": "needle"}, ctx)
        assert found.text == "a.txt:1:needle"
        named = await tools.call("grep", {"pattern": "x", "path": "pipe"}, ctx)
        assert named.is_error and "is not a regular file" in named.text


async def test_edit_refuses_files_larger_than_it_reads(tmp_path: Path) -> None:
    with open(tmp_path / "big.txt", "wb") as f:
        f.write(b"old\n")
        f.truncate(9 << 20)
    result = await ToolRegistry().call("edit", {"path": "big.txt", "old": "old", "new": "new"}, ToolContext(str(tmp_path)))
    assert result.is_error and result.text == (
        "big.txt is larger than 8 MiB, more than edit reads; change it with bash (sed, a script)"
    )
    assert (tmp_path / "big.txt").read_bytes()[:4] == b"old\n"


async def test_read_and_grep_count_lines_alike(tmp_path: Path) -> None:
    # \r, \r\n, a form feed and U+2028 each end a line, as str.splitlines says.
    (tmp_path / "mixed.txt").write_bytes("a\rb\r\nc\x0cd\u2028needle\n".encode())
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    read = await tools.call("read", {"path": "mixed.txt", "offset": 5, "limit": 1}, ctx)
    assert read.text == "5\tneedle"
    assert (await tools.call("grep", {"pattern": "needle"}, ctx)).text == "mixed.txt:5:needle"


@given(
    data=st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b"\x0c", "\u00e9".encode(), b"\xff", b"\xe2\x80"]), max_size=40),
    block=st.integers(1, 6),
    limit=st.integers(1, 8),
)
def test_text_lines_are_splitlines_read_a_block_at_a_time(data: list[bytes], block: int, limit: int) -> None:
    raw = b"".join(data)
    with patch.object(_lines, "_BLOCK", block):
        got = list(_lines.text_lines(io.BytesIO(raw), limit))
    assert got == [(line[:limit], len(line) > limit) for line in raw.decode("utf-8", "replace").splitlines()]


async def test_tool_threads_are_the_registrys_own(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\n")
    tools = ToolRegistry(threads=2)
    default = trio.to_thread.current_default_thread_limiter()
    holders = [object() for _ in range(int(default.total_tokens))]
    for holder in holders:
        default.acquire_on_behalf_of_nowait(holder)
    try:
        # trio's default threads all taken: file tools still run, on the registry's. (Only
        # starting a process, git for a listing or bash, takes one of trio's for a moment.)
        ctx = ToolContext(str(tmp_path))
        with trio.fail_after(5):
            assert (await tools.call("read", {"path": "f.txt"}, ctx)).text == "1\tx"
            assert not (await tools.call("edit", {"path": "f.txt", "old": "x", "new": "y"}, ctx)).is_error
            assert not (await tools.call("write", {"path": "g.txt", "content": "z"}, ctx)).is_error
    finally:
        for holder in holders:
            default.release_on_behalf_of(holder)
    assert tools.threads.total_tokens == 2 and tools.threads.borrowed_tokens == 0


async def test_todo_replaces_the_checklist_and_returns_it_as_text_and_data(tmp_path: Path) -> None:
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    todos = [
        {"content": "Write the parser", "status": "completed"},
        {"content": "Add  tests", "status": "in_progress", "activeForm": "Adding tests"},
        {"content": "Update the docs", "status": "pending"},
    ]
    result = await tools.call("todo", {"todos": todos}, ctx)
    assert not result.is_error
    assert result.text == "1 of 3 done:\n[x] Write the parser\n[>] Add tests\n[ ] Update the docs"
    assert result.meta["todos"] == [
        {"content": "Write the parser", "status": "completed"},
        {"content": "Add tests", "status": "in_progress", "activeForm": "Adding tests"},
        {"content": "Update the docs", "status": "pending"},
    ]
    empty = await tools.call("todo", {"todos": []}, ctx)
    assert (empty.text, empty.meta["todos"]) == ("The checklist is empty.", [])
    for bad in ({"todos": [{"content": "x", "status": "done"}]}, {"todos": [{"status": "pending"}]}, {}):
        assert (await tools.call("todo", bad, ctx)).is_error


async def test_edit_and_write_keep_the_diff_they_made_for_the_people_watching(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_bytes(b"def f():\n    if x:\n        return 1\n    return 2\n\xff\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    edited = await tools.call("edit", {"path": "f.py", "old": "        return 1", "new": "        return 3"}, ctx)
    # The indentation kept; a byte that is not UTF-8 shown as U+FFFD (the meta is stored).
    assert edited.meta["diff"].splitlines() == [
        "--- a/f.py", "+++ b/f.py", "@@ -1,5 +1,5 @@", " def f():", "     if x:",
        "-        return 1", "+        return 3", "     return 2", " \ufffd",
    ]
    assert "diff" not in edited.text and "@@" not in edited.text  # the model is not sent it
    created = await tools.call("write", {"path": "g.py", "content": "a\n  b\n"}, ctx)
    assert created.meta["diff"].splitlines()[2:] == ["@@ -0,0 +1,2 @@", "+a", "+  b"]
    replaced = await tools.call("write", {"path": "g.py", "content": "a\n  c\n"}, ctx)
    assert replaced.meta["diff"].splitlines()[3:] == [" a", "-  b", "+  c"]
    same = await tools.call("write", {"path": "g.py", "content": "a\n  c\n"}, ctx)
    assert "diff" not in same.meta
