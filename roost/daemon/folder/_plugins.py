"""Claude Code's plugins, found where Claude Code installs them and enabled as its settings say.

Claude Code keeps them in the user's Claude Code folder (``$CLAUDE_CONFIG_DIR``, else
``~/.claude``)::

    plugins/installed_plugins.json     what is installed, and where
        {"version": 2, "plugins": {"feature-dev@claude-code-plugins": [
            {"scope": "user", "installPath": "~/.claude/plugins/cache/claude-code-plugins/feature-dev/1.0.0",
             "version": "1.0.0", "installedAt": "...", "lastUpdated": "...", "gitCommitSha": "..."}]}}
        (version 1: one such object per plugin instead of a list; ``scope: project`` entries
        carry the ``projectPath`` they were installed for)
    plugins/cache/MARKETPLACE/PLUGIN/VERSION/   a plugin as installed
    plugins/known_marketplaces.json    each marketplace's ``installLocation``
    plugins/marketplaces/MARKETPLACE/  a marketplace's copy: ``.claude-plugin/marketplace.json``
                                       lists its plugins and their ``source`` folders

A plugin is found at its record's ``installPath``, else in the cache at its version, else,
for a plugin that a marketplace's copy holds (``"source": "./plugins/x"``), there.

A plugin's folder: ``.claude-plugin/plugin.json`` (optional: ``name``, ``version``,
``description``, and ``commands``, ``agents``, ``skills``, ``hooks``, ``mcpServers``, paths
that add to the folders below, or for ``hooks`` and ``mcpServers`` the object itself),
``commands/``, ``agents/``, ``skills/NAME/SKILL.md``, ``hooks/hooks.json`` and ``.mcp.json``.
A path in plugin.json must stay inside the plugin's folder. Each part is read where every
other of its kind is, named as Claude Code names it: an agent ``plugin:agent``, a command
``/plugin:command``, a skill ``plugin:skill``, an MCP server ``plugin_PLUGIN_SERVER`` (its
tools ``mcp__plugin_PLUGIN_SERVER__tool`` in Claude Code's names). ``${CLAUDE_PLUGIN_ROOT}``
in a hook's command, a command file's text and a server's command, args, env and url is the
plugin's folder, and a hook and a stdio server get ``CLAUDE_PLUGIN_ROOT`` in their
environment.

Enabled: ``enabledPlugins`` (``{"feature-dev@claude-code-plugins": true}``) of the user's
``settings.json``, then the project's ``.claude/settings.json`` and
``.claude/settings.local.json``, a later file's word over an earlier one's. No file saying
``true``: not enabled.

Trust: what a plugin holds is the user's own (the user installed it, and its files live in
the user's folder), so an enabled plugin's hooks and servers run as the user's own do. But
a project file turning on a plugin the user's settings did not turn on is the project
speaking, and it widens (the plugin's hooks and servers would start on the project's say):
it is reported as a :class:`Widening` (kind ``plugin``) and applies only while that file is
trusted. A project turning a plugin off narrows, and always applies.

Reading is bounded as every other config read is (``_reading``): each file regular and
bounded, at most :data:`MAX_PLUGINS` plugins. A problem with one plugin is one line in
:attr:`PluginSet.problems`; the others still load.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from ._claude_settings import settings_hooks
from ._config import ConfigError, Hook
from ._project import claude_user_dir
from ._reading import FolderFiles
from ._trust import Widening, digest

#: Plugins read for one folder; more are reported and left out.
MAX_PLUGINS = 200
#: What Claude Code writes where a plugin's folder is meant.
ROOT_VARIABLE = "CLAUDE_PLUGIN_ROOT"
#: A plugin's name: it prefixes its agents, commands, skills and servers.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class Plugin:
    """One installed (or enabled) plugin, and where its parts are."""

    #: ``name@marketplace``, as the record and ``enabledPlugins`` write it.
    id: str
    #: What its parts are named after (plugin.json's ``name``, else the id's).
    name: str
    marketplace: str
    version: str = ""
    description: str = ""
    #: Its folder ("" when it was not found).
    root: str = ""
    enabled: bool = False
    #: The settings file whose ``enabledPlugins`` decided (""  when none names it).
    decided_by: str = ""
    #: Folders (or single files) of commands, agents, and folders of skills.
    commands: tuple[Path, ...] = ()
    agents: tuple[Path, ...] = ()
    skills: tuple[Path, ...] = ()
    #: Its hooks (``${CLAUDE_PLUGIN_ROOT}`` in place).
    hooks: tuple[Hook, ...] = ()
    #: Where its MCP servers are: a file, and the keys to its table of servers.
    mcp: tuple[tuple[Path, tuple[str, ...]], ...] = ()
    #: What is wrong with it, a line each.
    problems: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """Enabled and found: its parts load."""
        return self.enabled and bool(self.root)

    def owns(self, source: str) -> bool:
        """Whether ``source`` (a file a part came from) is this plugin's."""
        return bool(self.root) and (source == self.root or source.startswith(self.root.rstrip(os.sep) + os.sep))


@dataclass(frozen=True, slots=True)
class PluginSet:
    """The plugins for a folder, as one reading of it found them."""

    plugins: tuple[Plugin, ...] = ()
    #: Problems not of one plugin (the record, a settings file), a line each.
    problems: tuple[str, ...] = ()
    #: Plugins a project's settings turn on, each trusted (applied) or not.
    widening: tuple[Widening, ...] = ()

    @property
    def active(self) -> tuple[Plugin, ...]:
        """The plugins whose parts load: enabled and found."""
        return tuple(plugin for plugin in self.plugins if plugin.active)

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """The enabled plugins' hooks."""
        return tuple(hook for plugin in self.active for hook in plugin.hooks)

    @property
    def skill_folders(self) -> tuple[tuple[str, str], ...]:
        """Each enabled plugin's skill folders: (its name, a folder of skill folders)."""
        return tuple((plugin.name, os.fspath(folder)) for plugin in self.active for folder in plugin.skills)


def plugins_from(files: FolderFiles) -> PluginSet:
    """The user's plugins for the folder ``files`` reads, read once in that reading (the
    agents, commands, MCP servers and hooks all ask)."""
    return files.once("plugins", lambda: _read_plugins(files))


def _read_plugins(files: FolderFiles) -> PluginSet:
    home = claude_user_dir(files.environ)
    problems: list[str] = []
    installed = _installed(files, home / "plugins" / "installed_plugins.json", problems)
    decided, widening = _enabled(files, home / "settings.json", problems)
    ids = list(dict.fromkeys([*installed, *(i for i, (on, _) in decided.items() if on)]))
    if len(ids) > MAX_PLUGINS:
        problems.append(f"{home / 'plugins'}: more than {MAX_PLUGINS} plugins; the rest are not read")
        ids = ids[:MAX_PLUGINS]
    plugins = []
    for plugin_id in ids:
        on, by = decided.get(plugin_id, (False, ""))
        plugins.append(_plugin(files, home, plugin_id, installed.get(plugin_id), on, by))
    return PluginSet(tuple(plugins), tuple(problems), tuple(widening))


def _json(files: FolderFiles, path: Path, problems: list[str]) -> Any:
    """A JSON file of the user's (None, and a problem, when it cannot be read; None alone
    when there is no such file)."""
    try:
        return json.loads(files.read(path, own=True).decode("utf-8-sig"))
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{path}: cannot read: {exc.strerror or exc}")
    except (UnicodeDecodeError, ValueError) as exc:
        problems.append(f"{path}: not JSON: {exc}")
    return None


def _installed(files: FolderFiles, path: Path, problems: list[str]) -> dict[str, Mapping[str, Any]]:
    """The record's entry for each installed plugin (version 1's object, or the entry of
    version 2's list that fits this project: one installed for it, else a user-wide one)."""
    data = _json(files, path, problems)
    if data is None:
        return {}
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, dict):
        problems.append(f"{path}: plugins must be an object of name@marketplace entries")
        return {}
    root = os.fspath(files.root) if files.root is not None else None
    found: dict[str, Mapping[str, Any]] = {}
    for plugin_id, entry in plugins.items():
        entries = [e for e in (entry if isinstance(entry, list) else [entry]) if isinstance(e, dict)]
        if not entries:
            problems.append(f"{path}: {plugin_id}: not an installation entry")
            continue
        mine = [e for e in entries if root is not None and e.get("projectPath") == root]
        anywhere = [e for e in entries if e.get("scope", "user") != "project" or "projectPath" not in e]
        found[plugin_id] = (mine or anywhere or entries)[0]
    return found


def _enabled(
    files: FolderFiles, user: Path, problems: list[str]
) -> tuple[dict[str, tuple[bool, str]], list[Widening]]:
    """What ``enabledPlugins`` decides, plugin by plugin: on or off, and the file that said
    so; and the plugins a project's file turns on (applied only while it is trusted)."""
    decided: dict[str, tuple[bool, str]] = {}
    widening: list[Widening] = []
    for plugin_id, on in _switches(files, user, True, problems).items():
        decided[plugin_id] = (on, str(user))
    if files.root is None:
        return decided, widening
    for name in ("settings.json", "settings.local.json"):
        path = files.root / ".claude" / name
        if not os.path.lexists(path) or os.path.realpath(path) == os.path.realpath(user):
            continue
        for plugin_id, on in _switches(files, path, False, problems).items():
            if on and not decided.get(plugin_id, (False, ""))[0]:
                trusted = files.covers(path)
                widening.append(
                    Widening("plugin", plugin_id, "enabledPlugins: true", str(path), digest(files.read(path)), trusted)
                )
                if not trusted:
                    continue
            decided[plugin_id] = (on, str(path))
    return decided, widening


def _switches(files: FolderFiles, path: Path, own: bool, problems: list[str]) -> dict[str, bool]:
    """A settings file's ``enabledPlugins`` (a plugin pinned to versions is on)."""
    try:
        settings = json.loads(files.read(path, own=own).decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}  # reported where the settings are read (_claude_settings)
    table = settings.get("enabledPlugins", {}) if isinstance(settings, dict) else {}
    if not isinstance(table, dict):
        problems.append(f"{path}: enabledPlugins must be an object of name@marketplace: true/false")
        return {}
    return {str(key): value is True or (isinstance(value, list) and bool(value)) for key, value in table.items()}


def _plugin(
    files: FolderFiles, home: Path, plugin_id: str, entry: Mapping[str, Any] | None, on: bool, by: str
) -> Plugin:
    name, _, marketplace = plugin_id.partition("@")
    version = str(entry.get("version", "")) if entry is not None else ""
    plugin = Plugin(plugin_id, name, marketplace, version, enabled=on, decided_by=by)
    root = _find(files, home, plugin, entry)
    if root is None:
        where = "installed, but its folder is missing" if entry is not None else "enabled, but not installed"
        return replace(plugin, problems=(f"{plugin_id}: {where}",))
    problems: list[str] = []
    manifest = _json(files, root / ".claude-plugin" / "plugin.json", problems)
    if manifest is not None and not isinstance(manifest, dict):
        problems.append(f"{root / '.claude-plugin' / 'plugin.json'}: not a JSON object")
        manifest = None
    manifest = manifest or {}
    named = manifest.get("name", name)
    if not isinstance(named, str) or not _NAME.fullmatch(named):
        problems.append(f"{plugin_id}: the name {named!r} is not letters, digits, - _ and .; named {name!r}")
        named = name
    description = manifest.get("description", "")
    plugin = replace(
        plugin,
        name=named,
        version=str(manifest.get("version") or version),
        description=description if isinstance(description, str) else "",
        root=os.fspath(root),
    )
    where = f"{plugin_id}: plugin.json"
    return replace(
        plugin,
        commands=_paths(root, "commands", manifest.get("commands"), where, problems),
        agents=_paths(root, "agents", manifest.get("agents"), where, problems),
        skills=_paths(root, "skills", manifest.get("skills"), where, problems),
        hooks=_hooks(files, plugin, manifest.get("hooks"), problems),
        mcp=_servers(files, root, manifest.get("mcpServers"), where, problems),
        problems=tuple(problems),
    )


def _find(files: FolderFiles, home: Path, plugin: Plugin, entry: Mapping[str, Any] | None) -> Path | None:
    """The plugin's folder: the record's installPath, the cache's folder of its version, or
    the folder a marketplace's copy holds it in."""
    cache = home / "plugins" / "cache" / plugin.marketplace / plugin.name
    candidates = []
    if entry is not None and isinstance(entry.get("installPath"), str):
        candidates.append(Path(os.path.expanduser(entry["installPath"])))
    if plugin.version:
        candidates.append(cache / plugin.version)
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return _in_marketplace(files, home, plugin)


def _in_marketplace(files: FolderFiles, home: Path, plugin: Plugin) -> Path | None:
    """Where the marketplace's copy holds the plugin (a ``source`` folder inside it)."""
    known = _json(files, home / "plugins" / "known_marketplaces.json", [])
    location = known.get(plugin.marketplace, {}).get("installLocation") if isinstance(known, dict) else None
    folder = Path(location) if isinstance(location, str) else home / "plugins" / "marketplaces" / plugin.marketplace
    listing = _json(files, folder / ".claude-plugin" / "marketplace.json", [])
    entries = listing.get("plugins", []) if isinstance(listing, dict) else []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == plugin.name and isinstance(entry.get("source"), str):
            found = _inside(folder, entry["source"])
            return found if found is not None and found.is_dir() else None
    return None


def _inside(root: Path, relative: str) -> Path | None:
    """``relative`` (``./x``) under ``root``, if it really is inside it (links followed)."""
    if not relative or os.path.isabs(relative):
        return None
    path = root / relative
    real, top = os.path.realpath(path), os.path.realpath(root)
    return path if real == top or real.startswith(top + os.sep) else None


def _paths(root: Path, default: str, value: Any, where: str, problems: list[str]) -> tuple[Path, ...]:
    """The default folder and the paths plugin.json adds (those that exist)."""
    named = _named(value, default, where, problems)
    found = [root / default, *(p for p in (_bounded(root, v, where, default, problems) for v in named) if p)]
    return tuple(dict.fromkeys(p for p in found if p.exists()))


def _named(value: Any, key: str, where: str, problems: list[str]) -> list[str]:
    """A plugin.json path field (a path or a list of them) as a list."""
    if value is None:
        return []
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        problems.append(f"{where}: {key} must be a path or a list of paths")
        return []
    return values


def _bounded(root: Path, value: str, where: str, key: str, problems: list[str]) -> Path | None:
    path = _inside(root, value)
    if path is None:
        problems.append(f"{where}: {key}: {value!r} is not inside the plugin's folder")
    return path


def _hooks(files: FolderFiles, plugin: Plugin, value: Any, problems: list[str]) -> tuple[Hook, ...]:
    """The plugin's hooks: ``hooks/hooks.json``, and plugin.json's ``hooks`` (files, or the
    events themselves)."""
    root = Path(plugin.root)
    where = f"{plugin.id}: plugin.json"
    found: list[tuple[Path, Any]] = []
    if isinstance(value, dict):
        # The events, as a settings file's "hooks" holds them (or that object whole).
        found.append((root / ".claude-plugin" / "plugin.json", value if "hooks" in value else {"hooks": value}))
        value = None
    paths = [root / "hooks" / "hooks.json"]
    paths += [p for p in (_bounded(root, v, where, "hooks", problems) for v in _named(value, "hooks", where, problems)) if p]
    for path in dict.fromkeys(paths):
        if path.exists():
            data = _json(files, path, problems)
            if data is not None:
                found.append((path, data))
    hooks: list[Hook] = []
    for path, data in found:
        try:
            if not isinstance(data, dict):
                raise ConfigError(f"{path}: not a JSON object")
            read = settings_hooks(path, data)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        variable = "${" + ROOT_VARIABLE + "}"
        hooks += [replace(h, command=h.command.replace(variable, plugin.root), plugin_root=plugin.root) for h in read]
    return tuple(hooks)


def _servers(
    files: FolderFiles, root: Path, value: Any, where: str, problems: list[str]
) -> tuple[tuple[Path, tuple[str, ...]], ...]:
    """Where the plugin's MCP servers are: ``.mcp.json`` and the files plugin.json names
    (``{"mcpServers": {...}}`` or the servers alone), or plugin.json's own table."""
    found: list[tuple[Path, tuple[str, ...]]] = []
    if isinstance(value, dict):
        found.append((root / ".claude-plugin" / "plugin.json", ("mcpServers",)))
        value = None
    paths = [root / ".mcp.json"]
    paths += [p for p in (_bounded(root, v, where, "mcpServers", problems) for v in _named(value, "mcpServers", where, problems)) if p]
    for path in dict.fromkeys(paths):
        if path.exists():
            data = _json(files, path, problems)
            if isinstance(data, dict):
                found.append((path, ("mcpServers",) if isinstance(data.get("mcpServers"), dict) else ()))
    return tuple(found)
