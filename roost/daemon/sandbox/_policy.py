"""What a run's commands may do in the sandbox, decided once per dispatch.

:func:`build_policy` is the one place that merges the user's ``[sandbox]``, the dispatch's
``sandbox``, the agent's ``sandbox:`` and the project's narrowing into a
:class:`SandboxPolicy`; the paths it names are resolved beforehand, with the folder's other
files, by :func:`sandbox_paths`. The user (config, dispatch, their own agents) chooses; a project
(its ``.roost/config.toml``, its agents) may only narrow, trusted or not: what it says that
would widen is left out and named in :attr:`SandboxPolicy.ignored`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from roost.protocol import SANDBOX_MODES

from ._home import home_readable, system_secrets
from ._protected import Walks, protected_paths

#: The sandbox modes: the session folder writable; nothing writable but a private /tmp;
#: no sandbox.
MODES = SANDBOX_MODES
WORKSPACE, READ_ONLY, OFF = MODES
#: How much each mode holds back: a project may only move up this scale.
_STRICTNESS = {OFF: 0, WORKSPACE: 1, READ_ONLY: 2}

#: Sockets that reach past any read-only mount (a socket is not written to, only
#: connected to): the container runtimes and the system bus.
HIDDEN_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock", "/run/dbus/system_bus_socket")


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """What one config file's ``[sandbox]`` table says (None: it says nothing of that)."""

    mode: str | None = None
    #: Folders commands may write besides the session folder (workspace mode).
    writable: tuple[str, ...] | None = None
    network: bool | None = None
    #: Files and folders commands must not see.
    hide: tuple[str, ...] = ()
    #: Agent mode may run bash calls that no rule asks about without asking, while the
    #: sandbox holds them.
    auto_allow: bool | None = None
    #: The file it came from, and the folder its relative paths start from (None: the
    #: session folder).
    source: str = ""
    root: str | None = None
    #: What commands may read of the home folder besides its toolchains (the user's only).
    readable: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What the commands of one run may do. Paths are absolute, symlinks resolved."""

    mode: str = WORKSPACE
    #: Folders commands may write (the session folder first); a private /tmp always is.
    writable: tuple[str, ...] = ()
    #: Files and folders that are not there for commands (hiding wins over writable).
    hidden: tuple[str, ...] = ()
    network: bool = False
    auto_allow: bool = False
    #: What a project asked for that would have widened the sandbox, left out.
    ignored: tuple[str, ...] = ()
    #: The user's home folder (resolved), and whether it is hidden but for :attr:`readable`
    #: (it is not where a writable folder holds it, or where it is ``/``: then its
    #: configuration is protected).
    home: str = ""
    hide_home: bool = False
    #: What commands read of the hidden home folder (read-only).
    readable: tuple[str, ...] = ()
    #: What stays read-only inside the writable folders (see ``_protected``). Beside
    #: these and :attr:`hidden`, the home folder's credentials are hidden and its
    #: configuration protected (see ``_home``).
    protected: tuple[str, ...] = ()

    @property
    def on(self) -> bool:
        """Whether commands are to run in a sandbox at all."""
        return self.mode != OFF

    def narrowed(self, mode: str | None, source: str) -> SandboxPolicy:
        """This policy under ``mode`` (from ``source``) if that holds back more; a wider
        mode is ignored, and named (a sub-agent never gets more than its caller)."""
        if mode is None or mode == self.mode:
            return self
        if _STRICTNESS[mode] < _STRICTNESS[self.mode]:
            return replace(self, ignored=(*self.ignored, f"mode {mode} ({source})"))
        return replace(self, mode=mode, writable=() if mode == READ_ONLY else self.writable)

    def to_map(self) -> dict[str, Any]:
        """The policy as ``run.started`` records it."""
        return {
            "mode": self.mode,
            "writable": list(self.writable),
            "hidden": list(self.hidden),
            "network": self.network,
            "auto_allow": self.auto_allow,
            "ignored": list(self.ignored),
            "home": self.home,
            "hide_home": self.hide_home,
            "readable": list(self.readable),
            "protected": list(self.protected),
        }

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> SandboxPolicy:
        """The policy back from ``run.started``."""
        return cls(
            mode=m.get("mode", OFF),
            writable=tuple(m.get("writable", ())),
            hidden=tuple(m.get("hidden", ())),
            network=bool(m.get("network")),
            auto_allow=bool(m.get("auto_allow")),
            ignored=tuple(m.get("ignored", ())),
            home=m.get("home", ""),
            hide_home=bool(m.get("hide_home")),
            readable=tuple(m.get("readable", ())),
            protected=tuple(m.get("protected", ())),
        )


@dataclass(frozen=True, slots=True)
class SandboxPaths:
    """The paths a folder's sandbox names, resolved (absolute, symlinks followed).

    Resolving them reads the disk, so :func:`sandbox_paths` runs where a folder's files are
    read (a worker thread); :func:`build_policy` then only merges modes.
    """

    #: The session folder first, then the user's writable folders the project keeps.
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    #: The project's writable folders (and readable paths) that the user's config does not
    #: have (not added).
    ignored: tuple[str, ...] = ()
    #: See :attr:`SandboxPolicy.home`.
    home: str = ""
    hide_home: bool = False
    readable: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()


def sandbox_paths(
    cwd: str,
    *,
    user: SandboxConfig = SandboxConfig(),
    project: SandboxConfig | None = None,
    hidden: Iterable[str] = (),
    protect: Iterable[str] = (),
    home: str | None = None,
    walks: Walks | None = None,
) -> SandboxPaths:
    """What the sandbox of a run in ``cwd`` makes writable, hides, shows of the home folder
    and protects, from the user's and the project's ``[sandbox]`` (see :func:`build_policy`);
    ``protect``: more project files to protect (what trust records and trusted entries run).
    Reads the disk (a bounded walk of the writable folders; ``walks``: what earlier walks
    read, of the folders that did not change)."""
    home = home if home is not None else os.path.expanduser("~")
    project = project or SandboxConfig()
    extra = [_resolve(p, user.root or cwd, home) for p in user.writable or ()]
    ignored: list[str] = []
    if project.writable is not None:
        allowed = [_resolve(p, project.root or cwd, home) for p in project.writable]
        ignored = [f"writable {p} ({project.source})" for p in allowed if p not in extra]
        extra = [p for p in extra if p in allowed]
    ignored += [f"readable {p} ({project.source})" for p in project.readable or ()]
    writable = tuple(dict.fromkeys((os.path.realpath(cwd), *extra)))
    hide = [
        *hidden,
        *system_secrets(),
        *HIDDEN_SOCKETS,
        *(_resolve(p, user.root or cwd, home) for p in user.hide),
        *(_resolve(p, project.root or cwd, home) for p in project.hide),
    ]
    real_home = os.path.realpath(home)
    # A home the session folder holds (``~``, ``/home``) stays; its configuration is protected.
    hide_home = real_home != "/" and not any(within(real_home, w) for w in writable)
    readable = home_readable(home, (_resolve(p, user.root or cwd, home) for p in user.readable or ())) if hide_home else []
    # The spawner runs on the daemon's interpreter: under /tmp (a clone there) the private
    # /tmp would hide it.
    interpreter = os.path.realpath(sys.base_prefix)
    if within(interpreter, "/tmp"):
        readable.append(interpreter)
    protected = [*protected_paths(writable, walks=walks), *(os.path.realpath(p) for p in protect)]
    return SandboxPaths(
        writable=writable,
        hidden=tuple(dict.fromkeys(os.path.realpath(p) for p in hide)),
        ignored=tuple(ignored),
        home=real_home,
        hide_home=hide_home,
        readable=tuple(readable),
        protected=tuple(dict.fromkeys(protected)),
    )


def build_policy(
    cwd: str,
    *,
    user: SandboxConfig = SandboxConfig(),
    project: SandboxConfig | None = None,
    dispatch: str | None = None,
    agent: str | None = None,
    agent_source: str | None = None,
    hidden: Iterable[str] = (),
    home: str | None = None,
    paths: SandboxPaths | None = None,
) -> SandboxPolicy:
    """The sandbox of a run in ``cwd``.

    Args:
        user: the user's ``[sandbox]``.
        project: the project's ``[sandbox]``: it may only narrow.
        dispatch: the dispatch's ``sandbox`` (a mode), which beats the agent's and the config's.
        agent: the agent's ``sandbox:`` (a mode).
        agent_source: the project file the agent came from, if it is a project's: its mode
            may then only narrow.
        hidden: what the daemon always hides (its socket, database, logs, config).
        home: the user's home (default: the daemon's ``~``).
        paths: :func:`sandbox_paths` of the same ``cwd``, ``user``, ``project``, ``hidden``
            and ``home``, found beforehand (default: found here, reading the disk).

    Mode order: the dispatch's, else the user's agent's, else the user's config, else
    ``workspace``; then the project's and a project agent's modes, where they are
    stricter (off < workspace < read-only).
    """
    project = project or SandboxConfig()
    if paths is None:
        paths = sandbox_paths(cwd, user=user, project=project, hidden=hidden, home=home)
    ignored: list[str] = []
    mode = dispatch or (agent if agent_source is None else None) or user.mode or WORKSPACE
    for narrower, source in ((project.mode, project.source), (agent if agent_source else None, agent_source)):
        if narrower is None:
            continue
        if _STRICTNESS[narrower] > _STRICTNESS[mode]:
            mode = narrower
        elif _STRICTNESS[narrower] < _STRICTNESS[mode]:
            ignored.append(f"mode {narrower} ({source})")
    network = bool(user.network)
    if project.network is not None:
        if project.network and not network:
            ignored.append(f"network = true ({project.source})")
        network = network and project.network
    auto_allow = bool(user.auto_allow)
    if project.auto_allow is not None:
        if project.auto_allow and not auto_allow:
            ignored.append(f"auto_allow = true ({project.source})")
        auto_allow = auto_allow and project.auto_allow
    return SandboxPolicy(
        mode,
        # Kept in off mode too: a sub-agent may narrow its caller's off to workspace.
        writable=paths.writable if mode != READ_ONLY else (),
        hidden=paths.hidden,
        network=network,
        auto_allow=auto_allow,
        ignored=(*ignored, *paths.ignored),
        home=paths.home,
        hide_home=paths.hide_home,
        readable=paths.readable,
        protected=paths.protected,
    )


def _resolve(path: str, base: str, home: str) -> str:
    """``path`` from a config file as an absolute path: ``~`` is ``home``, relative paths
    start at ``base``, symlinks are followed."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return os.path.realpath(os.path.join(base, path))


def within(path: str, folder: str) -> bool:
    """Whether the absolute, normal ``path`` is ``folder`` or lies inside it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")
