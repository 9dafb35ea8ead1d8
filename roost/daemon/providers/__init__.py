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
from ._registry import DEFAULT_MODEL, ProviderRegistry, default_model

__all__ = [
    "DEFAULT_MODEL",
    "DeltaCallback",
    "ModelReply",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "ProviderRegistry",
    "ProviderUnavailable",
    "ToolSpec",
    "default_model",
]
