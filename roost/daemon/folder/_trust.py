"""Workspace trust: which folders' files may widen what roost does.

The rule (DESIGN.md, "Security model"): a repository can narrow what roost does; only its
user can widen it. Whatever a project's files say that widens what runs without a person,
or where commands and credentials go, is a :class:`Widening`: MCP servers, hooks, allow
rules, a guardrail switched off, providers, the default model and model aliases, agents
that run without approvals or replace ``default``, secrets passed to tools. The loaders
(config, agents, MCP) report every one they find and apply it only when the file it comes
from is trusted; the rest of a file (deny and ask rules, instructions, skills) always
applies.

Trust is bound to content, as direnv's ``allow`` is: ``roost trust DIR`` records, for the
folder, the SHA-256 of each file that widens. A file counts as trusted only while its
content still has the recorded digest, so a ``git pull`` that adds a server or a hook to a
trusted folder does nothing until the user looks again.

An entry is also bound to the project files it runs: a hook's ``.claude/hooks/check.sh``,
an MCP server's ``server.py`` (see ``_scripts`` for how they are found). Their digests are
recorded with the folder's files, and an entry applies only while its own file and each of
its :class:`Script` are as they were trusted: a command that rewrites the script, removes it
or creates one that was missing makes the entry someone else's word again.

With the files, trust records what their items were (:func:`item_record`: each item's
identity, its kind, name and file, and a digest of what it does), so that ``roost trust``
can say which items are new or changed since the user last looked (:func:`since`); that
record says nothing about what applies.

The store is ``trust.json`` in the user's state dir (0600, written atomically by the daemon
alone). Resource handling: :class:`TrustStore` reads the file again only when it changed;
callers in the daemon run its methods in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .._paths import ensure_private_dir
from ..runs._environ import is_secret

#: Format of trust.json; a file of another version is refused, never overwritten.
TRUST_VERSION = 1

#: What a content digest starts with (the SHA-256 of the content follows, in hex).
DIGEST = "sha256:"
#: What is recorded for a project path an entry names that does not exist: creating it
#: later changes what the entry runs.
ABSENT = "absent"
#: What is recorded for a project path that leads out of the project (a link), before the
#: real path: the entry runs something outside, not bound by content but by where it leads.
OUTSIDE = "outside:"


@dataclass(frozen=True, slots=True)
class Script:
    """A project file a widening entry runs (or names), bound into trust with the entry."""

    #: The path as the entry names it, made absolute (symlinks not resolved).
    path: str
    #: What trust records for it: its content's digest, :data:`ABSENT`, :data:`OUTSIDE` and
    #: where it leads, or ``""`` when it cannot be bound (not a regular file, too large,
    #: unreadable): an entry naming such a file is never trusted.
    digest: str
    #: Whether it lets the entry apply: trust recorded it as it is now, or it binds nothing.
    trusted: bool
    #: Whether the entry's trust depends on it; a file a bare word names that trust never
    #: recorded does not (see ``_scripts``).
    bound: bool = True

    @property
    def state(self) -> str:
        """``file``, ``missing``, ``outside`` or ``unreadable``."""
        if self.digest == ABSENT:
            return "missing"
        if self.digest.startswith(OUTSIDE):
            return "outside"
        return "file" if self.digest else "unreadable"

    def to_map(self) -> dict[str, Any]:
        """The script as methods and events carry it."""
        return {"path": self.path, "state": self.state, "trusted": self.trusted, "bound": self.bound}


@dataclass(frozen=True, slots=True)
class Widening:
    """One thing a project's file says that widens what roost does."""

    #: What it is: "mcp server", "hook", "allow rule", "guardrail off", "provider",
    #: "default model", "model alias", "agent", "secret passed to tools".
    kind: str
    name: str
    #: What it would do (a command, a URL, a mode), as ``roost trust`` shows it.
    detail: str
    #: The file it comes from, and that file's digest when it was read.
    source: str
    digest: str
    #: Whether the file is trusted with this content, and each of ``runs`` as it is now
    #: (then the item applies).
    trusted: bool
    #: The project files it runs, bound with it.
    runs: tuple[Script, ...] = ()
    #: What it sets, as its file writes it (an MCP server's env and headers, a provider's
    #: headers): name and value, ``${VAR}`` unexpanded.
    values: tuple[tuple[str, str], ...] = ()
    #: The variables of the user's environment it reads (names only; see ``_review``).
    variables: tuple[str, ...] = ()
    #: Why it grants more than it may look to (see ``_review``), a short reason each.
    warnings: tuple[str, ...] = ()

    def to_map(self) -> dict[str, Any]:
        """The item as methods and events carry it."""
        return {
            "kind": self.kind,
            "name": self.name,
            "detail": self.detail,
            "source": self.source,
            "trusted": self.trusted,
            "runs": [script.to_map() for script in self.runs],
            "values": [{"name": name, "value": value} for name, value in self.values],
            "variables": [{"name": name, "secret": is_secret(name)} for name in self.variables],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class Trust:
    """A snapshot of the trust store: each trusted folder's files and their digests."""

    folders: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def covers(self, path: str | os.PathLike[str], data: bytes) -> bool:
        """Whether the file at ``path`` with content ``data`` was trusted as it is.

        A file with more than one hard link never is: its content can be changed through
        a name elsewhere, in a folder that is not trusted (or that a command may write).
        Reads the file's status."""
        try:
            if os.lstat(path).st_nlink > 1:
                return False
        except OSError:
            return False
        return self.holds(path, digest(data))

    def holds(self, path: str | os.PathLike[str], recorded: str) -> bool:
        """Whether trust recorded ``path`` as ``recorded`` (a digest, :data:`ABSENT`, ...)."""
        key = os.fspath(path)
        return bool(recorded) and any(files.get(key) == recorded for files in self.folders.values())

    def knows(self, path: str | os.PathLike[str]) -> bool:
        """Whether trust recorded anything for ``path``."""
        key = os.fspath(path)
        return any(key in files for files in self.folders.values())

    def has_folder(self, folder: str | os.PathLike[str]) -> bool:
        """Whether the user trusted ``folder`` (whatever its files say now)."""
        return os.fspath(folder) in self.folders


def item_record(items: Iterable[Widening]) -> dict[str, list[str]]:
    """What trust records of ``items``: each identity's hash, with the hashes of what the
    items of that identity do (two hooks of one event and matcher share an identity)."""
    record: dict[str, list[str]] = {}
    for item in items:
        identity, content = _hashes(item)
        record.setdefault(identity, []).append(content)
    return record


def since(item: Widening, record: Mapping[str, Sequence[str]] | None) -> str | None:
    """``new`` or ``changed`` when ``item`` is not as ``record`` (an :func:`item_record`
    of the items last trusted) has it; None when it is, or when there is no record."""
    if record is None:
        return None
    identity, content = _hashes(item)
    if identity not in record:
        return "new"
    return None if content in record[identity] else "changed"


def _hashes(item: Widening) -> tuple[str, str]:
    """An item's identity (file, kind, name) and content (what it does, the digests of
    the files it runs too), each as a hash."""
    identity = [item.source, item.kind, item.name]
    content = [*identity, item.detail, [list(v) for v in item.values], [[s.path, s.digest] for s in item.runs]]
    return _hash(identity), _hash(content)


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:32]


#: Nothing trusted: what a loader assumes unless told otherwise.
NO_TRUST = Trust()


def digest(data: bytes) -> str:
    """The digest trust is bound to."""
    return DIGEST + hashlib.sha256(data).hexdigest()


class TrustError(Exception):
    """The trust store cannot be read or written; the message names the file."""


class TrustStore:
    """``trust.json``: the folders the user trusted, with the digests of their files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cached: tuple[tuple[int, int], dict[str, Any]] | None = None

    def snapshot(self) -> Trust:
        """The trusted folders as they are now.

        Raises:
            TrustError: the file is not a trust store of this version.
        """
        return Trust({folder: dict(entry["files"]) for folder, entry in self._read().items()})

    def records(self) -> list[dict[str, Any]]:
        """Every trusted folder: ``{folder, trusted_at, files: {path: digest}}``."""
        return [
            {"folder": folder, "trusted_at": entry["trusted_at"], "files": dict(entry["files"])}
            for folder, entry in sorted(self._read().items())
        ]

    def items(self, folder: str) -> dict[str, list[str]] | None:
        """The :func:`item_record` of what ``folder``'s files said when it was trusted
        (None: not trusted, or trusted before roost recorded items)."""
        recorded = self._read().get(folder, {}).get("items")
        return dict(recorded) if isinstance(recorded, dict) else None

    def add(self, folder: str, files: Mapping[str, str], items: Mapping[str, list[str]] | None = None) -> None:
        """Trust ``folder`` with these files at these digests (replacing what it had), and
        ``items`` (an :func:`item_record`) as what they said."""
        folders = dict(self._read())
        folders[folder] = {"trusted_at": time.time(), "files": dict(files), **({"items": dict(items)} if items is not None else {})}
        self._write(folders)

    def remove(self, folder: str) -> bool:
        """Forget ``folder``; whether it was trusted."""
        folders = dict(self._read())
        if folders.pop(folder, None) is None:
            return False
        self._write(folders)
        return True

    def _read(self) -> dict[str, Any]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        key = (info.st_mtime_ns, info.st_size)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError) as exc:
            raise TrustError(f"{self.path}: cannot read the trust store: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != TRUST_VERSION or not isinstance(data.get("folders"), dict):
            raise TrustError(f"{self.path}: not a roost trust store of version {TRUST_VERSION}")
        folders = data["folders"]
        self._cached = (key, folders)
        return folders

    def _write(self, folders: Mapping[str, Any]) -> None:
        ensure_private_dir(self.path.parent)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = json.dumps({"version": TRUST_VERSION, "folders": folders}, indent=1, sort_keys=True).encode()
        # A fresh file, never one planted at the temp name, and private from the start.
        temp.unlink(missing_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self._cached = None
