"""Built-in tools and the registry that checks and runs calls."""

from ._base import Tool, ToolContext, ToolResult, truncate
from ._ledger import ProcessLedger
from ._registry import BUILTIN_TOOLS, ToolRegistry

__all__ = [
    "BUILTIN_TOOLS",
    "ProcessLedger",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "truncate",
]
