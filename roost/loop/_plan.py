"""Reading a plan-mode reply: a numbered list of steps, each with the files it touches."""

from __future__ import annotations

import re
from typing import Any

_STEP = re.compile(r"^\s*(?:(\d+)[.)]|[-*])\s+(.*)$")
_FILES = re.compile(r"\s*[(\[]?\s*(?:files?|touches)\s*:\s*(.+?)[)\]]?\s*$", re.IGNORECASE)
_PATH = re.compile(r"`([^`\s]+)`")


def parse_plan(text: str) -> list[dict[str, Any]]:
    """The steps of ``text``: ``[{"step": n, "text": ..., "files": [...]}]``.

    A step is a line starting ``1.``, ``1)`` or a bullet; the lines after it, up to the next
    step or a blank line, continue it. Its files are listed after ``Files:`` (comma-separated), or else are
    the paths it quotes in backticks.
    """
    steps: list[dict[str, Any]] = []
    open_step = False
    for line in text.splitlines():
        match = _STEP.match(line)
        if match:
            steps.append({"step": len(steps) + 1, "text": match.group(2).strip(), "files": []})
            open_step = True
        elif not line.strip():
            open_step = False
        elif open_step:
            steps[-1]["text"] += " " + line.strip()
    for step in steps:
        files = _FILES.search(step["text"])
        if files:
            step["text"] = step["text"][: files.start()].rstrip(" .;,—-") + "."
            step["files"] = [f.strip(" `'\".") for f in files.group(1).split(",") if f.strip(" `'\".")]
        else:
            step["files"] = list(dict.fromkeys(_PATH.findall(step["text"])))
    return steps
