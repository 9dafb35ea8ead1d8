"""Notebooks through a real daemon and a scripted model: ``notebook_read`` shows cells with
ids, types, sources and outputs summarized; ``notebook_edit`` replaces, inserts and deletes
cells by id or index, and what it writes is a notebook nbformat's own validator accepts,
written atomically with the file's mode kept; edits are file writes for the permission
rules (a deny rule on edit blocks them, a protected path asks in every mode)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from roost.protocol.trio_client import TrioClient

from .conftest import events_until, text, write_script
from .test_paths import call, results, run_calls


def notebook(path: Path, *, minor: int = 5) -> Path:
    """A small notebook: a markdown cell, then a code cell with a stream, a result with an
    image, and an error."""
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Title", id="intro"),
            new_code_cell(
                "print('hi')\n1 + 1",
                id="calc",
                execution_count=3,
                outputs=[
                    new_output("stream", name="stdout", text="hi\n"),
                    new_output("execute_result", {"text/plain": "2", "image/png": "iVBORw0KGgo="}, execution_count=3),
                    new_output("error", ename="ValueError", evalue="bad", traceback=[]),
                ],
            ),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    if minor < 5:
        nb.nbformat_minor = minor
        for cell in nb.cells:
            del cell["id"]
    nbformat.write(nb, str(path))
    return path


async def run_steps(client: TrioClient, project: Path, *steps: list[dict[str, Any]], **dispatch: Any) -> list[str]:
    """A run of one reply per step (a read beside edits could run at the same time); the
    results in order."""
    model = write_script(project.parent, *steps, [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, **dispatch)
    return results(await events_until(client, lambda e: e.get("type") == "run.finished" and e.get("run") == run["run"]))


def valid(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
    nbformat.validate(nb)
    return nb


async def test_a_notebook_is_read_edited_by_id_and_index_and_stays_valid(client: TrioClient, project: Path) -> None:
    path = notebook(project / "nb.ipynb")
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    edits = [
        call("notebook_edit", path="nb.ipynb", cell_id="calc", new_source="x = 2\nx * 21"),
        call("notebook_edit", path="nb.ipynb", cell_id="intro", edit_mode="insert", cell_type="markdown", new_source="## Part"),
        call("notebook_edit", path="nb.ipynb", edit_mode="insert", new_source="import os"),
        call("notebook_edit", path="nb.ipynb", index=1, cell_type="raw", new_source="raw text"),
        call("notebook_edit", path="nb.ipynb", index=3, edit_mode="delete"),
    ]
    read = [call("notebook_read", path="nb.ipynb")]
    first, replaced, after_intro, at_top, retyped, deleted, second = await run_steps(client, project, read, edits, read, mode="full")
    assert first.splitlines()[:4] == ["nb.ipynb: 2 cells (nbformat 4.5, python)", "--- cell 0 id=intro markdown", "# Title", "--- cell 1 id=calc code [3]"]
    assert "outputs:\n  stdout: hi\n  execute_result: 2 [image/png (12 characters)]\n  error ValueError: bad" in first
    assert replaced == "replaced the source of the code cell at index 1 (id calc) in nb.ipynb; it has 2 cells"
    assert after_intro.startswith("inserted a markdown cell at index 1 (id ")
    assert at_top.startswith("inserted a code cell at index 0 (id ")
    assert retyped.startswith("replaced the source of the raw cell at index 1 (id intro)")
    assert deleted == "deleted the code cell at index 3 (id calc) in nb.ipynb; it has 3 cells"
    nb = valid(path)
    assert [(c.cell_type, c.source) for c in nb.cells] == [("code", "import os"), ("raw", "raw text"), ("markdown", "## Part")]
    assert nb.cells[1].id == "intro" and "outputs" not in nb.cells[1]
    assert nb.metadata.kernelspec.name == "python3"
    assert second.splitlines()[0] == "nb.ipynb: 3 cells (nbformat 4.5, python)"
    # Written aside and renamed into place, with the file's mode.
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.stat().st_ino != inode
    assert not [p for p in project.iterdir() if p.name not in {"a.txt", "b.txt", "c.py", "nb.ipynb"}]


async def test_a_replaced_code_cell_loses_its_stale_outputs_and_an_older_notebook_gets_no_ids(
    client: TrioClient, project: Path
) -> None:
    path = notebook(project / "old.ipynb", minor=4)
    calls = [
        call("notebook_edit", path="old.ipynb", index=1, new_source="2 + 2"),
        call("notebook_edit", path="old.ipynb", index=2, edit_mode="insert", new_source="3"),
    ]
    events = await run_calls(client, project, *calls, mode="full")
    assert results(events) == [
        "replaced the source of the code cell at index 1 in old.ipynb; it has 2 cells",
        "inserted a code cell at index 2 in old.ipynb; it has 3 cells",
    ]
    nb = valid(path)
    assert nb.nbformat_minor == 4 and not any("id" in c for c in nb.cells)
    assert (nb.cells[1].outputs, nb.cells[1].execution_count) == ([], None)


@pytest.mark.parametrize(
    ("input", "error"),
    [
        ({"path": "nb.ipynb", "cell_id": "nope", "new_source": "x"}, "no cell has the id 'nope' (its cells' ids: intro, calc)"),
        ({"path": "nb.ipynb", "index": 9, "new_source": "x"}, "no cell at index 9: the notebook has 2 (0 to 1)"),
        ({"path": "nb.ipynb", "new_source": "x"}, "replace needs the cell: its cell_id or its index"),
        ({"path": "nb.ipynb", "index": 0}, "replace needs new_source"),
        ({"path": "broken.ipynb", "index": 0, "new_source": "x"}, "broken.ipynb is not a notebook roost can use: cell 0 is not a code, markdown or raw cell"),
        ({"path": "a.txt", "index": 0, "new_source": "x"}, "a.txt is not a .ipynb file"),
        ({"path": "missing.ipynb", "index": 0, "new_source": "x"}, "no such file: missing.ipynb"),
    ],
)
async def test_an_edit_that_cannot_be_made_changes_nothing(
    client: TrioClient, project: Path, input: dict[str, Any], error: str
) -> None:
    path = notebook(project / "nb.ipynb")
    broken = project / "broken.ipynb"
    broken.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "widget"}]}))
    before = path.read_bytes(), broken.read_bytes()
    [result] = results(await run_calls(client, project, call("notebook_edit", **input), mode="full"))
    assert result == error
    assert (path.read_bytes(), broken.read_bytes()) == before


async def test_a_deny_rule_on_edit_blocks_notebook_edit_and_one_on_read_blocks_notebook_read(
    client: TrioClient, project: Path
) -> None:
    path = notebook(project / "nb.ipynb")
    before = path.read_bytes()
    calls = [call("notebook_edit", path="nb.ipynb", index=0, new_source="x"), call("notebook_read", path="nb.ipynb")]
    events = await run_calls(client, project, *calls, mode="full", deny=["edit(*.ipynb)", "Read(./nb.ipynb)"])
    edit, read = results(events)
    assert edit.startswith("permission denied: ") and "rule deny edit(*.ipynb)" in edit, edit
    assert read.startswith("permission denied: ") and "rule deny read(./nb.ipynb)" in read, read
    assert path.read_bytes() == before


async def test_a_notebook_in_a_protected_folder_is_asked_about_in_every_mode(client: TrioClient, project: Path) -> None:
    (project / ".claude").mkdir()
    path = notebook(project / ".claude" / "nb.ipynb")
    before = path.read_bytes()
    events = await run_calls(client, project, call("notebook_edit", path=".claude/nb.ipynb", index=0, new_source="x"), mode="full", yes=True)
    [asked] = [e for e in events if e["type"] == "permission.requested"]
    assert asked["tool"] == "notebook_edit" and "is protected" in asked["reason"]
    assert path.read_bytes() == before
