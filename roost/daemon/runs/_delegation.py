"""Agents as tools another agent calls: each agent an agent's ``tools`` names, and ``task``.

A call to either runs a sub-agent (the loop decides that, the conductor runs it). An agent
named in ``tools`` is a tool of its own name that takes a ``message``. ``task`` (Claude
Code's Task) is one tool for all of the folder's agents: its description lists them with
their descriptions, and a call names one (``agent``, or Claude Code's ``subagent_type``)
with a ``prompt``. An agent gets ``task`` when its ``tools`` names it, or when it has no
list (every built-in, as the default agent), as long as there is another agent to run:
every agent of the folder but ``default`` and itself. The name ``task`` always means this
tool; an agent called ``task`` is reached through it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from roost.loop import TASK

from ..folder._agents import DEFAULT_AGENT, Agent
from ..folder._project import taking_turns
from ..providers import ToolSpec

#: What an agent-tool takes.
SUBAGENT_SCHEMA = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "description": "the task, complete on its own"}
    },
    "required": ["message"],
    "additionalProperties": False,
}
#: An agent's description in ``task``'s list is cut here: the list goes with every model call.
DESCRIPTION_LIMIT = 400
#: Characters of ``task``'s agent list (about 4k tokens): with hundreds of agents installed,
#: a call would otherwise carry 100 KB of list. Beyond it the list says how many it left out.
LIST_BUDGET = 16_000

_TASK_ABOUT = (
    "Delegate a task to one of the agents below. It runs as a sub-agent with its own "
    "instructions, tools and model, and its final answer is this call's result. It does not "
    "see this conversation: give it the whole task, with what it needs to know. Several calls "
    "in one reply run at the same time."
)


def delegates(caller: Agent, agents: Mapping[str, Agent]) -> tuple[str, ...]:
    """The agents ``caller`` may run with ``task`` (none: it does not get the tool)."""
    if caller.tools is not None and TASK not in caller.tools:
        return ()
    return tuple(sorted(n for n in agents if n not in (DEFAULT_AGENT, caller.name)))


def agent_specs(
    names: Iterable[str], team: tuple[str, ...], agents: Mapping[str, Agent]
) -> dict[str, ToolSpec]:
    """The tools among ``names`` that run agents, as the model sees them: ``task`` (for the
    agents of ``team``) and each agent-tool."""
    specs = {}
    for name in names:
        if name == TASK:
            if team:
                specs[TASK] = task_spec(team, agents)
        elif name in agents:
            specs[name] = agent_spec(agents[name])
    return specs


def agent_spec(agent: Agent) -> ToolSpec:
    """An agent as a tool of its own name."""
    return ToolSpec(agent.name, agent.description or f"the {agent.name} agent", SUBAGENT_SCHEMA)


def task_spec(team: tuple[str, ...], agents: Mapping[str, Agent]) -> ToolSpec:
    """``task``, listing the agents of ``team`` with their descriptions, a line each, within
    :data:`LIST_BUDGET`: the user's own and the project's agents take turns, so that neither
    crowds the other out, and the agents left out are counted."""
    lines: list[str] = []
    listed: list[str] = []
    used = 0
    project = [n for n in team if n in agents and agents[n].from_project]
    for name in taking_turns([n for n in team if n not in project], project):
        about = " ".join((agents[name].description if name in agents else "").split())
        if len(about) > DESCRIPTION_LIMIT:
            about = about[: DESCRIPTION_LIMIT - 1] + "…"
        line = f"- {name}: {about}" if about else f"- {name}"
        if used + len(line) + 1 > LIST_BUDGET:
            break
        lines.append(line)
        listed.append(name)
        used += len(line) + 1
    whole = len(listed) == len(team)
    order = {name: i for i, name in enumerate(team)}
    lines = [line for _, line in sorted(zip((order[n] for n in listed), lines))]
    if not whole:
        lines.append(f"… and {len(team) - len(listed)} more (`roost agents` lists them all): name one as the agent.")
    agent: dict[str, Any] = {"type": "string", "description": "the agent that does the task"}
    if whole:
        agent["enum"] = list(team)
    schema = {
        "type": "object",
        "properties": {
            "agent": agent,
            "prompt": {"type": "string", "minLength": 1, "description": "the task, complete on its own"},
            "description": {"type": "string", "description": "the task in a few words, for the people watching"},
        },
        "required": ["agent", "prompt"],
    }
    return ToolSpec(TASK, _TASK_ABOUT + "\n\nAgents:\n" + "\n".join(lines), schema)
