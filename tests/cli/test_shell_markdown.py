"""The shell's Markdown renderer, line by line, on fixed inputs."""

from __future__ import annotations

from roost.cli.shell._markdown import MarkdownState, highlight, inline, render_line, render_markdown


def text(fragments: list[tuple[str, str]]) -> str:
    return "".join(t for _, t in fragments)


def styles(fragments: list[tuple[str, str]]) -> dict[str, str]:
    return {t: s for s, t in fragments}


def test_headings_lose_their_hashes_and_get_a_style_per_level() -> None:
    lines = render_markdown("# One\n## Two ##\n#### Four")
    assert lines == [[("class:md.h1", "One")], [("class:md.h2", "Two")], [("class:md.h3", "Four")]]


def test_lists_quotes_rules_and_task_boxes() -> None:
    lines = render_markdown("- a\n  * b\n3. c\n- [ ] todo\n- [x] done\n> said\n---")
    assert [text(line) for line in lines] == [
        "• a", "  • b", "3. c", "☐ todo", "☑ done", "▌ said", "─" * 40,
    ]
    assert ("class:md.bullet", "• ") in lines[0]
    assert lines[5][0] == ("class:md.quote", "▌ ")


def test_inline_bold_italic_code_and_links() -> None:
    fragments = inline("a **b** *c* `d` [e](http://x) snake_case_name 2*3*4")
    assert text(fragments) == "a b c d e (http://x) snake_case_name 2*3*4"
    found = styles(fragments)
    assert found["b"] == "class:md.bold"
    assert found["c"] == "class:md.em"
    assert found["d"] == "class:md.code"
    assert found["e"] == "class:md.link"
    # Underscores inside words and stars between digits are not emphasis.
    assert found[" snake_case_name 2*3*4"] == ""


def test_inline_styles_stack_on_a_base_style() -> None:
    assert inline("**x**", "class:md.h1") == [("class:md.h1 class:md.bold", "x")]


def test_a_fence_opens_a_code_block_that_the_state_carries_to_the_next_lines() -> None:
    state = MarkdownState()
    opening, state = render_line("```python", state)
    assert opening == [("class:md.fence", "```python")]
    assert state == MarkdownState(fence="```", lang="python")
    code, state = render_line("# not a heading", state)
    assert code == [("class:md.codeblock class:code.comment", "# not a heading")]
    # A shorter or different fence does not close it; the same one does.
    _, state = render_line("~~~", state)
    assert state.fence == "```"
    closing, state = render_line("```", state)
    assert closing == [("class:md.fence", "```")] and state == MarkdownState()


def test_python_highlighting() -> None:
    fragments = highlight("def f(x): return 'a#b' + 42  # note", "py")
    assert text(fragments) == "def f(x): return 'a#b' + 42  # note"
    found = styles(fragments)
    assert found["def"] == found["return"] == "class:md.codeblock class:code.keyword"
    assert found["'a#b'"] == "class:md.codeblock class:code.string"
    assert found["42"] == "class:md.codeblock class:code.number"
    assert found["# note"] == "class:md.codeblock class:code.comment"
    assert found[" f(x): "] == "class:md.codeblock"


def test_shell_and_c_like_highlighting() -> None:
    shell = styles(highlight('echo "$HOME" $USER # hi', "bash"))
    assert shell["$USER"] == "class:md.codeblock class:code.variable"
    assert shell["# hi"] == "class:md.codeblock class:code.comment"
    c = styles(highlight("let x = 1; // one", "rust"))
    assert c["let"] == "class:md.codeblock class:code.keyword"
    assert c["// one"] == "class:md.codeblock class:code.comment"


def test_unknown_languages_are_shown_plain() -> None:
    assert highlight("whatever <x>", "no-such-language") == [("class:md.codeblock", "whatever <x>")]
    assert render_markdown("```\nif x\n```")[1] == [("class:md.codeblock", "if x")]
