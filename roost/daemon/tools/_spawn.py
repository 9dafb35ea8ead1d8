"""Starting a command's process from the event loop, without a worker thread.

trio's ``open_process`` runs ``subprocess.Popen`` in a worker thread, because forking a
large process can take a while. Here Python starts children with ``vfork`` (Linux, no
``preexec_fn``): ``Popen`` returns in a fraction of a millisecond and holds the GIL for
most of it anyway, so the thread only adds its hop: waking a worker, passing the GIL there
and back, waking the loop (about 0.5 ms of CPU on every tool call, measured by
bench/step_overhead.py). So :func:`spawn` calls ``Popen`` itself, reads the output through
a :class:`trio.lowlevel.FdStream`, and waits for the exit on a pidfd. Where there is no
``os.pidfd_open`` (not Linux) it is trio's ``open_process``, as before.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any, Mapping, Sequence

import trio

_PIDFD = hasattr(os, "pidfd_open")


class Spawned:
    """A child process whose stdout and stderr come together on :attr:`stdout`.

    Resource handling: :attr:`stdout` is the caller's to close; :meth:`wait` reaps the
    child and closes its pidfd.
    """

    def __init__(self, popen: subprocess.Popen[bytes], stdout: trio.lowlevel.FdStream) -> None:
        self._popen = popen
        #: The child's output (stdout and stderr), read as it comes.
        self.stdout = stdout
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(popen.pid)
        except OSError:
            pass  # a kernel without pidfds (before 5.3): wait() polls

    @property
    def pid(self) -> int:
        return self._popen.pid

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


async def spawn(argv: Sequence[str], *, cwd: str, env: Mapping[str, str]) -> Any:
    """Start ``argv`` in ``cwd`` with ``env``, stdin from /dev/null, stdout and stderr into
    one pipe, in a new session (its own process group): a :class:`Spawned`, or trio's
    ``Process`` where pidfds are missing (the same attributes and methods).

    Raises:
        OSError: the command cannot be started (no such program, no such folder).
    """
    if not _PIDFD:
        return await trio.lowlevel.open_process(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    read, write = os.pipe()
    try:
        popen = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=write,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    # A scheduler pass, as every trio operation makes (a loop of spawns still lets others
    # run), that a cancellation cannot interrupt: the child must reach the caller.
    await trio.lowlevel.cancel_shielded_checkpoint()
    return Spawned(popen, trio.lowlevel.FdStream(read))
