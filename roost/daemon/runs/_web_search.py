"""Web search for a run: Anthropic's server tool, an MCP tool standing in for it, or why the
run goes without (said in the dispatch's warnings, never dropped without a word).

A run asks for web search when its agent names ``web_search`` (Claude Code's ``WebSearch``),
or, for an agent that names no tools (the default agent), when the user's
``[tools.web_search] default`` is true. Then, in this order:

- ``[tools.web_search] mcp = "server__tool"``: that MCP tool stands in, for any provider; its
  calls are judged and approved as any MCP tool's are.
- An Anthropic model: the request carries Anthropic's server tool. Anthropic runs each search
  inside its reply, so no search can wait for a person: it is offered only where the run's
  policy lets ``web_search`` through without asking (an allow rule, ``--yes``, full or exec
  mode). A deny or ask rule, agent mode with no rule, and plan mode (which runs no tools)
  leave it out, saying why.
- Any other model: left out, saying why.

Security: the searches leave this machine from the provider's side, outside the sandbox,
and a query can carry what the model read. That is why agent mode does not offer them
without a rule the user wrote (a project's rules widen only once trusted), and why
``[tools.web_search]`` is read from the user's config alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from roost.loop import decide

from ..folder._agents import Agent
from ..folder._config_tables import WEB_SEARCH, WebSearchConfig
from ..providers import WebSearch
from ._settings import Settled

__all__ = ["WEB_SEARCH", "WebSearchOffer", "server_tool", "web_search_offer"]


@dataclass(frozen=True, slots=True)
class WebSearchOffer:
    """How a run searches the web."""

    #: The agent the run's tools are taken from: ``web_search`` in its list stands for the
    #: MCP tool where one stands in.
    agent: Agent
    #: The provider's server tool the run's calls carry (None: not offered).
    server: WebSearch | None = None
    #: Why a run that asked for web search goes without (None: it did not ask, or has it).
    problem: str | None = None

    @property
    def tools(self) -> tuple[str, ...]:
        """What the run's tools gain: ``web_search`` where the server tool is offered."""
        return (WEB_SEARCH,) if self.server is not None else ()


def web_search_offer(settled: Settled, cwd: str, config: WebSearchConfig) -> WebSearchOffer:
    """What a run settled as ``settled`` gets for web search (see the module's docstring)."""
    agent, model, settings = settled.agent, settled.model, settled.settings
    named = agent.tools is not None and WEB_SEARCH in agent.tools
    if not named and not (agent.tools is None and config.default):
        return WebSearchOffer(agent)
    if config.mcp is not None:
        if agent.tools is None:
            return WebSearchOffer(agent)  # every MCP tool of the folder's servers is offered
        tools = tuple(config.mcp if name == WEB_SEARCH else name for name in agent.tools)
        return WebSearchOffer(replace(agent, tools=tools))
    if model.config.kind != "anthropic":
        return WebSearchOffer(agent, problem=(
            f"{WEB_SEARCH} is not available: {model.model_id} is not an Anthropic model, and "
            "[tools.web_search] mcp names no MCP tool to search with"
        ))
    decision = decide(settings.policy, settings.mode, (), WEB_SEARCH, {}, cwd)
    if decision.action != "allow":
        why = decision.reason
        if decision.action == "ask":
            why += (", and Anthropic runs each search inside its reply, so none can wait for a "
                    "person: allow it with a rule (web_search, or Claude Code's WebSearch) or "
                    "run in full mode")
        return WebSearchOffer(agent, problem=f"{WEB_SEARCH} is not available: {why}")
    return WebSearchOffer(agent, server=server_tool(config))


def server_tool(config: WebSearchConfig) -> WebSearch:
    """The provider's web search as ``config`` has it."""
    return WebSearch(config.max_uses, config.allowed_domains, config.blocked_domains)
