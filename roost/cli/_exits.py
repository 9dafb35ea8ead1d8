"""How ``roost dispatch`` exits: by the reason its run ended. Apart from the renderer, so
that a command's help can say it without loading what prints runs."""

from __future__ import annotations

#: Exit status of ``roost dispatch`` by the reason the run ended.
EXIT_STATUS = {
    "done": 0,
    "error": 1,
    "max_turns": 3,
    "max_tokens": 4,
    "aborted": 5,
    "check_passed": 0,
    "check_failed": 6,
    "timeout": 7,
    "guardrail": 8,
    "stuck": 9,
}

#: Exit status of ``roost dispatch`` for a run that would exit 0 but in which a call was
#: denied because nobody answered within the approval timeout: what was asked of it was not
#: all done.
EXIT_APPROVAL_TIMEOUT = 11


def exit_status(reason: str) -> int:
    """The exit status for a run that ended with ``reason`` (1 for reasons not listed)."""
    return EXIT_STATUS.get(reason, 1)
