"""Model ids to providers: ``provider/model`` resolved against the configuration.

Resolution: the name as ``folder._models`` reads it (``[models]``, Claude Code's aliases,
names and variables: ``Config.model_id``), then the provider's own model aliases. A Claude
model with ``[1m]`` is sent without it, with the 1M-context beta header.
Providers are built on first use and shared by every session; one instance per distinct
setting (name, kind, URL, key, headers, timeout, retries), so an edited config gets a fresh
client while the old one serves the runs that began with it. The Anthropic SDK costs most
of a second to import, so it is imported the first time an ``anthropic`` provider is built.
"""

from __future__ import annotations

import gc
import os
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..folder._config import Config, Price, ProviderConfig
from ..folder._models import ONE_M, ModelNameError
from ._base import Provider, ProviderUnavailable

#: The beta that gives a Claude model its 1M-token context window (Claude Code's ``[1m]``).
_CONTEXT_1M = "context-1m-2025-08-07"


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a model id came to."""

    provider: Provider
    #: The model's name at its provider.
    model: str
    #: The canonical id, ``provider/model``, after aliases (``[1m]`` kept: it is another
    #: window and price).
    model_id: str
    config: ProviderConfig
    price: Price | None


class ProviderRegistry:
    """Resolves model ids and owns the provider instances in use."""

    def __init__(self) -> None:
        self._providers: dict[tuple[Any, ...], Provider] = {}

    def resolve(
        self, named: str | None, config: Config, environ: Mapping[str, str] = os.environ, *, plan: bool = False
    ) -> Resolved:
        """The provider for the model ``named`` names under ``config`` (None: the one used
        when nothing names one; ``plan``: the run is in plan mode, for ``opusplan``), with
        its key from ``environ`` (the dispatching client's environment, whose variables
        also name models; the key stays in this process's memory).

        Raises:
            ProviderUnavailable: malformed id, unknown provider, or a provider that cannot
                be used as configured (for one that needs a key: the key is not set).
        """
        try:
            model_id = config.model_id(named, environ, plan=plan)
        except ModelNameError as exc:
            raise ProviderUnavailable(str(exc)) from None
        name, sep, model = model_id.partition("/")
        if not sep or not name or not model:
            raise ProviderUnavailable(
                f"model id {model_id!r} is not of the form provider/model "
                f"(providers: {', '.join(sorted(config.providers))}){_suggestion(model_id, config)}"
            )
        entry = config.providers.get(name)
        if entry is None:
            raise ProviderUnavailable(
                f"unknown provider {name!r} (configured: {', '.join(sorted(config.providers))})"
            )
        model = entry.models.get(model, model)
        canonical = f"{name}/{model}"
        if entry.kind == "anthropic" and model.endswith(ONE_M):
            model = model[: -len(ONE_M)]
            beta = ",".join(filter(None, (entry.headers.get("anthropic-beta"), _CONTEXT_1M)))
            entry = replace(entry, headers={**entry.headers, "anthropic-beta": beta})
        key = entry.api_key(environ)
        if entry.needs_key() and key is None:
            # Checked before building: no SDK import, no network, a clear reason.
            raise ProviderUnavailable(f"{name}: {entry.api_key_env} is not set (export it in the terminal you dispatch from)")
        identity = (
            name, entry.kind, entry.base_url, key, tuple(sorted(entry.headers.items())),
            entry.timeout, entry.max_retries,
        )
        provider = self._providers.get(identity)
        if provider is None:
            provider = self._providers[identity] = _build(entry, key)
            # Its SDK's modules (the Anthropic one: ~0.9 s of imports, most of the daemon's
            # objects) are never scanned by the cycle collector again; see __main__.
            gc.freeze()
        return Resolved(provider, model, canonical, entry, config.prices.get(canonical))

    def usable(self, entry: ProviderConfig, environ: Mapping[str, str] = os.environ) -> tuple[bool, str]:
        """Whether ``entry`` could serve a call now with ``environ``'s key, and why not (no
        network)."""
        if entry.needs_key() and entry.api_key(environ) is None:
            return False, f"{entry.api_key_env} is not set"
        if entry.kind == "openai" and not entry.base_url:
            return False, "no base_url"
        return True, ""

    async def aclose(self) -> None:
        """Close every provider built so far."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()


#: How OpenAI's own model names start: such a name given alone is an OpenAI model.
_OPENAI_NAMES = re.compile(r"(gpt-|chatgpt-|o[1-9](-|$)|text-embedding-|codex-)")


def _suggestion(named: str, config: Config) -> str:
    """``; did you mean P/named?`` for a model named without its provider: the provider
    whose ``[models]`` table has the name, else for OpenAI's names the OpenAI-compatible
    provider (``openai`` first)."""
    owners = [p for p, entry in sorted(config.providers.items()) if named in entry.models]
    if not owners and _OPENAI_NAMES.match(named):
        kinds = sorted((p != "openai", p) for p, entry in config.providers.items() if entry.kind == "openai")
        owners = [p for _, p in kinds[:1]]
    return f"; did you mean {owners[0]}/{named}?" if owners else ""


def _build(entry: ProviderConfig, key: str | None) -> Provider:
    if entry.kind == "scripted":
        from ._scripted import ScriptedProvider

        return ScriptedProvider()
    if entry.kind == "anthropic":
        from ._anthropic import AnthropicProvider

        return AnthropicProvider(
            api_key=key if entry.needs_key() else "",
            base_url=entry.base_url,
            max_retries=entry.max_retries,
            timeout=entry.timeout,
            headers=entry.headers,
        )
    from ._openai import OpenAIProvider

    assert entry.base_url is not None
    return OpenAIProvider(
        entry.base_url,
        key,
        headers=entry.headers,
        timeout=entry.timeout,
        max_retries=entry.max_retries,
        name=entry.name,
    )
