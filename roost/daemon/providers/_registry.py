"""Model ids to providers: ``provider/model``, providers built lazily and shared.

The Anthropic SDK costs most of a second to import, so it is imported the first time an
``anthropic/...`` model is used, never at daemon start.
"""

from __future__ import annotations

import os

from ._base import Provider, ProviderUnavailable

#: The model used when neither the dispatch nor ``ROOST_MODEL`` names one.
DEFAULT_MODEL = "anthropic/claude-sonnet-4-6"

KNOWN_PROVIDERS = ("anthropic", "scripted")


def default_model() -> str:
    """``ROOST_MODEL`` if set, else :data:`DEFAULT_MODEL`."""
    return os.environ.get("ROOST_MODEL") or DEFAULT_MODEL


class ProviderRegistry:
    """Resolves model ids and owns one instance of each provider in use."""

    def __init__(self) -> None:
        self._providers: dict[str, Provider] = {}

    def resolve(self, model_id: str) -> tuple[Provider, str]:
        """The provider for ``model_id`` and the model's name at that provider.

        Raises:
            ProviderUnavailable: malformed id, unknown provider, or a provider that cannot
                be used (for Anthropic: no ``ANTHROPIC_API_KEY``).
        """
        name, sep, model = model_id.partition("/")
        if not sep or not name or not model:
            raise ProviderUnavailable(
                f"model id {model_id!r} is not of the form provider/model "
                f"(providers: {', '.join(KNOWN_PROVIDERS)})"
            )
        provider = self._providers.get(name)
        if provider is None:
            provider = self._providers[name] = _build(name)
        return provider, model

    async def aclose(self) -> None:
        """Close every provider built so far."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()


def _build(name: str) -> Provider:
    if name == "scripted":
        from ._scripted import ScriptedProvider

        return ScriptedProvider()
    if name == "anthropic":
        # Checked before the import: a dispatch without a key fails at once instead of
        # after the SDK's second of importing.
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ProviderUnavailable(
                "anthropic: ANTHROPIC_API_KEY is not set in the daemon's environment "
                "(restart the daemon with it set: roost stop, then run again)"
            )
        from ._anthropic import AnthropicProvider

        return AnthropicProvider()
    raise ProviderUnavailable(
        f"unknown provider {name!r} (known: {', '.join(KNOWN_PROVIDERS)})"
    )
