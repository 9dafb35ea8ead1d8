"""Paths as the permission rules see them: made absolute (``~`` is the user's home),
normalised (``a/../b``, ``//x``, ``/proc/self/root/x``), and inside a folder or not; and
the user's configuration under the home folder, which ``write`` and ``edit`` ask before
changing in every mode."""

from __future__ import annotations

import functools
import posixpath
import re

#: The toolchains a user installs under the home folder: the programs their PATH and their
#: projects run.
USER_TOOLCHAINS = (
    ".local/bin",
    ".local/lib",
    ".local/share/uv/python",
    ".local/share/uv/tools",
    ".local/share/pipx",
    ".local/pipx",
    ".local/share/mise",
    ".local/share/pnpm",
    ".local/share/virtualenvs",
    ".virtualenvs",
    ".pyenv",
    ".conda",
    "miniconda3",
    "miniforge3",
    "mambaforge",
    "anaconda3",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".yarn",
    ".cargo",
    ".rustup",
    "go",
    ".rbenv",
    ".gem",
    ".sdkman",
    ".asdf",
    ".gradle/wrapper",
    ".dotnet",
    ".ghcup",
    ".cabal",
    ".stack",
    ".opam",
    ".elan",
    ".juliaup",
)
#: The user's configuration, under the home folder: what the user's tools run or obey later
#: (settings, shell startup files, the toolchains). ``write`` and ``edit`` ask before
#: changing it in every mode; the sandbox keeps it read-only where a session's folder
#: holds the home.
USER_CONFIGURATION = (
    ".claude",
    ".config",
    ".local/share/applications",
    ".gitconfig",
    ".git-templates",
    ".profile",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    ".pam_environment",
    ".xprofile",
    ".xsession",
    ".xsessionrc",
    ".xinitrc",
    ".vimrc",
    ".vim",
    ".emacs",
    ".emacs.d",
    ".tmux.conf",
    ".screenrc",
    ".pydistutils.cfg",
    ".condarc",
    ".roost",
    *USER_TOOLCHAINS,
)

_PROC_ROOT = re.compile(r"/proc/(?:self|thread-self)/root(?=/|$)")


@functools.lru_cache(maxsize=1024)
def rule_path(pattern: str, cwd: str, home: str) -> str:
    """A rule's path pattern made absolute (decided again for every file a search walks)."""
    return absolute(pattern, cwd, home)


def absolute(path: str, cwd: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = (home or "/") + path[1:]
    return normal(posixpath.join(cwd, path))


def normal(path: str) -> str:
    """``path`` normalised: ``a/../b``, ``//x`` and ``/proc/self/root/x`` name what they lead to."""
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    while match := _PROC_ROOT.match(path):
        path = posixpath.normpath("/" + path[match.end() :])
    return path


def inside(path: str, cwd: str) -> bool:
    root = posixpath.normpath(cwd)
    return path == root or path.startswith(root.rstrip("/") + "/")
