"""Run settings: everything a run is set up with, its defaults defined once, built in one
place (httpx's ``build_request`` with ``USE_CLIENT_DEFAULT`` is the anchor).

Where a setting comes from, first that says something:

- a top-level run (dispatch): the dispatch, then the agent, then the config, then the
  defaults below. "Says nothing" is :data:`UNSET`, never ``None``: ``think: off`` from a
  dispatch beats an agent's ``think: high``.
- a sub-agent: its agent, then its caller's run (model, thinking, output limit), then the
  defaults; its rules are its caller's plus its agent's, its sandbox its caller's or
  narrower, and it never plans or runs the check.

:func:`settle` builds one for both. What a run got is recorded in ``run.started`` (model,
mode, turns, output limit, thinking, rules, limits, sandbox, tools: the loop's
:class:`~roost.loop.RunSettings`), and a restarted daemon takes it from there, never from the
config as it is now.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Final, Mapping, Protocol

from roost.loop import EXEC_ATTEMPTS, EXEC_TIME_BOX, MAX_TURNS, MODE, Policy, RunSettings
from roost.protocol import MODES

from ..folder._agents import DEFAULT_AGENT, Agent, AgentError, think_budget
from ..folder._config import ConfigError, parse_rules, price_map
from ..folder._models import is_test_model
from ..folder._setup import FolderSetup
from ..providers import MAX_TOKENS, Resolved
from ..sandbox import MODES as SANDBOX_MODES
from ..sandbox import SandboxPolicy, build_policy



class _Unset:
    """A setting nobody gave (not the same as ``None``, which may mean "off")."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


class SettingsError(ValueError):
    """Settings that cannot make a run; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What a dispatch asks for; :data:`UNSET` where it says nothing."""

    agent: str | None = None
    model: Any = UNSET
    mode: Any = UNSET
    max_turns: Any = UNSET
    max_tokens: Any = UNSET
    #: Thinking budget in tokens; ``None`` is "off" (said), UNSET is "not said".
    think: Any = UNSET
    attempts: Any = UNSET
    time_box: Any = UNSET
    approval_timeout: Any = UNSET
    sandbox: Any = UNSET
    yes: bool = False
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Asked:
        """A dispatch's params (absent or null keys are not said).

        Raises:
            SettingsError: a value out of range.
        """
        said = {k: v for k, v in params.items() if v is not None}
        asked = cls(
            agent=said.get("agent"),
            model=said.get("model", UNSET),
            mode=said.get("mode", UNSET),
            max_turns=said.get("max_turns", UNSET),
            max_tokens=said.get("max_tokens", UNSET),
            think=_think(said["think"]) if "think" in said else UNSET,
            attempts=said.get("attempts", UNSET),
            time_box=float(said["time_box"]) if "time_box" in said else UNSET,
            approval_timeout=float(said["approval_timeout"]) if "approval_timeout" in said else UNSET,
            sandbox=said.get("sandbox", UNSET),
            yes=bool(said.get("yes")),
            allow=tuple(said.get("allow") or ()),
            ask=tuple(said.get("ask") or ()),
            deny=tuple(said.get("deny") or ()),
        )
        asked.check()
        return asked

    def check(self) -> None:
        """Raises SettingsError for a value out of range."""
        if self.mode is not UNSET and self.mode not in MODES:
            raise SettingsError(f"mode must be one of {', '.join(MODES)}")
        if self.max_turns is not UNSET and self.max_turns < 1:
            raise SettingsError("max_turns must be at least 1")
        if self.max_tokens is not UNSET and self.max_tokens < 1:
            raise SettingsError("max_tokens must be at least 1")
        if (self.attempts is not UNSET and self.attempts < 1) or (self.time_box is not UNSET and self.time_box <= 0):
            raise SettingsError("attempts and time_box must be positive")
        if self.approval_timeout is not UNSET and self.approval_timeout <= 0:
            raise SettingsError("approval_timeout must be positive")
        if self.sandbox is not UNSET and self.sandbox not in SANDBOX_MODES:
            raise SettingsError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}")


@dataclass(frozen=True, slots=True)
class Settled:
    """A run's settings as settled (the tools it is offered are the plan's to add), and
    what they were settled from: the agent, the model resolved, the sandbox's policy."""

    agent: Agent
    model: Resolved
    sandbox: SandboxPolicy
    settings: RunSettings


class Caller(Protocol):
    """What a sub-agent's settings take from its caller's run."""

    @property
    def settings(self) -> RunSettings: ...

    @property
    def model(self) -> Resolved | None: ...

    @property
    def sandbox(self) -> SandboxPolicy: ...


#: Resolves a model name under a folder's config (with the client's keys and variables);
#: None is the model used when nothing names one, the flag says the run is in plan mode
#: (``opusplan`` is Opus there).
Resolve = Callable[[str | None, bool], Resolved]


def settle(
    setup: FolderSetup,
    asked: Asked,
    *,
    resolve: Resolve,
    holds: Callable[[SandboxPolicy], bool] = lambda policy: False,
    caller: Caller | None = None,
) -> Settled:
    """The settings of a run in ``setup``'s folder: a dispatch's (``asked``), or, with a
    ``caller``, a sub-agent's (``asked.agent`` names it).

    ``holds(policy)`` says whether a working sandbox holds commands under ``policy``
    (auto_allow needs one). The sandbox's paths are the ones ``setup`` resolved.

    Raises:
        SettingsError: an unknown agent, a model that cannot be used, a bad rule.
        ProviderUnavailable: the model's provider cannot be used here.
    """
    config = setup.config
    agent = find_agent(setup, asked.agent)
    if caller is None:
        if _first(asked.model, None) is None:
            _own_model(agent)
        mode = _first(asked.mode, agent.mode, setup.claude.default_mode, MODE)
        model = resolve(_first(asked.model, agent.model, None), mode == "plan")
        # None from the dispatch is "off", said: it beats the agent's budget.
        think = agent.think if asked.think is UNSET else asked.think
        rules = [*config.rules, *setup.claude.rules, *agent.rules, *_rules(asked)]
        timeout = _first(asked.approval_timeout, config.approval_timeout, None)
        sandbox = sandbox_policy(setup, agent, _first(asked.sandbox, None, None))
        policy = Policy(
            tuple(rules), asked.yes, os.path.expanduser("~"), sandbox.auto_allow and holds(sandbox), sandbox.protected
        )
        guardrails = config.all_guardrails()
        max_tokens = _first(asked.max_tokens, agent.max_tokens, MAX_TOKENS)
        depth = 0
    else:
        _own_model(agent)
        was = caller.settings
        mode = was.subagent_mode(agent.mode)
        if agent.model:
            model = resolve(agent.model, mode == "plan")
        elif caller.model is not None:
            model = caller.model
        else:
            raise SettingsError("its caller's model cannot be used after the restart")
        think = agent.think if agent.think is not None else was.think
        sandbox = caller.sandbox.narrowed(agent.sandbox, agent.source)
        policy = replace(was.policy, rules=was.policy.rules + agent.rules)
        timeout, guardrails = was.approval_timeout, was.guardrails
        # A sub-agent's agent, else its caller's limit.
        max_tokens = _first(asked.max_tokens, agent.max_tokens, was.max_tokens or MAX_TOKENS)
        # One deeper than its caller: how deep sub-agents nest is the loop's rule.
        depth = was.depth + 1
    settings = RunSettings(
        model=model.model_id,
        agent=agent.name,
        mode=mode,
        max_turns=_first(asked.max_turns, agent.max_turns, MAX_TURNS),
        max_tokens=max_tokens,
        think=think,
        attempts=_first(asked.attempts, None, EXEC_ATTEMPTS),
        time_box=_first(asked.time_box, None, EXEC_TIME_BOX),
        policy=policy,
        guardrails=guardrails,
        approval_timeout=timeout,
        price=price_map(model.price),
        context_window=config.context_window(model.model_id),
        compact_at=config.compact_at,
        keep_turns=config.keep_turns,
        depth=depth,
    )
    return Settled(agent, model, sandbox, settings)


def _own_model(agent: Agent) -> None:
    """Refuse a project's agent that names the scripted test model (see :func:`is_test_model`)."""
    if agent.from_project and agent.model and is_test_model(agent.model):
        raise SettingsError(f"{agent.source}: a project's agent cannot name {agent.model}: only your own may")


def _first(*values: Any) -> Any:
    """The first value that was said (the last one is the default)."""
    for value in values[:-1]:
        if value is not UNSET and value is not None:
            return value
    return values[-1]


def sandbox_policy(setup: FolderSetup, agent: Agent, dispatch: str | None = None) -> SandboxPolicy:
    """The sandbox of a run of ``agent`` in ``setup``'s folder (``dispatch``: the mode a
    dispatch asked for, None: none).

    Raises:
        RuntimeError: ``setup`` was read without its sandbox's paths (a bug): no run is
            made with a sandbox that would hide and protect nothing.
    """
    if setup.sandbox_paths is None:
        raise RuntimeError(f"the setup of {setup.cwd} was read without its sandbox's paths")
    config = setup.config
    return build_policy(
        setup.cwd,
        user=config.sandbox,
        project=config.project_sandbox,
        dispatch=dispatch,
        agent=agent.sandbox,
        agent_source=agent.source if agent.from_project else None,
        paths=setup.sandbox_paths,
    )


def find_agent(setup: FolderSetup, name: str | None) -> Agent:
    """The agent ``name`` (None: the default) of the folder.

    Raises:
        SettingsError: no such agent (or its file is not trusted: then it says so).
    """
    found = setup.agents
    agent = found.agents.get(name or DEFAULT_AGENT)
    if agent is not None:
        return agent
    for item in found.widening:
        if item.name == name and not item.trusted:
            raise SettingsError(
                f"the agent {name!r} ({item.source}) {item.detail}; this folder is not trusted, so it "
                f"is not loaded: review it with roost trust {setup.root}"
            )
    close = difflib.get_close_matches(name or "", list(found.agents), n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}?" if close else f"agents here: {', '.join(sorted(found.agents))}"
    skipped = f"; {len(found.problems)} agent file(s) could not be read (roost agents)" if found.problems else ""
    raise SettingsError(f"no agent {name!r} here; {hint}{skipped}")


def _rules(asked: Asked) -> list[Any]:
    rules = []
    for action in ("allow", "ask", "deny"):
        try:
            rules += parse_rules(list(getattr(asked, action)), action, "dispatch")
        except ConfigError as exc:
            raise SettingsError(str(exc)) from None
    return rules


def _think(value: int | str) -> int | None:
    try:
        return think_budget(value)
    except AgentError:
        raise SettingsError("think must be off, low, medium, high or a number of tokens") from None
