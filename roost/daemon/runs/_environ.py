"""The environment of what the model runs: the dispatching terminal's, without its secrets.

A dispatch carries its client's environment, so that commands run with the PATH,
VIRTUAL_ENV, ... of the terminal that asked (as tmux's ``update-environment`` does), not of
whichever terminal first started the daemon. Provider keys in it serve that session's model
calls and stay in the daemon's memory; tool processes, hooks and stdio MCP servers get the
environment without them, without any variable whose name looks like a secret
(``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*WEBHOOK*``, a
word ``AUTH``, ``PAT``, ``DSN``, ``JWT``, ``PWD``, ``PASS``, ``SSH_AUTH_SOCK``) and without
any whose value carries one (a URL with a password, a known token's prefix, a JWT), unless
the user's config passes it by name (``[tools.env] pass``; an MCP server's own ``env``
table is passed as written). ``[tools.env]`` also takes Codex's
``shell_environment_policy`` keys: ``inherit = "all" | "core" | "none"``, ``exclude`` and
``include_only`` (globs of names), ``set`` (a table of variables).

Programs are never looked up through a relative ``PATH`` entry (``./bin``, ``bin``, or an
empty entry, which means the current folder): a child's program is looked up on the
child's ``PATH`` from the child's folder, the project, so ``PATH=./bin:$PATH`` would make
the daemon start the repository's own ``bin/bash`` or ``bin/bwrap``, outside any sandbox.
:func:`tool_environment` keeps only the absolute entries of ``PATH``, and sets it to
``/bin:/usr/bin`` when none is left (bash's own default, for a ``PATH`` unset, ends in
``.``); the daemon's own lookups go through :func:`find_program`, which skips the
relative ones too.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Iterable, Mapping

#: Parts of a variable's name that mark it as a secret (compared in upper case).
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "WEBHOOK")
#: Words of a name (split at ``_``) that mark it as a secret: whole words only, so that
#: ``PATH`` and ``GIT_AUTHOR_NAME`` stay.
SECRET_PARTS = frozenset({"AUTH", "PAT", "DSN", "JWT", "PWD", "PASS"})
#: Names that are secrets whatever they look like: the ssh agent signs for whoever asks.
SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "PWD_SECRET"})
#: Values that carry a secret: a URL with a password, the prefixes of well-known tokens
#: (OpenAI and Anthropic, Stripe, GitHub, GitLab, Slack, AWS, Google, npm, Hugging Face),
#: a JWT.
_SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"
    r"|(?:sk-|sk-ant-|sk_live_|sk_test_|rk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abposr]-|npm_|hf_)"
    r"[A-Za-z0-9_-]{12,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}|AIza[A-Za-z0-9_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|https://hooks\.slack\.com/services/"
)
#: What ``inherit = "core"`` keeps (Codex's core set), besides ``LC_*``.
CORE = frozenset({"HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
                  "LANGUAGE", "TERM", "TZ", "COLORTERM"})
INHERIT = ("all", "core", "none")


@dataclass(frozen=True, slots=True)
class EnvPolicy:
    """The user's ``[tools.env]``: how much of the client's environment tool processes
    inherit (Codex's ``shell_environment_policy``)."""

    #: ``all`` (less secrets), ``core`` (:data:`CORE` and ``LC_*``) or ``none``.
    inherit: str = "all"
    #: Names (globs) never passed; ``include_only``: if given, the only names passed.
    exclude: tuple[str, ...] = ()
    include_only: tuple[str, ...] = ()
    #: Variables set for every tool process, whatever the client's are.
    set: Mapping[str, str] = field(default_factory=dict)
    #: Secret-looking names passed all the same (``pass``).
    passed: tuple[str, ...] = ()


# Remembered: every dispatch asks of the client's whole environment, the same names and
# values each time.
@functools.lru_cache(maxsize=4096)
def is_secret(name: str) -> bool:
    """Whether a variable of this name is kept from tool processes."""
    upper = name.upper()
    parts = upper.split("_")
    return upper in SECRET_NAMES or any(w in upper for w in SECRET_WORDS) or any(p in SECRET_PARTS for p in parts[1:] or ())


@functools.lru_cache(maxsize=4096)
def carries_secret(value: str) -> bool:
    """Whether a variable's value holds a secret (a password in a URL, a known token)."""
    return _SECRET_VALUE.search(value) is not None


def tool_environment(environ: Mapping[str, str], *, keys: Iterable[str] = (), policy: EnvPolicy = EnvPolicy()) -> dict[str, str]:
    """``environ`` as tool processes get it under ``policy``: without ``keys`` (the
    providers' key variables), secret-looking names and values that carry a secret, except
    those passed; then ``exclude``, ``include_only`` and ``set``; and a ``PATH`` of
    absolute entries only (see the module docstring)."""
    allowed = set(policy.passed)
    dropped = set(keys) - allowed
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if policy.inherit == "none" or (policy.inherit == "core" and name not in CORE and not name.startswith("LC_")):
            continue
        if name not in allowed and (name in dropped or is_secret(name) or carries_secret(value)):
            continue
        if any(fnmatch.fnmatchcase(name, g) for g in policy.exclude):
            continue
        if policy.include_only and not any(fnmatch.fnmatchcase(name, g) for g in policy.include_only):
            continue
        kept[name] = value
    env = {**kept, **policy.set}
    env["PATH"] = absolute_path(env.get("PATH", "")) or os.defpath
    return env


def absolute_path(value: str) -> str:
    """The ``PATH`` value ``value`` without its relative and empty entries."""
    return os.pathsep.join(entry for entry in value.split(os.pathsep) if os.path.isabs(entry))


def find_program(name: str, path: str | None = None) -> str | None:
    """The absolute path of the program ``name`` (a bare name) on ``path`` (a ``PATH``
    value; None: the daemon's own), looked up in its absolute entries only; None when
    there is none."""
    value = os.environ.get("PATH", os.defpath) if path is None else path
    found = shutil.which(name, path=absolute_path(value))
    return os.path.abspath(found) if found else None
