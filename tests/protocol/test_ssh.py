"""ssh:// URLs, the ssh command line, and what an ssh child's end means (no ssh runs here;
tests/e2e/test_remote.py runs the real one)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest

from roost.protocol import BRIDGE_NO_DAEMON, ConnectionClosed, SshFailed, SshHost, bridge_argv, control_dir, ssh_argv
from roost.protocol._ssh import unreachable
from roost.protocol._streams import ProcessStream, ended_message, last_lines


@pytest.mark.parametrize(
    ("url", "host", "user", "port"),
    [
        ("ssh://box", "box", None, None),
        ("ssh://me@box.example.com:2222", "box.example.com", "me", 2222),
        ("ssh://me@box/", "box", "me", None),
        ("ssh://[::1]:22", "::1", None, 22),
        ("ssh://a.b@10.0.0.1", "10.0.0.1", "a.b", None),
    ],
)
def test_an_ssh_url_names_a_machine_a_user_and_a_port(url: str, host: str, user: str | None, port: int | None) -> None:
    parsed = SshHost.parse(url)
    assert (parsed.host, parsed.user, parsed.port) == (host, user, port)
    assert SshHost.parse(parsed.url) == parsed


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("box", "is not an ssh:// URL"),
        ("http://box", "is not an ssh:// URL"),
        ("ssh://box/home/me", "names a machine only"),
        ("ssh://box:0", "is not a port"),
        ("ssh://box:70000", "is not a port"),
        ("ssh://box:ssh", "is not a port"),
        ("ssh://-oProxyCommand=x", "is not a host name"),
        ("ssh://", "is not a host name"),
        ("ssh://me;rm@box", "is not a user name"),
        ("ssh://::1", "in brackets"),
        ("ssh://box name", "is not a host name"),
    ],
)
def test_a_bad_ssh_url_is_refused_saying_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        SshHost.parse(url)


def test_the_ssh_command_shares_one_connection_and_never_asks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROOST_SSH_COMMAND", raising=False)
    monkeypatch.delenv("ROOST_REMOTE_COMMAND", raising=False)
    argv = ssh_argv(SshHost.parse("ssh://me@box:2222"), ["bridge", "--no-start"], folder=str(tmp_path / "50%"),
                    connect_timeout=2.5)
    assert argv == [
        "ssh", "-o", "ControlMaster=auto", "-o", f"ControlPath={tmp_path}/50%%/%C", "-o", "ControlPersist=60s",
        "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "-p", "2222", "-T", "--", "me@box", "roost bridge --no-start",
    ]


def test_roost_ssh_command_replaces_ssh_and_the_remote_command_is_a_shell_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ROOST_SSH_COMMAND", "ssh -F '/my config' -o LogLevel=ERROR")
    monkeypatch.setenv("ROOST_REMOTE_COMMAND", "~/bin/roost")
    host = SshHost.parse("ssh://box")
    argv = bridge_argv(host, start=True)
    assert argv[:5] == ["ssh", "-F", "/my config", "-o", "LogLevel=ERROR"]
    assert argv[-2:] == ["box", "~/bin/roost bridge"]
    # A host's own command beats the variable; arguments are quoted for the remote shell.
    argv = ssh_argv(host, ["bridge", "it's"], command="env A=1 /opt/roost", folder=str(tmp_path))
    assert argv[-1] == "env A=1 /opt/roost bridge " + shlex.quote("it's")
    # No remote command: the shared connection alone, allowed to ask at the terminal.
    alone = ssh_argv(host, None, batch=False, folder=str(tmp_path))
    assert alone[-4:] == ["-N", "-f", "--", "box"] and "BatchMode=yes" not in alone
    monkeypatch.setenv("ROOST_SSH_COMMAND", "ssh '")
    with pytest.raises(ValueError, match="ROOST_SSH_COMMAND cannot be split"):
        ssh_argv(host, ["bridge"], folder=str(tmp_path))


def test_the_control_sockets_are_in_a_private_folder_next_to_the_socket(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    folder = control_dir(str(runtime / "roost.sock"))
    assert folder == str(runtime / "ssh")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(runtime).st_mode) == 0o700


def test_the_end_of_an_ssh_child_says_what_happened() -> None:
    host = SshHost.parse("ssh://me@box")
    none = unreachable(host, BRIDGE_NO_DAEMON, "roost: no roost daemon is running on /run/s.sock", start=False)
    assert isinstance(none, ConnectionRefusedError) and str(none) == "no roost daemon is running on ssh://me@box"
    # Started on purpose, the same status is a failure like any other.
    assert type(unreachable(host, BRIDGE_NO_DAEMON, "", start=True)) is ConnectionClosed
    ssh = unreachable(host, 255, "ssh: connect to host box port 22: Connection refused", start=True)
    assert isinstance(ssh, SshFailed)
    assert str(ssh) == ("cannot reach the roost daemon on ssh://me@box: ssh: connect to host box port 22: "
                        "Connection refused (exit status 255)")
    missing = unreachable(host, 127, "bash: line 1: roost: command not found", start=True)
    assert "is roost on the remote PATH? set [hosts.NAME] roost or ROOST_REMOTE_COMMAND" in str(missing)
    assert last_lines(b"Warning: one\n\n two \nthree\nfour\n") == "two; three; four"
    assert ended_message("ssh://box", "", None) == "lost the connection to ssh://box"


def test_a_process_stream_carries_bytes_both_ways_and_keeps_the_childs_last_words() -> None:
    stream = ProcessStream(["sh", "-c", "echo warming up >&2; head -c 5; echo gone >&2; exit 7"], "ssh://box")
    stream.settimeout(10)
    stream.sendall(b"hello, and more")
    got = b""
    while len(got) < 5:
        got += stream.recv(100)
    assert got == b"hello"
    assert stream.recv(100) == b""
    assert stream.ended() == "lost the connection to ssh://box: warming up; gone (exit status 7)"
    stream.close()
    stream.close()
