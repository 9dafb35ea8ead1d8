"""Jupyter notebooks (``.ipynb``, nbformat 4) as the notebook tools read and change them:
pure functions, no IO.

A notebook is JSON; roost checks the structure the tools rely on and nbformat 4's schema
requires (:func:`check`) rather than depending on ``nbformat`` at run time: the checks are a
few dozen lines, the edits touch only cells, and every field roost does not know is kept as
it is. The tests validate what the tools write with nbformat's own validator.

Cells are found by id (nbformat 4.5 gives every cell one) or by index. A cell whose source
is replaced keeps its id and metadata; a code cell's outputs and execution count are cleared
then (they were the old source's). A notebook older than 4.5 gets no ids on its new cells
(its schema forbids them). Written as Jupyter writes it: one-space indent, keys sorted,
non-ASCII kept, sources as lists of lines.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

#: The kinds of cell nbformat 4 knows.
CELL_TYPES = ("code", "markdown", "raw")
#: Characters of one output shown by a read, at most.
OUTPUT_SHOWN = 400


class NotebookError(ValueError):
    """Not a notebook roost can read or change; the message says why, for the model."""


def parse(data: bytes) -> dict[str, Any]:
    """The notebook in ``data``, checked (:func:`check`).

    Raises:
        NotebookError: not JSON, or not an nbformat 4 notebook.
    """
    try:
        notebook = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotebookError(f"not valid JSON: {exc}") from None
    check(notebook)
    return notebook


def check(notebook: Any) -> None:
    """Raise :class:`NotebookError` unless ``notebook`` has nbformat 4's structure: a
    ``cells`` list, ``metadata``, ``nbformat`` 4, and cells of a known type with a source
    (text or lines), metadata, and for code cells outputs and an execution count."""
    if not isinstance(notebook, dict):
        raise NotebookError("the file holds no JSON object")
    if notebook.get("nbformat") != 4 or not isinstance(notebook.get("nbformat_minor"), int):
        raise NotebookError(f"nbformat {notebook.get('nbformat')!r} is not 4: only nbformat 4 notebooks are read")
    if not isinstance(notebook.get("metadata"), dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError("a notebook has a metadata object and a cells list")
    for index, cell in enumerate(notebook["cells"]):
        where = f"cell {index}"
        if not isinstance(cell, dict) or cell.get("cell_type") not in CELL_TYPES:
            raise NotebookError(f"{where} is not a code, markdown or raw cell")
        if not _is_source(cell.get("source")) or not isinstance(cell.get("metadata"), dict):
            raise NotebookError(f"{where} has no source text or no metadata")
        if "id" in cell and not _is_id(cell["id"]):
            raise NotebookError(f"{where}'s id {cell['id']!r} is not 1 to 64 letters, digits, - or _")
        if cell["cell_type"] == "code":
            count = cell.get("execution_count")
            if not isinstance(cell.get("outputs"), list) or not (count is None or isinstance(count, int)):
                raise NotebookError(f"{where} is a code cell without outputs or an execution count")


def dump(notebook: dict[str, Any]) -> bytes:
    """The notebook as Jupyter writes it."""
    return (json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def source(cell: dict[str, Any]) -> str:
    """A cell's source as one text."""
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def find(notebook: dict[str, Any], cell_id: str | None, index: int | None) -> int:
    """The index of the cell ``cell_id`` names (else the one at ``index``).

    Raises:
        NotebookError: no such cell.
    """
    cells = notebook["cells"]
    if cell_id is not None:
        for at, cell in enumerate(cells):
            if cell.get("id") == cell_id:
                return at
        ids = [str(c["id"]) for c in cells if "id" in c]
        known = f"its cells' ids: {', '.join(ids)}" if ids else "its cells have no ids: name one by index"
        raise NotebookError(f"no cell has the id {cell_id!r} ({known})")
    assert index is not None, "the tool asks for one of them"
    if not 0 <= index < len(cells):
        raise NotebookError(f"no cell at index {index}: the notebook has {len(cells)} (0 to {len(cells) - 1})")
    return index


def replace(notebook: dict[str, Any], at: int, new_source: str, cell_type: str | None) -> dict[str, Any]:
    """The cell at ``at`` with ``new_source`` (and ``cell_type``, if given)."""
    cell = dict(notebook["cells"][at])
    kind = cell_type or cell["cell_type"]
    cell["source"] = _lines(new_source)
    cell["cell_type"] = kind
    if kind == "code":
        cell["outputs"], cell["execution_count"] = [], None
        cell.pop("attachments", None)  # only markdown and raw cells may carry them
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    notebook["cells"][at] = cell
    return cell


def insert(notebook: dict[str, Any], at: int, new_source: str, cell_type: str) -> dict[str, Any]:
    """A new cell of ``cell_type`` with ``new_source``, put at index ``at``."""
    cell: dict[str, Any] = {"cell_type": cell_type, "metadata": {}, "source": _lines(new_source)}
    if cell_type == "code":
        cell["outputs"], cell["execution_count"] = [], None
    if notebook["nbformat_minor"] >= 5:
        taken = {c.get("id") for c in notebook["cells"]}
        while (fresh := secrets.token_hex(4)) in taken:
            pass
        cell["id"] = fresh
    notebook["cells"].insert(at, cell)
    return cell


def describe(notebook: dict[str, Any], name: str) -> str:
    """The notebook as notebook_read shows it: each cell's index, id, type and source, and a
    summary of its outputs."""
    cells = notebook["cells"]
    kernel = notebook["metadata"].get("kernelspec", {})
    language = notebook["metadata"].get("language_info", {}).get("name") or (kernel.get("language") if isinstance(kernel, dict) else None)
    about = f", {language}" if isinstance(language, str) else ""
    parts = [f"{name}: {len(cells)} cells (nbformat 4.{notebook['nbformat_minor']}{about})"]
    for index, cell in enumerate(cells):
        head = f"--- cell {index}" + (f" id={cell['id']}" if "id" in cell else "") + f" {cell['cell_type']}"
        if cell["cell_type"] == "code" and cell.get("execution_count") is not None:
            head += f" [{cell['execution_count']}]"
        parts.append(head)
        parts.append(source(cell))
        outputs = cell.get("outputs") or []
        if outputs:
            parts.append("outputs:\n" + "\n".join(_output(o) for o in outputs))
    return "\n".join(parts)


def _output(output: Any) -> str:
    """One output, shortly: a stream's or a result's text (cut), an error's name and
    value, other data by kind and size."""
    if not isinstance(output, dict):
        return "  (an output roost cannot read)"
    kind = output.get("output_type")
    if kind == "stream":
        return f"  {output.get('name', 'stream')}: {_cut(_text(output.get('text', '')))}"
    if kind == "error":
        return f"  error {output.get('ename', '')}: {_cut(str(output.get('evalue', '')))}"
    data = output.get("data")
    if kind in ("execute_result", "display_data") and isinstance(data, dict):
        shown = [f"{mime} ({len(_text(value))} characters)" for mime, value in data.items() if mime != "text/plain"]
        plain = f": {_cut(_text(data['text/plain']))}" if "text/plain" in data else ""
        return f"  {kind}{plain}" + (f" [{', '.join(shown)}]" if shown else "")
    return f"  {kind}"


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value)


def _cut(text: str) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= OUTPUT_SHOWN else f"{text[:OUTPUT_SHOWN]}… ({len(text) - OUTPUT_SHOWN} more characters)"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _is_source(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 64 and all(c.isascii() and (c.isalnum() or c in "-_") for c in value)
