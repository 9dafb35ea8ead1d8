"""The one interface every sandbox backend fills, and the daemon's sandbox built on it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence

from ._explain import explain
from ._policy import SandboxPolicy


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a backend can sandbox commands on this machine, and if not, why."""

    available: bool
    backend: str
    program: str | None = None
    reason: str = ""

    def to_map(self) -> dict[str, Any]:
        """As ``status`` and ``run.started`` report it."""
        return {"available": self.available, "backend": self.backend, "program": self.program, "reason": self.reason}


class Backend(Protocol):
    """What builds a sandbox, on one platform."""

    #: Its name, as ``roost status`` shows it.
    name: str

    async def probe(self) -> Availability:
        """Whether it works here (run once per daemon)."""
        ...

    def argv(self, command: Sequence[str], cwd: str, policy: SandboxPolicy) -> list[str]:
        """The argv that runs ``command`` (a run's spawner) in ``cwd``, held by ``policy``."""
        ...

    def command_env(self, env: Mapping[str, str], policy: SandboxPolicy) -> dict[str, str]:
        """The environment a command started inside gets for ``env``."""
        ...


class Unsupported:
    """The backend of a platform roost cannot sandbox yet: never available."""

    name = "none"

    def __init__(self, platform: str) -> None:
        self.platform = platform

    async def probe(self) -> Availability:
        return Availability(False, self.name, None, f"no sandbox for {self.platform} yet")

    def argv(self, command: Sequence[str], cwd: str, policy: SandboxPolicy) -> list[str]:
        raise SandboxUnavailable(f"no sandbox for {self.platform} yet")

    def command_env(self, env: Mapping[str, str], policy: SandboxPolicy) -> dict[str, str]:
        return dict(env)


class SandboxUnavailable(RuntimeError):
    """A run's commands cannot have their sandbox (the backend does not work here, the
    sandbox could not be built, or it ended): they are not run."""


def default_backend(program: str | None = None) -> Backend:
    """The backend for this platform (``program``: the bwrap to use, on Linux)."""
    if sys.platform.startswith("linux"):
        from ._bwrap import Bubblewrap

        return Bubblewrap(program)
    return Unsupported(sys.platform)


class Sandbox:
    """The daemon's sandbox: a backend, whether it works here (probed once), and what the
    daemon always hides from commands (its socket, database, logs and config)."""

    def __init__(self, backend: Backend, hidden: Iterable[str] = ()) -> None:
        self.backend = backend
        self.hidden = tuple(hidden)
        self.availability = Availability(False, backend.name, None, "not probed yet")

    async def probe(self) -> Availability:
        """Find out whether the backend works here; the answer is kept."""
        self.availability = await self.backend.probe()
        return self.availability

    def holds(self, policy: SandboxPolicy) -> bool:
        """Whether commands of a run with ``policy`` will run sandboxed (rather than not at
        all: see :meth:`confine`)."""
        return policy.on and self.availability.available

    def confine(self, policy: SandboxPolicy) -> Confinement | None:
        """What a run's commands run under (None: unsandboxed, the user's choice of mode
        ``off``). Where the backend does not work, the run's sandbox cannot be built, and
        its commands are not run: never unsandboxed instead."""
        return Confinement(self, policy) if policy.on else None

    def describe(self, policy: SandboxPolicy) -> dict[str, Any]:
        """The run's sandbox as ``run.started`` records it: the policy, and whether the
        sandbox works here (if not, why)."""
        return {**policy.to_map(), **self.availability.to_map()}

    def argv(self, command: Sequence[str], cwd: str, policy: SandboxPolicy) -> list[str]:
        """``command`` under ``policy``.

        Raises:
            SandboxUnavailable: the backend does not work here (the message says why).
        """
        if not self.availability.available:
            raise SandboxUnavailable(self.availability.reason)
        return self.backend.argv(command, cwd, policy)


@dataclass(frozen=True, slots=True)
class Confinement:
    """A run's policy bound to the sandbox that enforces it: what a run's sandbox
    (:class:`RunSandbox`) is built from."""

    sandbox: Sandbox
    policy: SandboxPolicy

    def argv(self, command: Sequence[str], cwd: str) -> list[str]:
        """``command`` (the run's spawner) wrapped to run in the sandbox.

        Raises:
            SandboxUnavailable: the backend does not work here (any more).
        """
        return self.sandbox.argv(command, cwd, self.policy)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment a command started inside gets for ``env``."""
        return self.sandbox.backend.command_env(env, self.policy)

    def explain(self, output: str, status: int, cwd: str) -> str | None:
        """A note for a command that failed in ``cwd``: the sandbox's limits were likely
        met (None: nothing to say)."""
        return explain(output, status, self.policy, cwd)
