"""The words of the wire that clients and the daemon share, defined once: run modes,
sandbox modes, and how a run can end. (Event types are defined by the loop, which makes
the events; the daemon lists them in ``hello``.)"""

from __future__ import annotations

#: Run modes: one model call that plans, the tool loop with approvals, without them, and
#: the edit-run-check-fix harness.
MODES = ("plan", "agent", "full", "exec")

#: Where a run's commands run: the session folder writable, nothing writable but a private
#: /tmp, or no sandbox.
SANDBOX_MODES = ("workspace", "read-only", "off")

#: Why a run ends (``run.finished``'s ``reason``).
STOP_REASONS = (
    "done", "max_turns", "max_tokens", "aborted", "error", "check_passed", "check_failed", "timeout",
    "guardrail", "stuck",
)

#: The reasons that mean the run did what it was asked.
SUCCESS_REASONS = ("done", "check_passed")
