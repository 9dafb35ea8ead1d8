"""Sessions in memory: their folded state, their run lock, and the scope of the run in flight.

A session is loaded by folding its log; a long one from its latest snapshot (an idle state
as plain data, see :func:`roost.loop.snapshot`) and the events after it. A snapshot is
written, in the background, once a session is idle with :data:`SNAPSHOT_AFTER` events
folded beyond its last one: when a run ends, and when such a session is loaded.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence

import trio

import roost
from roost.loop import (
    SNAPSHOT_FORMAT,
    SNAPSHOTS_WORK,
    Abort,
    CreateSession,
    Event,
    SessionState,
    fold,
    fork_point,
    restore,
    snapshot,
    step,
)

from ..storage._store import EventStore, SessionRow, StoreError
from ..tools import Shell
from ._live import LiveRun
from ._plan import RunPlan

log = logging.getLogger(__name__)

#: Seconds between tries to store the end of a run that ended in memory only (a full disk).
SETTLE_RETRY = 5.0
#: Events folded beyond a session's snapshot (about 7 ms of folding here) before a new one
#: is written.
SNAPSHOT_AFTER = 200
#: The snapshots this daemon reads and writes: those of its own version and the loop's
#: format (another version's are ignored, and replaced once folded past).
SNAPSHOT_KEY = f"{roost.__version__} {SNAPSHOT_FORMAT}"


@dataclass(eq=False)
class Track:
    """One loop of a session: the session's own (``path`` empty) or a sub-agent's.

    A sub-agent's events are the session's (same store, same seq numbers, same
    subscribers), marked with ``path``, the chain of tool call ids that led to it; the
    session's own state only counts them.
    """

    state: SessionState
    path: tuple[str, ...] = ()
    #: What its run in flight was prepared with (a sub-agent's: also once it ended, for its
    #: caller's report; the session's own drops it then: it is a lot to keep per idle session).
    plan: RunPlan | None = None
    #: Its run in flight (None: none, or it is winding down).
    live: LiveRun | None = None
    #: The data of its run.finished, once its run has ended.
    finished: Mapping[str, Any] | None = None

    @property
    def agent(self) -> str:
        """The name of the agent its run is (or was) of."""
        return self.plan.settings.agent if self.plan is not None else "default"

    def streamed(self) -> str:
        """What the model call in flight has streamed so far."""
        return "".join(self.live.streamed) if self.live is not None else ""


@dataclass(eq=False)
class Session:
    """One session the daemon has loaded.

    ``lock`` serialises steps: every input is stepped, stored and published under it, so
    the state always equals the fold of the stored log.
    """

    #: The session's own loop.
    track: Track
    lock: trio.Lock = field(default_factory=trio.Lock)
    #: Sub-agents running in this session, by path; and the bound on how many at once.
    subruns: dict[tuple[str, ...], Track] = field(default_factory=dict)
    subagent_limiter: trio.CapacityLimiter = field(default_factory=lambda: trio.CapacityLimiter(4))
    #: A run is being set up (see :meth:`claim`).
    claimed: bool = False
    #: The seq of the session's latest snapshot (0: none).
    snapshot_seq: int = 0
    #: What ``async`` hooks said for the model after the session's run ended, for its next
    #: task (kept while the session is loaded).
    later: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.track.state.id

    @property
    def state(self) -> SessionState:
        """The session's own state: the fold of its log."""
        return self.track.state

    @state.setter
    def state(self, state: SessionState) -> None:
        self.track.state = state

    def tracks(self) -> tuple[Track, ...]:
        """The session's own track and its sub-agents'."""
        return (self.track, *self.subruns.values())

    def asking(self, call_id: str) -> Track:
        """The track whose run waits for a person's answer to ``call_id`` (the session's
        own when none does: the loop then refuses the answer)."""
        for track in self.subruns.values():
            if track.state.run is not None and call_id in track.state.run.waiting:
                return track
        return self.track

    def pending(self) -> list[dict[str, Any]]:
        """The open requests of the session's run and of its sub-agents."""
        out = []
        for track in self.tracks():
            run = track.state.run
            if run is None:
                continue
            for call_id, wait in run.waiting.items():
                out.append({"session": self.id, "run": run.id, "call_id": call_id, "path": list(track.path), **wait.to_map()})
        return out

    def waits_for_a_person(self) -> bool:
        """Whether the run in flight, or one of its sub-agents, waits for a person."""
        run = self.state.run
        if run is None:
            return False
        return any(track.state.run is not None and track.state.run.waiting for track in self.tracks())

    @contextmanager
    def claim(self) -> Iterator[None]:
        """The session's run lock: hold it from the check that no run is in flight to the
        moment the new run has started (its ``run.started`` stored).

        The check and the claim happen together, with no await between them, so of many
        dispatches at the same moment exactly one gets the session.

        Raises:
            SessionBusy: a run is in flight, or another is being set up.
        """
        if self.claimed or self.state.run is not None:
            raise SessionBusy(self.id)
        self.claimed = True
        try:
            yield
        finally:
            self.claimed = False


class SessionBusy(Exception):
    """The session has a run in flight, or one is being started."""


class Held:
    """``async with Held(lock)``: a trio lock or capacity limiter held for the block. A
    free one is taken at once, without the scheduler pass of trio's own ``async with``: a
    step takes the session's lock twice and its tool limiter once, and under load every
    pass is a wait behind every other run's work."""

    __slots__ = ("_lock",)

    def __init__(self, lock: trio.Lock | trio.CapacityLimiter) -> None:
        self._lock = lock

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()  # as trio's: a cancelled task stops here
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


#: What a session id taken from a file may look like (else it gets a new one).
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SessionNotFound(KeyError):
    """No session with that id."""


#: Ends, in the store, a run that could only be ended in memory: (session, why).
Settle = Callable[[Session, str], Awaitable[Any]]
#: What follows the deletion of sessions from the store (given their rows as listed).
Deleted = Callable[[list[SessionRow]], Awaitable[None]]


class SessionTable:
    """Sessions by id, loaded from the store on first use.

    A session whose run could only be ended in memory (nothing could be stored: see
    :meth:`forget`) is dropped, so that what is in memory always is the fold of the log;
    the next time it is loaded, ``settle`` stores the end of that run first.
    """

    def __init__(
        self,
        store: EventStore,
        settle: Settle | None = None,
        nursery: trio.Nursery | None = None,
        publish: Callable[[dict[str, Any]], None] = lambda event: None,
        deleted: Deleted | None = None,
        ending: Deleted | None = None,
        created: Callable[[str], None] = lambda session: None,
    ) -> None:
        self._store = store
        #: Told of each session :meth:`create` made (whose transcript has nothing to catch up).
        self._created = created
        #: Told of the sessions :meth:`prune` deleted (their transcripts go with them), and
        #: before, of those it is about to delete (their SessionEnd hooks).
        self._deleted = deleted
        self._ending = ending
        #: Where a new session's first events go once stored (the fan-out).
        self._publish = publish
        self._sessions: dict[str, Session] = {}
        self._loading = trio.Lock()
        self._settle = settle
        #: Where snapshots are written in the background (None: never).
        self._nursery = nursery
        #: Sessions being deleted (see :meth:`take`).
        self._taken: set[str] = set()
        #: Sessions forgotten with a run their log still has open: id -> why it ended.
        self.unsettled: dict[str, str] = {}
        #: The sessions in memory whose own run is in flight (see :meth:`noted`).
        self._running: set[Session] = set()
        #: The background commands running, in every run (each run's Shells keeps it).
        self.background: set[Shell] = set()

    def loaded(self) -> list[Session]:
        """The sessions in memory."""
        return list(self._sessions.values())

    def noted(self, session: Session) -> None:
        """``session``'s own state has changed (its run may have started or ended)."""
        if session.track.state.run is None or self._sessions.get(session.id) is not session:
            self._running.discard(session)
        else:
            self._running.add(session)

    def runs_in_flight(self) -> int:
        """Sessions with a run in flight: counted as runs start and end, not looked for
        (``status``, asked every few milliseconds by some clients, would look through
        thousands of sessions)."""
        return len(self._running)

    def known(self, session_id: str) -> bool:
        """Whether :meth:`get` would find the session (else it raises SessionNotFound),
        known without waiting."""
        return session_id in self._sessions or (self._store.has_session(session_id) and session_id not in self._taken)

    def stored_only(self, session_id: str) -> bool:
        """Whether the session exists and is not in memory, with nothing to settle: no run
        of it is in flight (a session with one is always loaded), so its log can be read
        as it is, without folding it."""
        return (
            session_id not in self._sessions
            and session_id not in self.unsettled
            and session_id not in self._taken
            and self._store.has_session(session_id)
        )

    def busy(self, session_id: str) -> bool:
        """Whether a run of the session is in flight or being set up (in memory: the
        caller also asks the log), or its run's end is still to be stored."""
        session = self._sessions.get(session_id)
        in_flight = session is not None and (session.claimed or session.state.run is not None)
        return in_flight or session_id in self.unsettled or session_id in self._taken

    def take(self, session_ids: Iterable[str]) -> list[str]:
        """Take those of ``session_ids`` that are not :meth:`busy` out of use, to delete
        them: :meth:`get` refuses them (SessionNotFound), and a dispatch that holds one
        already is refused as busy. :meth:`give_back` ends that (a deleted session is then
        not found anyway). Returns the ids taken."""
        taken = []
        for session_id in session_ids:
            if self.busy(session_id):
                continue
            session = self._sessions.pop(session_id, None)
            if session is not None:
                session.claimed = True  # for good: this object is out of the table
            self._taken.add(session_id)
            taken.append(session_id)
        return taken

    def give_back(self, session_ids: Iterable[str]) -> None:
        """End :meth:`take` for ``session_ids``."""
        self._taken.difference_update(session_ids)

    async def get(self, session_id: str) -> Session:
        """The session, folded from its stored events the first time.

        Raises:
            SessionNotFound: no such session.
            StoreError: it cannot be read, or its forgotten run cannot be ended yet.
        """
        session = self._sessions.get(session_id)
        if session is not None:
            return session
        if not self._store.has_session(session_id) or session_id in self._taken:
            raise SessionNotFound(session_id)
        async with self._loading:
            session = self._sessions.get(session_id)
            if session is None:
                if SNAPSHOTS_WORK:
                    snap, events = await self._store.history(session_id, SNAPSHOT_KEY)
                else:
                    snap, events = None, await self._store.events(session_id)
                if session_id in self._taken:
                    raise SessionNotFound(session_id)  # taken to be deleted meanwhile
                start = restore(snap) if snap is not None else SessionState(session_id)
                state = fold(events, start)
                session = self._sessions[session_id] = Session(Track(state), snapshot_seq=start.last_seq)
                self.noted(session)
                self.keep_snapshot(session)
                why = self.unsettled.get(session_id)
                if why is not None and self._settle is not None and state.run is not None:
                    # Forgotten again (and raising) if it still cannot be stored.
                    await self._settle(session, why)
                self.unsettled.pop(session_id, None)
        return session

    async def settle_later(self, session_id: str) -> None:
        """Try now and then to load a session forgotten with its run's end unstored (which
        settles it), until that works (or the daemon stops)."""
        while session_id in self.unsettled:
            await trio.sleep(SETTLE_RETRY)
            try:
                await self.get(session_id)
            except StoreError:
                continue

    def keep_snapshot(self, session: Session) -> None:
        """Write a snapshot of ``session`` in the background if it is idle and
        :data:`SNAPSHOT_AFTER` events were folded beyond its last one."""
        state = session.state
        if (
            self._nursery is None
            or not SNAPSHOTS_WORK
            or state.run is not None
            or state.last_seq - session.snapshot_seq < SNAPSHOT_AFTER
            or self._sessions.get(session.id) is not session
        ):
            return
        previous, session.snapshot_seq = session.snapshot_seq, state.last_seq
        self._nursery.start_soon(self._save_snapshot, session, state, previous)

    async def _save_snapshot(self, session: Session, state: SessionState, previous: int) -> None:
        try:
            # Made on the writer's thread: a long history takes a while to copy and hash.
            await self._store.save_snapshot(session.id, state.last_seq, SNAPSHOT_KEY, lambda: snapshot(state))
        except StoreError as exc:
            # Only a cost: the next load folds more of the log.
            log.warning("session %s: no snapshot kept: %s", session.id, exc)
            if session.snapshot_seq == state.last_seq:
                session.snapshot_seq = previous

    def forget(self, session: Session, why: str) -> None:
        """Drop ``session``, whose run in flight is over in memory only, its end unstored.

        Its run nursery is cancelled (and its sub-agents' with it), and its state and its
        sub-agents' lose their run, so that results still arriving are dropped; the next
        :meth:`get` loads it from the store again and settles it.
        """
        if session.track.live is not None:
            session.track.live.nursery.cancel_scope.cancel()
        for track in session.tracks():
            track.state = replace(track.state, run=None)
        self._sessions.pop(session.id, None)
        self.noted(session)
        self.unsettled[session.id] = why

    async def prune(
        self, idle_since: float, *, dry_run: bool = False, only: Iterable[str] | None = None
    ) -> tuple[list[SessionRow], list[tuple[SessionRow, str]]]:
        """Delete the sessions (of ``only``, if given) with no activity since
        ``idle_since``, never one with a run in flight, nor one with a fork that stays;
        return those deleted (with ``dry_run``: those that would be) and those kept, each
        with why. Forks go before their parents. What they referred to stays stored until
        :meth:`EventStore.collect_garbage`.
        """
        wanted = None if only is None else set(only)
        every = await self._store.sessions()
        old = [r for r in every if r.last_active < idle_since and (wanted is None or r.id in wanted)]
        # A run open in the log is in flight too (its session is loaded, or settling).
        open_ = set(await self._store.open_runs())
        kept = [(r, "a run is in flight") for r in old if r.id in open_ or self.busy(r.id)]
        going = {r.id for r in old} - {r.id for r, _ in kept}
        forks: dict[str, list[str]] = {}
        for row in every:
            if row.parent is not None:
                forks.setdefault(row.parent, []).append(row.id)
        # A parent goes only with all its forks (the store keeps a fork's history there).
        while stay := {s for s in going if any(f not in going for f in forks.get(s, ()))}:
            going -= stay
            kept += [(r, "it has forks that stay") for r in old if r.id in stay]
        depth = {r.id: _depth(r.id, {x.id: x.parent for x in every}) for r in old}
        old = sorted((r for r in old if r.id in going), key=lambda r: -depth[r.id])
        if dry_run or not old:
            return old, kept
        taken = self.take(r.id for r in old)
        try:
            if self._ending is not None:
                await self._ending([r for r in old if r.id in taken])
            gone = set(await self._store.delete_sessions(taken, idle_since))
        finally:
            self.give_back(taken)
        for row in old:
            if row.id in gone:
                log.info("session %s deleted (no activity since %s)", row.id, time.ctime(row.last_active))
        deleted = [r for r in old if r.id in gone]
        if self._deleted is not None and deleted:
            await self._deleted(deleted)
        return deleted, kept

    async def create(self, cwd: str) -> Session:
        """A new session in ``cwd``; its first events are stored and published.

        Raises:
            StoreError: it could not be stored; there is no such session.
        """
        session_id = secrets.token_hex(6)
        now = time.time()
        transition = step(SessionState(session_id), CreateSession(session_id, cwd, now))
        stored = await self._store.create_session(session_id, cwd, now, transition.events)
        session = Session(Track(fold(stored, SessionState(session_id))))
        self._sessions[session_id] = session
        self._created(session_id)
        for event in stored:
            self._publish(event.to_map())
        return session

    async def fork(self, parent: Session, at: int) -> Session:
        """A new session whose history is ``parent``'s up to the last whole point at or
        before seq ``at`` (:func:`roost.loop.fork_point`: never between a tool call and
        its result), shared in the store rather than copied; its own first events are stored
        and published: when the point is inside a run, that run ends there, ``aborted``, in
        the fork (the parent's goes on). The fork's ``forked_at`` is ``last_seq`` minus those.

        Raises:
            StoreError: it could not be stored; there is no such session.
        """
        session_id = secrets.token_hex(6)
        now = time.time()
        history = await self._store.events(parent.id, 0, limit=at)
        seq, state = fork_point(history, at, SessionState(session_id))
        first: tuple[Event, ...] = ()
        if state.run is not None:
            why = f"the session was forked from {parent.id} at seq {seq}, inside this run"
            first = step(state, Abort(now, why)).events
        stored = await self._store.create_session(
            session_id, state.cwd, now, first, parent=parent.id, forked_at=seq
        )
        session = Session(Track(fold(stored, state)))
        self._sessions[session_id] = session
        for event in stored:
            self._publish(event.to_map())
        return session

    async def import_session(
        self, id: str, cwd: str, created: float, events: Sequence[Event], state: SessionState
    ) -> str:
        """Store a session read from a file (its ``events``, folded into ``state``) as one
        new session, all at once; return its id: ``id`` unless that is taken (or not a
        plain token), else a new one. A run the file left in flight ends there,
        ``aborted``, so the session is idle.

        Raises:
            StoreError: it could not be stored; there is no such session.
        """
        session_id = id if _TOKEN.fullmatch(id) and not self._store.has_session(id) else secrets.token_hex(6)
        state = replace(state, id=session_id)
        first = [replace(event, session=session_id) for event in events]
        if state.run is not None:
            first += step(state, Abort(time.time(), "the session was exported while this run was in flight")).events
        await self._store.create_session(session_id, cwd, created, first)
        return session_id


def _depth(session: str, parents: Mapping[str, str | None]) -> int:
    """How many forks deep ``session`` is (0: not a fork)."""
    depth = 0
    while (session := parents.get(session) or "") and depth < len(parents):
        depth += 1
    return depth
