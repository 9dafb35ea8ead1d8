"""The keys ``config.toml`` has, to warn about the ones it does not: a typo such as
``default-model`` or ``[permisions]`` would otherwise be ignored without a word.

Unknown keys are warnings, not errors: a file written for a newer roost still loads. The
tables whose keys are names (providers, model aliases, prices, MCP servers, hosts) are
walked one level further where their entries have fixed keys.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

#: Any key: a table whose keys are names the user chooses.
_NAMES: Mapping[str, Any] = {}
#: Each key a name, and each entry's keys these.
_PROVIDER = frozenset({"kind", "base_url", "api_key_env", "timeout", "max_retries", "headers", "models", "api_key"})
_PRICE = frozenset({"input", "output", "cache_read", "cache_write"})
#: The keys of the tables whose readers refuse any other (``_config_tables``), in the order
#: their messages name them.
SANDBOX_KEYS = ("mode", "writable", "network", "hide", "auto_allow", "readable")
TOOLS_ENV_KEYS = ("pass", "inherit", "exclude", "include_only", "set")
WEB_FETCH_KEYS = ("allow_private",)
MEMORY_KEYS = ("learn", "embeddings")
WEB_SEARCH_KEYS = ("default", "max_uses", "allowed_domains", "blocked_domains", "mcp")

#: Top-level key -> what it holds: None (a value), a frozenset of keys, a dict of nested
#: tables, or ("each", keys) for a table of named entries with those keys.
_SCHEMA: Mapping[str, Any] = {
    "default_model": None,
    "providers": ("each", _PROVIDER),
    "models": _NAMES,
    "prices": ("each", _PRICE),
    "context_windows": _NAMES,
    "permissions": frozenset({"allow", "ask", "deny", "approval_timeout"}),
    "guardrails": frozenset({"secrets", "rules"}),
    "hooks": frozenset({"pre_tool", "post_tool"}),
    "compaction": frozenset({"at", "keep_turns"}),
    "sandbox": frozenset(SANDBOX_KEYS),
    "tools": {"env": frozenset(TOOLS_ENV_KEYS), "web_fetch": frozenset(WEB_FETCH_KEYS),
              "web_search": frozenset(WEB_SEARCH_KEYS)},
    "mcp": {"servers": _NAMES},
    "memory": frozenset(MEMORY_KEYS),
    "hosts": ("each", frozenset({"url", "roost"})),
}


def unknown_keys(data: Mapping[str, Any], path: str) -> list[str]:
    """A warning for each key of ``data`` (a parsed ``config.toml``) that roost does not
    read, with the known key it most resembles."""
    out: list[str] = []
    _walk(data, _SCHEMA, "", path, out)
    return out


def _walk(data: Mapping[str, Any], schema: Any, where: str, path: str, out: list[str]) -> None:
    if isinstance(schema, tuple):
        _, keys = schema
        for name, entry in data.items():
            if isinstance(entry, dict):
                _walk(entry, keys, f"{where}.{name}", path, out)
        return
    if schema is _NAMES:
        return
    known = list(schema)
    for key, value in data.items():
        if key not in schema:
            out.append(_warning(path, where, key, value, known))
        elif isinstance(schema, dict) and schema[key] is not None and isinstance(value, dict):
            _walk(value, schema[key], f"{where}.{key}", path, out)


def _warning(path: str, where: str, key: str, value: Any, known: list[str]) -> str:
    table = isinstance(value, dict)
    named = f"[{where[1:]}.{key}]" if where and table else f"[{key}]" if table else key
    place = f" in [{where[1:]}]" if where and not table else ""
    # A dash for an underscore is the usual slip, and difflib's ratio misses few others.
    near = difflib.get_close_matches(key.replace("-", "_"), known, n=1, cutoff=0.6)
    hint = f"; did you mean {_shown(where, near[0], table)}?" if near else f" (known: {', '.join(sorted(known))})"
    return f"{path}: unknown {'table' if table else 'key'} {named}{place}, ignored{hint}"


def _shown(where: str, key: str, table: bool) -> str:
    if not table:
        return key
    return f"[{where[1:]}.{key}]" if where else f"[{key}]"
