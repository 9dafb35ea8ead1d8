"""Built-in tools and the registry that checks and runs calls."""

from ._base import Tool, ToolContext, ToolResult, kill_group, real_path, truncate
from ._gitfiles import Repository, UnreadableRepository, find_repository, work_tree_files
from ._glob import list_files, walk_files
from ._ledger import ProcessLedger
from ._preview import change_preview
from ._registry import BUILTIN_TOOLS, ToolRegistry
from ._shells import Shell, Shells
from ._spawn import Process, spawn

__all__ = [
    "BUILTIN_TOOLS",
    "Process",
    "ProcessLedger",
    "Repository",
    "Shell",
    "Shells",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "UnreadableRepository",
    "change_preview",
    "find_repository",
    "kill_group",
    "list_files",
    "real_path",
    "spawn",
    "truncate",
    "walk_files",
    "work_tree_files",
]
