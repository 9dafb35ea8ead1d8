"""Markdown as styled terminal lines, one line at a time, so that a reply can stream.

The shell commits a reply to the terminal line by line as it arrives, so this renderer works
on one line at a time; the only thing that crosses lines (being inside a fenced code block,
and its language) is carried in :class:`MarkdownState`. Shown readably: headings, bullet and
numbered lists, task boxes, quotes, rules, fenced code with highlighting, and inline bold,
italic, code and links. Tables, setext headings and HTML stay as written.

Code is highlighted by pygments, one line at a time (strings and comments that span lines
are not tracked), its token types mapped onto the shell's few code styles.

Output is prompt_toolkit formatted text, ``[(style, text), ...]``, built as plain lists so
this module imports nothing from prompt_toolkit. Styles are class names (``class:md.h1``);
the shell's style sheet gives them colours.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

Fragments = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class MarkdownState:
    """What a line's rendering depends on from the lines before it."""

    #: The opening fence (```` ``` ````, ``~~~``, or longer) while inside a code block.
    fence: str = ""
    #: The code block's language, as written after the fence.
    lang: str = ""


def render_markdown(text: str) -> list[Fragments]:
    """A whole Markdown text as styled lines."""
    state = MarkdownState()
    lines = []
    for line in text.split("\n"):
        fragments, state = render_line(line, state)
        lines.append(fragments)
    return lines


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?:\[([ xX])\]\s+)?(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d{1,9}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")


def render_line(line: str, state: MarkdownState) -> tuple[Fragments, MarkdownState]:
    """One line of Markdown, and the state for the next line."""
    if state.fence:
        closing = _FENCE.match(line)
        if closing and closing.group(1)[0] == state.fence[0] and len(closing.group(1)) >= len(state.fence) \
                and not closing.group(2):
            return [("class:md.fence", line)], MarkdownState()
        return highlight(line, state.lang), state
    opening = _FENCE.match(line)
    if opening:
        return [("class:md.fence", line)], replace(state, fence=opening.group(1), lang=opening.group(2))
    heading = _HEADING.match(line)
    if heading:
        level = min(len(heading.group(1)), 3)
        return inline(heading.group(2), f"class:md.h{level}"), state
    if _RULE.match(line):
        return [("class:md.rule", "─" * 40)], state
    bullet = _BULLET.match(line)
    if bullet:
        indent, box, rest = bullet.groups()
        marker = "• " if box is None else ("☐ " if box == " " else "☑ ")
        return [*_indent(indent), ("class:md.bullet", marker), *inline(rest)], state
    numbered = _NUMBERED.match(line)
    if numbered:
        indent, number, rest = numbered.groups()
        return [*_indent(indent), ("class:md.bullet", number + " "), *inline(rest)], state
    quote = _QUOTE.match(line)
    if quote:
        return [("class:md.quote", "▌ "), *inline(quote.group(1), "class:md.quote")], state
    return inline(line), state


def _indent(spaces: str) -> Fragments:
    return [("", spaces)] if spaces else []


_INLINE = re.compile(
    r"(?P<ticks>`+)(?P<code>.+?)(?P=ticks)"
    r"|\*\*(?P<bold>[^*\s](?:[^*]*[^*\s])?)\*\*"
    r"|(?<!\w)__(?P<bold2>[^_\s](?:[^_]*[^_\s])?)__(?!\w)"
    r"|(?<![\w*])\*(?P<em>[^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"
    r"|(?<!\w)_(?P<em2>[^_\s](?:[^_]*[^_\s])?)_(?!\w)"
    r"|\[(?P<link>[^\]]+)\]\((?P<url>[^)\s]+)\)"
)


def inline(text: str, base: str = "") -> Fragments:
    """Inline Markdown (code spans, bold, italic, links) on top of the style ``base``."""
    out: Fragments = []
    at = 0
    for match in _INLINE.finditer(text):
        if match.start() > at:
            out.append((base, text[at:match.start()]))
        if match.group("code") is not None:
            out.append((_join(base, "class:md.code"), match.group("code")))
        elif match.group("bold") or match.group("bold2"):
            out.append((_join(base, "class:md.bold"), match.group("bold") or match.group("bold2")))
        elif match.group("em") or match.group("em2"):
            out.append((_join(base, "class:md.em"), match.group("em") or match.group("em2")))
        else:
            label, url = match.group("link"), match.group("url")
            out.append((_join(base, "class:md.link"), label))
            if url != label:
                out.append((_join(base, "class:md.url"), f" ({url})"))
        at = match.end()
    if at < len(text) or not out:
        out.append((base, text[at:]))
    return out


def _join(base: str, style: str) -> str:
    return f"{base} {style}" if base else style


# -- code ------------------------------------------------------------------------------------


def highlight(code: str, lang: str) -> Fragments:
    """One line of code in language ``lang`` (any name or alias pygments knows; unknown:
    unhighlighted)."""
    lexer = _lexer(lang.lower())
    if lexer is None:
        return [("class:md.codeblock", code)]
    out: Fragments = []
    for kind, value in lexer.get_tokens(code):
        style = _style(kind)
        if out and out[-1][0] == style:
            out[-1] = (style, out[-1][1] + value)
        else:
            out.append((style, value))
    # pygments ends what it was given with a newline of its own.
    if out and out[-1][1].endswith("\n") and not code.endswith("\n"):
        out[-1] = (out[-1][0], out[-1][1][:-1])
    return [f for f in out if f[1]] or [("class:md.codeblock", code)]


@functools.cache
def _lexer(lang: str) -> Any:
    """pygments' lexer for ``lang`` (None: pygments knows no such language)."""
    # Imported here: only a reply with a fenced code block pays for pygments.
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(lang, stripnl=False)
    except ClassNotFound:
        return None


def _style(kind: Any) -> str:
    """The shell's style class of a pygments token type (its parents count too)."""
    while kind is not None:
        name = _STYLES.get(str(kind))
        if name is not None:
            return f"class:md.codeblock class:code.{name}" if name else "class:md.codeblock"
        kind = kind.parent
    return "class:md.codeblock"


#: pygments token types -> the shell's code styles ("" = plain).
_STYLES = {
    "Token.Keyword": "keyword",
    "Token.Name.Builtin": "keyword",
    "Token.Literal.String": "string",
    "Token.Literal.Number": "number",
    "Token.Comment": "comment",
    "Token.Name.Variable": "variable",
    "Token": "",
}
