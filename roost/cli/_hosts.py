"""Remote hosts: what ``--host`` (``ROOST_HOST``) names, and ``[hosts.NAME]`` in config.toml.

``--host`` is an ``ssh://[user@]host[:port]`` URL, or the NAME of a host in the user's
config file (the daemon's own ``config.toml``, which the daemon does not read ``[hosts]``
from)::

    [hosts.build]
    url = "ssh://me@build-box"          # required
    roost = "~/.local/bin/roost"        # the remote roost command (default: ROOST_REMOTE_COMMAND, else roost)

The file is read (stdlib ``tomllib``) only when a name is given or every host is listed,
so a local command, or one given a URL, never pays for it.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import click

if TYPE_CHECKING:
    from roost.protocol import SshHost

_KEYS = {"url", "roost"}


# A named tuple, not a dataclass: every command imports this module, and a local one
# needs neither the dataclasses module nor the ssh one.
class Host(NamedTuple):
    """A machine whose daemon the commands reach over ssh."""

    #: Where it is.
    ssh: SshHost
    #: Its name in config.toml (None: given as a URL).
    name: str | None = None
    #: The remote roost command line (None: ``ROOST_REMOTE_COMMAND``, else ``roost``).
    roost: str | None = None

    @property
    def label(self) -> str:
        """How messages name it: its name, else its URL."""
        return self.name or self.ssh.url


def config_file() -> str:
    """The user's config.toml: platformdirs' user config dir, found with the standard
    library because the CLI does not import platformdirs."""
    if sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Application Support")
    else:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "roost", "config.toml")


def load_hosts() -> dict[str, Host]:
    """The ``[hosts.NAME]`` tables of the user's config file, in its order (none if the file
    does not exist).

    Raises:
        click.UsageError: the file is not TOML, or a host entry is wrong (the message names
            the file and the entry).
    """
    import tomllib  # only a command that names a host pays for it

    path = config_file()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.UsageError(f"{path}: {exc}") from None
    table = data.get("hosts", {})
    if not isinstance(table, dict):
        raise click.UsageError(f"{path}: [hosts] must be a table of [hosts.NAME] tables")
    return {name: _host(path, name, entry) for name, entry in table.items()}


def _host(path: str, name: str, entry: Any) -> Host:
    where = f"{path}: [hosts.{name}]"
    if name.startswith("ssh://") or not isinstance(entry, dict):
        raise click.UsageError(f"{where} must be a table with url = \"ssh://...\"")
    unknown = set(entry) - _KEYS
    if unknown:
        raise click.UsageError(f"{where} has no {', '.join(sorted(unknown))} (url, roost)")
    url, roost = entry.get("url"), entry.get("roost")
    if not isinstance(url, str):
        raise click.UsageError(f"{where} needs url = \"ssh://[user@]host[:port]\"")
    if roost is not None and (not isinstance(roost, str) or not roost.strip()):
        raise click.UsageError(f"{where}: roost must be a command line (a string)")
    from roost.protocol import SshHost

    try:
        return Host(SshHost.parse(url), name, roost)
    except ValueError as exc:
        raise click.UsageError(f"{where}: {exc}") from None


def find_host(given: str) -> Host:
    """The host ``--host`` names: an ``ssh://`` URL, or a name in config.toml.

    Raises:
        click.UsageError: not a URL of a scheme roost speaks, or no host of that name.
    """
    if given.startswith("ssh://"):
        from roost.protocol import SshHost

        try:
            return Host(SshHost.parse(given))
        except ValueError as exc:
            raise click.UsageError(f"--host: {exc}") from None
    if "://" in given:
        raise click.UsageError(f"--host {given!r}: roost reaches other machines over ssh:// only")
    hosts = load_hosts()
    if given not in hosts:
        known = ", ".join(hosts) or "none"
        raise click.UsageError(
            f"--host {given!r} is not an ssh:// URL, nor a host in {config_file()} (hosts there: {known})"
        )
    return hosts[given]
