"""Telling the model and the person that the sandbox is why a command failed.

A command stopped by the sandbox fails like any other: ``Read-only file system``,
``Could not resolve host``, ``No such file or directory``. :func:`explain` reads a failed
command's output for those signs and returns one note naming the limits that were hit, so
that nobody takes them for a broken machine and tries the same thing again.
"""

from __future__ import annotations

import os
import re

from ._policy import READ_ONLY, SandboxPolicy

_READ_ONLY = re.compile(r"read-only file system", re.IGNORECASE)
_NETWORK = re.compile(
    r"network is unreachable|could not resolve|temporary failure in name resolution"
    r"|name or service not known|no address associated with hostname|failed to resolve"
    r"|connection refused|getaddrinfo",
    re.IGNORECASE,
)
#: What a refused or missing path looks like in a message.
_MISSING = re.compile(r"permission denied|no such file or directory", re.IGNORECASE)
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
    wrote_outside = bool(_READ_ONLY.search(output))
    for line in output.splitlines():
        if not _MISSING.search(line):
            continue
        for word in _WORD.findall(line):
            if "/" not in word and not word.startswith("."):
                continue
            path = os.path.join(cwd, word)
            under = next((h for h in policy.hidden if _within(path, h)), None)
            if under is not None:
                hidden.append(under)
            elif "denied" in line.lower() and not any(_within(path, w) for w in (*policy.writable, "/tmp")):
                wrote_outside = True
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


def _within(path: str, folder: str) -> bool:
    path = os.path.normpath(path)
    return path == folder or path.startswith(folder.rstrip("/") + "/")
