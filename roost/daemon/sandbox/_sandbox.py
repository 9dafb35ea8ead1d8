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
    """What runs a command inside a sandbox, on one platform."""

    #: Its name, as ``roost status`` shows it.
    name: str
    #: How the sandboxing program starts the messages it writes itself (it could not build
    #: the sandbox), so that they are not taken for the command's.
    error_prefix: str

    async def probe(self) -> Availability:
        """Whether it works here (run once per daemon)."""
        ...

    def argv(self, command: Sequence[str], cwd: str, env: Mapping[str, str], policy: SandboxPolicy) -> list[str]:
        """The argv that runs ``command`` in ``cwd`` with ``env``, held by ``policy``."""
        ...


class Unsupported:
    """The backend of a platform roost cannot sandbox yet: never available."""

    name = "none"
    error_prefix = ""

    def __init__(self, platform: str) -> None:
        self.platform = platform

    async def probe(self) -> Availability:
        return Availability(False, self.name, None, f"no sandbox for {self.platform} yet")

    def argv(self, command: Sequence[str], cwd: str, env: Mapping[str, str], policy: SandboxPolicy) -> list[str]:
        raise SandboxUnavailable(f"no sandbox for {self.platform} yet")


class SandboxUnavailable(RuntimeError):
    """A run that started sandboxed cannot have its sandbox any more (the daemon restarted
    where the backend does not work): its commands are not run."""


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
        """Whether commands of a run with ``policy`` will run sandboxed."""
        return policy.on and self.availability.available

    def confine(self, policy: SandboxPolicy, *, promised: bool | None = None) -> Confinement | None:
        """What a run's commands run under (None: unsandboxed, as ``describe`` told).

        ``promised`` is what the run was told when it started (a run resumed after a
        restart): a run told it is sandboxed stays so, and its commands fail rather than
        run unsandboxed when the backend no longer works.
        """
        if promised is None:
            promised = self.holds(policy)
        return Confinement(self, policy) if promised and policy.on else None

    def describe(self, policy: SandboxPolicy) -> dict[str, Any]:
        """The run's sandbox as ``run.started`` records it: the policy, and whether the
        sandbox works here (if not, why)."""
        return {**policy.to_map(), **self.availability.to_map()}

    def argv(self, command: Sequence[str], cwd: str, env: Mapping[str, str], policy: SandboxPolicy) -> list[str]:
        """``command`` under ``policy``.

        Raises:
            SandboxUnavailable: the backend does not work here.
        """
        if not self.availability.available:
            raise SandboxUnavailable(f"the sandbox is not available: {self.availability.reason}")
        return self.backend.argv(command, cwd, env, policy)


@dataclass(frozen=True, slots=True)
class Confinement:
    """A run's policy bound to the sandbox that enforces it: what a tool's command runs in."""

    sandbox: Sandbox
    policy: SandboxPolicy

    def argv(self, command: Sequence[str], cwd: str, env: Mapping[str, str]) -> list[str]:
        """``command`` wrapped to run in the sandbox.

        Raises:
            SandboxUnavailable: the backend does not work here (any more).
        """
        return self.sandbox.argv(command, cwd, env, self.policy)

    def explain(self, output: str, status: int, cwd: str) -> str | None:
        """A note for a command that failed in ``cwd``: the sandbox could not be built, or
        its limits were likely met (None: nothing to say)."""
        prefix = self.sandbox.backend.error_prefix
        if status != 0 and prefix and output.startswith(prefix):
            return f"[the sandbox ({self.policy.mode}) could not be built for this command: {output.splitlines()[0]}]"
        return explain(output, status, self.policy, cwd)
