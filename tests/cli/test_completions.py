"""Shell completions: the scripts in contrib/ match what click makes, and they complete."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOST = str(Path(sys.executable).parent / "roost")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_contrib_scripts_are_current(shell: str) -> None:
    made = subprocess.run(
        [ROOST], env={**os.environ, "_ROOST_COMPLETE": f"{shell}_source"}, capture_output=True, text=True
    )
    assert made.stdout == (ROOT / "contrib" / "completions" / f"roost.{shell}").read_text()


def test_bash_completes_commands_and_options() -> None:
    def complete(*words: str) -> list[str]:
        env = {
            **os.environ,
            "_ROOST_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(["roost", *words]),
            "COMP_CWORD": str(len(words)),
        }
        out = subprocess.run([ROOST], env=env, capture_output=True, text=True).stdout
        return [line.split(",", 1)[1] for line in out.splitlines()]

    assert complete("dis") == ["dispatch"]
    assert "--max-turns" in complete("dispatch", "--m")
