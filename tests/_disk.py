"""A disk that fills up: a small tmpfs mounted for one test, and a way to fill it."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

#: The size of the test's file system.
SIZE = "3m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 3 MiB tmpfs of its own, unmounted after the test.

    Mounting needs root (or CAP_SYS_ADMIN); where that is not permitted the test is skipped
    and says why: a disk cannot be filled safely otherwise.
    """
    folder = tmp_path / "small-disk"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"a full disk is made by mounting a small tmpfs, which is not permitted here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        # Lazily: a daemon the test started may still hold files there for a moment.
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of ``folder`` with one file, then free ``leave`` bytes of it;
    the file (delete it to make room again)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        chunk = 1 << 16
        while chunk:
            try:
                os.write(fd, b"\xff" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
        if leave:
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler
