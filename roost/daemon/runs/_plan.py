"""The run plan: everything a run starts with, prepared in one place.

A run starts from a client's dispatch, a sub-agent call of a run in flight, a run an earlier
daemon left in flight, or a compaction. :meth:`Planner.prepare` turns each into a
:class:`RunPlan`: its settings (the loop's value, as ``run.started`` records them), the model
resolved, the tools and agents the model is offered and the MCP servers they are on, the
system prompt, the sandbox its commands run in, and the first input of its loop. The
conductor only starts what a plan says (:meth:`Conductor.start_run`), so every kind of run
is equipped the same way: one path for tools, one for the prompt, one for confinement.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

import trio

from roost.loop import (
    TASK,
    Compact,
    Interrupted,
    Mode,
    RunSettings,
    RunState,
    StartSubagent,
    Submit,
)

from ..folder import _claude as claude
from ..folder._agents import Agent
from ..folder._config import ConfigError
from ..folder._command_text import substitute
from ..folder._custom_commands import CustomCommand, find_skill, parse_invocation
from ..folder._project import FrontMatterError, Place
from ..folder._prompt import Layer, PromptCache, compose, render, sizes
from ..folder._setup import FolderSetup, load_folder, with_sandbox_paths
from ..folder._trust import NO_TRUST, TrustError, TrustStore
from ..mcp import McpManager, McpServerConfig
from ..memory import MemoryIndex
from ..memory._embedder import embed_with
from ..memory._learning import Learning
from ..memory._recall import recall_layer
from ..providers import ProviderError, ProviderRegistry, Resolved, ToolSpec, WebSearch, check_script
from ..sandbox import Confinement, Sandbox, SandboxPolicy, Walks
from ..tools import ToolRegistry
from ..tools._media import Media
from ._command_lines import (
    LineRefused,
    LinesNeedApproval,
    attach_media,
    granted_rules,
    include_files,
    judge_lines,
    media_references,
)
from ._delegation import agent_specs, delegates
from ._mcp_task import PromptError, is_prompt, prompt_task, with_resources
from ._run_tools import mcp_selected, mcp_tools, read_only, servers_of, tools_size
from ._settings import UNSET, Asked, SettingsError, find_agent, is_test_model, settle
from ._web_search import WEB_SEARCH, server_tool, web_search_offer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A client's dispatch: a task (as typed: it may name a custom command) for a folder."""

    cwd: str
    task: str
    asked: Asked
    #: The dispatching terminal's environment, provider keys and all (memory only).
    environ: Mapping[str, str]
    request_id: str | None = None
    #: Text the client adds to the end of the run's system prompt (Claude Code's
    #: ``--append-system-prompt``); the run's sub-agents do not get it.
    appended: str = ""
    #: A command's ``!`command``` lines a person approved for this dispatch, as written.
    approved_lines: tuple[str, ...] = ()
    #: MCP servers the client brings for this run (an editor's), ``.mcp.json``'s shape.
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    #: Images the client sent with the task, checked, each with the name it gave.
    images: tuple[tuple[str, Media], ...] = ()


@dataclass(frozen=True, slots=True)
class SubagentCall:
    """A run's call of an agent: the sub-agent runs under its caller's plan."""

    caller: RunPlan
    call: StartSubagent


@dataclass(frozen=True, slots=True)
class Recorded:
    """A run an earlier daemon left in flight, set up again as its ``run.started`` recorded
    it; ``resumed`` are its calls whose sub-agents go on."""

    cwd: str
    run: RunState
    resumed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Compaction:
    """``roost compact``: summarize an idle session's older history."""

    cwd: str
    model: str | None
    keep_turns: int | None
    environ: Mapping[str, str]
    #: What the person wants the summary to keep (Claude Code's ``/compact [instructions]``).
    instructions: str = ""


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything one run starts with (see the module's docstring)."""

    #: What ``run.started`` records (for a recorded run: what it recorded).
    settings: RunSettings
    #: The first input of the run's loop: a Submit, a Compact, or Interrupted.
    first: Submit | Compact | Interrupted
    #: The model resolved (None: a recorded run's could not be resolved again; its next
    #: call fails, saying so).
    model: Resolved | None = None
    #: The sandbox's policy (a sub-agent's is its caller's or narrower), and what the
    #: run's commands run under (None: unsandboxed).
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    confinement: Confinement | None = None
    system: str = ""
    #: The run's tools that are agents, as the model sees them.
    agent_specs: Mapping[str, ToolSpec] = field(default_factory=dict)
    #: The MCP servers the run's tools came from, by the names its folder's config gives
    #: them: its MCP tools reach these servers and no others.
    mcp_servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    #: What the folder's files said (None: they could not be read again after a restart).
    setup: FolderSetup | None = None
    #: The dispatching client's environment (the daemon's own after a restart), and the
    #: same without secrets, for the processes the run starts.
    environ: Mapping[str, str] = field(default_factory=dict)
    tool_environ: Mapping[str, str] | None = None
    #: A sub-agent whose history begins with its caller's (its agent says ``fork``).
    fork: bool = False
    #: The ``!`command``` lines of the task, allowed, run when the run starts (their
    #: output takes their place: see ``_command_lines``).
    lines: tuple[str, ...] = ()
    #: The provider's web search, offered with each call (None: not offered; see
    #: ``_web_search``).
    web_search: WebSearch | None = None
    #: What the client is told the run goes without, and why.
    warnings: tuple[str, ...] = ()
    #: The run's similar memories (see ``memory._recall``): the system prompt's last part,
    #: sent after the part a provider caches, since it changes from run to run.
    recalled: str = ""
    #: The images the task carries (sent with it, named by ``@file``): stored for the
    #: session when the run starts, and sent after the task.
    media: tuple[Media, ...] = ()

    @property
    def run(self) -> str:
        """The run's id."""
        return self.first.run if not isinstance(self.first, Interrupted) else ""

    @property
    def learning(self) -> Learning | None:
        """How the run learns at its end (None: it does not; see ``memory._learning``): its
        agent's ``memory: learn``, or the user's ``[memory] learn`` unless the agent says
        ``off``."""
        if self.model is None or self.setup is None:
            return None
        agent = self.setup.agents.agents.get(self.settings.agent)
        use = agent.memory if agent is not None else "recall"
        if use == "off" or (use != "learn" and not self.setup.config.memory_learn):
            return None
        return Learning(self.model.provider, self.model.model, self.setup.trusted, self.setup.cwd)

    @property
    def hooks(self) -> tuple[Any, ...]:
        """The hooks of the run's folder (config and Claude Code's settings)."""
        return self.setup.hooks if self.setup is not None else ()


class PlanError(Exception):
    """A request that cannot make a run; the message says why (a client's mistake)."""


class Planner:
    """Prepares runs: reads the folder, settles the settings, equips the run."""

    def __init__(
        self,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        sandbox: Sandbox,
        nursery: trio.Nursery,
        mcp: McpManager | None = None,
        trust: TrustStore | None = None,
        memory: MemoryIndex | None = None,
    ) -> None:
        self.providers = providers
        #: What runs recall for their task (None: nothing).
        self.memory = memory
        self.tools = tools
        self.sandbox = sandbox
        self.mcp = mcp
        self.trust = trust
        #: What composing system prompts read from files that did not change since.
        self.prompts = PromptCache()
        #: What the walks for protected paths read, of the folders that did not change.
        self.walks = Walks()
        self._nursery = nursery

    async def load_folder(self, cwd: str, environ: Mapping[str, str], *, run: bool = False) -> FolderSetup:
        """What ``cwd``'s files say, under the user's trust as it is now; with ``run``, also
        the paths its sandbox uses (``with_sandbox_paths``: what a run's settings need).

        Raises:
            ConfigError: a config file (or the trust store) cannot be used.
        """

        def load() -> FolderSetup:
            try:
                trust = self.trust.snapshot() if self.trust is not None else NO_TRUST
            except TrustError as exc:
                raise ConfigError(str(exc)) from None
            setup = load_folder(cwd, environ, trust)
            return with_sandbox_paths(setup, self.sandbox.hidden, self.walks) if run else setup

        setup = await trio.to_thread.run_sync(load)
        embed_with(self.memory, self.providers, setup.config, setup.environment(environ))
        return setup

    def resolve(
        self, model: str | None, setup: FolderSetup, environ: Mapping[str, str], plan: bool = False
    ) -> Resolved:
        """``model`` (None: the one used when nothing names one) resolved under the folder's
        config and ``environ`` with its Claude Code settings' env (``plan``: for plan mode).

        Raises:
            ProviderError: its provider (or script) cannot be used here (ProviderUnavailable).
        """
        resolved = self.providers.resolve(model, setup.config, setup.environment(environ), plan=plan)
        check_script(resolved.provider, resolved.model, setup.cwd)
        return resolved

    async def dispatch(self, request: Dispatch) -> RunPlan:
        """The plan of a client's dispatch.

        Raises:
            ConfigError: the folder's config cannot be used.
            PlanError: the task names an unknown command, or the settings cannot make a run.
            ProviderError: the model's provider cannot be used here.
        """
        setup = await self.load_folder(request.cwd, request.environ, run=True)
        if request.mcp_servers:
            try:
                setup = setup.with_servers(request.mcp_servers, request.environ)
            except ValueError as exc:
                raise PlanError(str(exc)) from None
        task, found, command, asked = await _expand(setup, request, self.mcp)
        try:
            settled = settle(
                setup,
                asked,
                resolve=lambda model, plan: self.resolve(model, setup, request.environ, plan),
                holds=self.sandbox.holds,
            )
        except SettingsError as exc:
            raise PlanError(str(exc)) from None
        search = web_search_offer(settled, request.cwd, setup.config.web_search)
        tools, specs, servers, team = await self._tools_of(search.agent, setup)
        mode = settled.settings.mode
        settings = replace(
            self._equipped(settled.settings, tools + search.tools, specs, servers, team, settled.sandbox),
            check=_check_command(request.cwd) if mode == Mode.EXEC else None,
            stop_hooks=any(hook.kind == "stop" for hook in setup.hooks),
        )
        task, settings, lines, media = await _ready(self.mcp, setup, request, task, found, settings)
        layers = await self._layers(settled.agent, settings, setup)
        layers += [Layer("appended", request.appended, "dispatch")] if request.appended.strip() else []
        recalled = await recall_layer(self.memory, settled.agent.memory, task, setup.place)
        first = Submit(
            "r" + secrets.token_hex(6),
            task,
            time.time(),
            settings,
            request_id=request.request_id,
            prompt=(*sizes(layers + recalled), tools_size(self.tools, self.mcp, settings, specs, servers)),
            untrusted=setup.untrusted_notice(),
            # What a project's files put in the prompt meets the input guardrails (an API
            # key in AGENTS.md must not reach the model any more than one in a tool result).
            instructions=_written_by_files(layers + recalled),
            command=command,
        )
        return RunPlan(
            settings,
            first,
            settled.model,
            settled.sandbox,
            self.sandbox.confine(settled.sandbox),
            render(layers),
            specs,
            servers,
            setup,
            request.environ,
            setup.tool_environment(request.environ),
            lines=lines,
            web_search=search.server,
            warnings=(search.problem,) if search.problem else (),
            media=media,
            recalled=render(recalled),
        )

    async def subagent(self, request: SubagentCall) -> RunPlan:
        """The plan of a sub-agent a run calls (in its caller's folder, as its caller's
        client set it up).

        Raises:
            PlanError: the agent cannot run (the message is the call's result).
        """
        caller, call = request.caller, request.call
        setup = caller.setup
        if setup is None:
            raise PlanError(f"the {call.name} agent cannot run: the session's folder was not read")
        try:
            settled = settle(
                setup,
                Asked(agent=call.name),
                resolve=lambda model, plan: self.resolve(model, setup, caller.environ, plan),
                caller=caller,
            )
        except (SettingsError, ProviderError) as exc:
            raise PlanError(f"the {call.name} agent cannot run: {exc}") from None
        search = web_search_offer(settled, setup.cwd, setup.config.web_search)
        if search.problem:
            log.info("%s: the %s agent: %s", setup.cwd, call.name, search.problem)
        tools, specs, servers, team = await self._tools_of(search.agent, setup)
        # A sub-agent's sandbox is its caller's, or narrower if its agent says so; inside a
        # sandboxed caller it is sandboxed too, or its commands fail.
        sandboxed = caller.settings.sandbox is not None
        confined = self.sandbox.confine(settled.sandbox) if sandboxed else None
        settings = self._equipped(settled.settings, tools + search.tools, specs, servers, team, settled.sandbox if sandboxed else None)
        # SubagentStop hooks that match the agent are its Stop hooks.
        settings = replace(settings, stop_hooks=any(
            hook.kind == "subagent_stop" and claude.event_matcher(hook.match)(call.name) for hook in setup.hooks
        ))
        if confined is None and settings.policy.sandboxed:
            settings = replace(settings, policy=replace(settings.policy, sandboxed=False))
        layers = await self._layers(settled.agent, settings, setup)
        recalled = await recall_layer(self.memory, settled.agent.memory, call.message, setup.place)
        first = Submit(
            "r" + secrets.token_hex(6),
            call.message,
            time.time(),
            settings,
            prompt=tuple(sizes(layers + recalled)),
            instructions=_written_by_files(layers + recalled),
        )
        return replace(
            caller,
            settings=settings,
            first=first,
            model=settled.model,
            sandbox=settled.sandbox,
            confinement=confined,
            system=render(layers),
            agent_specs=specs,
            mcp_servers=servers,
            fork=settled.agent.fork,
            web_search=search.server,
            warnings=(),
            recalled=render(recalled),
        )

    async def recorded(self, request: Recorded, setup: FolderSetup | None) -> RunPlan:
        """The plan of a run left in flight, as its ``run.started`` recorded it (settings,
        sandbox, sub-agent and MCP tools); the agent's instructions from its folder
        (``setup``: None when it cannot be read now), the model resolved again (in the
        daemon's environment). Where either fails the run keeps its sandbox."""
        settings = request.run.settings
        policy = SandboxPolicy.from_map(settings.sandbox) if settings.sandbox is not None else SandboxPolicy()
        plan = RunPlan(
            settings,
            Interrupted(time.time(), request.resumed),
            sandbox=policy,
            # As the run was told when it started: sandboxed stays sandboxed, or fails.
            confinement=self.sandbox.confine(policy) if settings.sandbox is not None else None,
            environ=os.environ,
        )
        if setup is None:
            return plan
        plan = replace(plan, setup=setup, tool_environ=setup.tool_environment(os.environ))
        try:
            model = self.resolve(settings.model, setup, os.environ)
        except ProviderError as exc:
            log.warning("%s: the %s agent's run cannot go on: %s", request.cwd, settings.agent, exc)
            return plan
        agent = setup.agents.agents.get(settings.agent)
        if agent is None:
            agent = find_agent(setup, None)
        layers = await self._layers(agent, settings, setup)
        return replace(
            plan,
            model=model,
            system=render(layers),
            agent_specs=agent_specs(settings.subagents, settings.delegates, setup.agents.agents),
            mcp_servers=self._resume_mcp(setup, settings.tools),
            fork=agent.fork,
            # Offered when the run started: offered again, as the user's config has it now.
            web_search=server_tool(setup.config.web_search) if WEB_SEARCH in settings.tools else None,
        )

    async def compaction(self, request: Compaction) -> RunPlan:
        """The plan of a compaction: the session's model (or the one asked for) summarizes.

        Raises:
            ConfigError, PlanError (a negative ``keep_turns``, a model that cannot be
            used), ProviderError: as for :meth:`dispatch`.
        """
        setup = await self.load_folder(request.cwd, request.environ, run=True)
        keep = request.keep_turns if request.keep_turns is not None else setup.config.keep_turns
        if keep < 0:
            raise PlanError("keep_turns must not be negative")
        try:
            settled = settle(
                setup,
                Asked(model=request.model or UNSET),
                resolve=lambda model, plan: self.resolve(model, setup, request.environ, plan),
            )
        except SettingsError as exc:
            raise PlanError(str(exc)) from None
        model = settled.model
        compact = Compact("r" + secrets.token_hex(6), time.time(), model.model_id, keep, request.instructions)
        settings = RunSettings(model.model_id, mode="compact", max_turns=1, keep_turns=keep)
        # It runs no tool, but a project's PreCompact hooks run in its sandbox, as in any run.
        return RunPlan(settings, compact, model, settled.sandbox, self.sandbox.confine(settled.sandbox), setup=setup,
                       environ=request.environ, tool_environ=setup.tool_environment(request.environ))

    async def _tools_of(
        self, agent: Agent, setup: FolderSetup
    ) -> tuple[tuple[str, ...], dict[str, ToolSpec], dict[str, McpServerConfig], tuple[str, ...]]:
        """The tools a run of ``agent`` gets (its allow list, or every built-in and ``task``),
        those of them that run agents, as the model sees them, the MCP servers the others
        are on, and the agents its ``task`` may run (see ``_delegation``)."""
        mcp_names, servers = await mcp_tools(self.mcp, agent, setup)
        names = self.tools.names() + mcp_names
        agents = setup.agents.agents
        team = delegates(agent, agents)
        if agent.tools is None:
            specs = agent_specs((TASK,), team, agents)
            return names + tuple(specs), specs, servers, team
        specs = agent_specs((n for n in agent.tools if n not in names), team, agents)
        offered = tuple(n for n in names if n in agent.tools or mcp_selected(n, agent.tools))
        return offered + tuple(specs), specs, servers, team

    def _equipped(
        self, settings: RunSettings, tools: tuple[str, ...], specs: Mapping[str, ToolSpec],
        servers: Mapping[str, McpServerConfig], team: tuple[str, ...], sandbox: SandboxPolicy | None,
    ) -> RunSettings:
        """``settings`` with the run's tools: which are agents, which only read, and the
        sandbox as ``run.started`` records it (None: not said)."""
        return replace(
            settings,
            tools=tools,
            subagents=tuple(specs),
            delegates=team,
            read_only=read_only(self.tools, self.mcp, tools, servers),
            sandbox=self.sandbox.describe(sandbox) if sandbox is not None else None,
        )

    async def _layers(self, agent: Agent, settings: RunSettings, setup: FolderSetup) -> list[Layer]:
        return await compose(
            agent, settings.mode, setup.place, tools=settings.tools, cache=self.prompts, rules=setup.rules.always
        )

    def _resume_mcp(self, setup: FolderSetup, tools: Iterable[str]) -> dict[str, McpServerConfig]:
        """The servers of the folder's config that a resumed run's MCP tools are on, started
        in the background (the daemon does not wait for them to listen)."""
        if self.mcp is None:
            return {}
        servers = servers_of(setup.mcp, tools)
        if servers:
            self._nursery.start_soon(self.mcp.ensure, servers)
        return servers


async def _expand(
    setup: FolderSetup, request: Dispatch, mcp: McpManager | None
) -> tuple[str, CustomCommand | None, dict[str, Any] | None, Asked]:
    """The task a dispatch runs (a custom command's with its arguments in place, or an MCP
    prompt's text: see ``_mcp_task``), the custom command (if any) and what
    ``run.started`` records of the command, and what the dispatch asks for once the
    command's front matter is counted."""
    task, asked = request.task, request.asked
    invocation = parse_invocation(task)
    if invocation is None:
        return (task[1:] if task.startswith("//") else task), None, None, asked
    if is_prompt(setup, invocation[0]):
        try:
            task, prompt = await prompt_task(mcp, setup, *invocation)
        except PromptError as exc:
            raise PlanError(str(exc)) from None
        return task, None, prompt, asked
    found = await trio.to_thread.run_sync(_command, setup, invocation[0])
    if found.model is not None and asked.model is UNSET:
        if found.scope == "project" and is_test_model(found.model):
            raise PlanError(f"{found.source}: a project's command cannot name {found.model}")
        asked = replace(asked, model=found.model)
    command = {"name": found.name, "arguments": invocation[1], "source": found.source, "typed": task}
    return substitute(found.body, invocation[1], found.arguments), found, command, asked


def _command(setup: FolderSetup, name: str) -> CustomCommand:
    """What ``/name`` invokes: a skill of that folder name (a skill wins, as in Claude
    Code), else a command, else a skill that names itself so. Blocking.

    Raises:
        PlanError: none, or a skill that cannot be read.
    """
    place = setup.place
    try:
        skill = find_skill(place.root, place.trusted, name)
        if skill is None:
            try:
                return setup.commands.find(name)
            except LookupError:
                skill = find_skill(place.root, place.trusted, name, named=True)
                if skill is None:
                    raise
    except LookupError as exc:
        raise PlanError(str(exc.args[0]) if exc.args else str(exc)) from None
    except (FrontMatterError, OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"/{name}: the skill cannot be read: {exc}") from None
    return skill


async def _ready(
    mcp: McpManager | None, setup: FolderSetup, request: Dispatch, task: str, found: CustomCommand | None, settings: RunSettings
) -> tuple[str, RunSettings, tuple[str, ...], tuple[Media, ...]]:
    """A dispatch's task made ready: a command's lines judged and ``@file`` references read
    (on its own text, before resources), the MCP resources it names read, and the images it
    carries: the images and PDFs its ``@file`` names, then the client's images (each with a
    line saying so)."""
    text = task  # (images are named by what was typed, not by the files it includes)
    lines: tuple[str, ...] = ()
    if found is not None:
        task, settings, lines = await _prepared(task, found, settings, setup.place, request.approved_lines)
    names = media_references(text)
    named = await trio.to_thread.run_sync(attach_media, names, setup.place, settings.policy) if names else []
    task = await with_resources(mcp, setup, request.task, task)
    images = [*named, *request.images]
    notes = [
        f'<{tag} path="{name}">{what}</{tag}>'
        for name, media in images
        for tag, what in [(media.kind, f"{media.describe()}, sent after this message") if isinstance(media, Media) else ("file", media)]
    ]
    media = tuple(image for _, image in images if isinstance(image, Media))
    return "\n\n".join([task, *notes]) if notes else task, settings, lines, media


async def _prepared(
    task: str, found: CustomCommand, settings: RunSettings, place: Place, approved: tuple[str, ...]
) -> tuple[str, RunSettings, tuple[str, ...]]:
    """A command's task with its ``@file`` references read, the run's settings with its
    ``allowed-tools`` (where they apply), and its ``!`command``` lines, each allowed (see
    ``_command_lines``)."""
    granted = granted_rules(found)
    if granted:
        settings = replace(settings, policy=replace(settings.policy, rules=settings.policy.rules + granted))

    def prepare() -> tuple[str, tuple[str, ...]]:
        lines = judge_lines(found, task, settings.policy, settings.mode, place.cwd, approved)
        return include_files(task, place, settings.policy), lines

    try:
        text, lines = await trio.to_thread.run_sync(prepare)
    except LinesNeedApproval:
        raise
    except LineRefused as exc:
        raise PlanError(str(exc)) from None
    return text, settings, lines


def _written_by_files(layers: list[Layer]) -> tuple[str, ...]:
    """The texts of the prompt's layers a project's files wrote (instructions, memory):
    the input guardrails read them with the task."""
    return tuple(layer.text for layer in layers if layer.name in ("instructions", "memory", "similar memories"))


def _check_command(cwd: str) -> str | None:
    """The project's check, run after each exec attempt: ``check.sh`` in the session's folder."""
    return "bash ./check.sh" if os.path.isfile(os.path.join(cwd, "check.sh")) else None
