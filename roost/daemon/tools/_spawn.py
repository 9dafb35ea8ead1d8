"""Starting a command's process from the event loop, without a worker thread.

trio's ``open_process`` runs ``subprocess.Popen`` in a worker thread, because forking a
large process can take a while. Here Python starts children with ``vfork`` (Linux, no
``preexec_fn``): ``Popen`` returns in a fraction of a millisecond and holds the GIL for
most of it anyway, so the thread only adds its hop: waking a worker, passing the GIL there
and back, waking the loop (about 0.5 ms of CPU on every tool call, measured by
bench/step_overhead.py). So :func:`spawn` calls ``Popen`` itself, reads the output through
a :class:`trio.lowlevel.FdStream`, and waits for the exit on a pidfd (where there is none,
not Linux or a kernel before 5.3, it polls).

A command of a sandboxed run is started by the run's sandbox instead
(``sandbox.RunSandbox.spawn``), as a process with the same surface, :class:`Process`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from typing import Any, Mapping, Protocol, Sequence

import trio

from ._base import kill_group


class Process(Protocol):
    """A command's process, started here or in a run's sandbox."""

    pid: int
    #: Its stdin (None: /dev/null), its output, and its stderr apart (None: in stdout).
    stdin: trio.lowlevel.FdStream | None
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream | None

    @property
    def returncode(self) -> int | None:
        """The exit status once :meth:`wait` has seen it (negative: killed by that signal)."""
        ...

    async def wait(self) -> int:
        """Wait for it to exit; its status. Cancellable."""
        ...

    def kill(self) -> None:
        """SIGKILL its process group (the command and everything it started)."""
        ...


class Spawned:
    """A child process started by :func:`spawn`.

    Resource handling: its streams are the caller's to close; :meth:`wait` reaps the child
    and closes its pidfd.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream,
        stderr: trio.lowlevel.FdStream | None,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(popen.pid)
        except (OSError, AttributeError):
            pass  # no pidfds: wait() polls

    @property
    def returncode(self) -> int | None:
        """The exit status once :meth:`wait` has seen it (negative: killed by that signal)."""
        return self._popen.returncode

    async def wait(self) -> int:
        """Wait for the child to exit; its status. Cancellable."""
        while self._popen.poll() is None:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:
                await trio.sleep(0.01)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return self._popen.returncode

    def kill(self) -> None:
        """SIGKILL the child's process group."""
        kill_group(self.pid)


async def spawn(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stdin: bool = False, stderr: bool = False
) -> Spawned:
    """Start ``argv`` in ``cwd`` with ``env``, in a new session (its own process group).

    Its stdin is /dev/null, or with ``stdin`` a pipe (:attr:`Spawned.stdin`); its stdout
    and stderr come together on :attr:`Spawned.stdout`, or with ``stderr`` apart.

    Raises:
        OSError: the command cannot be started (no such program, no such folder).
    """
    # Ours: the parent's ends (-1: none); theirs: what the child gets.
    ours = [-1, -1, -1]
    theirs = [subprocess.DEVNULL, -1, subprocess.STDOUT]
    try:
        if stdin:
            theirs[0], ours[0] = os.pipe()
        ours[1], theirs[1] = os.pipe()
        if stderr:
            ours[2], theirs[2] = os.pipe()
        popen = _popen(list(argv), cwd=cwd, env=dict(env), stdin=theirs[0], stdout=theirs[1], stderr=theirs[2])
    except BaseException:
        for fd in ours:
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in theirs:
            if fd >= 0:
                os.close(fd)
    # A scheduler pass, as every trio operation makes (a loop of spawns still lets others
    # run), that a cancellation cannot interrupt: the child must reach the caller.
    await trio.lowlevel.cancel_shielded_checkpoint()
    streams = [trio.lowlevel.FdStream(fd) if fd >= 0 else None for fd in ours]
    assert streams[1] is not None
    return Spawned(popen, streams[0], streams[1], streams[2])


def _popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``Popen`` in a new session, its program found on ``PATH`` once: ``Popen`` looks it up
    at every start (``os.get_exec_path``, about 50 µs here, most of it setting up and
    taking down a warnings filter), ``shutil.which`` here once per program and ``PATH``.
    A program that moved is looked up again."""
    program = _program(argv[0], kwargs["env"].get("PATH"))
    try:
        return subprocess.Popen(argv, executable=program, start_new_session=True, **kwargs)
    except FileNotFoundError:
        if program is None:
            raise
        _found.cache_clear()
        return subprocess.Popen(argv, start_new_session=True, **kwargs)


def _program(name: str, path: str | None) -> str | None:
    """Where ``name`` is on ``path``; None when ``Popen`` must look itself: a name with a
    slash, no ``PATH``, or one with a relative folder (found from the command's cwd)."""
    if "/" in name or not path or any(not folder.startswith("/") for folder in path.split(os.pathsep)):
        return None
    return _found(name, path)


@functools.lru_cache(maxsize=64)
def _found(name: str, path: str) -> str | None:
    return shutil.which(name, path=path)
