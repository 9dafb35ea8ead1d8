"""Which MCP servers a project has: ``[mcp.servers.NAME]`` tables and a project's ``.mcp.json``.

Sources, each overriding the earlier ones server by server:

1. the user's ``config.toml`` (``~/.config/roost/config.toml``),
2. the project's ``.roost/config.toml``,
3. the project's ``.mcp.json`` (at its root: the nearest folder holding ``.roost``,
   ``.claude`` or ``.git``), in the ``{"mcpServers": {...}}`` shape other tools write.

Claude Code's records of the user's servers (``~/.claude.json``) and the enabled Claude Code
plugins' servers (their ``.mcp.json``, named ``plugin_PLUGIN_SERVER``, ``${CLAUDE_PLUGIN_ROOT}``
their folder: see ``roost.daemon.folder._plugins``) are the user's own too, read after the
user's ``config.toml``.

::

    [mcp.servers.time]                     # stdio: a command the daemon starts
    command = "uvx"
    args = ["mcp-server-time", "--local-timezone", "UTC"]
    env = { TOKEN = "${TIME_TOKEN:-none}" }
    cwd = "tools"                          # relative to the project root (user file: its folder)
    timeout = 30                           # seconds per call (default 60)

    [mcp.servers.docs]                     # streamable HTTP: a URL
    url = "https://example.com/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

    [mcp.servers.github]                   # no command and no url: changes the entry of
    enabled = false                        # that name from an earlier source

``${VAR}`` and ``${VAR:-default}`` are expanded from the dispatching client's environment in
command, args, env values, url and headers; an unset variable without a default makes the
entry malformed. A malformed entry is left out and reported (file and server named); the
others still load.

A project's servers start programs and send requests where its files say: they are
widening (see ``roost.daemon.folder._trust``). An entry of a project file that is not trusted with
its current content is reported as a :class:`~roost.daemon.folder._trust.Widening` and kept in
:attr:`McpServers.untrusted` (listed, never started); only an entry that does nothing but
switch an earlier server off (``enabled = false``) applies untrusted, since it narrows. A
stdio entry is also bound to the project files its command and args run (``node
./server/index.js``, ``python tools/server.py``: see ``roost.daemon.folder._scripts``), read as
the file writes them (``${VAR}`` unexpanded, so trusted or not, one entry names the same
files) from the server's ``cwd``: a change to one of them untrusts the entry as a change
to its file would.

A server is what it runs, not what it is called: a stdio command is resolved once loaded (on
the ``PATH`` the server will get, a relative path against its ``cwd``) and started as
resolved, and :attr:`McpServerConfig.identity` is what the daemon keys servers by. Two
projects' servers of one name are two servers; one server configured in two places is one.
This module reads files only: it never imports the ``mcp`` SDK.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Mapping

from roost.daemon.folder._plugins import ROOT_VARIABLE, plugins_from
from roost.daemon.folder._project import project_config_file, user_config_file
from roost.daemon.folder._reading import FolderFiles
from roost.daemon.folder._review import argv_warnings, expanded, secret_warnings
from roost.daemon.folder._scripts import Word, argv_words
from roost.daemon.folder._trust import NO_TRUST, Script, Trust, Widening, digest
from roost.daemon.runs._environ import find_program

#: Seconds a tool call may take unless the entry says otherwise.
DEFAULT_TIMEOUT = 60.0

Transport = Literal["stdio", "http"]
#: What a server is (see :attr:`McpServerConfig.identity`); hashable.
Identity = tuple[object, ...]

# `server__tool` must split at the first "__", and providers accept [A-Za-z0-9_-] in tool
# names: letters, digits, '-' and single '_' between them.
_NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOML_KEYS = frozenset(
    {"transport", "type", "command", "args", "env", "cwd", "url", "headers", "enabled", "timeout"}
)
# Keys an entry without command or url may change on the earlier entry of that name.
_PATCH_KEYS: Mapping[str, tuple[str, ...]] = {
    "stdio": ("args", "env", "cwd", "enabled", "timeout"),
    "http": ("headers", "enabled", "timeout"),
}
_TYPES: Mapping[str, Transport] = {"stdio": "stdio", "http": "http", "streamable-http": "http"}


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One MCP server, as the daemon starts it (``${VAR}`` already expanded)."""

    name: str
    transport: Transport
    #: stdio: the program and its arguments.
    command: str | None = None
    args: tuple[str, ...] = ()
    #: stdio: variables added to the SDK's small default environment (HOME, PATH, ...):
    #: the entry's own, over what it gets of the client's (see ``_environment``).
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    #: http: the streamable HTTP endpoint and the headers sent with every request.
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    #: Seconds one tool call may take.
    timeout: float = DEFAULT_TIMEOUT
    #: The file the entry (or its last change) came from; not part of equality, so the
    #: same server defined in two files is the same server.
    source: str = field(default="", compare=False)
    #: A project's server: what trust records for the project files it runs (path, digest),
    #: part of its identity, not of equality.
    runs: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    #: stdio: the client's variables it would get but for the credentials in their value
    #: (a proxy URL with a password), named in its log.
    withheld: tuple[str, ...] = field(default=(), compare=False)

    @property
    def identity(self) -> Identity:
        """What the server is: a stdio server's command (as loaded: resolved), args, env,
        cwd and the project files it runs as they are (a server.py trusted again after a
        change is another server); an HTTP server's URL and headers.

        Configs with one identity are one server, whatever their name, file, timeout or
        ``enabled``; configs with different ones are never the same server.
        """
        if self.transport == "http":
            return ("http", self.url, tuple(sorted(self.headers.items())))
        return ("stdio", self.command, self.args, tuple(sorted(self.env.items())), self.cwd, self.runs)


@dataclass(frozen=True, slots=True)
class McpServers:
    """The MCP servers configured for a folder, and what its project files would add."""

    #: The servers runs may use, by name.
    servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    #: A message for each file or entry that could not be used.
    problems: tuple[str, ...] = ()
    #: The project's entries that start or reach a server, each marked trusted or not.
    widening: tuple[Widening, ...] = ()
    #: Servers of project files that are not trusted, by name: listed, never started.
    untrusted: Mapping[str, McpServerConfig] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Place:
    """A config file and what its entries are relative to."""

    path: Path
    #: Where a relative ``cwd`` starts.
    base: Path
    #: A stdio server's folder when the entry names none.
    default_cwd: str | None
    #: Unknown keys are errors in our own files; .mcp.json may carry other tools' keys.
    strict: bool
    #: A project's file: its servers need trust, and it must not lead out of the project.
    project: bool = False
    #: What its servers' names get in front (a plugin's: ``plugin_NAME_``).
    prefix: str = ""
    #: Variables its entries may use besides the environment's (a plugin's
    #: ``CLAUDE_PLUGIN_ROOT``), which its stdio servers also get.
    variables: Mapping[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return str(self.path)


def client_servers(entries: Mapping[str, Any], cwd: str, environ: Mapping[str, str]) -> dict[str, McpServerConfig]:
    """The MCP servers a client brings to its dispatch (an editor's, over ACP), in
    ``.mcp.json``'s shape (name -> ``{command, args, env}`` or ``{type, url, headers}``); a
    stdio server runs in ``cwd`` unless its entry says. They are the user's own, like their
    config file: no trust is asked.

    Raises:
        ValueError: an entry that cannot be used (the message names it).
    """
    place = _Place(Path("the client"), Path(cwd), cwd, strict=False)
    servers = {}
    for name, entry in entries.items():
        try:
            servers[name] = _parse(name, entry, None, place, environ)
        except _Malformed as exc:
            raise ValueError(f"the client's MCP server {name!r}: {exc}") from None
    return servers


class _Malformed(Exception):
    """One entry cannot be used; the message says why (without file or server)."""


def load_mcp_servers(cwd: str | None, environ: Mapping[str, str], trust: Trust = NO_TRUST) -> McpServers:
    """The MCP servers configured for ``cwd``: those runs may use, and those of project
    files ``trust`` does not cover; the servers alone (a folder's whole setup reads them
    with the rest: see :func:`mcp_servers_from`).

    ``environ`` expands ``${VAR}``, and its ``PATH`` (unless an entry's env has its own) is
    where a stdio command is looked up. Reads files: call it in a worker thread.

    Error handling:
        Never raises for a bad file or entry: a file that cannot be read or parsed, or an
        entry that is malformed, becomes one message naming the file (and the server); the
        other files and entries still load.
    """
    return mcp_servers_from(FolderFiles(cwd, environ, trust))


def mcp_servers_from(files: FolderFiles) -> McpServers:
    """The MCP servers configured for the folder ``files`` reads (see
    :func:`load_mcp_servers`)."""
    environ = files.environ
    servers: dict[str, McpServerConfig] = {}
    untrusted: dict[str, McpServerConfig] = {}
    widening: list[Widening] = []
    errors: list[str] = []
    root = files.root
    user = user_config_file()
    # The user's servers run in the daemon's folder; a project's run in the project.
    places: list[tuple[_Place, tuple[str, ...]]] = [(_Place(user, user.parent, None, strict=True), ("mcp", "servers"))]
    project = project_config_file(root)
    if project is not None:
        holder = project.parent.parent  # the folder holding .roost/
        places.append((_Place(project, holder, str(holder), True, True), ("mcp", "servers")))
    if root is not None and os.path.lexists(root / ".mcp.json"):
        places.append((_Place(root / ".mcp.json", root, str(root), False, True), ("mcpServers",)))
    # Claude Code's own record (~/.claude.json) holds the user's servers: user-wide ones
    # after roost's, and those added for this project ("local") last, over the project's
    # as in Claude Code. The user's own file: no trust needed.
    claude = claude_json(environ)
    if claude.is_file():
        places.insert(1, (_Place(claude, claude.parent, None, False), ("mcpServers",)))
        if root is not None:
            places.append((_Place(claude, claude.parent, str(root), False), ("projects", str(root), "mcpServers")))
    # The enabled plugins' servers, the user's too, after the user's own files.
    at = 2 if claude.is_file() else 1
    places[at:at] = [
        (_Place(path, Path(plugin.root), None, False, prefix=f"plugin_{plugin.name}_", variables={ROOT_VARIABLE: plugin.root}), keys)
        for plugin in plugins_from(files).active
        for path, keys in plugin.mcp
    ]
    for place, keys in places:
        if not place.project and not place.path.is_file():
            continue
        raw = _read(files, place, errors)
        if raw is None:
            continue
        trusted = not place.project or files.covers(place.path)
        data = _decode(place, raw, errors)
        table = ".".join(keys)
        for key, entry in _section(data, keys, f"{place.path}: {table}", errors).items():
            name = place.prefix + key
            where = f"{place.path}: {table}.{key}" if place.path.suffix == ".json" else f"{place.path}: [mcp.servers.{key}]"
            # An untrusted file's values stay unexpanded: its ${VAR} must not pull the
            # user's secrets into a listing or an event.
            values = {**environ, **place.variables} if trusted or _only_disables(entry) else _UNEXPANDED
            try:
                config = _parse(name, entry, servers.get(name), place, values)
            except _Malformed as exc:
                errors.append(f"{where}: {exc}")
                continue
            if place.variables and config.command is not None:
                config = replace(config, env={**place.variables, **config.env})
            if not place.project or _only_disables(entry):
                servers[name] = config
                continue
            runs = _runs(name, entry, config if values is _UNEXPANDED else None, servers.get(name), place, files)
            applies = trusted and all(script.trusted for script in runs)
            widening.append(
                Widening("mcp server", name, _describe(entry), place.source, digest(raw), applies, runs, *_review(name, entry))
            )
            config = replace(config, runs=tuple((script.path, script.digest) for script in runs))
            if applies:
                servers[name] = config
            else:
                untrusted[name] = config
    # Only now: a later source may still change an entry's env (its PATH) or cwd.
    return McpServers(
        {name: _resolved(config, environ) for name, config in servers.items()},
        tuple(errors),
        tuple(widening),
        untrusted,
    )


def _runs(
    name: str,
    entry: Any,
    unexpanded: McpServerConfig | None,
    earlier: McpServerConfig | None,
    place: _Place,
    files: FolderFiles,
) -> tuple[Script, ...]:
    """The project files a project's stdio entry runs, bound with it (``unexpanded``: the
    entry as parsed without expanding ``${VAR}``, if it was)."""
    if unexpanded is None:
        try:
            unexpanded = _parse(name, entry, earlier, place, _UNEXPANDED)
        except _Malformed:
            return ()  # an HTTP server whose url is a ${VAR}: it runs nothing here
    if unexpanded.command is None:
        return ()
    cwd = unexpanded.cwd or place.default_cwd or str(place.base)
    words = argv_words([unexpanded.command, *unexpanded.args])
    if os.sep not in unexpanded.command:
        # A bare command is the program the server gets on its PATH.
        path = unexpanded.env.get("PATH", files.environ.get("PATH", os.defpath))
        found = _program(unexpanded.command, cwd, path)
        if os.path.isabs(found):
            words.append(Word(found, True))
    return files.scripts(words, (cwd,))


def _only_disables(entry: Any) -> bool:
    """An entry that only switches an earlier server off: it narrows, trusted or not."""
    return isinstance(entry, dict) and entry.get("enabled") is False and set(entry) <= {"enabled", "type", "transport"}


def _describe(entry: Mapping[str, Any]) -> str:
    """What a (checked) server entry would start or reach, as its file writes it: values
    unexpanded, header and env values left out."""
    names = {key: f" ({key}: {', '.join(sorted(entry[key]))})" for key in ("env", "headers") if entry.get(key)}
    if "url" in entry:
        return entry["url"] + names.get("headers", "")
    if "command" in entry:
        return shlex.join([entry["command"], *entry.get("args", [])]) + names.get("env", "")
    changed = sorted(set(entry) - {"type", "transport"})
    return f"changes {', '.join(changed)} of a server of that name" + names.get("env", "")


def _review(name: str, entry: Mapping[str, Any]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[str, ...]]:
    """What ``roost trust`` shows of a (checked) server entry besides its description: its
    env, headers and cwd as written, the variables its values expand, and its broad grants
    (see ``folder._review``)."""
    values = tuple((f"{key}.{k}", v) for key in ("env", "headers") for k, v in entry.get(key, {}).items())
    if "cwd" in entry:
        values += (("cwd", entry["cwd"]),)
    argv = [entry["command"], *entry.get("args", [])] if "command" in entry else []
    variables = expanded([*argv, entry.get("url", ""), *(v for _, v in values)])
    return values, variables, argv_warnings(argv) + secret_warnings(variables, f"the server {name}")


class _Unexpanded(dict[str, str]):
    """An environment in which every ``${VAR}`` stands for itself."""

    def get(self, name: str, default: Any = None) -> str:
        return f"${{{name}}}"


_UNEXPANDED = _Unexpanded()


def expand(value: str, environ: Mapping[str, str]) -> str:
    """``value`` with ``${VAR}`` and ``${VAR:-default}`` replaced from ``environ``.

    ``:-`` uses the default when the variable is unset or empty, as the shell does.

    Raises:
        ValueError: a variable without a default is not set.
    """

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if default is not None:
            return found or default
        if found is None:
            raise ValueError(f"environment variable {name} is not set (give a default: ${{{name}:-...}})")
        return found

    return _VAR.sub(one, value)


def _resolved(config: McpServerConfig, environ: Mapping[str, str]) -> McpServerConfig:
    """A stdio config with its command resolved on the PATH its server gets (its own env's,
    else the environment's, as the SDK starts it)."""
    if config.command is None:
        return config
    path = config.env.get("PATH", environ.get("PATH", os.defpath))
    return replace(config, command=_program(config.command, config.cwd, path))


def _program(command: str, cwd: str | None, path: str) -> str:
    """The program ``command`` names, as an absolute path: looked up on ``path`` (a
    ``PATH`` value), or, when it holds a ``/``, taken relative to ``cwd`` (as the started
    server would); ``command`` itself when no such program is found."""
    if os.sep in command or (os.altsep and os.altsep in command):
        found = shutil.which(os.path.join(cwd or os.getcwd(), command))
        return os.path.abspath(found) if found else command
    # A relative PATH entry means the server's folder, not ours: left to the server.
    return find_program(command, path) or command


def claude_json(environ: Mapping[str, str]) -> Path:
    """Claude Code's record of the user's settings and servers: ``~/.claude.json``, or
    ``.claude.json`` in ``$CLAUDE_CONFIG_DIR``."""
    folder = environ.get("CLAUDE_CONFIG_DIR")
    return Path(folder) / ".claude.json" if folder else Path(os.path.expanduser("~/.claude.json"))


def _read(files: FolderFiles, place: _Place, errors: list[str]) -> bytes | None:
    try:
        return files.read(place.path, own=not place.project)
    except OSError as exc:
        errors.append(f"{place.path}: {exc.strerror or exc}")
    return None


def _decode(place: _Place, raw: bytes, errors: list[str]) -> Any:
    try:
        text = raw.decode("utf-8-sig")
        return json.loads(text) if place.path.suffix == ".json" else tomllib.loads(text)
    except UnicodeDecodeError:
        errors.append(f"{place.path}: not UTF-8 text")
    except tomllib.TOMLDecodeError as exc:
        errors.append(f"{place.path}: {exc}")
    except ValueError as exc:
        errors.append(f"{place.path}: not JSON ({exc})")
    return {}


def _section(data: Any, keys: tuple[str, ...], where: str, errors: list[str]) -> Mapping[str, Any]:
    for key in keys:
        if not isinstance(data, dict):
            errors.append(f"{where} must be a table of servers")
            return {}
        data = data.get(key, {})
    if not isinstance(data, dict):
        errors.append(f"{where} must be a table of servers")
        return {}
    return data


def _parse(
    name: str, entry: Any, earlier: McpServerConfig | None, place: _Place, environ: Mapping[str, str]
) -> McpServerConfig:
    if not _NAME.fullmatch(name):
        raise _Malformed("a server name uses letters, digits, '-' and single '_' between them")
    if not isinstance(entry, dict):
        raise _Malformed("must be a table")
    if place.strict and (unknown := sorted(set(entry) - _TOML_KEYS)):
        raise _Malformed(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_TOML_KEYS))})")
    kind = entry.get("transport", entry.get("type"))
    transport: Transport | None = None
    if kind == "sse":
        raise _Malformed("the SSE transport is not supported; use the server's streamable HTTP endpoint")
    if kind is not None:
        if not isinstance(kind, str) or kind not in _TYPES:
            raise _Malformed(f"unknown type {kind!r} (stdio, http or streamable-http)")
        transport = _TYPES[kind]
    if "command" in entry and "url" in entry:
        raise _Malformed("give command (a stdio server) or url (a streamable HTTP server), not both")
    try:
        fields = _fields(entry, place.base, environ)
    except ValueError as exc:
        raise _Malformed(str(exc)) from None
    if transport is None:
        if "command" not in fields and "url" not in fields:
            if earlier is None:
                raise _Malformed("needs command (a stdio server) or url (a streamable HTTP server)")
            keys = _PATCH_KEYS[earlier.transport]
            return replace(earlier, **{k: fields[k] for k in keys if k in fields}, source=place.source)
        transport = "http" if "url" in fields else "stdio"
    if transport == "stdio":
        if "command" not in fields:
            raise _Malformed("a stdio server needs command")
        fields.pop("headers", None)
        fields.setdefault("cwd", place.default_cwd)
    else:
        if "url" not in fields:
            raise _Malformed("a streamable HTTP server needs url")
        for key in ("args", "env", "cwd"):
            fields.pop(key, None)
    return McpServerConfig(name=name, transport=transport, source=place.source, **fields)


def _fields(entry: Mapping[str, Any], base: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """The entry's values, checked, with ``${VAR}`` expanded (ValueError says what is wrong)."""
    fields: dict[str, Any] = {}
    if "command" in entry:
        fields["command"] = expand(_string(entry, "command"), environ)
        if not fields["command"]:
            raise ValueError("command is empty")
    if "args" in entry:
        args = entry["args"]
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError("args must be a list of strings")
        fields["args"] = tuple(expand(a, environ) for a in args)
    for key in ("env", "headers"):
        if key in entry:
            table = entry[key]
            if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
                raise ValueError(f"{key} must be a table of strings")
            fields[key] = {k: expand(v, environ) for k, v in table.items()}
    if "cwd" in entry:
        # Relative to the project root (or, in the user's file, to the file's folder).
        fields["cwd"] = str(base / Path(_string(entry, "cwd")).expanduser())
    if "url" in entry:
        url = expand(_string(entry, "url"), environ)
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {url!r})")
        fields["url"] = url
    if "enabled" in entry:
        if not isinstance(entry["enabled"], bool):
            raise ValueError("enabled must be true or false")
        fields["enabled"] = entry["enabled"]
    if "timeout" in entry:
        timeout = entry["timeout"]
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError("timeout must be a number of seconds > 0")
        fields["timeout"] = float(timeout)
    return fields


def _string(entry: Mapping[str, Any], key: str) -> str:
    value = entry[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value
