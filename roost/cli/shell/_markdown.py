"""Markdown as styled terminal lines, one line at a time, so that a reply can stream.

The shell commits a reply to the terminal line by line as it arrives, so this renderer works
on one line at a time; the only thing that crosses lines (being inside a fenced code block,
and its language) is carried in :class:`MarkdownState`. Shown readably: headings, bullet and
numbered lists, task boxes, quotes, rules, fenced code with highlighting, and inline bold,
italic, code and links. Tables, setext headings and HTML stay as written.

Highlighting is a small tokenizer (comments, strings, numbers, keywords) for a few language
families rather than pygments, which is not a dependency of roost (it only comes with the
test tools). Strings and comments that span lines are not tracked.

Output is prompt_toolkit formatted text, ``[(style, text), ...]``, built as plain lists so
this module imports nothing from prompt_toolkit. Styles are class names (``class:md.h1``);
the shell's style sheet gives them colours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

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


@dataclass(frozen=True, slots=True)
class _Family:
    comment: str  # regex of a comment that runs to the end of the line
    keywords: frozenset[str]
    variables: bool = False  # shell: $NAME and ${...}


_PY = frozenset(
    "False None True and as assert async await break class continue def del elif else except "
    "finally for from global if import in is lambda nonlocal not or pass raise return try while "
    "with yield match case self".split()
)
_SH = frozenset(
    "if then else elif fi for while until do done case esac in function return local export "
    "set unset readonly shift source exit echo cd test true false".split()
)
_C = frozenset(
    "auto break case catch char class const constexpr continue default delete do double else "
    "enum extern false final float fn for func go if impl import in int interface let long "
    "match mod mut namespace new nil null package private protected pub public return self "
    "short static struct super switch this throw true try type typedef typeof union unsafe "
    "unsigned use var void volatile while async await export from function of yield undefined "
    "def defer chan map range select string bool byte rune where trait loop as".split()
)
_DATA = frozenset("true false null yes no on off".split())

_FAMILIES = {
    "python": _Family(r"#.*", _PY),
    "shell": _Family(r"(?<![\w$])#.*", _SH, variables=True),
    "c": _Family(r"//.*|/\*.*?(?:\*/|$)", _C),
    "data": _Family(r"#.*", _DATA),
    "sql": _Family(r"--.*", frozenset(
        "select from where insert into values update set delete create table drop alter index "
        "join left right inner outer on group by order having limit and or not null as "
        "primary key references begin commit".split())),
}
_ALIASES = {
    "py": "python", "python": "python", "python3": "python", "pycon": "python",
    "sh": "shell", "bash": "shell", "zsh": "shell", "shell": "shell", "console": "shell",
    "fish": "shell", "shell-session": "shell",
    "c": "c", "h": "c", "cpp": "c", "c++": "c", "cc": "c", "java": "c", "kotlin": "c",
    "js": "c", "javascript": "c", "ts": "c", "typescript": "c", "jsx": "c", "tsx": "c",
    "go": "c", "golang": "c", "rust": "c", "rs": "c", "swift": "c", "cs": "c", "csharp": "c",
    "json": "data", "yaml": "data", "yml": "data", "toml": "data", "ini": "data",
    "sql": "sql",
}
_STRING = r"\"(?:\\.|[^\"\\])*\"?|'(?:\\.|[^'\\])*'?|`[^`]*`?"
_NUMBER = r"\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b"
_WORD = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKENS = {
    name: re.compile(
        f"(?P<comment>{family.comment})|(?P<string>{_STRING})|(?P<number>{_NUMBER})"
        + (r"|(?P<variable>\$(?:\{[^}]*\}|\w+|.))" if family.variables else "")
        + f"|(?P<word>{_WORD})"
    )
    for name, family in _FAMILIES.items()
}


def highlight(code: str, lang: str) -> Fragments:
    """One line of code in language ``lang`` (an alias like ``py``; unknown: unhighlighted)."""
    family_name = _ALIASES.get(lang.lower())
    if family_name is None:
        return [("class:md.codeblock", code)]
    keywords = _FAMILIES[family_name].keywords
    out: Fragments = []
    at = 0
    for match in _TOKENS[family_name].finditer(code):
        kind = match.lastgroup
        if kind == "word" and match.group() not in keywords:
            continue
        if match.start() > at:
            out.append(("class:md.codeblock", code[at:match.start()]))
        style = "keyword" if kind == "word" else kind
        out.append((f"class:md.codeblock class:code.{style}", match.group()))
        at = match.end()
    if at < len(code) or not out:
        out.append(("class:md.codeblock", code[at:]))
    return out
