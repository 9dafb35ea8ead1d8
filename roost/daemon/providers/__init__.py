"""Model providers behind one interface (:class:`Provider`), resolved from ``provider/model``."""

from ._base import (
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
