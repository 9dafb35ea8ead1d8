"""The words of a shell line: what a word node says (quotes and backslashes removed), and
whether it is a literal, a pattern the shell expands, or text only known when the line runs
(:data:`WILD` stands for that text). The commands substituted in a word (``$(...)``,
backticks, ``<(...)``) are judged as commands of the line; an expansion with an operator,
ANSI-C quoting, arithmetic or a substitution in an array subscript makes the line not whole.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

if TYPE_CHECKING:
    from ._shell_lines import Walk

#: Stands for text only known when the line runs.
WILD = "\0"

#: Word kinds: a literal, text with a glob or brace pattern the shell expands, text with
#: parts only known when the line runs.
LITERAL, PATTERN, DYNAMIC = 0, 1, 2

#: Characters that a plain word never holds unescaped: seeing one means the grammar read
#: the line otherwise than bash would, so the line is not judged.
_FOREIGN = frozenset("$`;&|<>()\"' \t\n")
_GLOB = frozenset("*?[]{}")
_DQ_ESCAPES = frozenset('$`"\\\n')
#: In double quotes or an unquoted here-document, what only a parser bug would leave as text.
_HIDDEN = re.compile(r"(?<!\\)(?:`|\$[({A-Za-z_0-9@*#?$!-])")
#: An array subscript holding a command substitution.
_SUBSCRIPT = re.compile(r"\[[^\]]*(?:\$\(|`)")

Word = tuple[str, int]


def read_word(walk: Walk, node: Node, depth: int) -> Word:
    """The text of a word node, and its kind. Substituted commands are judged."""
    word = _bare_word(walk, node, depth)
    subscript(walk, word[0])
    return word


def subscript(walk: Walk, text: str) -> None:
    """``'a[$(cmd)]'``, even quoted: where bash takes it as an array element (``[[ 1
    -eq ... ]]``, ``[ -v ... ]``, ``printf -v``, ``read``, ``unset``, arithmetic) it
    evaluates the subscript and runs the command."""
    if _SUBSCRIPT.search(text):
        walk.fail(f"{text.replace(WILD, '…')} holds a command substitution in a subscript, which bash may run")


def _bare_word(walk: Walk, node: Node, depth: int) -> Word:
    t = node.type
    if t == "word":
        return _plain(node, walk)
    if t == "number":
        return node_text(node), LITERAL
    if t == "raw_string":
        return node_text(node)[1:-1], LITERAL
    if t == "string":
        return _string(walk, node, depth)
    if t == "concatenation":
        parts = [read_word(walk, child, depth) for child in node.children]
        return "".join(p[0] for p in parts), max((p[1] for p in parts), default=LITERAL)
    return WILD, expansion(walk, node, depth)


def _string(walk: Walk, node: Node, depth: int) -> Word:
    out: list[str] = []
    kind = LITERAL
    for child in node.children:
        t = child.type
        if t == '"':
            continue
        if t == "string_content":
            raw = node_text(child)
            if _HIDDEN.search(raw):
                walk.fail(f"roost cannot read the string {node_text(node)}")
            out.append(_unescape_dq(raw))
        elif t == "$":
            out.append("$")
        else:
            kind = max(kind, expansion(walk, child, depth))
            out.append(WILD)
    return "".join(out), kind


def expansion(walk: Walk, node: Node, depth: int) -> int:
    """An expansion or a substitution: its commands are judged; its text is WILD."""
    t = node.type
    if t == "simple_expansion":
        return DYNAMIC
    if t == "expansion":
        parts = [c.type for c in node.children]
        if parts not in (["${", "variable_name", "}"], ["${", "special_variable_name", "}"]):
            walk.fail(f"it uses an expansion with an operator ({node_text(node)})")
            _substitutions(walk, node, depth)
        return DYNAMIC
    if t in ("command_substitution", "process_substitution"):
        if node.child_count and node.children[0].type == "`" and "\\" in node_text(node):
            # In backquotes bash unescapes \`, \$ and \\ first: \`...\` nests a command.
            walk.fail("it escapes characters inside backquotes")
        walk.statements(node, depth)
        return DYNAMIC
    if t == "ansi_c_string":
        walk.fail(f"it uses ANSI-C quoting ({node_text(node)})")
    elif t == "arithmetic_expansion":
        walk.fail("it uses arithmetic ($(( )))")
    elif t == "translated_string":
        walk.fail(f"it uses a translated string ({node_text(node)})")
    else:
        walk.fail(f"roost cannot read the word {node_text(node)}")
    return DYNAMIC


def _substitutions(walk: Walk, node: Node, depth: int) -> None:
    """The commands substituted anywhere under ``node`` (for the deny rules)."""
    stack = list(node.named_children)
    while stack:
        child = stack.pop()
        if child.type in ("command_substitution", "process_substitution"):
            walk.statements(child, depth)
        else:
            stack.extend(child.named_children)


def node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _plain(node: Node, walk: Walk) -> Word:
    """An unquoted word: backslashes removed; a glob or a brace makes it a pattern."""
    raw = node_text(node)
    out: list[str] = []
    kind = LITERAL
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        if c in _FOREIGN:
            walk.fail(f"roost cannot read the word {raw}")
        elif c in _GLOB or (c == "~" and i == 0 and not raw.startswith("~/") and raw != "~"):
            kind = PATTERN
        out.append(c)
        i += 1
    return "".join(out), kind


def _unescape_dq(raw: str) -> str:
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\" and i + 1 < n and raw[i + 1] in _DQ_ESCAPES:
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)
