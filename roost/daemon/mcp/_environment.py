"""What a stdio MCP server gets of the dispatching client's environment.

The SDK starts a stdio server with a small environment of the daemon's (``HOME``,
``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``) and the entry's own ``env``. That
is too little behind a TLS-intercepting or plain proxy (``uvx mcp-server-fetch`` cannot
verify a certificate without ``SSL_CERT_FILE``), and the ``PATH`` is the terminal's that
first started the daemon. So a server also gets, from the client's environment as tool
processes get it (no secrets, the user's ``[tools.env]`` applied: see ``runs._environ``),
the variables of :data:`INHERITED` and the locale (``LC_*``); the entry's own ``env`` wins.

A proxy URL with a password (``http://user:pass@proxy:3128``) is a secret: it is passed
only when the user's config (or a trusted project's) names the variable in ``[tools.env]
pass``, as for tool processes. Otherwise it is left out (stripping the credentials would
leave a proxy that refuses the server), and the server's log says so
(:attr:`McpServerConfig.withheld`).

What a server gets is part of what it is (its identity): two clients whose ``PATH`` or
proxy differ get a server each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from roost.daemon.runs._environ import carries_secret

from ._config import McpServerConfig, McpServers

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
#: The variables a stdio server gets from the client's environment (and every ``LC_*``).
INHERITED = frozenset(
    {
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        *_PROXIES,
        *(name.lower() for name in _PROXIES),
        "PATH",
        "LANG",
        "LANGUAGE",
    }
)


def inherited(name: str) -> bool:
    """Whether a stdio server gets the client's variable ``name``."""
    return name in INHERITED or name.startswith("LC_")


def with_environment(servers: McpServers, environ: Mapping[str, str], tool_environ: Mapping[str, str]) -> McpServers:
    """``servers`` with each stdio server's env completed from the client's environment:
    the :func:`inherited` variables of ``tool_environ`` (``environ`` as tool processes get
    it) under the entry's own; those ``environ`` has but that were kept from tool
    processes for the credentials in their value are named in ``withheld``."""
    given = {name: value for name, value in tool_environ.items() if inherited(name)}
    withheld = tuple(sorted(
        name for name, value in environ.items() if inherited(name) and name not in given and carries_secret(value)
    ))

    def completed(config: McpServerConfig) -> McpServerConfig:
        if config.command is None:
            return config
        return replace(config, env={**given, **config.env}, withheld=tuple(n for n in withheld if n not in config.env))

    return replace(servers, servers={name: completed(c) for name, c in servers.servers.items()})
