"""What the daemon writes is 0600 in 0700 folders, whatever the umask, and never through a link."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
import trio

from roost.daemon._paths import ensure_private_dir, private_opener
from roost.daemon.storage._store import EventStore
from roost.daemon.tools import ProcessLedger
from roost.protocol import NotPrivate


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 0: any mode below comes from the code, not from the umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_folder_of_ours_that_others_may_read_is_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "older"
    folder.mkdir()
    os.chmod(folder, 0o755)
    ensure_private_dir(folder)
    assert mode(folder) == 0o700


def test_a_link_in_place_of_a_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    (tmp_path / "log").symlink_to(target)
    with pytest.raises(NotPrivate, match="symbolic link"):
        ensure_private_dir(tmp_path / "log")
    assert mode(target) == 0o755


def test_files_are_created_0600_and_old_ones_tightened(tmp_path: Path, open_umask: None) -> None:
    with open(tmp_path / "new.log", "a", opener=private_opener) as f:
        f.write("x")
    old = tmp_path / "old.log"
    old.write_text("old\n")
    assert mode(old) == 0o666
    with open(old, "a", opener=private_opener) as f:
        f.write("more\n")
    assert (mode(tmp_path / "new.log"), mode(old)) == (0o600, 0o600)
    assert old.read_text() == "old\nmore\n"


def test_a_planted_link_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "roostd.log").symlink_to(victim)
    with pytest.raises(NotPrivate, match="symbolic link"):
        open(tmp_path / "roostd.log", "a", opener=private_opener)
    assert victim.read_text() == "precious"


async def test_the_database_and_its_wal_are_0600(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "db" / "roost.db"
    store = EventStore.open(path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run_writer)
            await store.create_session("s1", "/", 0.0)  # a write, so that the -wal exists
            files = {p.name: mode(p) for p in path.parent.iterdir()}
            store.stop_writer()
    finally:
        store.close()
    assert files == {"roost.db": 0o600, "roost.db-wal": 0o600, "roost.db-shm": 0o600}
    assert mode(path.parent) == 0o700


def test_the_ledger_folder_and_files_are_private(tmp_path: Path, open_umask: None) -> None:
    ledger = ProcessLedger(tmp_path / "s.sock.tools")
    ledger.add(os.getpid())
    assert mode(ledger.folder) == 0o700
    assert mode(ledger.journal) == 0o600
    ledger.remove(os.getpid())
    ledger.close()
