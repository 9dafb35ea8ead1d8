"""The notebook tools: ``notebook_read`` and ``notebook_edit`` on Jupyter notebooks
(``.ipynb``), Claude Code's ``NotebookRead`` and ``NotebookEdit``.

They reach files as ``read`` and ``edit`` do (``_fs``): the path is resolved once and
judged (notebook_read as a read, notebook_edit as an edit: the same rules and protected
paths), the folder is opened at the real path following no link, and the notebook is read
(at most :data:`NOTEBOOK_LIMIT` bytes, a regular file) and written within that folder's
descriptor: a temporary file in the same folder, synced, renamed over the old one, which
keeps its mode. What the notebook holds is checked before and after an edit (``_ipynb``):
an edit never leaves a file that is not a notebook.
"""

from __future__ import annotations

import errno
import os
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from ..folder._files import FileRefused, read_bounded
from . import _ipynb
from ._base import Tool, ToolContext, ToolResult, locate, truncate
from ._fs import open_folder, open_path, write_at

#: The largest notebook read (whole: outputs with images make notebooks large).
NOTEBOOK_LIMIT = 32 << 20

_PATH = {"type": "string", "minLength": 1, "description": "the .ipynb file, relative to the working directory"}


class _Failed(Exception):
    """A read or an edit that cannot be made; the message is for the model."""


def _load(folder: int, leaf: str, name: str) -> dict[str, Any]:
    try:
        raw = read_bounded(leaf, NOTEBOOK_LIMIT, opener=partial(open_path, dir_fd=folder))
    except FileNotFoundError:
        raise _Failed(f"no such file: {name}") from None
    except IsADirectoryError:
        raise _Failed(f"{name} is a directory, not a notebook") from None
    except FileRefused as exc:
        if exc.errno == errno.EFBIG:
            raise _Failed(f"{name} is larger than {NOTEBOOK_LIMIT >> 20} MiB, more than the notebook tools read") from None
        raise _Failed(f"cannot read {name}: {exc.strerror}") from None
    try:
        return _ipynb.parse(raw)
    except _ipynb.NotebookError as exc:
        raise _Failed(f"{name} is not a notebook roost can use: {exc}") from None


def _in_folder(path: Path, name: str, work: Any) -> Any:
    """``work(folder_fd, leaf)`` within the notebook's folder, opened following no link
    (blocking)."""
    if path.suffix != ".ipynb":
        raise _Failed(f"{name} is not a .ipynb file")
    try:
        folder = open_folder(str(path.parent))
    except FileNotFoundError:
        raise _Failed(f"no such file: {name}") from None
    try:
        return work(folder, path.name)
    finally:
        os.close(folder)


def _located(input: Mapping[str, Any], ctx: ToolContext) -> Path | ToolResult:
    located = locate(ctx, input["path"])
    return located if isinstance(located, ToolResult) else located[0]


async def _run_read(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    name = input["path"]
    path = _located(input, ctx)
    if isinstance(path, ToolResult):
        return path

    def read(folder: int, leaf: str) -> dict[str, Any]:
        return _load(folder, leaf, name)

    try:
        notebook = await ctx.in_thread(_in_folder, path, name, read)
    except _Failed as exc:
        return ToolResult(str(exc), is_error=True)
    except OSError as exc:
        return ToolResult(f"cannot read {name}: {exc.strerror or exc}", is_error=True)
    return ToolResult(truncate(_ipynb.describe(notebook, name), ctx.output_limit), meta={"cells": len(notebook["cells"])})


def _edit(folder: int, leaf: str, name: str, input: Mapping[str, Any]) -> tuple[str, int]:
    """Make the edit (blocking); what was done, and the bytes written."""
    notebook = _load(folder, leaf, name)
    mode = input.get("edit_mode", "replace")
    cell_id, index = input.get("cell_id"), input.get("index")
    # The tool checked that new_source is there unless the cell is deleted.
    new_source, cell_type = str(input.get("new_source", "")), input.get("cell_type")
    try:
        if mode == "insert":
            # After the cell named by id (Claude Code's way), at the index given, or first.
            at = _ipynb.find(notebook, cell_id, None) + 1 if cell_id is not None else index or 0
            if at > len(notebook["cells"]):
                raise _Failed(f"cannot insert at index {at}: the notebook has {len(notebook['cells'])} cells")
            cell = _ipynb.insert(notebook, at, new_source, cell_type or "code")
            done = f"inserted a {cell['cell_type']} cell at index {at}"
        else:
            at = _ipynb.find(notebook, cell_id, index)
            if mode == "delete":
                cell = notebook["cells"].pop(at)
                done = f"deleted the {cell['cell_type']} cell at index {at}"
            else:
                cell = _ipynb.replace(notebook, at, new_source, cell_type)
                done = f"replaced the source of the {cell['cell_type']} cell at index {at}"
        _ipynb.check(notebook)
    except _ipynb.NotebookError as exc:
        raise _Failed(str(exc)) from None
    if "id" in cell:
        done += f" (id {cell['id']})"
    data = _ipynb.dump(notebook)
    write_at(folder, leaf, data)
    return f"{done} in {name}; it has {len(notebook['cells'])} cells", len(data)


async def _run_edit(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    name = input["path"]
    mode = input.get("edit_mode", "replace")
    if mode != "insert" and input.get("cell_id") is None and input.get("index") is None:
        return ToolResult(f"{mode} needs the cell: its cell_id or its index", is_error=True)
    if mode != "delete" and not isinstance(input.get("new_source"), str):
        return ToolResult(f"{mode} needs new_source", is_error=True)
    path = _located(input, ctx)
    if isinstance(path, ToolResult):
        return path
    try:
        done, size = await ctx.in_thread(_in_folder, path, name, partial(_edit, name=name, input=input))
    except _Failed as exc:
        return ToolResult(str(exc), is_error=True)
    except OSError as exc:
        return ToolResult(f"cannot edit {name}: {exc.strerror or exc}", is_error=True)
    return ToolResult(done, meta={"bytes": size, "edit_mode": mode})


NOTEBOOK_READ = Tool(
    "notebook_read",
    "Read a Jupyter notebook (.ipynb): every cell's index, id, type and source, with its "
    "outputs summarized (text cut short, images and other data by kind and size).",
    {"type": "object", "properties": {"path": _PATH}, "required": ["path"], "additionalProperties": False},
    _run_read,
    read_only=True,
)

NOTEBOOK_EDIT = Tool(
    "notebook_edit",
    "Change one cell of a Jupyter notebook (.ipynb). edit_mode replace (the default) sets the "
    "source of the cell named by cell_id or index (and its type, with cell_type; a code "
    "cell's outputs are cleared); insert adds a cell (cell_type, code by default) after the "
    "cell cell_id names, or at index, or first; delete removes the cell. Read the notebook "
    "first for the cells' ids.",
    {
        "type": "object",
        "properties": {
            "path": _PATH,
            "cell_id": {"type": "string", "minLength": 1, "description": "the cell's id (as notebook_read shows it)"},
            "index": {"type": "integer", "minimum": 0, "description": "the cell's index, from 0 (instead of cell_id)"},
            "new_source": {"type": "string", "description": "the cell's new source (not for delete)"},
            "cell_type": {"enum": list(_ipynb.CELL_TYPES), "description": "the cell's type: code, markdown or raw"},
            "edit_mode": {"enum": ["replace", "insert", "delete"], "description": "replace (default), insert or delete"},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    _run_edit,
)
