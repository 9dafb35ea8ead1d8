"""A roost on another machine, over a real OpenSSH server (tests/_sshd.py) on 127.0.0.1.

The "remote machine" is this one, reached through our own sshd: a second daemon with its
own socket, config, state and home (set by the remote command line, ``[hosts.box] roost``
in the local config.toml), started by ``roost bridge`` on the far side of ssh. The local
side is the test's usual world (its socket, XDG dirs, HOME), where no daemon may start.
``ROOST_SSH_COMMAND`` is ``ssh -F <the test's ssh_config>`` (its key, its known host).
If sshd cannot run here, these tests fail saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._sshd import Sshd, SshdUnavailable

from .conftest import E2E, ROOST, LineReader, alive, bash, text, wait_until
from .test_shell import IDLE, Tmux


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    server = Sshd(Path(tempfile.mkdtemp(prefix="sshd-", dir="/tmp")))
    try:
        server.start()
    except SshdUnavailable as exc:
        pytest.fail(f"the remote-host tests need a real sshd on 127.0.0.1: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)


class Remote:
    """The daemon of the "other machine": its world, and how the local side names it."""

    def __init__(self, e2e: E2E, sshd: Sshd) -> None:
        self.sshd = sshd
        self.runtime = e2e.short / "r"
        self.runtime.mkdir(mode=0o700)
        self.socket = self.runtime / "s.sock"
        self.home = e2e.tmp / "remote-home"
        (self.home / "proj").mkdir(parents=True)
        (self.home / "proj" / "there.txt").write_text("on the remote side\n")
        self.env = {"ROOST_SOCKET": str(self.socket), "XDG_RUNTIME_DIR": str(self.runtime), "HOME": str(self.home)}
        for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
            folder = e2e.tmp / "remote" / var.lower()
            folder.mkdir(parents=True)
            self.env[var] = str(folder)
        # ROOST_HOST there (dotfiles shared with this machine) is for other commands: the
        # bridge relays to the daemon of the machine it runs on.
        self.command = sshd.remote_command({**self.env, "ROOST_HOST": "elsewhere"})
        # The local side: ssh as the test's, and the host by name in the user's config.
        e2e.env["ROOST_SSH_COMMAND"] = sshd.ssh_command
        config = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'[hosts.box]\nurl = "{sshd.url}"\nroost = {json.dumps(self.command)}\n')
        self.controls = e2e.short / "ssh"

    def there(self) -> dict[str, str]:
        """The environment of a client on the remote machine itself (its socket)."""
        return {**os.environ, **self.env}

    def masters(self) -> list[int]:
        """The pids of the local side's shared ssh connections to it."""
        return self.sshd.master_pids(self.controls)

    def daemon_pid(self) -> int:
        return int(Path(str(self.socket) + ".lock").read_text().strip())


@pytest.fixture
def remote(e2e: E2E, sshd: Sshd) -> Iterator[Remote]:
    world = Remote(e2e, sshd)
    try:
        yield world
    finally:
        sshd.close_masters(world.controls)


@pytest.fixture
def panes(e2e: E2E, remote: Remote) -> Iterator[Tmux]:
    """tmux (see test_shell.py), started after ``remote`` set the test's ssh command."""
    server = Tmux(e2e)
    try:
        yield server
    finally:
        server.kill()


def no_local_daemon(e2e: E2E) -> bool:
    return not e2e.socket.exists() and not Path(str(e2e.socket) + ".lock").exists()


def pending(e2e: E2E) -> list[dict[str, Any]]:
    return e2e.json_out("--host", "box", "pending", "--json")


def test_dispatch_over_ssh_runs_in_a_remote_folder_and_starts_no_local_daemon(e2e: E2E, remote: Remote) -> None:
    model = e2e.script([bash("cat there.txt")], [text("Read it.")])
    # --cwd is the remote machine's: relative to the remote home, never looked at here.
    assert not (e2e.project / "proj").exists()
    done = e2e.ok("--host", "box", "dispatch", "read the file", "--model", model, "--cwd", "proj", "--yes", "--json")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [result] = [e for e in events if e["type"] == "tool.finished"]
    assert result["result"] == "on the remote side\n"
    assert events[-1]["type"] == "run.finished" and events[-1]["text"] == "Read it."
    [row] = e2e.json_out("--host", "box", "sessions", "--json")
    assert row["cwd"] == str(remote.home / "proj")
    assert remote.socket.exists() and alive(remote.daemon_pid())
    assert no_local_daemon(e2e)
    # A URL and ROOST_REMOTE_COMMAND reach the same daemon; so does a client on that machine.
    by_url = json.loads(e2e.ok("status", "--json", env={**e2e.env, "ROOST_HOST": remote.sshd.url,
                                                        "ROOST_REMOTE_COMMAND": remote.command}).stdout)
    there = json.loads(e2e.ok("status", "--json", env=remote.there()).stdout)
    assert by_url["pid"] == there["pid"] == remote.daemon_pid()
    assert no_local_daemon(e2e)


def test_two_followers_one_over_ssh_see_the_same_events_and_an_approval_given_over_ssh(e2e: E2E, remote: Remote) -> None:
    model = e2e.script([bash("echo approved > made.txt")], [text("Made it.")])
    started = json.loads(e2e.ok("--host", "box", "dispatch", "make a file", "--model", model, "--detach", "--json").stdout)
    session = started["session"]
    over_ssh = e2e.popen([ROOST, "--host", "box", "logs", session, "--follow", "--json"], stdout=subprocess.PIPE)
    on_host = e2e.popen([ROOST, "logs", session, "--follow", "--json"], stdout=subprocess.PIPE, env=remote.there())
    readers = [LineReader(over_ssh.stdout), LineReader(on_host.stdout)]
    for reader in readers:
        reader.until(lambda line: json.loads(line)["type"] == "permission.requested")
    [row] = pending(e2e)
    assert (row["session"], row["name"]) == (session, "bash")
    assert e2e.ok("--host", "box", "approve", session, row["call_id"]).stdout.strip() == f"approved {row['call_id']}"
    for reader in readers:
        reader.until(lambda line: json.loads(line)["type"] == "run.finished")
    seen = [[json.loads(line) for line in reader.lines] for reader in readers]
    assert seen[0] == seen[1]
    [resolved] = [e for e in seen[0] if e["type"] == "permission.resolved"]
    assert resolved["decision"] == "approve" and resolved["client"].startswith("roost-cli#")
    assert (remote.home / "made.txt").read_text() == "approved\n"
    assert no_local_daemon(e2e)


def test_a_follower_over_ssh_comes_back_from_its_last_seq_when_the_connection_is_killed(e2e: E2E, remote: Remote) -> None:
    model = e2e.script([bash("echo one")], [bash("echo two")], [text("Both done.")])
    # The dispatch that started the run follows it too, until the connection goes.
    dispatch = e2e.popen([ROOST, "--host", "box", "dispatch", "two steps", "--model", model, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    session = json.loads(LineReader(dispatch.stdout).until(lambda line: True))["session"]
    follower = e2e.popen([ROOST, "--host", "box", "logs", session, "--follow", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = LineReader(follower.stdout), LineReader(follower.stderr)
    out.until(lambda line: json.loads(line)["type"] == "permission.requested")
    masters = wait_until(remote.masters, what="the shared ssh connection")
    for pid in masters:
        os.kill(pid, signal.SIGKILL)
    lost = err.until(lambda line: "lost the connection to ssh://" in line)
    assert "waiting" in lost
    err.until(lambda line: "(back: following from seq" in line)
    assert dispatch.wait(timeout=10) == 10
    assert f"the run goes on there: roost --host box logs {session} --follow" in dispatch.stderr.read()
    # While it was away, nothing happened; now the run goes on, answered over ssh again.
    [first] = pending(e2e)
    e2e.ok("--host", "box", "approve", session, first["call_id"])
    second = wait_until(lambda: [r for r in pending(e2e) if r["call_id"] != first["call_id"]], what="the next request")
    e2e.ok("--host", "box", "approve", session, second[0]["call_id"])
    out.until(lambda line: json.loads(line)["type"] == "run.finished")
    seqs = [json.loads(line).get("seq") for line in out.lines]
    logged = e2e.ok("--host", "box", "logs", session, "--json").stdout.splitlines()
    stored = [json.loads(line)["seq"] for line in logged]
    assert [s for s in seqs if s is not None] == stored  # no gap, no duplicate
    assert follower.poll() is None
    assert no_local_daemon(e2e)


def test_status_of_every_host_and_clear_errors(e2e: E2E, remote: Remote) -> None:
    e2e.ok("--host", "box", "daemon")
    config = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    nothing = f"ssh://{remote.sshd.user}@127.0.0.1:{_closed_port()}"
    config.write_text(config.read_text() + f'\n[hosts.gone]\nurl = "{nothing}"\n')
    done = e2e.roost("status", "--all-hosts", "--json")
    assert done.returncode == 10, done.stderr
    rows = {row["host"]: row for row in json.loads(done.stdout)["hosts"]}
    assert list(rows) == ["local", "box", "gone"]
    assert rows["local"]["status"] is None and rows["local"]["error"] == "not running"
    assert rows["box"]["status"]["pid"] == remote.daemon_pid() and rows["box"]["error"] is None
    assert rows["gone"]["status"] is None and "Connection refused" in rows["gone"]["error"]
    shown = e2e.roost("status", "--all-hosts").stdout
    assert "box    roost " in shown and f"({remote.sshd.url})" in shown

    unreachable = e2e.roost("--host", "gone", "sessions")
    assert unreachable.returncode == 10
    assert f"cannot reach the roost daemon on {nothing}: ssh: connect to host 127.0.0.1 port" in unreachable.stderr
    unknown = e2e.roost("--host", "nowhere", "status")
    assert unknown.returncode == 2 and "'nowhere' is not an ssh:// URL, nor a host in" in unknown.stderr
    assert "(hosts there: box, gone)" in unknown.stderr
    no_roost = e2e.roost("status", env={**e2e.env, "ROOST_HOST": remote.sshd.url,
                                        "ROOST_REMOTE_COMMAND": "/nonexistent/roost"})
    assert no_roost.returncode == 10 and "is roost on the remote PATH?" in no_roost.stderr
    silent = e2e.roost("status", env={**e2e.env, "ROOST_HOST": remote.sshd.url, "ROOST_TIMEOUT": "1",
                                      "ROOST_REMOTE_COMMAND": "sleep 5 #"})
    assert silent.returncode == 10
    assert f"the roost daemon at {remote.sshd.url} did not answer within 1 s" in silent.stderr
    assert "Its log is in ~/.local/state/roost/log/ there" in silent.stderr

    assert e2e.ok("--host", "box", "stop").stdout.startswith("stopped roost daemon (pid ")
    assert not remote.socket.exists()
    stopped = e2e.roost("--host", "box", "status")
    assert stopped.returncode == 10 and f"no roost daemon is running on {remote.sshd.url}" in stopped.stderr
    assert no_local_daemon(e2e)


def test_the_shell_and_attach_over_ssh_reattach_after_the_connection_is_killed(
    e2e: E2E, remote: Remote, panes: Tmux
) -> None:
    model = e2e.script([bash("echo first")], [text("First done.")], [bash("echo second")], [text("Second done.")])
    pane = panes.open("--host", "box", "shell", "--model", model, "--mode", "full")
    pane.wait(IDLE)
    pane.submit("the first task")
    pane.wait("First done.")
    # A second terminal attaches over ssh (no session named: the most recent one there).
    other = panes.open("--host", "box", "attach")
    other.wait(lambda screen: "First done." in screen and IDLE in screen)
    for pid in wait_until(remote.masters, what="the shared ssh connection"):
        os.kill(pid, signal.SIGKILL)
    pane.wait("(lost the daemon at seq")
    pane.wait("(back: re-attached from seq")
    pane.wait(IDLE)
    pane.submit("the second task")
    screen = pane.wait("Second done.")
    assert screen.count("First done.") == 1
    other.wait("Second done.")
    [row] = e2e.json_out("--host", "box", "sessions", "--json")
    assert row["cwd"] == str(remote.home)
    assert no_local_daemon(e2e)


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
