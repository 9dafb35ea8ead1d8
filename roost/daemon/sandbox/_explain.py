"""Telling the model and the person that the sandbox is why a command failed.

A command stopped by the sandbox fails like any other: ``Read-only file system``,
``Could not resolve host``, ``No such file or directory``. :func:`explain` reads a failed
command's output for those signs and returns one note naming the limits that were hit, so
that nobody takes them for a broken machine and tries the same thing again.
"""

from __future__ import annotations

import os
import re

from ._home import hidden_and_protected
from ._policy import READ_ONLY, SandboxPolicy, within

_READ_ONLY = re.compile(r"read-only file system", re.IGNORECASE)
_NETWORK = re.compile(
    r"network is unreachable|could not resolve|temporary failure in name resolution"
    r"|name or service not known|no address associated with hostname|failed to resolve"
    r"|connection refused|getaddrinfo",
    re.IGNORECASE,
)
#: What a refused or missing path looks like in a message.
_MISSING = re.compile(r"permission denied|no such file or directory", re.IGNORECASE)
#: What renaming or removing a mount point (a protected path's folder) says.
_BUSY = re.compile(r"device or resource busy", re.IGNORECASE)
#: Words of a line that may be paths: up to a quote, a colon, a comma or a space.
_WORD = re.compile(r"[^\s'\"`:,;()\[\]{}<>]+")


def explain(output: str, status: int, policy: SandboxPolicy, cwd: str) -> str | None:
    """A note for a command that ran in ``cwd`` and exited ``status`` with ``output``
    inside ``policy``'s sandbox, when the output shows it met the sandbox's limits (None:
    it did not, or it succeeded)."""
    if status == 0 or not policy.on:
        return None
    causes: list[str] = []
    hidden: list[str] = []
    protected: list[str] = []
    wrote_outside = False
    hides, guards = hidden_and_protected(policy)
    for line in output.splitlines():
        read_only, busy, missing = _READ_ONLY.search(line), _BUSY.search(line), _MISSING.search(line)
        if not (read_only or busy or missing):
            continue
        named = False
        for word in _WORD.findall(line):
            # A folder moved aside is often named bare ('scripts'); other messages name paths.
            if "/" not in word and not word.startswith(".") and not busy:
                continue
            path = os.path.normpath(os.path.join(cwd, word))
            guarded = _protected(path, guards, policy.writable) if read_only or busy else None
            under = next((h for h in hides if within(path, h)), None)
            if guarded is not None:
                protected.append(guarded)
                named = True
            elif under is not None and missing:
                hidden.append(under)
            elif "denied" in line.lower() and not any(within(path, w) for w in (*policy.writable, "/tmp")):
                wrote_outside = True
        wrote_outside = wrote_outside or bool(read_only and not named)
    if protected:
        causes.append(
            f"{', '.join(dict.fromkeys(protected))} {'is' if len(set(protected)) == 1 else 'are'} protected "
            "(read-only: they say what runs outside the sandbox, and their folders cannot be moved)"
        )
    if wrote_outside:
        places = ", ".join([*policy.writable, "a private /tmp"])
        what = "the session folder is read-only; " if policy.mode == READ_ONLY else ""
        causes.append(f"{what}commands may write only in {places}")
    if not policy.network and _NETWORK.search(output):
        causes.append("there is no network (not even to this machine's own servers)")
    if hidden:
        causes.append(f"{', '.join(dict.fromkeys(hidden))} is hidden")
    if not causes:
        return None
    return (
        f"[the sandbox ({policy.mode}) may be why this failed: {'; '.join(causes)}. Do not retry "
        "the same way: do without it, or ask the user to run it outside the sandbox]"
    )



def _protected(path: str, protected: tuple[str, ...], writable: tuple[str, ...]) -> str | None:
    """The protected path ``path`` is, lies in, or holds inside a writable folder (a
    folder that holds one cannot be moved) (None: none)."""
    for guarded in protected:
        if any(within(guarded, w) and guarded != w for w in writable):
            if within(path, guarded) or (within(guarded, path) and path not in writable):
                return guarded
    return None
