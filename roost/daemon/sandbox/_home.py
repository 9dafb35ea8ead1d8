"""What a run's commands see of the user's home folder, and of the machine's secrets.

The home folder is hidden from commands (an empty, private folder stands in its place, as
``/tmp`` does), except what the user's tools need, read-only: the toolchains and caches of
:data:`TOOLCHAINS`, git's own configuration, the tool folders that ``~/.local/bin``'s links
lead to (uv's and pipx's), the interpreter the daemon runs on, and what the user's
``[sandbox] readable`` adds. :data:`CREDENTIALS` are hidden even inside those, and even in a
session whose folder holds the home (``~`` itself, ``/home``): there the user's
configuration (:data:`roost.loop.USER_CONFIGURATION`: what the user's tools run or obey
later, ``~/.claude``, ``~/.config``, shell startup files, ``~/.local/bin``, the
toolchains), is read-only, so that no session can make every later run
unsandboxed. Everything here is a name under the home folder; the functions resolve them
(symlinks followed: a dotfile manager's links protect what they lead to).
"""

from __future__ import annotations

import glob
import os
import sys
from typing import TYPE_CHECKING, Iterable

from roost.loop import USER_CONFIGURATION, USER_TOOLCHAINS

if TYPE_CHECKING:
    from ._policy import SandboxPolicy

#: Credentials under the home folder: never there for commands.
CREDENTIALS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".password-store",
    ".netrc",
    ".pgpass",
    ".my.cnf",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".docker/config.json",
    ".kube",
    ".terraform.d",
    ".vault-token",
    ".boto",
    ".s3cfg",
    ".oci",
    ".config/gh",
    ".config/gcloud",
    ".config/op",
    ".config/rclone",
    ".config/hub",
    ".config/doctl",
    ".config/hcloud",
    ".config/configstore",
    ".config/github-copilot",
    ".config/sops",
    ".config/Bitwarden CLI",
    ".config/stripe",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".local/share/keyrings",
    ".local/share/uv/credentials",
    ".cache/huggingface/token",
    ".huggingface/token",
    ".claude/.credentials.json",
    ".claude.json",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".lesshst",
    ".local/share/fish/fish_history",
)

#: What commands may read of the home folder (read-only): the toolchains, package caches,
#: and git's configuration. Documented in docs/security.md; ``[sandbox] readable`` adds to it.
TOOLCHAINS = (
    *USER_TOOLCHAINS,
    ".cache",
    ".npm",
    ".m2/repository",
    ".gradle/caches",
    ".nuget/packages",
    ".pub-cache",
    ".gitconfig",
    ".config/git",
)

#: Secrets of the machine itself, readable by a command running as root (the daemon's user):
#: hidden whoever runs it. Globs.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*_key")


def credentials(home: str) -> list[str]:
    """:data:`CREDENTIALS` of ``home``, each where it really is (resolved)."""
    return [os.path.realpath(os.path.join(home, name)) for name in CREDENTIALS]


def system_secrets() -> list[str]:
    """The machine's own secrets (:data:`SYSTEM_SECRETS`) that exist."""
    return [path for pattern in SYSTEM_SECRETS for path in glob.glob(pattern)]


def configuration(home: str) -> list[str]:
    """The user's configuration in ``home``, each where it really is (resolved)."""
    return [os.path.realpath(os.path.join(home, name)) for name in USER_CONFIGURATION]


def home_readable(home: str, extra: Iterable[str] = ()) -> list[str]:
    """What commands see of ``home`` (read-only), resolved, existing: :data:`TOOLCHAINS`,
    the tool folders of ``~/.local/bin``'s links, the daemon's interpreter where it lies
    under ``home``, and ``extra`` (the user's ``[sandbox] readable``, resolved)."""
    real_home = os.path.realpath(home)
    # Most of them are not there: one lstat says so, where resolving each costs one a part
    # (what is not there has no real path that is; the names hold no "..").
    found = [path for name in TOOLCHAINS if os.path.lexists(path := os.path.join(home, name))]
    found += _link_targets(os.path.join(home, ".local", "bin"))
    found += [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    found += extra
    kept: list[str] = []
    for path in found:
        real = os.path.realpath(path)
        if os.path.lexists(real) and (real == real_home or real.startswith(real_home.rstrip("/") + "/")):
            kept.append(real)
    return list(dict.fromkeys(kept))


def _link_targets(folder: str) -> list[str]:
    """The folders that the links in ``folder`` lead into: a tool's virtual environment
    (``.../tools/ruff/bin/ruff`` gives ``.../tools/ruff``), else the target's folder."""
    targets: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return targets
    for entry in entries:
        if not entry.is_symlink():
            continue
        parent = os.path.dirname(os.path.realpath(entry.path))
        targets.append(os.path.dirname(parent) if os.path.basename(parent) in ("bin", "Scripts") else parent)
    return targets


def hidden_and_protected(policy: SandboxPolicy) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What ``policy`` hides and protects, with what its home folder adds: the credentials,
    always, and the user's configuration where the home is not hidden (a writable folder
    holds it). Reads the disk (resolving each name)."""
    if not policy.home:
        return policy.hidden, policy.protected
    hidden = (*policy.hidden, *credentials(policy.home))
    protected = policy.protected if policy.hide_home else (*policy.protected, *configuration(policy.home))
    return hidden, protected
