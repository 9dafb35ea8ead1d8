"""Private folders and peer credentials: what clients check before they trust a socket."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from roost.protocol import NotPrivate, check_peer, check_private_dir, peer_credentials

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder of another user")


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def test_a_missing_folder_is_made_0700_with_its_missing_parents(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "roost"
    assert check_private_dir(str(folder)) is True
    assert [mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", folder)] == [0o700] * 3


def test_without_create_a_missing_folder_is_false_and_nothing_is_made(tmp_path: Path) -> None:
    assert check_private_dir(str(tmp_path / "nope"), create=False) is False
    assert not (tmp_path / "nope").exists()


def test_an_existing_folder_of_ours_is_checked_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    os.chmod(folder, 0o755)
    assert check_private_dir(str(folder)) is True
    assert mode(folder) == 0o755  # readable by others is not a risk for a socket folder


def test_a_symlink_in_place_of_the_folder_is_refused_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "roost"
    link.symlink_to(elsewhere)
    for create in (True, False):
        with pytest.raises(NotPrivate, match="symbolic link"):
            check_private_dir(str(link), create=create)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "not-yet")
    with pytest.raises(NotPrivate, match="symbolic link"):
        check_private_dir(str(dangling))
    assert not (tmp_path / "not-yet").exists()


def test_a_file_in_place_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "roost").write_text("")
    with pytest.raises(NotPrivate, match="not a folder"):
        check_private_dir(str(tmp_path / "roost"))


def test_a_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    os.chmod(folder, 0o777)
    with pytest.raises(NotPrivate) as info:
        check_private_dir(str(folder))
    assert "can be written by other users (mode 0777)" in str(info.value)
    assert f"chmod 700 {folder}" in str(info.value)
    assert mode(folder) == 0o777


@as_root
def test_a_folder_of_another_user_is_refused_naming_the_owner(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    with pytest.raises(NotPrivate) as info:
        check_private_dir(str(folder))
    message = str(info.value)
    assert str(folder) in message
    assert "belongs to user nobody (uid 65534)" in message
    assert "have it removed" in message


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="SO_PEERCRED is Linux's")
def test_peer_credentials_name_our_own_process() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_credentials(a) == (os.getpid(), os.getuid())
        check_peer(a, "socketpair")  # ours: no error
