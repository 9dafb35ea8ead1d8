"""What the shell shows, as prompt_toolkit formatted text: pure functions, no IO, no state.

Each function takes event maps or the view's state (and the time and width it needs as
arguments) and returns fragments ``[(style, text), ...]`` or lines of them. Lists of tuples
are prompt_toolkit formatted text as they are, so this module imports nothing from
prompt_toolkit and its output can be compared in tests. Styles are class names; the shell's
style sheet (``_app.STYLE``) gives them colours.

Two places show things: the transcript, committed to the terminal's scrollback once (event
lines, a reply's Markdown), and the live area under it, redrawn as time passes (tools
running, a spinner, the open approval or question, the toolbar).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from roost.protocol import SUCCESS_REASONS

from .. import _approval_keys as keys
from .._render import applied_diff, media_lines, sandbox_line, searched, seconds, session_tree, shorten, summary, tools_changed, tree_id, untrusted, when
from .._safe_text import printable, visible
from ._markdown import Fragments
from ._view import Phase, Request, SessionView, ToolCall

Lines = list[Fragments]

#: Frames of the spinner shown while waiting on the model or a tool (ten a second).
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
#: Lines of a tool's result shown under its call; the rest is folded into a count.
RESULT_LINES = 3
#: Lines of a check's output, or of a long user message from a check, shown.
NOTE_LINES = 3
#: Lines of the diff an approval shows.
DIFF_LINES = 30

def plain(fragments: Iterable[tuple[str, str]]) -> str:
    """The text of some fragments, without styles."""
    return "".join(text for _, text in fragments)


def clean(text: str) -> str:
    """Text safe to print: tabs expanded, control characters (escapes, CR) removed."""
    return printable(text.expandtabs(4))


def indent(lines: Lines, depth: int) -> Lines:
    """Lines of a sub-agent ``depth`` levels down, indented under its call."""
    if depth <= 0:
        return lines
    bar = ("class:subagent", "  │ " * depth)
    return [[bar, *line] for line in lines]


def join_lines(lines: Lines) -> Fragments:
    """Lines as one piece of formatted text, ending with a newline."""
    out: Fragments = []
    for line in lines:
        out.extend(line)
        out.append(("", "\n"))
    return out


def cut(line: str, width: int) -> str:
    """One line cut to ``width`` with an ellipsis, its whitespace kept (unlike
    :func:`shorten`): code and diffs keep their indentation."""
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def brief_input(value: Any, width: int) -> str:
    """A tool call's main argument (command, path, pattern, ...) on one line."""
    if isinstance(value, dict):
        for key in ("command", "path", "file_path", "pattern", "query", "url", "description", "prompt"):
            if isinstance(value.get(key), str):
                return shorten(clean(value[key]), width)
        if isinstance(value.get("todos"), list):
            return f"{len(value['todos'])} items"
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in value.items())
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return shorten(clean(text), width)


# -- the transcript ----------------------------------------------------------------------------


def session_header(session: str, cwd: str, created: float | None) -> Lines:
    """The line that opens a session's transcript."""
    when_text = f" · created {when(created)}" if created else ""
    return [[("class:dim", f"── session {session} · {cwd}{when_text} ──")]]


def run_started(e: dict[str, Any]) -> Lines:
    """A run began: its id, agent, mode and model, and where its commands run."""
    parts = [f"▶ run {e.get('run')}"]
    parts += [str(e[key]) for key in ("agent", "mode", "model") if e.get(key)]
    lines: Lines = [[], [("class:dim", " · ".join(parts))]]
    sandbox = sandbox_line(e.get("sandbox"))
    if sandbox is not None:
        style = "class:warn" if "unsandboxed" in sandbox or "ignored" in sandbox else "class:dim"
        lines.append([(style, clean(sandbox))])
    return lines


def project_untrusted(e: dict[str, Any]) -> Lines:
    """The folder is not trusted: what its files would widen was ignored."""
    return [[("class:warn", clean(untrusted(e)))]]


def tools_changed_line(e: dict[str, Any]) -> Lines:
    """The run's tools differ from the last run's: what disappeared and appeared."""
    return [[("class:warn", clean(tools_changed(e)))]]


def trust_question(shown: dict[str, Any]) -> Lines:
    """``trust.show``'s answer for a folder that is not trusted: what its files would widen."""
    out: Lines = [[("class:warn.bold", f"{visible(shown.get('folder') or '')} is not trusted; its files would widen what roost does:")]]
    for item in shown.get("items", []):
        if item.get("trusted"):
            continue
        # Escaped, not cleaned: a control character in a file must show, never hide a part.
        detail = f": {item['detail']}" if item.get("detail") else ""
        since = {"new": "  [new since you trusted it]", "changed": "  [changed since you trusted it]"}.get(item.get("since") or "", "")
        out.append([
            ("class:warn", f"  {item.get('kind')} {visible(str(item.get('name')))}"),
            ("class:dim", visible(f"{detail} ({item.get('source')})")),
            ("class:warn.bold", since),
        ])
        out += [[("class:dim", visible(f"    {v['name'].replace('.', ' ', 1)} = {v['value']}"))] for v in item.get("values") or ()]
        variables = [v["name"] + (" (looks secret)" if v["secret"] else "") for v in item.get("variables") or ()]
        if variables:
            out.append([("class:dim", visible(f"    reads from your environment: {', '.join(variables)}"))])
        out += [[("class:warn.bold", visible(f"    ⚠ {warning}"))] for warning in item.get("warnings") or ()]
    out.append([("class:dim", "y: trust these files as they are now · anything else: go on, ignoring them")])
    return out


def lines_question(lines: list[str]) -> Lines:
    """A custom command's ``!`command``` lines that wait for approval (a line with control
    characters shown escaped: nothing it would run is hidden)."""
    out: Lines = [[("class:warn.bold", "The command runs these lines before its task is sent:")]]
    for line in lines:
        shown = line if clean(line) == line else line.encode("unicode_escape").decode()
        out.append([("class:tool.name", f"  !`{shown}`")])
    out.append([("class:dim", "y: run them, then send the task · anything else: send nothing")])
    return out


def user_message(text: str, origin: str, command: str = "", media: Iterable[str] = ()) -> Lines:
    """A task (with the custom ``command`` it was expanded from, if any: the command, then
    the expansion folded; then the lines of the images it carries), a steer, or a note fed
    back by the check or a hook (folded)."""
    attached = [[("", "  "), ("class:dim", line)] for line in media]
    return _user_lines(text, origin, command) + attached


def _user_lines(text: str, origin: str, command: str) -> Lines:
    lines = clean(text).strip("\n").split("\n")
    if origin == "check":
        return _folded([("class:dim", "◆ ")], lines, "class:dim", NOTE_LINES)
    if origin == "hook":
        return _folded([("class:dim", "◆ hook: ")], lines, "class:dim", NOTE_LINES)
    if command:
        typed = [[("class:user.marker", "› "), ("class:user", clean(command).split("\n")[0])]]
        return typed + _folded([("", "  ")], lines, "class:dim", NOTE_LINES)
    marker = "› " if origin != "steer" else "» "
    out = [[("class:user.marker", marker), ("class:user", lines[0])]]
    out += [[("", "  "), ("class:user", line)] for line in lines[1:]]
    return out


def steer_queued(text: str) -> Lines:
    """Text for the run in flight, given to its next model call."""
    lines = clean(text).strip("\n").split("\n")
    out = [[("class:user.marker", "» "), ("class:user", lines[0]), ("class:dim", "  (steering)")]]
    out += [[("", "  "), ("class:user", line)] for line in lines[1:]]
    return out


def tool_finished(name: str, tool_input: Any, e: dict[str, Any], width: int) -> Lines:
    """A finished tool call: one line (tool, main argument, status, time), its result folded."""
    failed = bool(e.get("is_error"))
    mark = ("class:tool.error", "✗ ") if failed else ("class:tool.ok", "● ")
    took = f" · {seconds(float(e.get('latency') or 0.0))}"
    head = [mark, ("class:tool.name", name), ("", " "),
            ("class:tool.arg", brief_input(tool_input, max(10, width - len(name) - len(took) - 4))),
            ("class:dim", took)]
    result = clean(str(e.get("result", ""))).rstrip("\n")
    lines = result.split("\n") if result.strip() else ["(no output)"]
    style = "class:tool.error-text" if failed else "class:tool.result"
    return [head, *_folded([("class:dim", "  ⎿ ")], lines, style, RESULT_LINES, width, "    "),
            *[[("", "    "), ("class:dim", line)] for line in media_lines(e)],
            *diff_lines(applied_diff(e), width, "    ")]


def searches(content: Iterable[Any], width: int) -> Lines:
    """The searches a reply's provider ran: each query as a tool line, what it found, and
    the sources the reply cites."""
    out: Lines = []
    for kind, line in searched(content):
        if kind == "call":
            name, _, query = line.partition(" ")
            out.append([("class:tool.ok", "● "), ("class:tool.name", name), ("", " "), ("class:tool.arg", cut(query, width - len(name) - 3))])
        elif kind == "source":
            out.append([("class:dim", "  " + cut(line, width - 2))])
        else:
            style = "class:tool.error-text" if kind == "failed" else "class:tool.result"
            out.append([("class:dim", "  ⎿ "), (style, cut(line, width - 4))])
    return out


def diff_lines(diff: str, width: int, gutter: str) -> Lines:
    """A unified diff, coloured, each line with its indentation (cut to ``width``, at most
    :data:`DIFF_LINES` of them)."""
    # Tabs are expanded after each line's marker (+, -, space), as in the file.
    lines = [clean(line[:1]) + clean(line[1:]) for line in diff.split("\n")] if diff else []
    out = [[("", gutter), (_diff_style(line), cut(line, width - len(gutter)))] for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        out.append([("", gutter), ("class:dim", f"… +{len(lines) - DIFF_LINES} lines")])
    return out


def running_tool(call: ToolCall, now: float, width: int) -> Fragments:
    """A tool call in flight, with a spinner and how long it has been running."""
    took = f" · {seconds(max(0.0, now - call.started))}"
    arg = brief_input(call.input, max(10, width - len(call.name) - len(took) - 6 - 4 * call.depth))
    line = [("class:spinner", spinner(now) + " "), ("class:tool.name", call.name), ("", " "),
            ("class:tool.arg", arg), ("class:dim", took)]
    return indent([line], call.depth)[0]


def reasoning(text: str, expanded: bool, width: int) -> Lines:
    """A model's reasoning: dimmed in full, or collapsed to one line."""
    text = clean(text).strip()
    if not text:
        return []
    if expanded:
        return [[("class:reasoning", "✻ ")]] + [[("class:reasoning", line)] for line in text.split("\n")]
    words = len(text.split())
    first = shorten(text, max(10, width - 40))
    return [[("class:reasoning", f"✻ thought ({words} words): {first}"), ("class:dim", "  Ctrl-O shows it")]]


def plan(e: dict[str, Any]) -> Lines:
    """Plan mode's result: numbered steps, with the files each touches."""
    out: Lines = []
    for step in e.get("steps") or []:
        if not isinstance(step, dict):
            continue
        line = [("class:md.bullet", f"{step.get('step', len(out) + 1)}. "), ("", clean(str(step.get("text", ""))))]
        if step.get("files"):
            line.append(("class:dim", "  [" + ", ".join(str(f) for f in step["files"]) + "]"))
        out.append(line)
    return [[("class:bold", "plan:")], *out] if out else []


def check_started(e: dict[str, Any]) -> Lines:
    """Exec mode: the check command started."""
    return [[("class:tool.name", f"⚑ check (attempt {e.get('attempt')}): "), ("class:tool.arg", str(e.get("command", "")))]]


def check_finished(e: dict[str, Any]) -> Lines:
    """Exec mode: the check ended."""
    ok = e.get("exit_status") == 0
    verdict = "passed" if ok else f"failed (exit status {e.get('exit_status')})"
    return [[("class:ok" if ok else "class:error", f"  check {verdict} · {seconds(float(e.get('duration') or 0.0))}")]]


def resolved(request: dict[str, Any] | None, e: dict[str, Any], width: int) -> Lines:
    """An approval was answered, by this terminal or another: who, and what."""
    approved = e.get("decision") == "approve"
    scope = "for the session" if e.get("scope") == "session" else "once"
    verdict = f"approved {scope}" if approved else "denied"
    what = ""
    if request is not None:
        what = f": {request.get('tool', '')} {brief_input(request.get('input'), max(10, width - 50))}"
    line = [("class:ok" if approved else "class:error", f"{'✓' if approved else '✗'} {verdict}"),
            ("class:dim", f" by {e.get('client') or 'someone'}"), ("", what)]
    if e.get("reason"):
        line.append(("class:dim", f" · {clean(str(e['reason']))}"))
    return [line]


def answered(request: dict[str, Any] | None, e: dict[str, Any]) -> Lines:
    """A question was answered, by this terminal or another."""
    question = shorten(clean(str((request or {}).get("question", ""))), 60)
    return [[("class:ok", "✓ "), ("class:dim", f"{question} → "), ("", clean(str(e.get("answer", "")))),
             ("class:dim", f"  (answered by {e.get('client') or 'someone'})")]]


def run_finished(e: dict[str, Any]) -> Lines:
    """The run's last line: how it ended, turns, tokens, cost, time."""
    good = e.get("reason") in SUCCESS_REASONS
    return [[("class:ok.bold" if good else "class:warn.bold", summary(e))]]


def error(message: str) -> Lines:
    """Something went wrong in the run, or a request was refused."""
    return [[("class:error", f"error: {clean(message)}")]]


def note(text: str, style: str = "class:dim") -> Lines:
    """A line from the shell itself (not from the session)."""
    return [[(style, clean(line))] for line in text.split("\n")]


def hook_failures(failures: Iterable[str]) -> Lines:
    """Hooks that failed (they blocked nothing)."""
    return [[("class:warn", clean(f"hook failed: {failure}"))] for failure in failures]


def compacted(e: dict[str, Any], width: int) -> Lines:
    """History was compacted into a summary."""
    summary_text = shorten(clean(str(e.get("summary", ""))), max(10, width - 20))
    return [[("class:dim", f"── compacted: {summary_text} ──")]]


def _folded(first: Fragments, lines: list[str], style: str, keep: int, width: int = 0,
            gutter: str = "  ") -> Lines:
    shown = lines[:keep]
    out = []
    for i, line in enumerate(shown):
        if width:
            line = cut(line, width - len(gutter))
        out.append([*(first if i == 0 else [("", gutter)]), (style, line)])
    if len(lines) > keep:
        out.append([("", gutter), ("class:dim", f"… +{len(lines) - keep} lines")])
    return out


# -- the live area -----------------------------------------------------------------------------


def spinner(now: float) -> str:
    """The spinner's frame at time ``now``."""
    return SPINNER[int(now * 10) % len(SPINNER)]


def request_panel(request: Request, now: float, width: int, *, position: str = "", choosing: bool = False) -> Lines:
    """An open approval or question, with the keys that answer it (``choosing``: the
    approval's scope for the session is asked)."""
    left = ""
    if request.deadline is not None:
        left = f"  ⏱ {seconds(max(0.0, float(request.deadline) - now))} left"
    if request.kind == "question":
        lines = [[("class:request.title", "╭ question: "), ("class:request", clean(request.question))]]
        if request.choices:
            choices = "  ".join(f"{i}) {clean(c)}" for i, c in enumerate(request.choices, start=1))
            lines.append([("class:request.title", "│ "), ("", choices)])
        lines.append([("class:request.title", "╰ "),
                      ("class:dim", "type the answer" + (" or its number" if request.choices else "")
                       + ", then Enter" + position + left)])
        return indent(lines, request.depth)
    # What a person is asked to trust: every character that could hide or reorder a part
    # of it written out (a right-to-left override would show another command).
    arg = visible(brief_input(request.input, max(10, width - len(request.tool) - 20)))
    lines = [[("class:request.title", f"╭ approve {visible(request.tool)}? "), ("class:tool.arg", arg)]]
    bar = ("class:request.title", "│ ")
    if request.reason:
        lines.append([bar, ("class:dim", clean(request.reason))])
    lines += [[bar, *line] for line in diff_lines(request.diff, width - 2, "")]
    # What approving for the session adds, exactly as the daemon will add it.
    offered = request.as_map()
    if choosing:
        lines.append([bar, ("class:request", "for the session:")])
        for number, what, also in keys.scope_lines(offered):
            lines.append([bar, ("class:key", f"  {number}"), ("", f"  {what}"),
                          ("class:dim", f"  ({also})" if also else "")])
        answer = [("class:key", "1"), ("", " / "), ("class:key", "2"), ("", " · "), ("class:key", "Esc"), ("", " back")]
    else:
        answer = []
        for key, meaning in keys.key_parts(offered):
            answer += [*([("", " · ")] if answer else []), ("class:key", key), ("", f" {meaning}")]
    lines.append([("class:request.title", "╰ "), *answer, ("class:dim", position + left)])
    return indent(lines, request.depth)


def _diff_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "class:dim"
    return {"+": "class:diff.add", "-": "class:diff.del", "@": "class:diff.hunk"}.get(line[:1], "")


def toolbar(view: SessionView, now: float, *, connected: bool, width: int = 200, model: str = "",
            agent: str = "", mode: str = "") -> Fragments:
    """The bottom line: session, what the run is doing, the model's checklist, tokens, cost,
    attached clients, then agent, mode and model. ``model``, ``agent`` and ``mode`` are this shell's choices for its
    next run; empty ones show what the last run used. The model name is cut to fit."""
    figures = f"{view.input_tokens + view.output_tokens:,} tokens"
    if view.cost is not None:
        figures += f" · ${view.cost:.4f}"
    if view.clients is not None:
        figures += f" · {view.clients} client{'s' if view.clients != 1 else ''}"
    if view.background:
        figures += f" · {len(view.background)} in background"
    out: Fragments = [
        ("class:toolbar.session", f" {view.session} "),
        ("class:toolbar", " "),
        status(view, now, connected),
    ]
    if view.todos:
        out.append(("class:toolbar", " │ " + checklist(view.todos, max(10, width // 4))))
    out.append(("class:toolbar", f" │ {figures} │ "))
    head = f"{agent or view.agent or 'default'} · {mode or view.mode or 'agent'} · "
    room = width - len(plain(out)) - len(head) - 1
    name = model or view.model or "default model"
    if len(name) > room:
        name = "…" + name[len(name) - max(0, room - 1):] if room > 1 else ""
    out.append(("class:toolbar", head + name + " "))
    return out


def checklist(todos: list[dict[str, Any]], width: int) -> str:
    """The model's checklist in a few words: ``2/5 ✓ · now: <the item in progress>`` (that
    item in the words of its ``activeForm``, cut to ``width``)."""
    done = sum(t.get("status") == "completed" for t in todos)
    text = f"{done}/{len(todos)} ✓"
    current = next((t for t in todos if t.get("status") == "in_progress"), None)
    if current is not None:
        text += " · now: " + shorten(clean(str(current.get("activeForm") or current.get("content", ""))), width)
    return text


def status(view: SessionView, now: float, connected: bool) -> tuple[str, str]:
    """What the session is doing, with a spinner and elapsed time when something runs."""
    if not connected:
        return ("class:toolbar.warn", f"{spinner(now)} reconnecting to the daemon")
    phase = view.phase
    if phase is Phase.IDLE:
        return ("class:toolbar.idle", "idle")
    if phase is Phase.WAITING:
        request = view.first_request()
        assert request is not None
        what = "approval" if request.kind == "permission" else "an answer"
        return ("class:toolbar.warn", f"waiting for {what} {seconds(max(0.0, now - request.asked))}")
    if phase is Phase.TOOL:
        call = min(view.tools.values(), key=lambda c: c.started)
        more = f" +{len(view.tools) - 1}" if len(view.tools) > 1 else ""
        return ("class:toolbar.busy", f"{spinner(now)} running {call.name}{more} {seconds(max(0.0, now - call.started))}")
    since = view.step_started or (view.run.started if view.run else now)
    return ("class:toolbar.busy", f"{spinner(now)} thinking {seconds(max(0.0, now - since))}")


def prompt(mode: str, busy: bool) -> Fragments:
    """The input prompt: what Enter will do with the text typed."""
    if mode == "deny":
        return [("class:prompt.request", "deny, reason (Enter: none) › ")]
    if mode == "answer":
        return [("class:prompt.request", "answer › ")]
    if mode == "trust":
        return [("class:prompt.request", "trust this folder? y / N › ")]
    if mode == "lines":
        return [("class:prompt.request", "run them? y / N › ")]
    if mode == "approval":
        return [("class:prompt.request", "approve? › ")]
    return [("class:prompt", "steer › " if busy else "› ")]


# -- output of slash commands -----------------------------------------------------------------


def mapping(result: dict[str, Any]) -> Lines:
    """A method's result (``report``, ``prompt``, ...) as key: value lines."""
    rows = []
    for key, value in result.items():
        if not isinstance(value, str):
            value = json.dumps(value, ensure_ascii=False, default=str)
        rows.append((str(key), value))
    return table(rows)


def prompt_layers(result: dict[str, Any]) -> Lines:
    """``/prompt``: the system prompt a run would get, each layer under a heading."""
    layers = [layer for layer in result.get("layers") or [] if isinstance(layer, dict)]
    if not layers:
        return mapping(result)
    out: Lines = []
    for layer in layers:
        text = clean(str(layer.get("text", ""))).rstrip()
        source = f" · {layer['source']}" if layer.get("source") else ""
        out.append([("class:tool.name", f"── {layer.get('name', '?')} ({len(text):,} chars{source})")])
        out += [[("", line)] for line in text.split("\n")]
    out.append([("class:dim", f"── agent {result.get('agent', '?')} · {result.get('mode', '?')} mode")])
    return out


def table(rows: list[tuple[str, str]]) -> Lines:
    """Two columns: names dimmed, values as they are (multi-line values indented)."""
    width = max((len(name) for name, _ in rows), default=0)
    out: Lines = []
    for name, value in rows:
        first, *more = clean(value).split("\n")
        out.append([("class:dim", f"  {name:<{width}}  "), ("", first)])
        out += [[("", " " * (width + 4) + line)] for line in more]
    return out


def sessions_table(rows: list[dict[str, Any]], current: str) -> Lines:
    """``/sessions``: id, status, events, clients, cwd; the current one marked, forks
    under their parents."""
    if not rows:
        return note("no sessions")
    tree = [(tree_id(depth, row), row) for depth, row in session_tree(rows)]
    width = max(13, *(len(name) for name, _ in tree))
    out: Lines = [[("class:dim", f"  {'ID':<{width}} {'CREATED':<19}  {'STATUS':<9} {'EVENTS':>6} {'CLIENTS':>7}  CWD")]]
    for name, row in tree:
        mark = "*" if row.get("id") == current else " "
        clients = row.get("clients")
        out.append([("class:user.marker" if mark == "*" else "", f"{mark} {name:<{width}} "),
                    ("", f"{when(row['created']) if row.get('created') else '':<19}  {row.get('status', ''):<9} "
                         f"{row.get('events', 0):>6} {'' if clients is None else clients:>7}  {row.get('cwd', '')}")])
    return out


def help_lines(commands: Iterable[tuple[str, str, str]], custom: Iterable[tuple[str, str, str]] = ()) -> Lines:
    """``/help``: the slash commands (built in, then custom: name, arguments, what it does)
    and the keys."""
    out: Lines = [[("class:bold", "Type a task and press Enter; while a run is in flight, what you type steers it.")]]
    rows = [(f"/{name}", f" {args}" if args else "", doc) for name, args, doc in commands]
    more = [(f"/{name}", f" {args}" if args else "", doc) for name, args, doc in custom]
    width = max((len(name + args) for name, args, _ in rows + more), default=0)
    for name, args, doc in rows:
        out.append([("class:key", f"  {name}"), ("", args.ljust(width - len(name))), ("class:dim", f"  {doc}")])
    if more:
        out.append([("class:bold", "Custom commands (.claude/commands; the daemon expands them):")])
    for name, args, doc in more:
        out.append([("class:key", f"  {clean(name)}"), ("", clean(args).ljust(width - len(name))), ("class:dim", f"  {clean(doc)}")])
    shortcuts = [
        ("Esc Enter", "new line (a paste keeps its lines)"),
        ("Tab", "complete /commands, agent and model names, @paths"),
        ("Ctrl-C", "abort the run; at an empty prompt, detach"),
        ("Ctrl-D", "detach (the run goes on in the daemon)"),
        ("Ctrl-O", "show reasoning in full, or collapsed"),
        ("y s/a n", f"answer an approval: {keys.KEYS_HELP} (Esc: back)"),
        ("//text", "send text that starts with /"),
    ]
    out.append([("class:bold", "Keys:")])
    out += [[("class:key", f"  {key:<10}"), ("class:dim", f" {doc}")] for key, doc in shortcuts]
    return out
