"""Snapshots: an idle state as plain data; the events after it folded onto it give the state
the whole log gives."""

from __future__ import annotations

from dataclasses import fields

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.loop import SNAPSHOTS_WORK, Event, NotSnapshottable, SessionState, fold, restore, snapshot, step

from ._driver import SESSION, legal_input
from .test_fold import a_busy_session


def _through_msgpack(value):
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False, strict_map_key=False)


def test_every_field_of_the_session_state_is_coded() -> None:
    # A new SessionState field must be coded in roost/loop/_snapshot.py, or snapshots are off.
    assert SNAPSHOTS_WORK, [f.name for f in fields(SessionState)]


def test_a_state_with_a_run_in_flight_is_not_snapshotted() -> None:
    d = a_busy_session()
    assert d.state.run is not None
    with pytest.raises(NotSnapshottable):
        snapshot(d.state)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_the_events_after_a_snapshot_fold_to_the_same_state(data: st.DataObject) -> None:
    state = SessionState(SESSION)
    log: list[Event] = []
    idle_at = [0]
    for serial in range(data.draw(st.integers(1, 40), label="steps")):
        t = step(state, data.draw(legal_input(state, float(serial), serial)))
        state = t.state
        log += t.events
        if state.run is None:
            idle_at.append(len(log))
    # As the store keeps them: numbered, through msgpack.
    stored = [Event.from_map(_through_msgpack(e.numbered(i).to_map())) for i, e in enumerate(log, start=1)]
    whole = fold(stored, SessionState(SESSION))
    cut = data.draw(st.sampled_from(idle_at), label="cut")
    head = fold(stored[:cut], SessionState(SESSION))
    snap = _through_msgpack(snapshot(head))
    assert restore(snap) == head
    assert fold(stored[cut:], restore(snap)) == whole
