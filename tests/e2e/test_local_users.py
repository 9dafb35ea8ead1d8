"""Other users of the machine: a socket folder they made, links they planted, fake daemons
they serve, and what the daemon's files let them read. Plus a daemon that stops answering.

Another user is simulated as root does it: folders chowned to ``nobody``, and a process that
drops to ``nobody`` before it listens. Those tests need root (as in the sandbox we run in).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest

from roost.protocol import Decoder, Request, Response, encode

from .conftest import E2E, ROOST, LineReader, bash, text

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def default_socket(e2e: E2E) -> Path:
    """Use the default socket (no ROOST_SOCKET, no XDG_RUNTIME_DIR): ``$TMPDIR/roost-UID``,
    with TMPDIR in the test's own folder, never the real /tmp."""
    for variable in ("ROOST_SOCKET", "XDG_RUNTIME_DIR"):
        e2e.env.pop(variable, None)
    e2e.env["TMPDIR"] = str(e2e.short)
    e2e.socket = e2e.short / f"roost-{os.getuid()}" / "roost.sock"
    return e2e.socket


def refused(e2e: E2E, *args: str) -> str:
    """``roost ARGS`` must fail with exit status 10: its stderr."""
    done = e2e.roost(*args)
    assert done.returncode == 10, (done.returncode, done.stdout, done.stderr)
    return done.stderr


def nothing_started(e2e: E2E) -> None:
    assert e2e.lock_pids() == []
    assert not e2e.log_file.exists()


# -- the socket's folder -------------------------------------------------------------------


@as_root
def test_a_socket_folder_another_user_made_is_refused(e2e: E2E) -> None:
    folder = default_socket(e2e).parent
    folder.mkdir(mode=0o755)
    os.chown(folder, NOBODY, NOBODY)

    for args in (("status",), ("dispatch", "hi", "--model", "scripted/demo", "--detach")):
        error = refused(e2e, *args)
        assert f"unsafe socket folder: {folder} belongs to user nobody (uid 65534)" in error
        assert "XDG_RUNTIME_DIR" in error and "ROOST_SOCKET" in error
    assert os.listdir(folder) == []  # not even the daemon's stderr file
    nothing_started(e2e)


@as_root
def test_a_socket_of_another_user_is_a_one_line_error_naming_its_owner(e2e: E2E) -> None:
    e2e.ok("dispatch", "hi", "--model", "scripted/demo", "--detach", "--yes")
    os.chown(e2e.socket, NOBODY, NOBODY)  # 0600: only nobody may connect now
    try:
        # root without a capability is an ordinary user of uid 0: the socket refuses it.
        uncapable = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]
        for args in (("status",), ("bridge",), ("sessions",)):
            done = subprocess.run([*uncapable, ROOST, *args], cwd=e2e.project, env=e2e.env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=20)
            assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
            assert done.stderr.strip().splitlines() == [
                f"Error: cannot open the socket {e2e.socket}: it belongs to user nobody (uid 65534), not to you "
                "(uid 0); use a socket of your own (set XDG_RUNTIME_DIR or ROOST_SOCKET)"
            ], done.stderr
    finally:
        os.chown(e2e.socket, 0, 0)


def test_a_symlink_in_place_of_the_socket_folder_is_refused(e2e: E2E) -> None:
    folder = default_socket(e2e).parent
    planted = e2e.short / "planted"
    planted.mkdir(mode=0o700)
    folder.symlink_to(planted)

    error = refused(e2e, "dispatch", "hi", "--model", "scripted/demo", "--detach")
    assert f"{folder} is a symbolic link" in error
    assert os.listdir(planted) == []
    nothing_started(e2e)


def test_a_socket_folder_others_can_write_is_refused(e2e: E2E) -> None:
    folder = default_socket(e2e).parent
    folder.mkdir()
    os.chmod(folder, 0o777)

    error = refused(e2e, "dispatch", "hi", "--model", "scripted/demo", "--detach")
    assert f"{folder} can be written by other users (mode 0777)" in error
    assert f"chmod 700 {folder}" in error
    nothing_started(e2e)


def test_a_missing_socket_folder_is_made_private_and_status_makes_nothing(e2e: E2E) -> None:
    folder = default_socket(e2e).parent
    assert "no roost daemon is running" in refused(e2e, "status")
    assert not folder.exists()

    e2e.ok("dispatch", "hi", "--model", "scripted/demo", "--detach")
    assert mode(folder) == 0o700


def test_a_planted_link_at_the_stderr_file_is_not_written_through(e2e: E2E) -> None:
    victim = e2e.tmp / "victim.txt"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    errors = Path(f"{e2e.socket}.stderr")
    errors.symlink_to(victim)

    error = refused(e2e, "dispatch", "hi", "--model", "scripted/demo", "--detach")
    assert f"{errors} is a symbolic link; roost does not write through one" in error
    assert victim.read_text() == "precious\n"
    assert mode(victim) == 0o644
    nothing_started(e2e)


# -- who serves the socket -----------------------------------------------------------------

_LISTEN_AS_NOBODY = """
import socket, sys, time
listener = socket.socket(fileno=int(sys.argv[1]))
listener.listen()
print("listening", flush=True)
connection, _ = listener.accept()
time.sleep(60)
"""


@as_root
@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="needs a Python that nobody may run")
@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="SO_PEERCRED is Linux's")
def test_a_fake_daemon_of_another_user_is_refused(e2e: E2E) -> None:
    # Bound by us in our own private folder, then listened on by a process of nobody:
    # the peer credentials name whoever called listen().
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with listener:
        listener.bind(str(e2e.socket))
        fake = e2e.popen(
            [SYSTEM_PYTHON, "-c", _LISTEN_AS_NOBODY, str(listener.fileno())],
            pass_fds=(listener.fileno(),),
            preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),
            cwd="/",
            stdout=subprocess.PIPE,
        )
        LineReader(fake.stdout).until(lambda line: line.strip() == "listening")

    error = refused(e2e, "status")
    assert f"a process of user nobody (uid 65534) serves {e2e.socket} (pid {fake.pid})" in error
    assert "it is not your roost daemon" in error


# -- a daemon that stops answering ---------------------------------------------------------


@contextlib.contextmanager
def fake_daemon(path: Path, answers: dict[str, Callable[[Request], object]]) -> Iterator[None]:
    """A socket server that answers the methods in ``answers`` and ignores the rest (as a
    frozen daemon would), keeping every connection open until the test ends."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    done = threading.Event()

    def serve(connection: socket.socket) -> None:
        decoder = Decoder()
        with connection:
            while not done.is_set():
                data = connection.recv(65536)
                if not data:
                    return
                for message in decoder.feed(data):
                    if isinstance(message, Request) and message.method in answers:
                        result = answers[message.method](message)
                        connection.sendall(encode(Response(message.msgid, None, result)))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield
    finally:
        done.set()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()


def test_a_daemon_that_never_answers_is_a_clear_error(e2e: E2E) -> None:
    e2e.env["ROOST_TIMEOUT"] = "1"
    with fake_daemon(e2e.socket, {}):
        error = refused(e2e, "status")
    assert f"the roost daemon at {e2e.socket} did not answer within 1 s" in error
    assert f"Its log is {e2e.log_file}" in error


_SESSION = {"id": "s1", "cwd": "/", "created": 0.0, "status": "running", "events": 0}


@pytest.mark.parametrize(
    "args",
    [("logs", "s1", "--follow"), ("dispatch", "a task", "--model", "scripted/demo", "--yes")],
    ids=["logs-follow", "dispatch"],
)
def test_following_a_run_notices_a_daemon_that_froze(e2e: E2E, args: tuple[str, ...]) -> None:
    # It answers until the command starts following, then never again (not even status).
    e2e.env["ROOST_TIMEOUT"] = "1"
    answers: dict[str, Callable[[Request], object]] = {
        "hello": lambda r: {"pid": 1},
        "sessions.list": lambda r: {"sessions": [_SESSION]},
        "attach": lambda r: {"session": "s1", "last_seq": 0},
        "dispatch": lambda r: {"session": "s1", "run": "r1"},
    }
    with fake_daemon(e2e.socket, answers):
        error = refused(e2e, *args)
    assert f"the roost daemon at {e2e.socket} did not answer within 1 s" in error


def test_roost_timeout_must_be_a_number(e2e: E2E) -> None:
    e2e.env["ROOST_TIMEOUT"] = "soon"
    done = e2e.roost("status")
    assert done.returncode == 2
    assert "ROOST_TIMEOUT must be a number of seconds" in done.stderr


# -- what the daemon writes ----------------------------------------------------------------


def test_the_daemon_keeps_its_files_private_and_the_users_files_as_usual(e2e: E2E) -> None:
    # A socket folder to be made, and state and log folders an older roost left open.
    e2e.socket = e2e.short / "run" / "s.sock"
    e2e.env["ROOST_SOCKET"] = str(e2e.socket)
    state = e2e.log_file.parent.parent
    e2e.log_file.parent.mkdir(parents=True)
    for folder in (state, e2e.log_file.parent):
        os.chmod(folder, 0o755)
    e2e.log_file.write_text("an old line\n")
    os.chmod(e2e.log_file, 0o644)

    model = e2e.script([bash("touch made-by-a-tool")], [text("done")])
    e2e.ok("dispatch", "make a file", "--model", model, "--yes")

    tools = Path(f"{e2e.socket}.tools")
    database = state / "roost.db"
    modes = {
        "socket folder": mode(e2e.socket.parent),
        "socket": mode(e2e.socket),
        "lock": mode(Path(f"{e2e.socket}.lock")),
        "stderr": mode(Path(f"{e2e.socket}.stderr")),
        "tools folder": mode(tools),
        "state folder": mode(state),
        "database": mode(database),
        "wal": mode(Path(f"{database}-wal")),
        "shm": mode(Path(f"{database}-shm")),
        "log folder": mode(e2e.log_file.parent),
        "log": mode(e2e.log_file),
    }
    assert modes == {
        "socket folder": 0o700, "socket": 0o600, "lock": 0o600, "stderr": 0o600,
        "tools folder": 0o700, "state folder": 0o700, "database": 0o600, "wal": 0o600,
        "shm": 0o600, "log folder": 0o700, "log": 0o600,
    }
    assert e2e.log_file.read_text().startswith("an old line\n")
    # The daemon never touched the umask: what its tools make has the user's usual mode.
    umask = os.umask(0)
    os.umask(umask)
    assert mode(e2e.project / "made-by-a-tool") == 0o666 & ~umask
