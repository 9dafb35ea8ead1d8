"""Model names to model ids: the one place a name someone wrote becomes ``provider/model``.

A model is named in a dispatch (``--model``), the config (``default_model``), an agent's or
a custom command's front matter (``model:``), and by Claude Code's environment variables.
Every one of them is read here, as Claude Code reads it (its "model configuration" page):

- ``provider/model`` is itself (``anthropic/claude-sonnet-4-6``, ``ollama/qwen3:8b``).
- A full or dated Claude model name is Anthropic's: ``claude-opus-4-1-20250805`` is
  ``anthropic/claude-opus-4-1-20250805``.
- Claude Code's aliases: ``sonnet``, ``opus``, ``haiku``, ``fable``; ``best`` (the most
  capable model: roost cannot know whether an account has Fable, so Opus); ``opusplan``
  (Opus in plan mode, Sonnet otherwise); ``default`` (the config's ``default_model``:
  "clears any override", so not ``ANTHROPIC_MODEL``); a ``[1m]`` suffix on any of them or
  on a Claude name asks for the 1M-token context window (the registry sends the beta header).
- ``ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU,FABLE}_MODEL`` name the model of each alias
  (``ANTHROPIC_SMALL_FAST_MODEL``, deprecated, haiku's when the new one is unset);
  ``ANTHROPIC_MODEL`` the model when nothing else names one (above ``default_model``, as
  Claude Code puts the variable above its settings file). Their values are Anthropic's
  model names, or an alias, or ``provider/model``.
- The ``model`` of Claude Code's settings files (``chosen``: the user's, or a trusted
  project's) comes next, under ``ANTHROPIC_MODEL`` (as Claude Code orders them) and over
  ``default_model``; it is read as the variable's value is.
- ``[models]`` in the config wins over all of these, for any name, and may map an alias to
  any provider (``sonnet = "openai/gpt-4o"``). What an alias maps to is read again, so
  ``fast = "haiku"`` and ``best = "fable"`` work.

Pure: the environment is passed in (the dispatching client's), nothing is read or cached.
"""

from __future__ import annotations

from typing import Mapping

#: The suffix that asks for the 1M-token context window.
ONE_M = "[1m]"

#: Each of Claude Code's model families as roost names it when no variable says otherwise.
BUILTIN: Mapping[str, str] = {
    "sonnet": "anthropic/claude-sonnet-4-6",
    "opus": "anthropic/claude-opus-4-5",
    "haiku": "anthropic/claude-haiku-4-5",
    "fable": "anthropic/claude-fable-5",
}

#: The variables that name each family's model, first found wins.
VARIABLES: Mapping[str, tuple[str, ...]] = {
    "sonnet": ("ANTHROPIC_DEFAULT_SONNET_MODEL",),
    "opus": ("ANTHROPIC_DEFAULT_OPUS_MODEL",),
    "haiku": ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"),
    "fable": ("ANTHROPIC_DEFAULT_FABLE_MODEL",),
}

#: Every alias Claude Code defines (``default`` aside), without ``[1m]``.
ALIASES = (*BUILTIN, "best", "opusplan")

#: How many times a name may lead to another (``[models]`` chains, variables naming
#: aliases) before it is taken as a loop.
_HOPS = 8


def is_test_model(model: str) -> bool:
    """Whether ``model`` is the scripted test model: it replays a file's tool calls, so only
    the user (a dispatch's flags, their own config and agents) may name it, never a
    project's file (it would script what runs)."""
    return model.split("/", 1)[0] == "scripted"


class ModelNameError(ValueError):
    """A name that leads back to itself (``[models] a = "b"``, ``b = "a"``)."""


def model_id(
    name: str | None,
    aliases: Mapping[str, str],
    default: str,
    environ: Mapping[str, str],
    *,
    plan: bool = False,
    chosen: str | None = None,
) -> str:
    """The model id that ``name`` names (None: the model when nothing names one).

    ``aliases`` is the config's ``[models]``, ``default`` its ``default_model``,
    ``environ`` the dispatching client's environment, ``plan`` whether the run is in plan
    mode (for ``opusplan``), ``chosen`` the model Claude Code's settings files name. A name that is none of the forms above comes back as it is
    (the registry says it is not ``provider/model``).

    Raises:
        ModelNameError: the names lead in a circle.
    """
    if name is None:
        chosen = environ.get("ANTHROPIC_MODEL") or chosen
        name, anthropic = (chosen, True) if chosen else (default, False)
    else:
        anthropic = False
    seen: list[str] = []
    while True:
        if name in seen or len(seen) > _HOPS:
            raise ModelNameError(f"the model name {seen[0]!r} leads in a circle: {' -> '.join([*seen, name])}")
        seen.append(name)
        nxt, anthropic = _step(name, aliases, default, environ, plan, anthropic)
        if nxt is None:
            return name
        name = nxt


def _step(
    name: str, aliases: Mapping[str, str], default: str, environ: Mapping[str, str], plan: bool, anthropic: bool
) -> tuple[str | None, bool]:
    """What ``name`` leads to (None: it is final, as it is), and whether that is a value
    of one of Claude Code's variables (a bare name there is Anthropic's)."""
    if name in aliases:
        return aliases[name], False
    if name == "default":
        return default, False
    if name.endswith(ONE_M) and "/" not in name and not name.startswith("claude-"):
        # An alias with [1m]: the window only where it still names a Claude model.
        target = model_id(name[: -len(ONE_M)], aliases, default, environ, plan=plan)
        return (target + ONE_M if target.startswith("anthropic/") and not target.endswith(ONE_M) else target), False
    if name in ALIASES:
        family = "opus" if name == "best" or (name == "opusplan" and plan) else name
        family = "sonnet" if family == "opusplan" else family
        if family != name:
            return family, False  # through [models] and the variables again
        for variable in VARIABLES[family]:
            if environ.get(variable):
                return environ[variable], True
        return BUILTIN[family], False
    if "/" in name:
        return None, False
    if name.startswith("claude-") or anthropic:
        return f"anthropic/{name}", False
    return None, False
