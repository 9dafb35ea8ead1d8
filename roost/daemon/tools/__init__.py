"""Built-in tools and the registry that checks and runs calls."""

from ._base import Tool, ToolContext, ToolResult, kill_group, real_path, truncate
from ._glob import git_entry, in_git_work_tree, list_files, walk_files
from ._ledger import ProcessLedger
from ._preview import change_preview
from ._registry import BUILTIN_TOOLS, ToolRegistry
from ._spawn import Process, spawn

__all__ = [
    "BUILTIN_TOOLS",
    "Process",
    "ProcessLedger",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "change_preview",
    "git_entry",
    "in_git_work_tree",
    "kill_group",
    "list_files",
    "real_path",
    "spawn",
    "truncate",
    "walk_files",
]
