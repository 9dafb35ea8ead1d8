"""The Linux backend: a run's commands run under bubblewrap (``bwrap``), started by the
run's spawner (see ``_run``), which is what bwrap itself runs.

The sandbox is built from the outside in, one bwrap option at a time, in this order:

1. new namespaces for everything (``--unshare-all``: user, pid, network, ipc, uts,
   cgroup), the network given back only when the policy allows it (``--share-net``);
2. the whole filesystem read-only (``--ro-bind / /``), a fresh ``/dev`` and ``/proc`` (of
   the new pid namespace: no other process of the machine is visible, nor their
   environments), and an empty private ``/tmp``;
3. the policy's folders, shallowest first so that a deeper one is mounted over a
   shallower one: writable folders bound read-write, hidden folders covered by an empty
   read-only tmpfs, hidden files by ``/dev/null``. A hidden folder inside a writable one
   (``~/.ssh`` of a session in ``~``) is hidden; a writable folder inside a hidden one is
   there and writable, alone;
4. ``--die-with-parent``: the sandbox dies with the daemon; and since the commands'
   processes live in their own pid namespace, killing bwrap's process group (the run's
   end) ends every one of them, even those that left their group.

The spawner runs in its own session (``--new-session``), and each command in another: no
terminal to push keystrokes into. What a command's environment becomes inside is
:meth:`Bubblewrap.command_env`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import PurePath
from typing import Mapping, Sequence

import trio

from ..runs._environ import find_program
from ._home import hidden_and_protected
from ._policy import READ_ONLY, SandboxPolicy, within
from ._sandbox import Availability

#: The probe runs bwrap with this much of a real sandbox; it must work within this time.
PROBE_TIMEOUT = 10.0
#: Where commands get an empty, private temporary folder.
PRIVATE_TMP = "/tmp"


class Bubblewrap:
    """Commands under bubblewrap.

    Args:
        program: the ``bwrap`` to run (default: ``ROOST_BWRAP``, else ``bwrap`` on PATH).
    """

    name = "bubblewrap"

    def __init__(self, program: str | None = None) -> None:
        self.program = program if program is not None else os.environ.get("ROOST_BWRAP") or find_program("bwrap") or ""

    async def probe(self) -> Availability:
        """Whether bwrap is there and can build a sandbox here (a namespace-less container,
        or a kernel that forbids user namespaces, cannot)."""
        if not self.program or shutil.which(self.program) is None:
            missing = self.program or "bwrap"
            return Availability(False, self.name, self.program, f"{missing} not found (install the bubblewrap package)")
        argv = self.argv(["true"], "/", SandboxPolicy())
        try:
            with trio.fail_after(PROBE_TIMEOUT):
                done = await trio.run_process(argv, stdin=b"", capture_stdout=True, capture_stderr=True, check=False)
        except (OSError, trio.TooSlowError) as exc:
            return Availability(False, self.name, self.program, f"{self.program} did not run: {exc or 'timed out'}")
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            why = said[-1] if said else f"exit status {done.returncode}"
            return Availability(False, self.name, self.program, f"{self.program} cannot build a sandbox here: {why}")
        return Availability(True, self.name, self.program)

    def argv(self, command: Sequence[str], cwd: str, policy: SandboxPolicy) -> list[str]:
        """``command`` wrapped in bwrap, to run in ``cwd`` under ``policy``."""
        # --cap-drop ALL: a command run as root (containers, CI) keeps no capability, so it
        # can neither unmount what hides the daemon's files nor remount anything writable.
        args = [self.program, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if policy.network:
            args.append("--share-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", PRIVATE_TMP]
        args += mounts(policy, os.path.realpath(cwd))
        return [*args, "--chdir", cwd, "--", *command]

    def command_env(self, env: Mapping[str, str], policy: SandboxPolicy) -> dict[str, str]:
        """The environment a command started inside gets for ``env``."""
        env = dict(env)
        tmpdir = env.get("TMPDIR")
        if tmpdir and not any(within(os.path.realpath(tmpdir), w) for w in policy.writable):
            # The private /tmp is the one temporary folder commands can be sure to write.
            env["TMPDIR"] = PRIVATE_TMP
        return env


def mounts(policy: SandboxPolicy, cwd: str) -> list[str]:
    """bwrap options that mount ``policy``'s folders over the read-only root and the
    private /tmp (see the module's docstring for the order). Paths that do not exist are
    skipped; so are hidden ones that nothing would show anyway, and protected ones outside
    the writable folders (read-only already)."""
    kinds: dict[str, str] = {}
    if policy.hide_home:
        kinds[policy.home] = "home"
    for path in policy.readable:
        kinds[path] = "ro-bind"
    if policy.mode == READ_ONLY:
        # Visible even when it lies under the private /tmp or the hidden home.
        kinds[cwd] = "ro-bind"
    for path in policy.writable:
        kinds[path] = "bind"
    hidden, protected = hidden_and_protected(policy)
    kinds.update(_protected(policy, protected))
    for path in hidden:
        kinds[path] = "hide"
    mounted: list[tuple[str, str]] = [(PRIVATE_TMP, "tmpfs")]
    args: list[str] = []
    read_only: list[str] = []
    for path, kind in sorted(kinds.items(), key=lambda item: len(PurePath(item[0]).parts)):
        if not os.path.lexists(path):
            continue
        if kind == "hide":
            covering = max((m for m in mounted if within(path, m[0])), key=lambda m: len(m[0]), default=None)
            if covering is not None and covering[1] in ("tmpfs", "hide", "home"):
                continue
            if os.path.isdir(path):
                args += ["--tmpfs", path]
                read_only.append(path)
            else:
                args += ["--ro-bind", "/dev/null", path]
        elif kind == "home":
            # An empty home of its own, writable like the private /tmp, gone with the sandbox.
            args += ["--tmpfs", path]
        else:
            args += ["--bind" if kind == "bind" else "--ro-bind", path, path]
        mounted.append((path, kind))
    # Last: a writable folder inside a hidden one needs its mount point made first.
    for path in read_only:
        args += ["--remount-ro", path]
    return args


def _protected(policy: SandboxPolicy, protected: tuple[str, ...]) -> dict[str, str]:
    """The mounts that keep ``protected`` read-only inside ``policy``'s writable
    folders: each bound read-only over itself, after every folder between it and its
    writable folder is bound over itself (a mount point cannot be renamed or removed, so
    no command can move ``.git`` aside and make a new one). A path inside another
    protected one is read-only already."""
    kinds: dict[str, str] = {}
    if policy.mode == READ_ONLY:
        return kinds
    fixed: list[str] = []
    for path in sorted(protected, key=lambda p: len(PurePath(p).parts)):
        root = max((w for w in policy.writable if within(path, w) and path != w), key=len, default=None)
        if root is None or any(within(path, f) for f in fixed) or not os.path.lexists(path):
            continue
        folder = os.path.dirname(path)
        while folder != root and within(folder, root):
            kinds.setdefault(folder, "bind")
            folder = os.path.dirname(folder)
        kinds[path] = "ro-bind"
        fixed.append(path)
    return kinds
