"""The parts of a shell line around its commands: assignments (a variable that changes what
programs run makes the line not whole), declarations, tests (``[[ ]]`` evaluates its
expansions as arithmetic), redirections (the files the line writes; ``/dev/null`` and the
standard streams are no files) and here-documents (an unquoted one runs its substitutions).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from ._shell_words import LITERAL, WILD, Word, expansion, node_text, read_word, subscript

if TYPE_CHECKING:
    from ._shell_lines import Walk

#: Variables that change what a program runs, or which program runs.
_DANGEROUS = re.compile(
    r"PATH|LD_\w*|DYLD_\w*|BASH_ENV|ENV|BASH_FUNC_\w*|SHELLOPTS|BASHOPTS|PS4|IFS|PROMPT_COMMAND"
    r"|GIT_\w*|HOME|XDG_CONFIG_HOME|ZDOTDIR|PYTHON\w*|PERL5\w*|PERLLIB|RUBYOPT|RUBYLIB"
    r"|NODE_OPTIONS|NODE_PATH|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|EDITOR|VISUAL|PAGER|\w*_PAGER"
    r"|MANPAGER|LESSOPEN|LESSCLOSE|\w*ASKPASS|npm_config_\w*|NPM_CONFIG_\w*"
)
#: Redirection targets that are no files.
_STREAMS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_WRITING = frozenset({">", ">>", ">|", "&>", "&>>"})
#: A substitution in text that the grammar left as text (a here-document's backticks).
_SUBSTITUTION = re.compile(r"(?<!\\)(?:`|\$\()")
_EXPANSIONS = frozenset({
    "simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion",
})


def check_variable(walk: Walk, name: str) -> None:
    if _DANGEROUS.fullmatch(name):
        walk.fail(f"it sets {name}, which changes what programs run")


def assignment(walk: Walk, node: Node, depth: int) -> None:
    for i, child in enumerate(node.children):
        field = node.field_name_for_child(i)
        if field == "name":
            if child.type == "subscript":
                walk.fail("it assigns to an array element (its index is arithmetic)")
            else:
                check_variable(walk, node_text(child))
        elif field == "value":
            if child.type == "array":
                for element in child.named_children:
                    read_word(walk, element, depth)
            else:
                read_word(walk, child, depth)


def assignments(walk: Walk, node: Node, depth: int) -> None:
    if node.type == "variable_assignment":
        assignment(walk, node, depth)
    else:
        for child in node.named_children:
            assignment(walk, child, depth)


def declaration(walk: Walk, node: Node, depth: int) -> None:
    for child in node.children:
        t = child.type
        if t == "variable_assignment":
            assignment(walk, child, depth)
        elif t == "variable_name":
            check_variable(walk, node_text(child))
        elif child.is_named:
            text, _ = read_word(walk, child, depth)
            if text[:1] in "-+" and ("i" in text or "n" in text):
                walk.fail(f"{text} makes a declaration evaluate arithmetic or name another variable")


def test_command(walk: Walk, node: Node, depth: int) -> None:
    double = node.child_count > 0 and node.children[0].type == "[["
    stack = list(node.named_children)
    while stack:
        child = stack.pop()
        t = child.type
        if t in _EXPANSIONS:
            if double:
                # [[ $x -eq 1 ]] evaluates $x as arithmetic, which can run commands.
                walk.fail("it tests expansions in [[ ]]")
            expansion(walk, child, depth)
        elif t in ("ansi_c_string", "translated_string"):
            expansion(walk, child, depth)
        else:
            subscript(walk, node_text(child))
            stack.extend(child.named_children)


def redirect(walk: Walk, node: Node, depth: int) -> None:
    t = node.type
    if t == "heredoc_redirect":
        quoted = False
        for child in node.named_children:
            ct = child.type
            if ct == "heredoc_start":
                quoted = any(q in node_text(child) for q in "'\"\\")
            elif ct == "heredoc_body":
                if not quoted:
                    heredoc(walk, child, depth)
            elif ct.endswith("_redirect"):
                redirect(walk, child, depth)
            elif ct != "heredoc_end":
                walk.statement(child, depth)
        return
    if t == "herestring_redirect":
        for child in node.named_children:
            read_word(walk, child, depth)
        return
    operator = ""
    destination: Node | None = None
    for i, child in enumerate(node.children):
        if node.field_name_for_child(i) == "destination":
            destination = child
        elif not child.is_named:
            operator = child.type
    if destination is None:
        return
    if operator in (">&-", "<&-"):
        # These take no target: the grammar read an argument as one.
        walk.fail(f"roost cannot read the redirection {node_text(node)}")
    word = read_word(walk, destination, depth)
    if operator in _WRITING or (operator == ">&" and not word[0].isdigit() and word[0] != "-"):
        write(walk, word)


def write(walk: Walk, word: Word) -> None:
    text, kind = word
    if kind != LITERAL:
        walk.fail(f"it writes to a file only known when the line runs ({text.replace(WILD, '…')})")
    elif text not in _STREAMS:
        walk.writes.append(text)


def heredoc(walk: Walk, node: Node, depth: int) -> None:
    """An unquoted here-document: its substitutions run when the line does."""
    source = node.text or b""
    plain, at = [], node.start_byte
    for child in node.named_children:
        if child.type != "heredoc_content":
            plain.append(source[at - node.start_byte : child.start_byte - node.start_byte])
            at = child.end_byte
            expansion(walk, child, depth)
    plain.append(source[at - node.start_byte :])
    if _SUBSTITUTION.search(b"".join(plain).decode("utf-8", "surrogatepass")):
        walk.fail("roost cannot read the here-document")
