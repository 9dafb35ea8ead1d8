"""Regular expressions that run in linear time, for patterns from anyone.

Python's ``re`` backtracks: ``(a+)+$`` over a 28-character line takes seconds, and the
engine holds the interpreter lock, so no timeout fires and the whole daemon waits. A
pattern a model, a project or a rule gives (grep's, a guardrail's, a rule's glob) runs on
RE2 (``google-re2``) instead, which matches in time linear in the text. RE2 lacks what
needs backtracking: backreferences (``\\1``) and lookaround (``(?=``, ``(?<!``); such a
pattern is a :class:`PatternError` saying so, never a slow match.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

import re2


class PatternError(ValueError):
    """A pattern RE2 cannot run; the message says why (and what RE2 lacks)."""


class Regex(Protocol):
    """What a compiled linear pattern offers (the subset of ``re.Pattern`` roost uses)."""

    def search(self, text: str) -> Any: ...

    def fullmatch(self, text: str) -> Any: ...


class _Linear:
    """An RE2 pattern that also takes text RE2 cannot encode: a file name that is not
    UTF-8 comes with lone surrogates (``os.fsdecode``); they are matched as U+FFFD."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def search(self, text: str) -> Any:
        try:
            return self._compiled.search(text)
        except UnicodeEncodeError:
            return self._compiled.search(_SURROGATES.sub("\ufffd", text))

    def fullmatch(self, text: str) -> Any:
        try:
            return self._compiled.fullmatch(text)
        except UnicodeEncodeError:
            return self._compiled.fullmatch(_SURROGATES.sub("\ufffd", text))


_SURROGATES = re.compile("[\ud800-\udfff]")


@functools.lru_cache(maxsize=1024)
def linear_regex(pattern: str, *, ignore_case: bool = False, dot_all: bool = False) -> Regex:
    """``pattern`` compiled for linear-time matching (Python's syntax, as far as RE2 has it).

    Raises:
        PatternError: the pattern is invalid, or needs backtracking (backreferences,
            lookaround), or is too large.
    """
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_all
    try:
        return _Linear(re2.compile(pattern, options))
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(
            f"{why} (patterns run on RE2, in linear time: no backreferences or lookaround)"
        ) from None
