"""The ``skill`` tool: the body of a skill (a folder with a SKILL.md) the prompt lists.

Skills come from the user's folders (``~/.claude/skills/``, ``skills/`` in the config dir,
the enabled Claude Code plugins' ``plugin:skill``) and the project (``.claude/skills/``,
``.roost/skills/``); the system prompt of a run with
this tool carries only their names and descriptions, and the model reads one when it needs
it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..folder._project import Skill, find_skills, project_root, read_skill
from ._base import Tool, ToolContext, ToolResult, truncate

_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "description": "the skill's name"}},
    "required": ["name"],
    "additionalProperties": False,
}


def _skills(cwd: str, trusted: bool, plugins: tuple[tuple[str, str], ...]) -> tuple[Path, dict[str, Skill]]:
    """The project's root (looked for once, in the tool's thread) and the skills there."""
    root = project_root(cwd) or Path(cwd)
    return root, find_skills(root, trusted, plugins)


async def _run_skill(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    root, skills = await ctx.in_thread(_skills, ctx.cwd, ctx.trusted_folder, ctx.plugin_skills)
    found = skills.get(input["name"])
    if found is None:
        known = ", ".join(sorted(skills)) or "none"
        return ToolResult(f"no skill {input['name']!r}; skills here: {known}", is_error=True)
    path = found.path
    within = None if found.own or ctx.trusted_folder else root
    try:
        text = await ctx.in_thread(read_skill, path, within)
    except OSError as exc:
        return ToolResult(f"cannot read the skill {input['name']!r}: {exc.strerror or exc}", is_error=True)
    others = sorted(p.name for p in path.parent.iterdir() if p.name != "SKILL.md")
    extra = f"\n\nOther files of this skill (in {path.parent}): {', '.join(others)}" if others else ""
    return ToolResult(truncate(text + extra, ctx.output_limit), meta={"path": str(path)})


SKILL = Tool(
    "skill",
    "Read a skill: the instructions (and the list of files) of one of the skills named in "
    "the system prompt.",
    _SCHEMA,
    _run_skill,
    read_only=True,
)
