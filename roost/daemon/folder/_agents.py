"""Agents: Markdown files with YAML front matter, and the built-in default.

    ---
    name: reviewer
    description: Reviews a change and reports problems; never edits.
    model: anthropic/claude-sonnet-4-6     # or a Claude name or alias (sonnet) / inherit
    mode: agent                            # plan | agent | full | exec
    tools: [read, grep, glob]              # allow list; may name MCP tools (server__*)
    memory: off                            # recall (default), learn, or off
    max_turns: 20
    max_tokens: 16000                      # output tokens each reply may have
    think: medium                          # off | low | medium | high | a token budget
    permissions: {deny: ["bash(git push*)"]}
    sandbox: read-only                     # workspace | read-only | off
    ---
    You review changes. ...

The body is the agent's instructions. Files come from ``~/.claude/agents/`` and the user
config dir (``agents/``), the user's own, then the project's ``.claude/agents/`` and
``.roost/agents/``, subfolders included (``.claude/agents/team/reviewer.md``); a later file
of the same name overrides an earlier one and the built-in. The enabled Claude Code plugins'
agents come first, named ``plugin:agent`` as Claude Code names them (see ``_plugins``). Claude Code's sub-agent format
loads as it is: front matter that only its lenient reading accepts (an unquoted
``description:`` holding ``: ``), ``tools: Read, Grep``, its tool names (``WebFetch`` is
``web_fetch``, ``Task`` and ``Agent`` are ``task``, ``mcp__server__tool`` is
``server__tool``), and its model names (``claude-opus-4-1-20250805``, ``sonnet``,
``opusplan``, ...: read when the run is settled, see ``_models``; ``inherit``: the
caller's model). A file that cannot be used is
reported with its path (and line) and the others still load. Tool names roost has no tool
for stay in the agent's list, and ``agents.list`` reports them (:func:`unknown_tools`); its
runs go without them.

A project's agent that widens what roost does — ``mode: full`` or ``exec``, allow rules, or
the name ``default`` (replacing the agent every plain dispatch gets) — loads only while its
file is trusted (see ``_trust``); untrusted, it is left out whole and reported. Agents that
only narrow (fewer tools, deny rules, their own instructions) load anywhere. A project
agent's ``sandbox`` may only narrow the run's sandbox, trusted or not (see ``sandbox``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Collection, Mapping

from roost.loop import TASK, Rule, RuleError, parse_rule
from roost.protocol import MODES

from ..sandbox import MODES as SANDBOX_MODES
from ._claude import roost_tool
from ._config_tables import WEB_SEARCH
from ._project import AGENT_FILES, FrontMatterError, agent_dirs, agent_files, split_front_matter
from ._plugins import plugins_from
from ._reading import FolderFiles
from ._review import mode_warnings, rule_warnings
from ._trust import NO_TRUST, Trust, Widening, digest

#: The agent a dispatch gets when it names none.
DEFAULT_AGENT = "default"
#: Thinking budgets (tokens) for the words ``think`` accepts.
THINK_LEVELS = {"off": 0, "low": 2048, "medium": 8192, "high": 24576}


@dataclass(frozen=True, slots=True)
class Agent:
    """One agent definition."""

    name: str
    description: str = ""
    instructions: str = ""
    #: ``provider/model`` (None: the dispatch's, else the config's default).
    model: str | None = None
    mode: str | None = None
    #: Tool names it may use (None: every built-in tool).
    tools: tuple[str, ...] | None = None
    max_turns: int | None = None
    #: Output tokens each reply may have (None: the dispatch's, else the default).
    max_tokens: int | None = None
    #: Thinking budget in tokens (None: off unless the dispatch says).
    think: int | None = None
    rules: tuple[Rule, ...] = ()
    #: As a sub-agent: start from a fork of the caller's history instead of a fresh one.
    fork: bool = False
    #: The sandbox mode its runs get unless the dispatch says (None: the config's).
    sandbox: str | None = None
    #: What its runs do with memory: ``recall`` (the default: a "similar memories" layer
    #: for the task), ``learn`` (that, and the run's durable facts learned at its end), or
    #: ``off`` (neither).
    memory: str = "recall"
    #: "built-in" or the file it came from.
    source: str = "built-in"
    #: It came from a project's folder: its ``sandbox`` may only narrow.
    from_project: bool = False

    def describe(self) -> dict[str, Any]:
        """The agent as ``agents.list`` shows it."""
        return {
            "name": self.name,
            "description": self.description,
            "model": self.model,
            "mode": self.mode,
            "tools": list(self.tools) if self.tools is not None else None,
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "think": self.think,
            "permissions": [r.to_map() for r in self.rules],
            "fork": self.fork,
            "sandbox": self.sandbox,
            "memory": self.memory,
            "source": self.source,
        }


BUILTIN_AGENTS: Mapping[str, Agent] = {
    DEFAULT_AGENT: Agent(
        DEFAULT_AGENT,
        "The general agent: reads, changes and runs things in the project to do the task.",
        "You are roost's agent. You work in the user's project with the tools you are given; "
        "their results are real. Look before you change things, make the change the task asks "
        "for and no more, check your work when you can (run the tests), and say briefly what "
        "you did and what is left.",
    ),
}


@dataclass(frozen=True, slots=True)
class AgentSet:
    """The agents for a folder, the files skipped, and what project agents would widen."""

    agents: Mapping[str, Agent]
    #: A message for each file that could not be used (path and line).
    problems: tuple[str, ...] = ()
    #: Project agents that widen, each marked trusted (loaded) or not (left out).
    widening: tuple[Widening, ...] = ()
    #: The project agents left out because they widen and their file is not trusted (for
    #: ``agents.list`` to show as such; no run gets them).
    untrusted: tuple[Agent, ...] = ()


def load_agents(cwd: str | None, trust: Trust = NO_TRUST) -> AgentSet:
    """Every agent for a session in ``cwd``: the agents alone (a folder's whole setup
    reads them with the rest: see :func:`agents_from`). Reads files: call it in a worker
    thread."""
    return agents_from(FolderFiles(cwd, {}, trust))


def agents_from(files: FolderFiles) -> AgentSet:
    """Every agent for a session in the folder ``files`` reads."""
    agents = dict(BUILTIN_AGENTS)
    problems: list[str] = []
    widening: list[Widening] = []
    untrusted: list[Agent] = []
    # The enabled plugins' agents first: Claude Code ranks them below the user's and the
    # project's, and names them after their plugin (plugin:agent).
    for plugin in plugins_from(files).active:
        for place in plugin.agents:
            for path in agent_files(place)[:AGENT_FILES] if place.is_dir() else [place]:
                if (found := _read_agent(files, path, True, problems)) is not None:
                    named = f"{plugin.name}:{found[0].name}"
                    agents[named] = replace(found[0], name=named)
    for folder in agent_dirs(files.root):
        if not folder.path.is_dir():
            continue
        paths = agent_files(folder.path)
        if len(paths) > AGENT_FILES:
            problems.append(f"{folder.path}: more than {AGENT_FILES} agent files; the rest are not read")
            paths = paths[:AGENT_FILES]
        for path in paths:
            if (found := _read_agent(files, path, folder.own, problems)) is None:
                continue
            agent, data = replace(found[0], from_project=not folder.own), found[1]
            widens = None if folder.own else _widens(agent)
            if widens is not None:
                broad = mode_warnings(agent.mode) + tuple(
                    w for rule in agent.rules if rule.action == "allow" for w in rule_warnings(str(rule))
                )
                item = Widening("agent", agent.name, widens, str(path), digest(data), files.covers(path), warnings=broad)
                widening.append(item)
                if not item.trusted:
                    untrusted.append(agent)
                    continue
            agents[agent.name] = agent
    return AgentSet(agents, tuple(problems), tuple(widening), tuple(untrusted))


def _read_agent(files: FolderFiles, path: Path, own: bool, problems: list[str]) -> tuple[Agent, bytes] | None:
    """The agent of one file and the file's bytes (None, and a problem, if it cannot be used)."""
    try:
        data = files.read(path, own=own)
        return parse_agent(data.decode("utf-8-sig"), str(path)), data
    except AgentError as exc:
        problems.append(str(exc))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    return None


def unknown_tools(
    agent: Agent, tools: Collection[str], servers: Collection[str], agents: Collection[str]
) -> tuple[str, ...]:
    """The names in ``agent``'s tool list that are no tool a run could get: not one of
    ``tools`` (the daemon's), not ``task`` (the sub-agent tool, which the run's plan adds),
    not an agent of ``agents`` (a sub-agent), not on an MCP
    server of ``servers`` (``server__tool``, ``server__*``, or a glob over servers)."""
    if agent.tools is None:
        return ()
    return tuple(name for name in agent.tools if not _known(name, tools, servers, agents))


def _known(name: str, tools: Collection[str], servers: Collection[str], agents: Collection[str]) -> bool:
    if name in tools or name in agents or name in (TASK, WEB_SEARCH):
        # (Whether a run gets web search depends on its model and mode: a dispatch says.)
        return True
    server, sep, _ = name.partition("__")
    if sep:
        # Which tools a server has is only known once it runs: its name has to do.
        return any(fnmatch.fnmatchcase(s, server) for s in servers)
    # A glob with no "__" (``*``, ``git*``) selects MCP tools only (see the conductor).
    return any(c in name for c in "*?[") and any(fnmatch.fnmatchcase(f"{s}__", name) for s in servers)


def _widens(agent: Agent) -> str | None:
    """How a project's agent widens what roost does (None: it does not)."""
    reasons = []
    if agent.name == DEFAULT_AGENT:
        reasons.append("replaces the default agent")
    if agent.mode in ("full", "exec"):
        reasons.append(f"mode: {agent.mode} (no approvals)")
    allowed = [r for r in agent.rules if r.action == "allow"]
    if allowed:
        reasons.append("allow rules: " + ", ".join(str(r) for r in allowed))
    return "; ".join(reasons) or None


class AgentError(ValueError):
    """An agent file that cannot be used; the message names the file (and line)."""


def parse_agent(text: str, source: str) -> Agent:
    """An agent from a file's text.

    Raises:
        AgentError: no front matter, bad YAML, or a field of the wrong kind.
    """
    try:
        meta, body = split_front_matter(text, source)
    except FrontMatterError as exc:
        raise AgentError(str(exc)) from None
    where = f"{source}: "
    name = meta.get("name") or Path(source).stem
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise AgentError(f"{where}name must be letters, digits, - and _ (got {name!r})")
    mode = meta.get("mode")
    if mode is not None and mode not in MODES:
        raise AgentError(f"{where}mode must be one of {', '.join(MODES)}")
    # YAML reads a bare ``off`` as false.
    sandbox = "off" if meta.get("sandbox") is False else meta.get("sandbox")
    if sandbox is not None and sandbox not in SANDBOX_MODES:
        raise AgentError(f"{where}sandbox must be one of {', '.join(SANDBOX_MODES)}")
    return Agent(
        name=name,
        # A one-line description writes its line ends as a backslash and n, which Claude
        # Code reads as line ends.
        description=_text(meta, "description", where).replace("\\n", "\n"),
        instructions=body,
        model=_model(meta.get("model"), where),
        mode=mode,
        tools=_tools(meta.get("tools"), where),
        max_turns=_positive(meta.get("max_turns"), "max_turns", where),
        max_tokens=_positive(meta.get("max_tokens"), "max_tokens", where),
        think=think_budget(meta.get("think"), where),
        rules=_rules(meta.get("permissions"), source),
        fork=bool(meta.get("fork", False)),
        sandbox=sandbox,
        memory=_memory(meta.get("memory"), where),
        source=source,
    )


def think_budget(value: Any, where: str = "") -> int | None:
    """``off`` / ``low`` / ``medium`` / ``high`` / a number of tokens as a budget (None: off)."""
    if value is None or value is False:
        return None
    if isinstance(value, str) and value in THINK_LEVELS:
        return THINK_LEVELS[value] or None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value or None
    raise AgentError(f"{where}think must be off, low, medium, high or a number of tokens")


def _text(meta: Mapping[str, Any], key: str, where: str) -> str:
    value = meta.get(key, "")
    if not isinstance(value, str):
        raise AgentError(f"{where}{key} must be text")
    return value.strip()


def _model(value: Any, where: str) -> str | None:
    if value is None or value == "inherit":
        return None
    if not isinstance(value, str):
        raise AgentError(f"{where}model must be provider/model, a Claude model name or alias (sonnet, opus, ...), or inherit")
    # Kept as written: every model name is read in one place, when the run is settled
    # (Config.model_id: [models], Claude Code's aliases and variables).
    return value


def _tools(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise AgentError(f"{where}tools must be a list of tool names (or a comma-separated string)")
    names = []
    for tool in value:
        if tool.startswith("mcp__"):
            # mcp__server__tool is server__tool; mcp__server alone is every tool of it.
            tool = tool[len("mcp__") :]
            tool = tool if "__" in tool else f"{tool}__*"
        names.append(roost_tool(tool))
    return tuple(dict.fromkeys(names))


#: What an agent's ``memory:`` may say.
MEMORY_USES = ("recall", "learn", "off")


def _memory(value: Any, where: str) -> str:
    # YAML reads a bare ``off`` as false.
    value = "off" if value is False else "recall" if value is None or value is True else value
    if value not in MEMORY_USES:
        raise AgentError(f"{where}memory must be one of {', '.join(MEMORY_USES)}")
    return str(value)


def _positive(value: Any, key: str, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise AgentError(f"{where}{key} must be a whole number of at least 1")
    return value


def _rules(value: Any, source: str) -> tuple[Rule, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise AgentError(f"{source}: permissions must be a map of allow / ask / deny lists")
    rules = []
    for action, texts in value.items():
        if not isinstance(texts, list):
            raise AgentError(f"{source}: permissions.{action} must be a list of rules")
        for text in texts:
            try:
                rules.append(parse_rule(text, action, source))
            except RuleError as exc:
                raise AgentError(f"{source}: permissions.{action}: {exc}") from None
    return tuple(rules)

