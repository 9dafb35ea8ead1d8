"""The providers' pure parts stay pure: the wire formats, the SSE decoder and the shared wire
helpers import nothing that does IO or reads the clock (checked on their source, with ast,
as tests/test_layout.py checks the loop)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROVIDERS = Path(__file__).resolve().parents[3] / "roost" / "daemon" / "providers"
PURE = ("_anthropic_wire.py", "_openai_wire.py", "_sse.py", "_wire.py")
#: The stdlib and ours they may use: the rest of the package only through _base and _wire.
ALLOWED = {"__future__", "collections", "dataclasses", "json", "typing", "uuid", "_base", "_wire"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


@pytest.mark.parametrize("name", PURE)
def test_a_pure_module_imports_nothing_that_does_io(name: str) -> None:
    assert imported(PROVIDERS / name) <= ALLOWED
