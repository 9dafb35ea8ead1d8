"""What each of the user's Claude Code plugins brings to a folder, as ``plugins.list`` (and
``roost plugins``) shows it: found where, enabled by which file, its agents, commands,
skills, hooks and MCP servers as runs there get them, and what is wrong with it, a line
each. Reads the skill folders: call it in a worker thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._plugins import Plugin
from ._project import find_skills
from ._setup import FolderSetup


def plugin_report(setup: FolderSetup) -> dict[str, Any]:
    """``plugins.list``'s answer for the folder ``setup`` read."""
    found = setup.plugins
    skills = find_skills(Path(setup.root), setup.trusted, found.skill_folders)
    # What the loaders could not use of a plugin names a file in its folder.
    problems = [*setup.agents.problems, *setup.commands.problems, *setup.mcp_config.problems]
    listed = []
    for plugin in found.plugins:
        mine = [p for p in problems if plugin.owns(p.split(":", 1)[0])]
        listed.append({
            **_about(plugin),
            "agents": sorted(a.name for a in setup.agents.agents.values() if plugin.owns(a.source)),
            "commands": sorted(c.name for c in setup.commands.commands.values() if c.scope == "plugin" and plugin.owns(c.source)),
            "skills": sorted(name for name, skill in skills.items() if plugin.active and plugin.owns(str(skill.path))),
            "hooks": [f"{h.event} {h.match or '*'}: {h.command}" for h in plugin.hooks] if plugin.active else [],
            "mcp_servers": sorted(n for n, s in setup.mcp.items() if plugin.owns(s.source)),
            "problems": [*plugin.problems, *mine],
        })
    return {
        "plugins": listed,
        "problems": list(found.problems),
        "untrusted": [item.to_map() for item in found.widening if not item.trusted],
    }


def _about(plugin: Plugin) -> dict[str, Any]:
    return {
        "id": plugin.id,
        "name": plugin.name,
        "marketplace": plugin.marketplace,
        "version": plugin.version,
        "description": plugin.description,
        "root": plugin.root or None,
        "enabled": plugin.enabled,
        "enabled_by": plugin.decided_by or None,
        "active": plugin.active,
    }
