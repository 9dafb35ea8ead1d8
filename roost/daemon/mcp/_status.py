"""What ``mcp.list`` says about one server (shared by running and stopped servers)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from ._config import McpServerConfig

State = Literal["stopped", "starting", "ready", "failed", "untrusted"]


def log_file(log_dir: Path, config: McpServerConfig) -> Path:
    """Where a server's stderr and our notes about it go: ``mcp-NAME-HASH.log``, the hash
    (of its identity) telling apart two projects' servers of one name."""
    digest = hashlib.sha256(repr(config.identity).encode()).hexdigest()[:8]
    return log_dir / f"mcp-{config.name}-{digest}.log"


def status_map(
    config: McpServerConfig,
    state: State,
    log_path: Path,
    *,
    pid: int | None = None,
    tools: int = 0,
    error: str | None = None,
    restarts: int = 0,
    stderr: tuple[str, ...] = (),
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
        "stderr": list(stderr),
    }
