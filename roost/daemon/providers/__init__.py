"""Model providers behind one interface (:class:`Provider`), resolved from ``provider/model``."""

from ._base import (
    MAX_TOKENS,
    DeltaCallback,
    ModelReply,
    ModelRequest,
    Provider,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
)
from ._registry import ProviderRegistry, Resolved

__all__ = [
    "MAX_TOKENS",
    "DeltaCallback",
    "ModelReply",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "ProviderRegistry",
    "ProviderUnavailable",
    "Resolved",
    "ToolSpec",
]
