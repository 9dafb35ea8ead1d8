"""The sandbox: where the commands the model runs are held, whatever a rule let through.

Permission rules judge a command's text; the sandbox holds what it does. A run's bash
calls, its exec-mode check and its project's hooks run inside it: in ``workspace`` mode
(the default) the session folder and a private ``/tmp`` are writable, the rest of the
filesystem is read-only, credentials (``~/.ssh``, ``~/.aws``, ``~/.gnupg``, ...), the
user's runtime folder (agent and bus sockets) and the daemon's own files (socket,
database, trust, logs, ``~/.config/roost``) are not there, and there is no network.
``read-only`` leaves only the private ``/tmp`` writable; ``off`` runs commands as they are.

Pieces:

- :class:`SandboxPolicy` (``_policy``): what one run's commands may do, built in one place,
  :func:`build_policy`, from the user's ``[sandbox]``, the dispatch, the agent and the
  project's narrowing (a project may only narrow, trusted or not).
- :class:`Backend` (``_sandbox``): the one interface a platform fills: ``probe()`` (does it
  work here?), ``argv(command, cwd, policy)`` (a program, wrapped: what starts a run's
  spawner) and ``command_env(env, policy)`` (a command's environment inside).
  :class:`Bubblewrap` (``_bwrap``) is the Linux one.
- :class:`Sandbox`: the daemon's backend, probed once at start, and the paths the daemon
  always hides. ``status`` and every ``run.started`` say whether it works and why not;
  where it does not, a run's commands do not run: the run ends ``error`` at the first,
  naming the reason and the way out (``--sandbox off``, the user's explicit choice).
- :class:`Confinement`: a run's policy bound to the sandbox.
- :class:`RunSandbox` (``_run``): one run's sandbox, built at its first command with a
  small spawner inside (``_spawner``, stdlib only, run by the daemon's interpreter), which
  starts each of the run's commands (:class:`SandboxedProcess`) in its own process group;
  ended with the run. Runs never share one; a sub-agent shares its caller's unless its
  policy is narrower. Tools get it in their ``ToolContext``, and :func:`explain` turns a
  failure the sandbox caused into a note.

A trusted project's hooks run in the run's sandbox too (they are the project's programs).
The user's own hooks and MCP servers are not sandboxed: they are programs the user
configured, not commands the model or a project wrote.

A macOS backend (``sandbox-exec``, Seatbelt; Codex's anchor) fills the same interface:

- ``probe()``: ``/usr/bin/sandbox-exec -p '(version 1)(allow default)' /usr/bin/true``
  exits 0 (the tool is deprecated but present and used by Chrome, Codex and Claude Code).
- ``argv()``: ``sandbox-exec -p PROFILE -D WRITABLE_0=... -D HIDDEN_0=... -- SPAWNER``
  (the same spawner: it needs only a Python and ``posix_spawn``; ``prctl`` is Linux's, so
  keep its process unreachable another way; it ends what commands leave outside their
  group only as pid 2 of a pid namespace, so that would be left to the run's end)
  with an SBPL profile generated from the policy: ``(deny default)``, then
  ``(allow process-exec process-fork signal (target same-sandbox))``,
  ``(allow file-read*)`` minus ``(deny file-read* (subpath (param "HIDDEN_n")))`` for each
  hidden path (``literal`` for files), ``(allow file-write* (subpath (param
  "WRITABLE_n")))`` plus a per-run temp folder (there is no private ``/tmp``: make one
  and point ``TMPDIR`` at it), ``/dev/null`` and ``/dev/tty`` writes, ``sysctl-read``,
  ``mach-lookup`` of the few services a shell needs, and ``(allow network*)`` only when
  the network is on (``(allow network* (remote unix-socket))`` would let sockets through:
  keep unix sockets denied, the daemon's included). Paths are passed as ``-D`` parameters,
  never pasted into the profile text, and must be resolved (``/tmp`` is ``/private/tmp``).
- There is no pid namespace: processes that leave the process group survive a kill;
  track them by the sandbox (``signal (target same-sandbox)``) or accept it.
- Failures read ``Operation not permitted`` (EPERM), not ``Read-only file system``:
  :func:`explain` needs that pattern for paths outside the writable set.
- Tests: the same behaviours as ``tests/daemon/test_sandbox.py``, on a macOS runner.
"""

from ._bwrap import Bubblewrap
from ._explain import explain
from ._policy import MODES, OFF, READ_ONLY, WORKSPACE, SandboxConfig, SandboxPaths, SandboxPolicy, build_policy, sandbox_paths
from ._protected import Walks
from ._run import RunSandbox, SandboxedProcess
from ._sandbox import Availability, Backend, Confinement, Sandbox, SandboxUnavailable, Unsupported, default_backend

__all__ = [
    "Availability",
    "Backend",
    "Bubblewrap",
    "Confinement",
    "MODES",
    "OFF",
    "READ_ONLY",
    "RunSandbox",
    "Sandbox",
    "SandboxConfig",
    "SandboxPaths",
    "SandboxPolicy",
    "SandboxUnavailable",
    "SandboxedProcess",
    "Unsupported",
    "WORKSPACE",
    "Walks",
    "build_policy",
    "default_backend",
    "explain",
    "sandbox_paths",
]
