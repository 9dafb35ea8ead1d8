"""A run's settings: one value, with the only copy of their defaults.

The daemon settles them (dispatch, agent, config; a sub-agent's from its caller's) and hands
them to the loop in :class:`~roost.loop.Submit`; the loop records them in ``run.started``
(:meth:`RunSettings.to_map`) and its state holds them back from there
(:meth:`RunSettings.from_map`), so a restarted daemon goes on with what the run was given,
never with the config as it is now.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final, Mapping

from ._guardrails import Guardrail
from ._modes import NO_APPROVAL_MODES, NO_TOOLS_MODES, Mode
from ._permissions import Policy

#: The defaults of a run where neither its dispatch, its agent nor the config says.
MAX_TURNS: Final = 12
MODE: Final = Mode.AGENT
AGENT: Final = "default"
EXEC_ATTEMPTS: Final = 6
EXEC_TIME_BOX: Final = 1800.0
COMPACT_AT: Final = 0.8
KEEP_TURNS: Final = 6


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What one run is set up with, as ``run.started`` records it."""

    model: str
    agent: str = AGENT
    mode: str = MODE
    max_turns: int = MAX_TURNS
    #: The tools the model is offered; the agent's list holds in every mode.
    tools: tuple[str, ...] = ()
    #: What decides the run's tool calls (the preset follows ``mode``).
    policy: Policy = field(default_factory=Policy)
    guardrails: tuple[Guardrail, ...] = ()
    #: Seconds a permission request waits before it counts as denied (None: for ever).
    approval_timeout: float | None = None
    #: USD per million tokens (input, output, cache_read, cache_write), when known.
    price: Mapping[str, float] | None = None
    #: exec mode: the check command run after each attempt (None: one pass, no check), how
    #: many attempts, and the time box in seconds from the run's start.
    check: str | None = None
    attempts: int = EXEC_ATTEMPTS
    time_box: float = EXEC_TIME_BOX
    #: The model's context window in tokens (None: never compact), the share of it that
    #: triggers a compaction, and the replies a compaction keeps whole.
    context_window: int | None = None
    compact_at: float = COMPACT_AT
    keep_turns: int = KEEP_TURNS
    #: Names among ``tools`` that are agents: a call to one runs it as a sub-agent. ``task``
    #: among them runs the agent its call names, one of ``delegates``.
    subagents: tuple[str, ...] = ()
    delegates: tuple[str, ...] = ()
    #: Thinking budget in tokens (None: off).
    think: int | None = None
    #: Output tokens each reply may have (None: the provider's default).
    max_tokens: int | None = None
    #: Tools whose calls only read (run side by side); calls of the others run one at a
    #: time, in the model's order.
    read_only: tuple[str, ...] = ()
    #: The sandbox the run's commands run in (mode, writable, hidden, network, available,
    #: ...; None: not said).
    sandbox: Mapping[str, Any] | None = None
    #: The run has Stop hooks: when the model ends its turn they are asked first.
    stop_hooks: bool = False
    #: How deep among sub-agents the run is: 0 for a session's own run, 1 for its
    #: sub-agent, 2 for that one's, ... (how deep its own calls may still nest).
    depth: int = 0

    def subagent_mode(self, asked: str | None) -> str:
        """The mode of a sub-agent this run calls, whose agent asks for ``asked``: a
        sub-agent never plans or runs the check; it works, with approvals unless its caller
        has none."""
        if asked in (Mode.AGENT, Mode.FULL):
            return asked
        return Mode.FULL if self.mode in NO_APPROVAL_MODES else Mode.AGENT

    def previews(self) -> bool:
        """Whether a person may be asked about the calls of a reply, and so is shown what
        each change would change (the daemon reads the files edited before the reply is
        stepped): in agent mode, unless every call is approved beforehand."""
        return self.mode == Mode.AGENT and not self.policy.yes

    def problem(self) -> str | None:
        """Why these settings cannot start a run (None: they can)."""
        if self.max_turns < 1:
            return "max_turns must be at least 1"
        if self.attempts < 1 or self.time_box <= 0:
            return "attempts and time_box must be positive"
        return None

    def recorded(self) -> RunSettings:
        """These settings as the run keeps them: what they do not use left at the defaults
        (a plan offers no tools; only exec checks; only a known context window compacts),
        read-only tools among its own."""
        tools = self.tools if self.mode not in NO_TOOLS_MODES else ()
        kept = replace(self, tools=tools, read_only=tuple(sorted(set(self.read_only) & set(tools))))
        if not self.context_window:
            kept = replace(kept, compact_at=COMPACT_AT, keep_turns=KEEP_TURNS)
        if self.mode != Mode.EXEC:
            kept = replace(kept, check=None, attempts=EXEC_ATTEMPTS, time_box=EXEC_TIME_BOX)
        return kept

    def to_map(self) -> dict[str, Any]:
        """As ``run.started`` records them: what is at its default is left out, except the
        fields every run states."""
        m: dict[str, Any] = {
            "model": self.model,
            "agent": self.agent,
            "mode": self.mode,
            "max_turns": self.max_turns,
            "tools": list(self.tools),
            "permissions": self.policy.to_map(),
        }
        if self.context_window:
            m.update(context_window=self.context_window, compact_at=self.compact_at, keep_turns=self.keep_turns)
        optional: dict[str, Any] = {
            "subagents": list(self.subagents),
            "delegates": list(self.delegates),
            "think": self.think,
            "max_tokens": self.max_tokens,
            "read_only": list(self.read_only),
            "guardrails": [g.to_map() for g in self.guardrails],
            "approval_timeout": self.approval_timeout,
            "stop_hooks": self.stop_hooks,
            "depth": self.depth,
        }
        m.update((k, v) for k, v in optional.items() if v)
        if self.price is not None:
            m["price"] = dict(self.price)
        if self.sandbox is not None:
            m["sandbox"] = dict(self.sandbox)
        if self.mode == Mode.EXEC:
            m.update(check=self.check, attempts=self.attempts, time_box=self.time_box)
        return m

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> RunSettings:
        """The settings a ``run.started`` recorded (one stored before ``time_box`` was
        recorded has the default: its ``deadline`` is what holds)."""
        return cls(
            model=m["model"],
            agent=m.get("agent", AGENT),
            mode=m.get("mode", MODE),
            max_turns=m.get("max_turns", MAX_TURNS),
            tools=tuple(m.get("tools", ())),
            policy=Policy.from_map(m.get("permissions")),
            guardrails=tuple(Guardrail.from_map(g) for g in m.get("guardrails", ())),
            approval_timeout=m.get("approval_timeout"),
            price=m.get("price"),
            check=m.get("check"),
            attempts=m.get("attempts", EXEC_ATTEMPTS),
            time_box=m.get("time_box", EXEC_TIME_BOX),
            context_window=m.get("context_window"),
            compact_at=m.get("compact_at", COMPACT_AT),
            keep_turns=m.get("keep_turns", KEEP_TURNS),
            subagents=tuple(m.get("subagents", ())),
            delegates=tuple(m.get("delegates", ())),
            think=m.get("think"),
            max_tokens=m.get("max_tokens"),
            read_only=tuple(m.get("read_only", ())),
            sandbox=m.get("sandbox"),
            stop_hooks=bool(m.get("stop_hooks")),
            depth=m.get("depth", 0),
        )
