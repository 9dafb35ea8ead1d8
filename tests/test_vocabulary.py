"""The words of the wire are defined once (roost.protocol's vocabulary) and mean the same
everywhere: the stop reasons the loop makes are the protocol's, and the CLI has an exit
status for each; the loop's modes are the protocol's, and it names them, never spells them."""

from __future__ import annotations

import ast
from pathlib import Path

from roost.cli._exits import EXIT_STATUS
from roost.loop import MODE, Mode
from roost.protocol import MODES, STOP_REASONS, SUCCESS_REASONS

LOOP = Path(__file__).resolve().parent.parent / "roost" / "loop"


def _loop_sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(LOOP.glob("*.py"))}


def test_every_stop_reason_has_an_exit_status_and_only_success_is_zero() -> None:
    assert set(EXIT_STATUS) == set(STOP_REASONS)
    assert {r for r, status in EXIT_STATUS.items() if status == 0} == set(SUCCESS_REASONS)


def test_the_loop_ends_runs_only_with_the_protocols_stop_reasons_and_with_each() -> None:
    made: set[str] = set()
    for path, source in _loop_sources().items():
        for node in ast.walk(ast.parse(source, str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "emit_run_finished"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                made.add(node.args[0].value)
    assert made and made <= set(STOP_REASONS), made - set(STOP_REASONS)
    everything = "\n".join(_loop_sources().values())
    assert [r for r in STOP_REASONS if f'"{r}"' not in everything] == []



def test_the_loops_modes_are_the_protocols() -> None:
    assert tuple(Mode) == MODES
    assert MODE in MODES


def test_the_loop_compares_modes_by_name_not_by_spelling() -> None:
    # A mode spelled out in a comparison is a second copy of the word (the loop's own
    # ``compact`` too: COMPACT_MODE).
    spelled = []
    for path, source in _loop_sources().items():
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.Compare):
                for operand in [node.left, *node.comparators]:
                    words = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                    for word in words:
                        if isinstance(word, ast.Constant) and word.value in (*MODES, "compact"):
                            spelled.append(f"{path.name}:{node.lineno}: {word.value!r}")
    assert spelled == []
