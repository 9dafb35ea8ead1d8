"""One reading of a folder: its project found once, each file read once, its trust judged once.

A folder's setup (see ``_setup``) is made of parts that read some of the same files: the
config and the MCP servers both come from the ``config.toml`` files, and each part judges
the trust of the project files it reads. Every part reads through one :class:`FolderFiles`:
the project's root is found when the reading starts and handed to each part, a file two
parts read is opened once (both see the same content), whether trust covers a file is
judged once, on that content, and a project file that entries of several parts run is
hashed once (see ``_scripts``).

The rules for reading on a project's behalf are applied here, once for all parts: a file
is read bounded and only if it is a regular file (``_files``); a project's file that leads
out of the project is not read unless the user trusted the folder; the user's own files
may lead anywhere.

Resource handling: a reading keeps the content it read until it is dropped. It lives as
long as one :func:`~roost.daemon.folder._setup.load_folder`, in its worker thread; the
setup keeps no file's content. Blocking: use it in a worker thread.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from ._files import CONFIG_LIMIT, read_bounded
from ._project import Place, project_root
from ._scripts import Word, scripts
from ._trust import NO_TRUST, Script, Trust

_T = TypeVar("_T")


class FolderFiles:
    """The files of a folder as one reading sees them (see the module docstring)."""

    def __init__(self, cwd: str | None, environ: Mapping[str, str], trust: Trust = NO_TRUST) -> None:
        #: The session's folder (None: no folder; only the user's files are read).
        self.cwd = cwd
        #: The dispatching client's environment (where the user's Claude Code folder is,
        #: and what ``${VAR}`` and ``PATH`` mean in the files); a folder's setup adds what
        #: Claude Code's settings files set once it has read them (see ``_setup``).
        self.environ = environ
        #: The user's trust as it was when the reading started.
        self.trust = trust
        #: The project's root, found once (None when there is no folder).
        self.root = project_root(cwd)
        #: The user trusted the project: its files may lead out of it.
        self.trusted = self.root is not None and trust.has_folder(self.root)
        self._contents: dict[tuple[str, int, bool], bytes | OSError] = {}
        self._covered: dict[str, bool] = {}
        self._recorded: dict[str, str] = {}
        self._derived: dict[str, Any] = {}

    @property
    def place(self) -> Place:
        """Where the session works, as this reading found it (it has a folder)."""
        assert self.cwd and self.root is not None
        return Place(self.cwd, self.root, self.trusted)

    def read(self, path: Path, limit: int = CONFIG_LIMIT, *, own: bool = False) -> bytes:
        """The content of the regular file ``path`` (at most ``limit`` bytes), read once:
        the user's ``own`` file wherever it leads, a project's only inside the project
        unless the user trusted it.

        Raises:
            OSError: as :func:`~roost.daemon.folder._files.read_bounded` (no such file, not
                a regular file, too large, outside the project), each time it is asked.
        """
        key = (os.fspath(path), limit, own)
        if key not in self._contents:
            try:
                self._contents[key] = read_bounded(path, limit, within=None if own else self._within)
            except OSError as exc:
                # A copy, and a copy raised each time: the error raised holds its traceback,
                # whose frames hold this reading, which would hold the error (a cycle per
                # absent file, left to the cycle collector after every folder read).
                self._contents[key] = copy.copy(exc)
        found = self._contents[key]
        if isinstance(found, OSError):
            raise copy.copy(found)
        return found

    def covers(self, path: Path) -> bool:
        """Whether trust covers the project file ``path`` with the content this reading
        read (see :meth:`Trust.covers`), judged once.

        Raises:
            OSError: the file cannot be read (see :meth:`read`).
        """
        key = os.fspath(path)
        if key not in self._covered:
            self._covered[key] = self.trust.covers(path, self.read(path))
        return self._covered[key]

    def scripts(self, words: Iterable[Word], bases: Iterable[str]) -> tuple[Script, ...]:
        """What trust records for the project files ``words`` name, relative ones taken
        from ``bases`` (see ``_scripts``); each file is hashed once in this reading."""
        assert self.root is not None
        return scripts(words, self.root, bases, self.trust, self._recorded)

    def once(self, key: str, make: Callable[[], _T]) -> _T:
        """What ``make`` derives from the files, made once in this reading (several parts
        need the user's installed plugins, say: see ``_plugins``)."""
        if key not in self._derived:
            self._derived[key] = make()
        found: _T = self._derived[key]
        return found

    @property
    def _within(self) -> Path | None:
        # What a project's file must not lead out of; a trusted project's may.
        return None if self.trusted else self.root
