"""What ``mcp.list`` says about one server (shared by running and stopped servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ._config import McpServerConfig

State = Literal["stopped", "starting", "ready", "failed"]


def log_file(log_dir: Path, name: str) -> Path:
    """Where server ``name``'s stderr and our notes about it go."""
    return log_dir / f"mcp-{name}.log"


def status_map(
    config: McpServerConfig,
    state: State,
    log_path: Path,
    *,
    pid: int | None = None,
    tools: int = 0,
    error: str | None = None,
    restarts: int = 0,
) -> dict[str, Any]:
    """One server's entry in ``mcp.list``."""
    return {
        "name": config.name,
        "state": state,
        "transport": config.transport,
        "pid": pid,
        "url": config.url,
        "tools": tools,
        "error": error,
        "restarts": restarts,
        "enabled": config.enabled,
        "source": config.source,
        "log": str(log_path),
    }
