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
    WebSearch,
)
from ._registry import ProviderRegistry, Resolved
from ._scripted import check_script

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
    "WebSearch",
    "check_script",
]
