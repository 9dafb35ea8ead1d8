"""git's wildmatch (how ``.gitignore`` patterns match paths), without backtracking.

A repository's patterns are written by whoever wrote the repository, and they are matched in
a worker thread that holds the GIL while it runs: a backtracking matcher (a pattern turned
into a regular expression) takes exponential time on ``**/**/**/…/x`` or ``*a*a*a*…*b``
against a long path, and would freeze the whole daemon. Here a pattern becomes a small NFA,
one state per token, simulated as a DFA whose states are made when a match first needs
them and kept: once made, a byte costs one dict lookup, and making a state costs one pass
over the pattern's tokens, so a match never costs more than ``len(text) × len(pattern)``.

The meaning is git's ``wildmatch.c`` (from rsync), on bytes, case-sensitive:

- ``\\x`` is ``x`` itself; a ``\\`` that ends the pattern never matches;
- ``?`` is any byte, ``[...]`` a class (``!`` or ``^`` first negates; ``]`` first is a
  member; ``a-z`` ranges; ``[:alpha:]`` and the other POSIX names, in ASCII); a class that
  is never closed, or names no known class, makes the pattern match nothing;
- with ``pathname`` (git's ``WM_PATHNAME``), neither ``?``, ``*`` nor a class matches a
  ``/``. A run of two or more ``*`` matches across ``/`` only when it stands alone between
  slashes (or the pattern's ends): ``**/`` is "no folder or any folders", a trailing
  ``**`` is "everything below"; anywhere else the run is a plain ``*``. Without
  ``pathname`` every ``*`` matches anything.
"""

from __future__ import annotations

#: The DFA states and moves a matcher keeps at most before it starts over (a hostile
#: pattern could otherwise make a new state for every byte of every path).
DFA_STATES = 4096
DFA_MOVES = 1 << 16

_ALL = frozenset(range(256))
_SLASH = ord("/")
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
    b"alpha": frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
    b"blank": frozenset(b" \t"),
    b"cntrl": frozenset([*range(32), 127]),
    b"digit": frozenset(b"0123456789"),
    b"graph": frozenset(range(0x21, 0x7F)),
    b"lower": frozenset(b"abcdefghijklmnopqrstuvwxyz"),
    b"print": frozenset(range(0x20, 0x7F)),
    b"punct": frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    # git's own ctype: no vertical tab, no form feed.
    b"space": frozenset(b" \t\n\r"),
    b"upper": frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    b"xdigit": frozenset(b"0123456789ABCDEFabcdef"),
}


class Wildmatch:
    """One compiled pattern; :meth:`match` tests a whole text (bytes) against it.

    Thread-safe enough for its use: a matcher is made and used by one listing, in one
    thread; what two threads could race on is only a cache entry made twice.
    """

    def __init__(self, pattern: bytes, *, pathname: bool) -> None:
        #: Per NFA state: the bytes it takes, and whether taking one stays there (a star)
        #: or moves on; the last state (``len(takes)``) accepts.
        self._takes: list[frozenset[int]] = []
        self._stays: list[bool] = []
        skips: dict[int, int] = {}
        _compile(pattern, pathname, self._takes, self._stays, skips)
        size = len(self._takes)
        # Each state with the states it reaches without a byte, as bit sets (edges only go
        # forward): entered, a star may match nothing, and a ``**/`` may skip its slash
        # too; a star that took a byte may still match nothing more, but no longer skip.
        closure = [0] * (size + 1)
        closure[size] = 1 << size
        for i in range(size - 1, -1, -1):
            reach = 1 << i
            if self._stays[i]:
                reach |= closure[i + 1]
            if i in skips:
                reach |= closure[skips[i]]
            closure[i] = reach
        self._closure = closure
        self._again = [(1 << i) | closure[i + 1] if self._stays[i] else 0 for i in range(size)]
        self._accept = 1 << size
        #: The fewest bytes a match takes: every token that is not a star, but the
        #: slash a ``**/`` may skip.
        self.shortest = sum(1 for stays in self._stays if not stays) - len(skips)
        self._start = closure[0]
        self._reset()

    def _reset(self) -> None:
        self._ids: dict[int, int] = {self._start: 0, 0: 1}
        self._sets: list[int] = [self._start, 0]
        self._moves: dict[int, int] = {}

    def match(self, text: bytes) -> bool:
        """Whether the whole of ``text`` matches."""
        if len(text) < self.shortest:
            return False
        if len(self._sets) > DFA_STATES or len(self._moves) > DFA_MOVES:
            self._reset()
        moves, state = self._moves, 0
        for byte in text:
            key = state << 8 | byte
            after = moves.get(key)
            if after is None:
                after = moves[key] = self._make(state, byte)
            if after == 1:  # no state left: nothing after this can match
                return False
            state = after
        return bool(self._sets[state] & self._accept)

    def _make(self, state: int, byte: int) -> int:
        """The DFA state after ``byte`` in ``state`` (made now)."""
        current, after = self._sets[state], 0
        takes, stays, closure, again = self._takes, self._stays, self._closure, self._again
        while current:
            low = current & -current
            current ^= low
            i = low.bit_length() - 1
            if i < len(takes) and byte in takes[i]:
                after |= again[i] if stays[i] else closure[i + 1]
        known = self._ids.get(after)
        if known is None:
            known = self._ids[after] = len(self._sets)
            self._sets.append(after)
        return known


def _compile(
    pattern: bytes, pathname: bool, takes: list[frozenset[int]], stays: list[bool], skips: dict[int, int]
) -> None:
    """Append the NFA states of ``pattern`` to ``takes`` and ``stays``; ``skips`` gets the
    ``**/`` states that may jump past their slash."""
    anything = _ALL - {_SLASH} if pathname else _ALL
    i, size = 0, len(pattern)
    while i < size:
        byte = pattern[i]
        if byte == ord("\\"):
            # A lone backslash at the end matches nothing (git compares it with the NUL).
            takes.append(frozenset(pattern[i + 1 : i + 2]))
            stays.append(False)
            i += 2
        elif byte == ord("?"):
            takes.append(anything)
            stays.append(False)
            i += 1
        elif byte == ord("["):
            members, i = _char_class(pattern, i)
            takes.append(members - {_SLASH} if pathname else members)
            stays.append(False)
        elif byte == ord("*"):
            end = i
            while end < size and pattern[end] == ord("*"):
                end += 1
            spans = not pathname or (end - i >= 2 and _alone(pattern, i, end))
            takes.append(_ALL if spans else anything)
            stays.append(True)
            if pathname and spans and pattern[end : end + 1] == b"/":
                # "**/": the folders and their slash, or nothing at all.
                skips[len(takes) - 1] = len(takes) + 1
            i = end
        else:
            takes.append(frozenset((byte,)))
            stays.append(False)
            i += 1


def _alone(pattern: bytes, start: int, end: int) -> bool:
    """Whether the stars ``pattern[start:end]`` stand alone between slashes (an escaped
    slash after them counts, as in git)."""
    before = start == 0 or pattern[start - 1] == _SLASH
    after = end == len(pattern) or pattern[end] == _SLASH or pattern[end : end + 2] == b"\\/"
    return before and after


def _char_class(pattern: bytes, start: int) -> tuple[frozenset[int], int]:
    """The bytes the class opening at ``pattern[start]`` (a ``[``) takes, and the index
    after it. A class that never closes, or names no known class, takes nothing."""
    size, i = len(pattern), start + 1
    negated = pattern[i : i + 1] in (b"!", b"^")
    if negated:
        i += 1
    members: set[int] = set()
    previous, first = 0, True
    while True:
        if i >= size:
            return frozenset(), size
        byte = pattern[i]
        if byte == ord("]") and not first:
            break
        first = False
        if byte == ord("\\"):
            i += 1
            if i >= size:
                return frozenset(), size
            byte = pattern[i]
            members.add(byte)
        elif byte == ord("-") and previous and i + 1 < size and pattern[i + 1] != ord("]"):
            i += 1
            high = pattern[i]
            if high == ord("\\"):
                i += 1
                if i >= size:
                    return frozenset(), size
                high = pattern[i]
            members.update(range(previous, high + 1))
            byte = 0  # a range is no range's start
        elif byte == ord("[") and pattern[i + 1 : i + 2] == b":":
            close = pattern.find(b"]", i + 2)
            if close == -1:
                return frozenset(), size
            if close - (i + 2) >= 1 and pattern[close - 1] == ord(":"):
                named = _CLASSES.get(pattern[i + 2 : close - 1])
                if named is None:
                    return frozenset(), size
                members |= named
                i, byte = close, 0
            else:
                members.add(byte)  # no ":]": a plain "[", and the ":" comes next
        else:
            members.add(byte)
        previous = byte
        i += 1
    taken = frozenset(members)
    return (_ALL - taken if negated else taken), i + 1

