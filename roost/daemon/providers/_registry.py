"""Model ids to providers: ``provider/model`` resolved against the configuration.

Resolution: a whole-id alias (``[models]``, or a Claude tier: ``Config.alias``) first, then
the provider's own model aliases.
Providers are built on first use and shared by every session; one instance per distinct
setting (name, kind, URL, key, headers, timeout, retries), so an edited config gets a fresh
client while the old one serves the runs that began with it. The Anthropic SDK costs most
of a second to import, so it is imported the first time an ``anthropic`` provider is built.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from typing import Any, Mapping

from ..folder._config import Config, Price, ProviderConfig
from ._base import Provider, ProviderUnavailable


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a model id came to."""

    provider: Provider
    #: The model's name at its provider.
    model: str
    #: The canonical id, ``provider/model``, after aliases.
    model_id: str
    config: ProviderConfig
    price: Price | None


class ProviderRegistry:
    """Resolves model ids and owns the provider instances in use."""

    def __init__(self) -> None:
        self._providers: dict[tuple[Any, ...], Provider] = {}

    def resolve(self, model_id: str, config: Config, environ: Mapping[str, str] = os.environ) -> Resolved:
        """The provider for ``model_id`` under ``config``, with its key from ``environ``
        (the dispatching client's environment; the key stays in this process's memory).

        Raises:
            ProviderUnavailable: malformed id, unknown provider, or a provider that cannot
                be used as configured (for one that needs a key: the key is not set).
        """
        model_id = config.alias(model_id)
        name, sep, model = model_id.partition("/")
        if not sep or not name or not model:
            raise ProviderUnavailable(
                f"model id {model_id!r} is not of the form provider/model "
                f"(providers: {', '.join(sorted(config.providers))})"
            )
        entry = config.providers.get(name)
        if entry is None:
            raise ProviderUnavailable(
                f"unknown provider {name!r} (configured: {', '.join(sorted(config.providers))})"
            )
        model = entry.models.get(model, model)
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
        canonical = f"{name}/{model}"
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
