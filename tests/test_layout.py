"""The layout rules of DESIGN.md, enforced on whatever files exist under roost/.

1. The dependency rule: imports flow ``cli -> protocol``, ``daemon -> loop, protocol``,
   ``loop -> (nothing of ours)``; the loop does no IO and imports the stdlib, the
   tree-sitter bash grammar and RE2 (linear-time patterns) only; the protocol imports msgpack and the
   stdlib, and trio only in ``roost/protocol/trio_client.py``. Imports are read with ``ast``
   (every import statement anywhere in a file, including lazy imports inside functions and
   ``TYPE_CHECKING`` blocks, and ``importlib.import_module("...")`` / ``__import__("...")``
   with a literal name), so a violation is reported as ``file:line`` without importing
   anything.
2. ``import roost.cli``, ``roost --help`` and ``roost --version`` stay light: no trio, anyio,
   anthropic, httpx, mcp, pydantic, sqlite3, tree-sitter, asyncio, prompt_toolkit or pygments
   in ``sys.modules`` (tests/e2e/test_startup.py checks the commands that reach a daemon);
   ``roost --version`` imports no command module and not the protocol.
3. Every package ``__init__`` that binds names has a sorted ``__all__`` of names that exist
   and are not private.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "roost"

# Which of our top-level packages each layer may import (besides itself and the bare
# ``roost`` package, which holds only ``__version__``).
ALLOWED_OURS: dict[str, frozenset[str]] = {
    "cli": frozenset({"protocol"}),
    "daemon": frozenset({"loop", "protocol"}),
    "loop": frozenset(),
    "protocol": frozenset(),
}
# The loop is a pure state machine: no event loop, sockets, files, processes, clock or
# randomness. The first two lines are the modules the design names; the rest are more of
# the same kind.
LOOP_FORBIDDEN = frozenset(
    {"trio", "anyio", "socket", "sqlite3", "time", "random", "uuid", "os", "subprocess"}
    | {"asyncio", "threading", "httpx", "httpx2"}
    | {"secrets", "select", "selectors", "ssl", "signal", "multiprocessing", "concurrent"}
    | {"shutil", "tempfile", "urllib", "http", "anthropic", "mcp", "platformdirs"}
)
# Modules of those packages that only compute: splitting a URL reads nothing.
LOOP_PURE = frozenset({"urllib.parse"})
# Besides the stdlib, the loop imports only the bash grammar it judges shell lines with:
# tree-sitter parses and RE2 matches in memory, no IO.
LOOP_THIRD_PARTY = frozenset({"tree_sitter", "tree_sitter_bash", "re2"})
# The protocol imports msgpack and the stdlib; trio only in its own client module.
PROTOCOL_THIRD_PARTY = frozenset({"msgpack"})
PROTOCOL_TRIO_MODULE = "roost.protocol.trio_client"
# What `roost --help` must not pay for.
CLI_HEAVY = (
    "trio", "anyio", "anthropic", "httpx", "httpx2", "mcp", "pydantic", "sqlite3", "tree_sitter",
    # The shell's alone: a plain command pays for neither.
    "asyncio", "prompt_toolkit", "pygments",
)


@dataclass(frozen=True)
class Import:
    module: str  # absolute dotted name
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_our_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or path.is_dir()


def collect_imports(path: Path, source: str) -> list[Import]:
    """Every module ``source`` (the text of ``path``) imports, as absolute names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append(Import(target, node.lineno))
            # `from roost import protocol`, `from . import _events`: the submodule too
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if target.split(".")[0] == "roost" and _is_our_module(sub):
                    found.append(Import(sub, node.lineno))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            dynamic = (isinstance(func, ast.Name) and func.id == "__import__") or (
                isinstance(func, ast.Attribute) and func.attr == "import_module"
            )
            first = node.args[0]
            if dynamic and isinstance(first, ast.Constant) and isinstance(first.value, str):
                if not first.value.startswith("."):
                    found.append(Import(first.value, node.lineno))
    return found


def violations_of(path: Path, source: str) -> list[str]:
    """The dependency rule's complaints about one file, as ``file:line: message``."""
    name = module_name(path)
    parts = name.split(".")
    layer = parts[1] if len(parts) > 1 else None
    if layer not in ALLOWED_OURS:
        return []
    where = path.relative_to(ROOT)
    out: list[str] = []
    reported: set[tuple[int, str]] = set()  # `from roost.x import sub`: one complaint, not two
    for imp in collect_imports(path, source):
        top, *rest = imp.module.split(".")
        if top == "roost":
            other = rest[0] if rest else None
            if other is not None and other != layer and other not in ALLOWED_OURS[layer]:
                if (imp.line, other) in reported:
                    continue
                reported.add((imp.line, other))
                allowed = ", ".join(f"roost.{p}" for p in sorted(ALLOWED_OURS[layer])) or "nothing"
                out.append(
                    f"{where}:{imp.line}: roost.{layer} imports {imp.module} "
                    f"(roost.{layer} may import {allowed} of ours)"
                )
            continue
        if layer == "loop" and top in LOOP_FORBIDDEN and imp.module not in LOOP_PURE:
            out.append(f"{where}:{imp.line}: roost.loop imports {imp.module} (the loop does no IO)")
        elif layer == "loop" and top not in sys.stdlib_module_names and top not in LOOP_THIRD_PARTY:
            out.append(
                f"{where}:{imp.line}: roost.loop imports {imp.module} "
                "(the loop imports the stdlib, tree-sitter and RE2 only)"
            )
        if layer == "protocol":
            if top == "trio" and name == PROTOCOL_TRIO_MODULE:
                continue
            if top == "trio":
                out.append(f"{where}:{imp.line}: imports trio (only {PROTOCOL_TRIO_MODULE} may)")
            elif top not in sys.stdlib_module_names and top not in PROTOCOL_THIRD_PARTY:
                out.append(
                    f"{where}:{imp.line}: roost.protocol imports {imp.module} "
                    "(the protocol imports msgpack and the stdlib only)"
                )
    return out


def python_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_dependency_rule() -> None:
    files = python_files()
    layers = {module_name(p).split(".")[1] for p in files if module_name(p).count(".")}
    assert {"protocol", "loop"} <= layers, f"layout test found no protocol/loop under {PACKAGE}"
    problems = [v for path in files for v in violations_of(path, path.read_text(encoding="utf-8"))]
    assert not problems, "imports against the dependency rule (DESIGN.md):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("file", "source", "expected"),
    [
        ("roost/loop/_x.py", "from ..daemon import conductor\n", ["roost.loop imports roost.daemon"]),
        ("roost/loop/_x.py", "def f():\n    import time.monotonic\n", [":2: roost.loop imports time"]),
        ("roost/loop/_x.py", "from os import path\n", ["roost.loop imports os"]),
        ("roost/loop/_x.py", "from roost import protocol\n", ["imports roost.protocol"]),
        ("roost/loop/_x.py", "from . import _events\nfrom ._state import fold\nimport roost\n", []),
        ("roost/loop/__init__.py", "from ._step import step\n", []),
        ("roost/loop/_x.py", "import tree_sitter_bash\nfrom tree_sitter import Parser\n", []),
        ("roost/loop/_x.py", "import yaml\n", ["roost.loop imports yaml"]),
        ("roost/cli/_x.py", "from roost.daemon import _server\n", ["roost.cli imports roost.daemon"]),
        ("roost/cli/_x.py", "from ..loop import step\n", ["roost.cli imports roost.loop"]),
        ("roost/cli/_x.py", "import importlib\nimportlib.import_module('roost.daemon')\n", [":2:"]),
        ("roost/cli/_x.py", "from roost import __version__\nfrom roost.protocol import Client\n", []),
        ("roost/cli/sub/_x.py", "from ...daemon import x\n", ["roost.cli imports roost.daemon"]),
        ("roost/daemon/_x.py", "import trio\nfrom roost.loop import step\nimport roost.protocol\n", []),
        ("roost/daemon/_x.py", "from roost.cli import main\n", ["roost.daemon imports roost.cli"]),
        ("roost/protocol/_x.py", "import trio\n", ["imports trio"]),
        ("roost/protocol/_x.py", "import click\n", ["roost.protocol imports click"]),
        ("roost/protocol/_x.py", "import msgpack\nimport socket\nfrom . import _errors\n", []),
        ("roost/protocol/trio_client.py", "import trio\n", []),
        ("roost/protocol/_x.py", "from ..loop import Event\n", ["roost.protocol imports roost.loop"]),
    ],
)
def test_the_rule_checker_itself(file: str, source: str, expected: list[str]) -> None:
    # the checker must be able to fail: known violations on made-up files
    found = violations_of(ROOT / file, source)
    assert len(found) == len(expected), found
    for message, fragment in zip(found, expected):
        assert message.startswith(file) and fragment in message, (message, fragment)


_IMPORT_COST = """
import contextlib, io, json, sys
heavy = set(sys.argv[1].split(","))
def loaded():
    return sorted(m for m in sys.modules if m.split(".")[0] in heavy)
report = {}
import roost.protocol
report["import roost.protocol"] = loaded()
if sys.argv[2] == "cli":
    import roost.cli
    report["import roost.cli"] = loaded()
    main = getattr(roost.cli, "main", None)
    for args in (["--help"], ["--version"]) if main is not None else ():
        sys.argv = ["roost", *args]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                main()
            except SystemExit:
                pass
        report["roost " + " ".join(args)] = loaded()
print(json.dumps(report))
"""


def test_cli_import_stays_light() -> None:
    has_cli = (PACKAGE / "cli" / "__init__.py").is_file()
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_COST, ",".join(CLI_HEAVY), "cli" if has_cli else "protocol"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    heavy = {step: modules for step, modules in report.items() if modules}
    assert not heavy, f"heavy modules loaded: {heavy}"


_VERSION_IMPORTS = """
import contextlib, io, json, sys
sys.argv = ["roost", "--version"]
from roost.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("roost", "msgpack", "socket"))))
"""


def test_version_imports_no_command() -> None:
    # Each command's module is imported when it runs: --version needs none of them, nor
    # the protocol.
    proc = subprocess.run([sys.executable, "-c", _VERSION_IMPORTS], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["roost", "roost.cli", "roost.cli._main"]


# --- exports ---------------------------------------------------------------------------


def package_inits() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def _binds_names(tree: ast.Module) -> bool:
    """Whether the module defines or imports anything (besides its docstring and __future__)."""
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        return True
    return False


def _literal_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            value = ast.literal_eval(node.value)
            assert isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value), (
                "__all__ must be a literal list of strings"
            )
            return list(value)
    return None


def _isort_key(name: str) -> tuple[int, str]:
    # ruff RUF022 / isort "order by type": CONSTANTS, then Classes, then everything else
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("init", package_inits(), ids=lambda p: module_name(p))
def test_package_exports(init: Path) -> None:
    tree = ast.parse(init.read_text(encoding="utf-8"), filename=str(init))
    if not _binds_names(tree):
        return  # an empty package (a namespace for its modules) has nothing to export
    names = _literal_all(tree)
    where = init.relative_to(ROOT)
    assert names is not None, f"{where} binds names but has no __all__"
    assert len(names) == len(set(names)), f"{where}: __all__ has duplicates"
    # Either plain sorted() order or isort's order-by-type (constants, classes, functions);
    # both are in use today (roost.protocol: plain, roost.loop: by type).
    assert names == sorted(names) or names == sorted(names, key=_isort_key), (
        f"{where}: __all__ is not sorted; sorted() gives {sorted(names)}"
    )
    # roost/__init__.py exports __version__; nothing else may start with an underscore
    allowed = {"__version__"} if init.parent == PACKAGE else set()
    private = [n for n in names if n.startswith("_") and n not in allowed]
    assert not private, f"{where}: __all__ exports underscore names {private}"
    module = importlib.import_module(module_name(init))
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{where}: __all__ names that do not exist: {missing}"
