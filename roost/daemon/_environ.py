"""The environment of what the model runs: the dispatching terminal's, without its secrets.

A dispatch carries its client's environment, so that commands run with the PATH,
VIRTUAL_ENV, ... of the terminal that asked (as tmux's ``update-environment`` does), not of
whichever terminal first started the daemon. Provider keys in it serve that session's model
calls and stay in the daemon's memory; tool processes, hooks and stdio MCP servers get the
environment without them, and without any variable whose name looks like a secret
(``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``; Codex's
``shell_environment_policy`` is the anchor), unless the user's config passes it by name
(``[tools.env] pass``; an MCP server's own ``env`` table is passed as written).
"""

from __future__ import annotations

from typing import Iterable, Mapping

#: Parts of a variable's name that mark it as a secret (compared in upper case).
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def is_secret(name: str) -> bool:
    """Whether a variable of this name is kept from tool processes."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def tool_environment(
    environ: Mapping[str, str], *, keys: Iterable[str] = (), passed: Iterable[str] = ()
) -> dict[str, str]:
    """``environ`` as tool processes get it: without ``keys`` (the providers' key
    variables) and secret-looking names, except those ``passed``."""
    allowed = set(passed)
    dropped = set(keys) - allowed
    return {
        name: value
        for name, value in environ.items()
        if name in allowed or (name not in dropped and not is_secret(name))
    }
