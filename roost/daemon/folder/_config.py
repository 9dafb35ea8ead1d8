"""Configuration: built-in defaults, the user's ``config.toml``, the project's ``.roost/config.toml``.

Later layers override earlier ones key by key (a project may change one field of a provider).
API keys are never read from these files: a provider names the environment variable that
holds its key, and the key is read from the dispatching client's environment (else the
daemon's) when the provider is built. Files are read again on every use, so an edit takes
effect without a restart.

A project's file is someone else's word until its user trusts it (see ``_trust``): what it
says that widens — ``[providers]``, ``default_model``, ``[models]``, ``[permissions] allow``,
``[guardrails] secrets = false``, ``[hooks]``, ``[tools.env] pass`` — is reported as a
:class:`Widening` and applied only while the file is trusted with this content (a hook also
only while the project files its command runs are: see ``_scripts``); the rest (deny and
ask rules, guardrail rules, prices, windows, compaction) always applies.

    default_model = "anthropic/claude-sonnet-4-6"

    [providers.ollama]
    kind = "openai"                        # anthropic | openai
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = ""                       # no key needed
    headers = { "x-team" = "tools" }
    timeout = 600                          # seconds
    max_retries = 2
    models = { small = "qwen3:8b" }        # aliases: ollama/small -> ollama/qwen3:8b

    [models]                               # aliases for whole model ids
    fast = "anthropic/claude-haiku-4-5"
    sonnet = "openai/gpt-4o"               # Claude's tiers too (agents' model: sonnet)

    [prices."anthropic/claude-sonnet-4-6"] # USD per million tokens
    input = 3.0
    output = 15.0

    [permissions]                          # rules add up across files; deny wins
    allow = ["bash(git status*)", "bash(npm test)", "write(src/**)"]
    ask = ["bash(git push*)"]
    deny = ["read(~/.ssh/**)", "bash(rm -rf *)"]
    approval_timeout = 600                 # seconds; an unanswered request is denied

    [guardrails]
    secrets = true                         # the built-in secrets guardrail (default on)
    [[guardrails.rules]]
    name = "no-prod"
    on = "output"                          # input | output
    pattern = 'prod[.]example[.]com'
    what = "the production host"
    action = "stop"                        # stop (default: the run ends) | warn (it goes on)

    [context_windows]                      # tokens; anthropic and openai have defaults
    "ollama/qwen3:8b" = 32768
    [compaction]                           # summarize older history when a call would
    at = 0.8                               # fill this share of the window,
    keep_turns = 6                         # keeping the last replies whole

    [[hooks.pre_tool]]                     # also [[hooks.post_tool]]; Claude Code's
    match = "bash"                         # tool glob (default "*")   settings.json hooks:
                                           # see _claude_settings
    command = "python3 .roost/hooks/check.py"
    timeout = 30

    [tools.env]                            # secrets tools, hooks and MCP servers may see
    pass = ["GITHUB_TOKEN"]                # (others named *KEY*, *TOKEN*, ... are removed)

    [tools.web_fetch]                      # your config only: a project's is not read
    allow_private = false                  # true: web_fetch may reach this machine and
                                           # private networks (loopback, 10/8, 192.168/16, ...)

    [tools.web_search]                     # your config only (see runs._web_search)
    default = false                        # true: agents that name no tools search too
    max_uses = 5                           # searches a reply may make
    blocked_domains = ["example.com"]      # or allowed_domains (not both)
    mcp = "search__web"                    # an MCP tool that searches instead, any model

    [memory]                               # your config only
    learn = false                          # true: each run's durable facts are learned at
                                           # its end (an agent's memory: learn / off says)
    embeddings = "local/nomic-embed-text"  # an OpenAI-compatible /embeddings model: recall
                                           # ranks by meaning too (hybrid with the words)

    [sandbox]                              # where bash commands run (see roost.daemon.sandbox)
    mode = "workspace"                     # workspace (default) | read-only | off
    writable = ["~/.cache"]                # more folders commands may write (workspace mode)
    network = false                        # true: commands may reach the network
    hide = ["~/private"]                   # more files and folders commands must not see
    auto_allow = false                     # agent mode runs bash calls no rule asks about
                                           # without asking, while the sandbox holds them

In ``writable`` and ``hide``, ``~`` is the user's home and a relative path starts at the
session's folder (the user's file) or the project's root (a project's file).
A project's ``[sandbox]`` may only narrow, trusted or not: a stricter mode, ``network =
false``, ``auto_allow = false``, more ``hide``, and ``writable`` as a filter on the user's
list (paths relative to the project's root). What it says that would widen is left out and
named in the run's ``run.started`` (``sandbox.ignored``).
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from roost.loop import Guardrail, Rule, secrets_guardrails

from ..runs._environ import EnvPolicy
from ..sandbox import SandboxConfig
from ._claude import tool_matcher
from ._config_keys import unknown_keys
from ._config_tables import (
    ConfigError,
    env_policy,
    WebSearchConfig,
    fetch_private,
    flag,
    guardrail,
    memory_embeddings,
    memory_learns,
    parse_rules,
    passed,
    sandbox_table,
    strings,
    table,
    web_search_table,
)
from ._models import ONE_M, model_id
from ._project import project_config_file, user_config_file
from ._reading import FolderFiles
from ._scripts import shell_words
from ._review import command_warnings, rule_warnings, secret_warnings, shell_variables
from ._trust import NO_TRUST, Script, Trust, Widening, digest

#: The model used when nothing names one.
BUILTIN_DEFAULT_MODEL = "anthropic/claude-sonnet-4-6"

KINDS = ("anthropic", "openai", "scripted")

#: The kinds of hooks config.toml has: before and after a tool call.
HOOK_KINDS = ("pre_tool", "post_tool")


@dataclass(frozen=True, slots=True)
class Hook:
    """One configured hook (see roost.daemon.runs._hooks for what hooks do).

    ``kind`` is ``pre_tool`` or ``post_tool`` (config.toml, and Claude Code's PreToolUse and
    PostToolUse), ``prompt`` (UserPromptSubmit) or ``stop`` (Stop).
    """

    kind: str
    #: Tool names it applies to: a glob (``bash``, ``everything__*``, ``*``), or for a
    #: Claude Code hook its matcher (``Bash|Edit``, ``mcp__.*``; see ``_claude``).
    match: str
    command: str
    timeout: float = 30.0
    source: str = ""
    #: The Claude Code event of a hook from a ``settings.json`` (it gets Claude Code's
    #: payload and is read as Claude Code reads it); None: roost's own format.
    event: str | None = None
    #: A Claude Code plugin's hook: the plugin's folder (its ``CLAUDE_PLUGIN_ROOT``). The
    #: user installed and enabled it: it runs as the user's own hooks do.
    plugin_root: str | None = None
    #: Claude Code's ``if``: a permission rule (``Bash(git *)``) a tool call must match for
    #: the hook to run, as a deny rule of it would refuse the call (None: every call).
    condition: Rule | None = None
    #: Claude Code's ``async``: it runs off the run's way, its answer ignored.
    background: bool = False

    def applies(self, tool: str) -> bool:
        """Whether the hook runs for calls of ``tool``."""
        if self.event is not None:
            return tool_matcher(self.match)(tool)
        return fnmatch.fnmatchcase(tool, self.match)


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One provider entry."""

    name: str
    kind: str
    base_url: str | None = None
    #: Name of the environment variable holding the key ("" or None: no key needed).
    api_key_env: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 600.0
    max_retries: int = 2
    models: Mapping[str, str] = field(default_factory=dict)
    #: Where the entry (or its last change) came from: "built-in" or a file path.
    source: str = "built-in"

    def api_key(self, environ: Mapping[str, str]) -> str | None:
        """The key from the environment, or None when none is needed or it is unset."""
        return environ.get(self.api_key_env) or None if self.api_key_env else None

    def needs_key(self) -> bool:
        """Whether the provider cannot work without a key."""
        return bool(self.api_key_env)


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


def price_map(price: Price | None) -> dict[str, float] | None:
    """A price as the plain map the loop takes (None stays None)."""
    return None if price is None else asdict(price)


@dataclass(frozen=True, slots=True)
class Config:
    """The merged configuration for one working directory."""

    providers: Mapping[str, ProviderConfig]
    default_model: str = BUILTIN_DEFAULT_MODEL
    #: The model Claude Code's settings files name (the user's, or a trusted project's),
    #: over ``default_model`` (see ``_models``).
    claude_model: str | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    prices: Mapping[str, Price] = field(default_factory=dict)
    #: The files that were read, in order.
    files: tuple[str, ...] = ()
    #: Permission rules of every file, in order (each knows its file).
    rules: tuple[Rule, ...] = ()
    approval_timeout: float | None = None
    #: Whether the built-in secrets guardrail is on, and the configured guardrails.
    secrets: bool = True
    guardrails: tuple[Guardrail, ...] = ()
    hooks: tuple[Hook, ...] = ()
    #: Context windows in tokens by model id (beside the built-in ones per provider), and
    #: when and how compaction cuts.
    context_windows: Mapping[str, int] = field(default_factory=dict)
    compact_at: float = 0.8
    keep_turns: int = 6
    #: Secret-looking variables tool processes may still see (``[tools.env] pass``).
    tool_env_pass: tuple[str, ...] = ()
    #: The user's ``[tools.env]`` but for ``pass`` (which is :attr:`tool_env_pass`).
    tool_env: EnvPolicy = EnvPolicy()
    #: web_fetch may reach loopback, link-local and private addresses (the user's
    #: ``[tools.web_fetch] allow_private``; a project cannot say so).
    fetch_private: bool = False
    #: The user's ``[tools.web_search]`` (a project cannot say).
    web_search: WebSearchConfig = WebSearchConfig()
    #: Every run learns durable facts at its end (the user's ``[memory] learn``).
    memory_learn: bool = False
    #: The model that embeds memory entries for vector search, ``provider/model`` (the
    #: user's ``[memory] embeddings``; None: lexical search only).
    memory_embeddings: str | None = None
    #: What the project's file says that widens, each marked trusted (applied) or not.
    widening: tuple[Widening, ...] = ()
    #: The user's ``[sandbox]``, and the project's, which may only narrow it.
    sandbox: SandboxConfig = SandboxConfig()
    project_sandbox: SandboxConfig | None = None
    #: Keys of the files that roost does not read (typos, most often), one line each.
    warnings: tuple[str, ...] = ()

    def model_id(self, name: str | None, environ: Mapping[str, str], *, plan: bool = False) -> str:
        """The model ``name`` names (None: the one used when nothing names one), with
        ``[models]``, Claude Code's aliases and ``environ``'s variables (see ``_models``).
        So ``[models] sonnet = "openai/gpt-4o"`` runs Claude Code's agents without an
        Anthropic key.

        Raises:
            ModelNameError: the names lead in a circle.
        """
        return model_id(name, self.aliases, self.default_model, environ, plan=plan, chosen=self.claude_model)

    def context_window(self, model_id: str) -> int | None:
        """The window of ``model_id``: configured, else the provider's usual one, else None
        (no compaction)."""
        if model_id in self.context_windows:
            return self.context_windows[model_id]
        if model_id.endswith(ONE_M):
            return 1_000_000
        return BUILTIN_WINDOWS.get(model_id.split("/", 1)[0])

    def all_guardrails(self) -> tuple[Guardrail, ...]:
        """The guardrails a run gets: the built-in one (unless turned off), then the configured."""
        return (secrets_guardrails() if self.secrets else ()) + self.guardrails


BUILTIN_PROVIDERS: Mapping[str, ProviderConfig] = {
    "anthropic": ProviderConfig("anthropic", "anthropic", api_key_env="ANTHROPIC_API_KEY"),
    "openai": ProviderConfig("openai", "openai", api_key_env="OPENAI_API_KEY"),
    "scripted": ProviderConfig("scripted", "scripted"),
}

#: A few list prices (USD per million tokens); config overrides or adds.
BUILTIN_PRICES: Mapping[str, Price] = {
    "anthropic/claude-sonnet-4-6": Price(3.0, 15.0, 0.3, 3.75),
    "anthropic/claude-sonnet-4-5": Price(3.0, 15.0, 0.3, 3.75),
    "anthropic/claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25),
    "anthropic/claude-opus-4-5": Price(5.0, 25.0, 0.5, 6.25),
    "openai/gpt-4o": Price(2.5, 10.0, 1.25, 0.0),
    "openai/gpt-4o-mini": Price(0.15, 0.6, 0.075, 0.0),
}


#: Context windows (tokens) of each built-in provider's models.
BUILTIN_WINDOWS: Mapping[str, int] = {"anthropic": 200_000, "openai": 128_000}


def load_config(
    cwd: str | None = None, environ: Mapping[str, str] = os.environ, trust: Trust = NO_TRUST
) -> Config:
    """Built-ins, then the user file, then the project file for ``cwd``: the config alone
    (a folder's whole setup reads it with the rest: see :func:`config_from`).

    ``environ`` is the dispatching client's environment (``ROOST_MODEL``,
    ``ANTHROPIC_BASE_URL``, ...); ``trust`` says whether the project file may widen.
    Reads files: call it in a worker thread.

    Raises:
        ConfigError: a file cannot be read, is not valid TOML, or has a value of the wrong
            kind (trusted or not: a broken file is reported, never half-read).
    """
    return config_from(FolderFiles(cwd, environ, trust))


def config_from(files: FolderFiles) -> Config:
    """Built-ins, then the user file, then the project file, as one reading of a folder
    has them (see :func:`load_config`).

    Raises:
        ConfigError: as :func:`load_config`.
    """
    environ = files.environ
    config = Config(
        providers=_builtin_providers(environ),
        default_model=environ.get("ROOST_MODEL") or BUILTIN_DEFAULT_MODEL,
        prices=dict(BUILTIN_PRICES),
    )
    user = user_config_file()
    if user.is_file():
        parsed = _parse(user, read_config(files, user, own=True))
        config = replace(
            _merge(config, parsed, str(user)),
            tool_env_pass=passed(parsed, str(user)),
            tool_env=env_policy(parsed, str(user)),
            sandbox=sandbox_table(parsed, str(user), None),
            fetch_private=fetch_private(parsed, str(user)),
            web_search=web_search_table(parsed, str(user)),
            memory_learn=memory_learns(parsed, str(user)),
            memory_embeddings=memory_embeddings(parsed, str(user)),
            warnings=tuple(unknown_keys(parsed, str(user))),
        )
    project = project_config_file(files.root)
    if project is not None:
        root = os.fspath(project.parent.parent)
        data = read_config(files, project)
        parsed = _parse(project, data)
        # Checked whole first: an error anywhere in the file is an error, trusted or not.
        _merge(config, parsed, str(project))
        passed(parsed, str(project))
        # Not a widening to trust: whatever the project's [sandbox] says, it only narrows.
        sandbox = sandbox_table(parsed, str(project), root)
        trusted = files.covers(project)

        def runs(command: str) -> tuple[Script, ...]:
            # A hook runs in the session's folder, and is written for the project's root.
            return files.scripts(shell_words(command), (files.cwd or root, root))

        widening = _widening(parsed, str(project), digest(data), trusted, runs)
        if trusted:
            config = _merge(config, parsed, str(project))
            config = replace(config, tool_env_pass=(*config.tool_env_pass, *passed(parsed, str(project))))
            # A hook whose script changed since the file was trusted does not run.
            changed = {item.detail for item in widening if item.kind == "hook" and not item.trusted}
            kept = [hook for hook in config.hooks if hook.source != str(project) or hook.command not in changed]
            config = replace(config, hooks=tuple(kept))
        else:
            config = _merge(config, _narrowing(parsed), str(project))
        warnings = (*config.warnings, *unknown_keys(parsed, str(project)))
        # What only the user may say, said by a project: left out, and said so.
        warnings += tuple(
            f"{project}: [tools.{key}] is read from your own config.toml only: left out"
            for key in ("web_fetch", "web_search") if key in table(parsed, "tools", str(project))
        ) + ((f"{project}: [memory] is read from your own config.toml only: left out",) if "memory" in parsed else ())
        config = replace(config, widening=widening, project_sandbox=sandbox, warnings=warnings)
    return config


def _widening(
    data: Mapping[str, Any], source: str, digest: str, trusted: bool, runs: Callable[[str], tuple[Script, ...]]
) -> tuple[Widening, ...]:
    """Everything a (checked) project file says that widens what roost does (``runs``: the
    project files a hook's command runs)."""
    found: list[Widening] = []

    def add(
        kind: str, name: str, detail: str = "", *, values: tuple[tuple[str, str], ...] = (),
        variables: tuple[str, ...] = (), warnings: tuple[str, ...] = (),
    ) -> None:
        ran = runs(detail) if kind == "hook" else ()
        applies = trusted and all(s.trusted for s in ran)
        found.append(Widening(kind, name, detail, source, digest, applies, ran, values, variables, warnings))

    for name, entry in data.get("providers", {}).items():
        shown = {k: v for k, v in entry.items() if k in ("kind", "base_url", "api_key_env")}
        headers = sorted(entry.get("headers", {}))
        detail = ", ".join([*(f"{k} = {v}" for k, v in shown.items()), *([f"headers: {', '.join(headers)}"] if headers else [])])
        key = (entry["api_key_env"],) if entry.get("api_key_env") else ()
        url = entry.get("base_url")
        sends = (f"model calls, with the provider's key, go to {url}",) if url else ()
        values = tuple((f"headers.{k}", str(v)) for k, v in entry.get("headers", {}).items())
        add("provider", name, detail, values=values, variables=key, warnings=sends + secret_warnings(key, f"the provider {name}"))
    if "default_model" in data:
        add("default model", data["default_model"])
    for alias, target in data.get("models", {}).items():
        add("model alias", alias, target)
    for rule in data.get("permissions", {}).get("allow", []):
        add("allow rule", rule, warnings=rule_warnings(rule))
    if data.get("guardrails", {}).get("secrets") is False:
        off = "the built-in secrets guardrail is switched off"
        add("guardrail off", "secrets", off, warnings=("secrets the model reads or writes are no longer caught",))
    for kind, entries in data.get("hooks", {}).items():
        for entry in entries:
            command = entry["command"]
            hook = f"{kind} {entry.get('match', '*')}"
            add("hook", hook, command, variables=shell_variables(command), warnings=command_warnings(command))
    for name in passed(data, source):
        add("secret passed to tools", name, variables=(name,), warnings=(f"every command the model runs gets {name}",))
    return tuple(found)


def _narrowing(data: Mapping[str, Any]) -> dict[str, Any]:
    """A project file without what widens: what an untrusted folder's file still does."""
    kept = {k: v for k, v in data.items() if k not in ("providers", "default_model", "models", "hooks", "tools")}
    if "permissions" in kept:
        kept["permissions"] = {k: v for k, v in kept["permissions"].items() if k != "allow"}
    if kept.get("guardrails", {}).get("secrets") is False:
        kept["guardrails"] = {k: v for k, v in kept["guardrails"].items() if k != "secrets"}
    return kept


def _builtin_providers(environ: Mapping[str, str]) -> dict[str, ProviderConfig]:
    providers = dict(BUILTIN_PROVIDERS)
    for name, variable in (("anthropic", "ANTHROPIC_BASE_URL"), ("openai", "OPENAI_BASE_URL")):
        if environ.get(variable):
            providers[name] = replace(providers[name], base_url=environ[variable])
    if providers["openai"].base_url is None:
        providers["openai"] = replace(providers["openai"], base_url="https://api.openai.com/v1")
    return providers


def read_config(files: FolderFiles, path: Path, *, own: bool = False) -> bytes:
    """A config file's bytes as the folder's reading gives them (ConfigError if not)."""
    try:
        return files.read(path, own=own)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None


def _parse(path: Path, data: bytes) -> Mapping[str, Any]:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _merge(config: Config, data: Mapping[str, Any], source: str) -> Config:
    where = source
    providers = dict(config.providers)
    for name, entry in table(data, "providers", where).items():
        entry = table({"p": entry}, "p", f"{where} [providers.{name}]")
        base = providers.get(name)
        kind = _str(entry, "kind", where, name) or (base.kind if base else None)
        if kind not in KINDS:
            raise ConfigError(f"{where}: [providers.{name}] needs kind = one of {', '.join(KINDS[:2])}")
        merged = base if base is not None and base.kind == kind else ProviderConfig(name, kind)
        updates: dict[str, Any] = {"source": source, "kind": kind}
        for key in ("base_url", "api_key_env"):
            if key in entry:
                updates[key] = _str(entry, key, where, name)
        for key, cast in (("timeout", float), ("max_retries", int)):
            if key in entry:
                value = entry[key]
                if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                    raise ConfigError(f"{where}: [providers.{name}] {key} must be a number >= 0")
                updates[key] = cast(value)
        for key in ("headers", "models"):
            if key in entry:
                given = strings(entry[key], f"{where}: [providers.{name}] {key}")
                updates[key] = {**getattr(merged, key), **given}
        if "api_key" in entry:
            raise ConfigError(
                f"{where}: [providers.{name}] api_key is not read from files; "
                "set api_key_env to the name of an environment variable instead"
            )
        providers[name] = replace(merged, **updates)
    aliases = {**config.aliases, **strings(data.get("models", {}), f"{where}: [models]")}
    prices = dict(config.prices)
    for model, entry in table(data, "prices", where).items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: [prices.\"{model}\"] must be a table")
        try:
            prices[model] = Price(**{k: float(v) for k, v in entry.items()})
        except (TypeError, ValueError):
            raise ConfigError(
                f"{where}: [prices.\"{model}\"] takes input, output, cache_read, cache_write (numbers)"
            ) from None
    default = data.get("default_model", config.default_model)
    if not isinstance(default, str):
        raise ConfigError(f"{where}: default_model must be a string")
    return replace(
        _merge_safety(config, data, source),
        providers=providers,
        default_model=default,
        aliases=aliases,
        prices=prices,
        files=(*config.files, source),
    )


def _merge_safety(config: Config, data: Mapping[str, Any], where: str) -> Config:
    """``[permissions]``, ``[guardrails]`` and ``[hooks]``: rules and hooks add up across files."""
    permissions = table(data, "permissions", where)
    rules = list(config.rules)
    for action in ("allow", "ask", "deny"):
        values = permissions.get(action, [])
        if not isinstance(values, list):
            raise ConfigError(f"{where}: [permissions] {action} must be a list of rules")
        rules += parse_rules(values, action, where)
    timeout = permissions.get("approval_timeout", config.approval_timeout)
    if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0):
        raise ConfigError(f"{where}: [permissions] approval_timeout must be a number of seconds > 0")
    rails = table(data, "guardrails", where)
    secrets = flag(rails, "secrets", config.secrets, f"{where}: [guardrails]")
    guardrails = list(config.guardrails)
    for i, entry in enumerate(rails.get("rules", [])):
        guardrails.append(guardrail(entry, f"{where}: [[guardrails.rules]] #{i + 1}"))
    hooks = list(config.hooks)
    for kind, entries in table(data, "hooks", where).items():
        if kind not in HOOK_KINDS or not isinstance(entries, list):
            raise ConfigError(f"{where}: hooks are [[hooks.pre_tool]] and [[hooks.post_tool]] entries")
        for i, entry in enumerate(entries):
            hooks.append(_hook(kind, entry, f"{where}: [[hooks.{kind}]] #{i + 1}", where))
    compaction = table(data, "compaction", where)
    compact_at = compaction.get("at", config.compact_at)
    keep_turns = compaction.get("keep_turns", config.keep_turns)
    if not isinstance(compact_at, (int, float)) or isinstance(compact_at, bool) or not 0 < compact_at <= 1:
        raise ConfigError(f"{where}: [compaction] at must be a share of the window, above 0 and at most 1")
    if not isinstance(keep_turns, int) or isinstance(keep_turns, bool) or keep_turns < 0:
        raise ConfigError(f"{where}: [compaction] keep_turns must be a whole number >= 0")
    windows = dict(config.context_windows)
    for model, size in table(data, "context_windows", where).items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError(f"{where}: [context_windows] \"{model}\" must be a number of tokens")
        windows[model] = size
    return replace(
        config,
        context_windows=windows,
        compact_at=float(compact_at),
        keep_turns=keep_turns,
        rules=tuple(rules),
        approval_timeout=float(timeout) if timeout is not None else None,
        secrets=secrets,
        guardrails=tuple(guardrails),
        hooks=tuple(hooks),
    )


def _hook(kind: str, entry: Any, where: str, source: str) -> Hook:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not entry["command"].strip():
        raise ConfigError(f"{where} needs command = a shell command")
    match = entry.get("match", "*")
    timeout = entry.get("timeout", 30)
    if not isinstance(match, str):
        raise ConfigError(f"{where}: match must be a tool name or glob")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"{where}: timeout must be a number of seconds > 0")
    return Hook(kind, match, entry["command"], float(timeout), source)


def _str(entry: Mapping[str, Any], key: str, where: str, name: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}: [providers.{name}] {key} must be a string")
    return value
