"""Claude Code's SessionEnd hooks, when a roost session ends.

roost's sessions outlive the terminals that show them, so a session ends, in the words of
Claude Code's ``reason``, when:

- it is deleted (``roost sessions --prune``): ``other``. The hooks run before it goes, while
  its transcript is still there to read; the prune waits for them.
- a shell leaves it, saying why in its ``detach``: ``/clear`` or ``/new`` (``clear``),
  ``/switch`` to another session (``resume``), the shell exits (``prompt_input_exit``).
  Only while no run of the session is in flight: a run that goes on in the daemon keeps
  the session going. The client does not wait for them.

Never for a session that has had no run. The hooks are those of the session's folder as it
is read now: a project's only while its files are trusted, each in a sandbox of its own
under the folder's sandbox policy (as an ``async`` hook's: no run's sandbox is left); the
user's own as the user configured them. They cannot block anything. All of them run at
once, as Claude Code runs an event's hooks, within the budget Claude Code gives them:
``CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS`` of the daemon's environment (default 1500 ms)
caps each one's timeout, so a prune waits at most that long for them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Iterable

import trio

from ..folder._config import ConfigError
from ..storage._store import SessionRow, StoreError
from ..tools import ProcessLedger
from ._hook_events import event_hooks
from ._hooks import HookEnv, run_detached
from ._plan import Planner
from ._sessions import SessionNotFound, SessionTable
from ._settings import SettingsError, find_agent, sandbox_policy
from ._transcript import Transcripts

log = logging.getLogger(__name__)

#: Why a session ends, as Claude Code names it (what a SessionEnd matcher matches).
REASONS = ("clear", "resume", "logout", "prompt_input_exit", "other")
#: Claude Code's budget for a session's SessionEnd hooks, in ms, unless its variable says.
BUDGET_MS = 1500.0


class SessionEnds:
    """Runs the SessionEnd hooks of the sessions that end (see the module's docstring)."""

    def __init__(
        self, planner: Planner, transcripts: Transcripts, ledger: ProcessLedger | None, nursery: trio.Nursery
    ) -> None:
        self._planner = planner
        self._transcripts = transcripts
        self._ledger = ledger
        #: Where the hooks of a session a client left run: the daemon's.
        self._nursery = nursery

    async def pruned(self, rows: Iterable[SessionRow]) -> None:
        """The sessions ``rows`` lists are about to be deleted: their hooks, reason ``other``;
        those that had a run."""
        async with trio.open_nursery() as nursery:
            for row in rows:
                if row.last_status is not None:
                    nursery.start_soon(self._end, row.id, row.cwd, "other")

    def left(self, sessions: SessionTable, session_id: str, reason: str) -> None:
        """A client left the session ``session_id`` saying why (one of :data:`REASONS`): its
        hooks, off the client's way, if it has had a run and none is in flight."""

        async def end() -> None:
            try:
                session = await sessions.get(session_id)
            except (SessionNotFound, StoreError):
                return
            state = session.state
            if state.last_run is None or state.run is not None:
                log.info("session %s left (%s): it does not end (%s)", session_id, reason,
                         "no run yet" if state.last_run is None else "a run goes on")
                return
            await self._end(session_id, state.cwd, reason)

        self._nursery.start_soon(end)

    async def _end(self, session: str, cwd: str, reason: str) -> None:
        try:
            setup = await self._planner.load_folder(cwd, os.environ, run=True)
            policy = sandbox_policy(setup, find_agent(setup, None))
        except (ConfigError, SettingsError, OSError) as exc:
            log.warning("session %s: no SessionEnd hooks: its folder cannot be read: %s", session, exc)
            return
        hooks = event_hooks(setup.hooks, "session_end", reason)
        if not hooks:
            return
        budget = _budget()
        transcript = await self._transcripts.sync(session)
        environ = setup.tool_environment(os.environ)
        where = HookEnv(session, cwd, setup.root, env=environ, ledger=self._ledger, transcript=transcript)
        payload = where.claude_payload("SessionEnd", reason=reason)
        confinement = self._planner.sandbox.confine(policy)
        async with trio.open_nursery() as nursery:
            for hook in hooks:
                bounded = replace(hook, timeout=min(hook.timeout, budget), background=False)
                nursery.start_soon(run_detached, bounded, payload, where, confinement)


def _budget() -> float:
    """Seconds each SessionEnd hook may run (Claude Code's variable, in ms)."""
    try:
        ms = float(os.environ.get("CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS", BUDGET_MS))
    except ValueError:
        ms = BUDGET_MS
    return max(ms, 1.0) / 1000
