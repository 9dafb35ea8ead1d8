"""Which sessions exist, the next seq of each, and where forks branch off: the store's
memory of its numbering, read from the database once when it opens, kept in the trio thread.

Every stored event gets the next per-session ``seq`` the moment it is appended, in call
order, before it joins the writer's queue. Numbers are taken only once every row is packed,
and given back if the commit fails: a failed append never leaves a gap in a session's seqs.

Forks share what they do not change. A fork's row names its parent and ``forked_at``, the
last seq of the parent's history it starts from; only the fork's own events (numbered from
``forked_at + 1``) are stored under its id. Reading a fork's events reads its ancestors'
up to those seqs, then its own (:meth:`Numbering.segments` says where), each with the
fork's id in ``session``: the same history, seqs and fold as if it had been copied. A fork
of a fork chains. A session with forks cannot be deleted (the foreign key restricts it).
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

from roost.loop import Event

#: A seq above any a session will have (an open upper bound in queries).
_NO_END = 1 << 62

#: Numbers taken by an append, to give back if it is not stored: session -> (the seq it
#: had next before, the seq it has next after).
Taken = dict[str, tuple[int, int]]


class Numbering:
    """Each session's next seq and each fork's link to its parent."""

    def __init__(self, next_seq: dict[str, int], forks: dict[str, tuple[str, int]]) -> None:
        self._next_seq = next_seq
        #: Forks: session -> (parent, forked_at).
        self._forks = forks

    @classmethod
    def read(cls, db: sqlite3.Connection) -> Numbering:
        """The numbering of the sessions stored in ``db``."""
        next_seq: dict[str, int] = {}
        forks: dict[str, tuple[str, int]] = {}
        for session, parent, forked_at in db.execute(
            "SELECT id, parent, forked_at FROM sessions WHERE parent IS NOT NULL"
        ):
            forks[session] = (parent, forked_at)
            next_seq[session] = forked_at + 1
        for session, last in db.execute("SELECT session, max(seq) FROM events GROUP BY session"):
            next_seq[session] = last + 1
        return cls(next_seq, forks)

    def last_seq(self, session: str) -> int:
        """The highest seq stored (or queued) for ``session``; 0 if none."""
        return self._next_seq.get(session, 1) - 1

    def count(self) -> int:
        """How many sessions exist."""
        return len(self._next_seq)

    def has(self, session: str) -> bool:
        """Whether the session exists."""
        return session in self._next_seq

    def parent(self, session: str) -> tuple[str, int] | None:
        """The session ``session`` was forked from and the seq it was forked at (None: not
        a fork)."""
        return self._forks.get(session)

    def segments(self, session: str) -> list[tuple[str, int, int]]:
        """Where ``session``'s history is stored: (session, after, upto) ranges of seqs,
        oldest first, from its first ancestor down to itself."""
        out = []
        upto = _NO_END
        node = session
        while True:
            link = self._forks.get(node)
            after = link[1] if link is not None else 0
            if upto > after:
                out.append((node, after, upto))
            if link is None:
                return out[::-1]
            upto = min(upto, after)
            node = link[0]

    def add(self, session: str, first: Sequence[Event], parent: str | None, forked_at: int) -> list[Event]:
        """Take the new ``session`` (with ``parent``: a fork of it at ``forked_at``) and the
        numbers of its ``first`` events; return them numbered. :meth:`forget` gives all back.

        Raises:
            ValueError: the session exists, the parent has no such seq, or an event is live;
                nothing was taken.
        """
        if session in self._next_seq:
            raise ValueError(f"session {session} exists")
        if parent is not None and not 0 < forked_at <= self.last_seq(parent):
            raise ValueError(f"session {parent} has no seq {forked_at} to fork at")
        start = forked_at if parent is not None else 0
        self._next_seq[session] = start + 1
        if parent is not None:
            self._forks[session] = (parent, forked_at)
        try:
            numbered = self.number(first)
        except BaseException:
            self.forget(session)
            raise
        self._next_seq[session] = start + len(numbered) + 1
        return numbered

    def forget(self, session: str) -> None:
        """Drop ``session`` (it was deleted, or never stored)."""
        self._next_seq.pop(session, None)
        self._forks.pop(session, None)

    def number(self, events: Sequence[Event]) -> list[Event]:
        """``events`` numbered after what each session has; no number is taken yet.

        Raises:
            ValueError: an event is live (live events are never stored).
        """
        numbered = []
        next_seq: dict[str, int] = {}
        for event in events:
            if event.live:
                raise ValueError(f"live event {event.type} cannot be stored")
            seq = next_seq.get(event.session) or self._next_seq.get(event.session, 1)
            next_seq[event.session] = seq + 1
            numbered.append(event.numbered(seq))
        return numbered

    def take(self, numbered: Sequence[Event]) -> Taken:
        """Take the numbers of ``numbered`` (from :meth:`number`): the next append numbers
        after them."""
        last = {e.session: e.seq + 1 for e in numbered if e.seq is not None}
        taken = {session: (self._next_seq.get(session, 1), after) for session, after in last.items()}
        self._next_seq.update(last)
        return taken

    def give_back(self, taken: Taken) -> None:
        """Give back numbers :meth:`take` took, for each session that took none since."""
        for session, (before, after) in taken.items():
            if self._next_seq.get(session) == after:
                self._next_seq[session] = before
