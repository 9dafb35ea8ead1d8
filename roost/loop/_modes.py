"""Run modes: the loop's names for the protocol's words (``roost.protocol.MODES``, which the
loop may not import; tests/test_vocabulary.py holds the two equal).

The members are strings, so a mode read from ``run.started`` or a request compares equal to
its member, and a member goes into an event as the word itself.
"""

from __future__ import annotations

import enum
from typing import Final


class Mode(enum.StrEnum):
    """How a run treats its tool calls."""

    #: One model call that plans: no tools run.
    PLAN = "plan"
    #: The tool loop; calls that change things wait for approval.
    AGENT = "agent"
    #: The tool loop without approvals.
    FULL = "full"
    #: The edit-run-check-fix harness: attempts, a check command, a time box; no approvals.
    EXEC = "exec"


#: The mode a compaction run (``roost compact``) records: none a client asks for.
COMPACT_MODE: Final = "compact"
#: Modes whose runs call no tools: a plan is one reply; a compaction one summary.
NO_TOOLS_MODES: Final = (Mode.PLAN, COMPACT_MODE)
#: Modes in which no call waits for approval (but one that changes a protected path).
NO_APPROVAL_MODES: Final = (Mode.FULL, Mode.EXEC)
