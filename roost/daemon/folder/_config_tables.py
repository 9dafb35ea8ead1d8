"""A config file's tables, checked: a value of the wrong kind is a :class:`ConfigError` naming
the file and the key (see ``_config`` for the format).

Here are the checks every table shares and the tables read on their own: permission and
guardrail rules, ``[sandbox]``, ``[tools.env]``, ``[tools.web_fetch]``,
``[tools.web_search]`` and ``[memory]``. What is merged
onto the config layer by layer (providers, models, prices, hooks) is checked in ``_config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from roost.loop import GUARDRAIL_ACTIONS, Guardrail, PatternError, Rule, RuleError, linear_regex, parse_rule

from ..runs._environ import INHERIT, EnvPolicy
from ..sandbox import MODES as SANDBOX_MODES
from ..sandbox import SandboxConfig
from ._config_keys import MEMORY_KEYS, SANDBOX_KEYS, TOOLS_ENV_KEYS, WEB_FETCH_KEYS, WEB_SEARCH_KEYS

#: roost's name for web search (Claude Code's ``WebSearch``).
WEB_SEARCH = "web_search"


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file (and line)."""


def parse_rules(values: Any, action: str, source: str) -> list[Rule]:
    """Rule strings (``bash(git status*)``) of one action; ConfigError names the bad one."""
    if not isinstance(values, list):
        raise ConfigError(f"{source}: {action} rules must be a list")
    rules = []
    for text in values:
        try:
            rules.append(parse_rule(text, action, source))
        except RuleError as exc:
            raise ConfigError(f"{source}: {action}: {exc}") from None
    return rules


def guardrail(entry: Any, where: str) -> Guardrail:
    """One ``[[guardrails.rules]]`` entry (its pattern runs in linear time, whatever it says)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("pattern"), str):
        raise ConfigError(f"{where} needs pattern = a regular expression")
    on = entry.get("on", "input")
    if on not in ("input", "output"):
        raise ConfigError(f"{where}: on must be input or output")
    action = entry.get("action", "stop")
    if action not in GUARDRAIL_ACTIONS:
        raise ConfigError(f"{where}: action must be {' or '.join(GUARDRAIL_ACTIONS)}")
    try:
        linear_regex(entry["pattern"])
    except PatternError as exc:
        raise ConfigError(f"{where}: pattern cannot be used: {exc}") from None
    return Guardrail(str(entry.get("name", "custom")), on, entry["pattern"], str(entry.get("what", "")), action)


def table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """``data[key]``, a table (an empty one when there is none)."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be a table")
    return value


def known_only(section: Mapping[str, Any], keys: tuple[str, ...], name: str) -> Mapping[str, Any]:
    """``section``, a table whose reader refuses keys it does not know (``name`` says which
    table, for the message): a misspelt key must not pass unnoticed."""
    unknown = set(section) - set(keys)
    if unknown:
        raise ConfigError(f"{name} has no {', '.join(sorted(unknown))} ({', '.join(keys)})")
    return section


def flag(section: Mapping[str, Any], key: str, default: bool, name: str) -> bool:
    """``section[key]``, true or false (``default`` when absent); ``name`` says which table."""
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{name} {key} must be true or false")
    return value


def strings(value: Any, where: str) -> dict[str, str]:
    """``value``, a table of strings."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where} must be a table of strings")
    return dict(value)


def sandbox_table(data: Mapping[str, Any], where: str, root: str | None) -> SandboxConfig:
    """A file's ``[sandbox]`` (``root``: where its relative paths start; None: the session
    folder). Unknown keys are errors: a misspelt narrowing must not pass unnoticed."""
    section = known_only(table(data, "sandbox", where), SANDBOX_KEYS, f"{where}: [sandbox]")
    mode = section.get("mode")
    if mode is not None and mode not in SANDBOX_MODES:
        raise ConfigError(f"{where}: [sandbox] mode must be one of {', '.join(SANDBOX_MODES)}")
    for key in ("network", "auto_allow"):
        flag(section, key, False, f"{where}: [sandbox]")
    for key in ("writable", "hide", "readable"):
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            raise ConfigError(f"{where}: [sandbox] {key} must be a list of paths")
    writable, readable = section.get("writable"), section.get("readable")
    return SandboxConfig(
        mode=mode,
        writable=tuple(writable) if writable is not None else None,
        readable=tuple(readable) if readable is not None else None,
        network=section.get("network"),
        hide=tuple(section.get("hide", ())),
        auto_allow=section.get("auto_allow"),
        source=where,
        root=root,
    )


def passed(data: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """A file's ``[tools.env] pass``: the secret-looking variables tools may still see."""
    return _names(table(table(data, "tools", where), "env", f"{where}: [tools]"), "pass", where)


def _names(env: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    names = env.get(key, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: [tools.env] {key} must be a list of variable names")
    return tuple(names)


def env_policy(data: Mapping[str, Any], where: str) -> EnvPolicy:
    """The user's ``[tools.env]`` (its ``pass`` is read by :func:`passed`)."""
    env = known_only(table(table(data, "tools", where), "env", f"{where}: [tools]"), TOOLS_ENV_KEYS, f"{where}: [tools.env]")
    inherit = env.get("inherit", "all")
    if inherit not in INHERIT:
        raise ConfigError(f"{where}: [tools.env] inherit must be one of {', '.join(INHERIT)}")
    values = env.get("set", {})
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise ConfigError(f"{where}: [tools.env] set must be a table of strings")
    return EnvPolicy(inherit, _names(env, "exclude", where), _names(env, "include_only", where), dict(values))


def fetch_private(data: Mapping[str, Any], where: str) -> bool:
    """The user's ``[tools.web_fetch] allow_private``."""
    name = f"{where}: [tools.web_fetch]"
    section = known_only(table(table(data, "tools", where), "web_fetch", f"{where}: [tools]"), WEB_FETCH_KEYS, name)
    return flag(section, "allow_private", False, name)


@dataclass(frozen=True, slots=True)
class WebSearchConfig:
    """The user's ``[tools.web_search]``."""

    #: Runs whose agent names no tools search the web too.
    default: bool = False
    #: Searches one reply may make (Anthropic's ``max_uses``).
    max_uses: int = 5
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    #: An MCP tool (``server__tool``) that searches instead, for any model.
    mcp: str | None = None


def web_search_table(data: Mapping[str, Any], where: str) -> WebSearchConfig:
    """The user's ``[tools.web_search]`` (see ``roost.daemon.runs._web_search``)."""
    name = f"{where}: [tools.web_search]"
    section = known_only(table(table(data, "tools", where), "web_search", f"{where}: [tools]"), WEB_SEARCH_KEYS, name)
    default = flag(section, "default", False, name)
    uses = section.get("max_uses", 5)
    if not isinstance(uses, int) or isinstance(uses, bool) or uses < 1:
        raise ConfigError(f"{name} max_uses must be a whole number of at least 1")
    domains = {}
    for key in ("allowed_domains", "blocked_domains"):
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(d, str) and d for d in value):
            raise ConfigError(f"{name} {key} must be a list of domains")
        domains[key] = tuple(value)
    if domains["allowed_domains"] and domains["blocked_domains"]:
        raise ConfigError(f"{name} takes allowed_domains or blocked_domains, not both")
    mcp = section.get("mcp")
    if mcp is not None and (not isinstance(mcp, str) or "__" not in mcp.strip("_")):
        raise ConfigError(f"{name} mcp must name an MCP tool as server__tool")
    return WebSearchConfig(default, uses, domains["allowed_domains"], domains["blocked_domains"], mcp)


def memory_learns(data: Mapping[str, Any], where: str) -> bool:
    """The user's ``[memory] learn``: every run learns (unless its agent says otherwise)."""
    section = known_only(table(data, "memory", where), MEMORY_KEYS, f"{where}: [memory]")
    return flag(section, "learn", False, f"{where}: [memory]")


def memory_embeddings(data: Mapping[str, Any], where: str) -> str | None:
    """The user's ``[memory] embeddings``: the ``provider/model`` that embeds memory entries
    for vector search (None: lexical search only; see ``roost.daemon.memory._embedder``)."""
    model = table(data, "memory", where).get("embeddings")
    if model is None:
        return None
    name, sep, rest = model.partition("/") if isinstance(model, str) else ("", "", "")
    if not (name and sep and rest):
        raise ConfigError(f"{where}: [memory] embeddings must name a model as provider/model")
    return str(model)
