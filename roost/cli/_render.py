"""Events as readable terminal output: text as it streams, tool calls in brief, the model's
checklist when it changes, a summary."""

from __future__ import annotations

import datetime
from typing import Any, Callable, Iterable

import click

from roost.protocol import SUCCESS_REASONS

from . import _approval_keys as keys
from ._safe_text import printable, visible

#: Lines of a task shown in a run's header; the rest is counted.
TASK_LINES = 8


#: The events whose first line ``roost logs`` marks with their seq.
_MARKED = frozenset(
    ("run.started", "message.user", "message.assistant", "tool.finished", "permission.requested", "human.asked", "run.finished")
)


class Renderer:
    """Turns a session's events into lines; keeps just enough state to avoid repeats."""

    def __init__(
        self, echo: Callable[..., None] = click.echo, *, color: bool | None = None, seqs: bool = False,
        answering: bool = False,
    ) -> None:
        self._echo = echo
        self._color = color
        #: Whether the lines an event starts are marked with its seq (``roost logs``: the
        #: points ``fork --at`` takes), and the mark the next line written gets.
        self._seqs = seqs
        self._mark = ""
        #: The person at this terminal is asked about each request (``_approvals``): the
        #: request's lines leave out what the question says.
        self._answering = answering
        #: Calls whose change was shown with their approval (not shown again once made).
        self._diffed: set[str] = set()
        self._streamed = False
        self._mid_line = False
        #: The last checklist shown, by the ``path`` of the agent that keeps it.
        self._todos: dict[tuple[str, ...], list[Any]] = {}

    def render(self, event: dict[str, Any]) -> None:
        """Write one event."""
        kind = event.get("type")
        handler = getattr(self, "_" + str(kind).replace(".", "_"), None)
        if handler is None:
            return
        if self._seqs and kind in _MARKED and event.get("seq"):
            self._end_line()
            self._mark = f"[{event['seq']}] "
        handler(event)
        # A mark belongs to a line the event wrote itself (a streamed reply wrote its own).
        self._mark = ""

    def _out(self, text: str, *, nl: bool = True, **style: Any) -> None:
        # Every event's text passes here: roost's own colours are added after.
        text = printable(text)
        if style:
            text = click.style(text, **style)
        if self._mark:
            text = click.style(self._mark, dim=True) + text
            self._mark = ""
        self._echo(text, nl=nl, color=self._color)

    def _end_line(self) -> None:
        if self._mid_line:
            self._out("")
            self._mid_line = False

    def _run_started(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"▶ run {e.get('run')} · {e.get('model')} · session {e.get('session')}", dim=True)
        line = sandbox_line(e.get("sandbox"))
        if line is not None:
            warn = "unsandboxed" in line or "ignored" in line
            self._out(line, **({"fg": "yellow"} if warn else {"dim": True}))
        heavy = tools_note(e.get("prompt") or [])
        if heavy is not None:
            self._out(heavy, fg="yellow")
        self._hook_failures(e)

    def _project_untrusted(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(untrusted(e), fg="yellow")

    def _tools_changed(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(tools_changed(e), fg="yellow")

    def _message_user(self, e: dict[str, Any]) -> None:
        self._end_line()
        prefix = {"steer": "steer", "nudge": "roost", "check": "check", "hook": "hook"}.get(e.get("origin", ""), "task")
        if e.get("command"):
            # A custom command: as typed, then what it expanded to.
            self._out(f"{prefix}: {e['command']}", bold=True)
            self._out(folded(str(e.get("text", ""))), dim=True)
            return
        self._out(f"{prefix}: {folded(str(e.get('text', '')))}", bold=True)
        for line in media_lines(e):
            self._out(f"  {line}", dim=True)

    def _text_delta(self, e: dict[str, Any]) -> None:
        self._streamed = True
        text = e.get("text", "")
        if text:
            self._out(text, nl=False)
            self._mid_line = not text.endswith("\n")

    def _reasoning_delta(self, e: dict[str, Any]) -> None:
        self._streamed = True
        self._out(e.get("text", ""), nl=False, dim=True)
        self._mid_line = True

    def _message_assistant(self, e: dict[str, Any]) -> None:
        if not self._streamed:
            for block in e.get("content", []):
                if block.get("type") == "text" and block.get("text"):
                    self._end_line()
                    self._out(block["text"])
        self._streamed = False
        self._end_line()
        for kind, line in searched(e.get("content", [])):
            if kind == "call":
                self._out(f"→ {line}", fg="cyan")
            else:
                mark = {"failed": "✗", "found": "✓"}.get(kind, " ")
                self._out(f"  {mark} {line}", **({"fg": "red"} if kind == "failed" else {"dim": True}))

    def _memory_learned(self, e: dict[str, Any]) -> None:
        self._end_line()
        for line in learned(e):
            self._out(line, dim=True)

    def _tool_started(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"→ {e.get('name')} {brief(e.get('input'))}", fg="cyan")

    def _tool_finished(self, e: dict[str, Any]) -> None:
        self._end_line()
        todos = (e.get("meta") or {}).get("todos")
        if e.get("name") == "todo" and isinstance(todos, list) and not e.get("is_error"):
            self._checklist(tuple(e.get("path") or ()), todos)
            return
        result = str(e.get("result", ""))
        lines = result.strip().splitlines()
        first = lines[0] if lines else ""
        if len(first) > 100:
            first = first[:97] + "..."
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        took = f" {e.get('latency', 0.0):.2f}s"
        if e.get("is_error"):
            self._out(f"  ✗ {first}{more}{took}", fg="red")
            return
        self._out(f"  ✓ {first}{more}{took}", dim=True)
        for line in media_lines(e):
            self._out(f"    {line}", dim=True)
        diff = applied_diff(e)
        if diff and str(e.get("call_id")) not in self._diffed:
            # The change made, unless the approval showed it already.
            self._diff(diff)

    def _stop_hooks_finished(self, e: dict[str, Any]) -> None:
        self._hook_failures(e)

    def _hook_failures(self, e: dict[str, Any]) -> None:
        """Hooks that failed (they blocked nothing), as the event says."""
        for failure in e.get("hook_failures") or e.get("failures") or ():
            self._end_line()
            self._out(f"hook failed: {failure}", fg="yellow")

    def _checklist(self, path: tuple[str, ...], todos: list[Any]) -> None:
        items = [t for t in todos if isinstance(t, dict)]
        done = sum(t.get("status") == "completed" for t in items)
        changed = self._todos.get(path) != items
        self._todos[path] = items
        self._out(f"  ✓ todo {done}/{len(items)} done{'' if changed else ' (unchanged)'}", dim=True)
        if changed:
            for item in items:
                line, style = todo_line(item)
                self._out(f"    {line}", **style)

    def _check_started(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"⚑ check (attempt {e.get('attempt')}): {e.get('command')}", fg="cyan")

    def _check_finished(self, e: dict[str, Any]) -> None:
        self._end_line()
        ok = e.get("exit_status") == 0
        verdict = "passed" if ok else f"failed (exit status {e.get('exit_status')})"
        self._out(f"  check {verdict} · {e.get('duration', 0.0):.1f}s", fg="green" if ok else "red")

    def _permission_requested(self, e: dict[str, Any]) -> None:
        self._end_line()
        # What a person is asked to trust: a bidirectional override must not disguise it.
        self._out(f"? {visible(str(e.get('tool')))} {visible(brief(e.get('input')))} waits for approval ({e.get('reason')})", fg="yellow")
        if e.get("diff"):
            self._diff(str(e["diff"]))
            self._diffed.add(str(e.get("call_id")))
        if self._answering:
            return  # the question at this terminal says what the keys add
        self._out(f"  {keys.offer(e)}", dim=True)
        session, call = e.get("session"), e.get("call_id")
        self._out(visible(f"  roost approve {session} {call}{keys.approve_flags(e)} · roost deny {session} {call}"), dim=True)

    def _diff(self, diff: str) -> None:
        """A unified diff, each line as it is (its indentation kept), coloured."""
        for line in diff.splitlines():
            color = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1]) if not line.startswith(("+++", "---")) else None
            self._out(f"  {line}", fg=color, dim=color is None)

    def _permission_resolved(self, e: dict[str, Any]) -> None:
        self._end_line()
        who = e.get("client") or "someone"
        if e.get("decision") == "approve":
            scope = f" for the session ({', '.join(e.get('rules') or [])})" if e.get("scope") == "session" else ""
            self._out(f"  approved by {who}{scope}", fg="green")
        else:
            because = f": {e['reason']}" if e.get("reason") else ""
            self._out(f"  denied by {who}{because}", fg="red")

    def _human_asked(self, e: dict[str, Any]) -> None:
        self._end_line()
        choices = e.get("choices") or []
        offer = f" [{' / '.join(choices)}]" if choices else ""
        self._out(f"? {e.get('question')}{offer}", fg="yellow", bold=True)
        self._out(f'  roost answer {e.get("session")} {e.get("call_id")} "..."', dim=True)

    def _human_answered(self, e: dict[str, Any]) -> None:
        self._end_line()
        if e.get("cancelled"):
            self._out("  (the question was withdrawn: the run ended)", dim=True)
        else:
            self._out(f"  answered by {e.get('client') or 'someone'}: {e.get('answer', '')}", fg="green")

    def _plan(self, e: dict[str, Any]) -> None:
        self._end_line()
        steps = e.get("steps") or []
        if not steps:
            return
        self._out("plan:", bold=True)
        for step in steps:
            files = f"  [{', '.join(step.get('files') or [])}]" if step.get("files") else ""
            self._out(f"  {step.get('step')}. {step.get('text')}", nl=not files)
            if files:
                self._out(files, dim=True)

    def _guardrail_warned(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(guardrail_warning(e), fg="yellow")

    def _run_stopping(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"(the run ends after this step: {e.get('reason', '')})", fg="yellow")

    def _steer_queued(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"(steering queued: {e.get('text', '')})", dim=True)
        for line in media_lines(e):
            self._out(f"  {line}", dim=True)

    def _error(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"error: {e.get('message', '')}", fg="red")

    def _lagged(self, e: dict[str, Any]) -> None:
        self._end_line()
        self._out(f"(fell behind at seq {e.get('last_seq')}; catching up)", dim=True)

    def _run_finished(self, e: dict[str, Any]) -> None:
        self._end_line()
        good = e.get("reason") in SUCCESS_REASONS
        self._out(summary(e), bold=True, fg="green" if good else "yellow")


def summary(e: dict[str, Any]) -> str:
    """The last line of a run: how it ended, turns, tokens and time."""
    usage = e.get("usage") or {}
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    parts = [
        f"■ {e.get('reason')}",
        f"{e.get('turns', 0)} turns",
        f"{tokens:,} tokens ({usage.get('input_tokens', 0):,} in, {usage.get('output_tokens', 0):,} out)",
        f"{e.get('duration', 0.0):.1f}s",
    ]
    if e.get("cost") is not None:
        parts.insert(3, f"${e['cost']:.4f}")
    if e.get("error"):
        parts.append(str(e["error"]))
    return " · ".join(parts)


def guardrail_warning(e: dict[str, Any]) -> str:
    """A ``guardrail.warned`` event in one line."""
    where = {"tool": f"the result of {e.get('call_id')}", "reply": "the reply", "task": "the task",
             "steer": "the steering", "hook": "what a hook added", "check": "the check's output"}.get(str(e.get("origin")), "the content")
    return f"⚠ {e.get('message')} (in {where}; the run goes on)"


def sandbox_line(sandbox: dict[str, Any] | None) -> str | None:
    """A run's sandbox (``run.started``'s ``sandbox``) in one line (None: not recorded)."""
    if not sandbox:
        return None
    mode = sandbox.get("mode")
    if mode == "off":
        line = "sandbox: off — commands run unsandboxed"
    elif not sandbox.get("available"):
        reason = sandbox.get("reason") or "unknown"
        line = f"sandbox: UNAVAILABLE ({reason}) — commands will not run (--sandbox off runs them unsandboxed)"
    else:
        writes = [*(sandbox.get("writable") or []), "private /tmp"]
        network = "network on" if sandbox.get("network") else "no network"
        auto = " · bash runs without asking" if sandbox.get("auto_allow") else ""
        line = f"sandbox: {mode} (writes: {', '.join(writes)}; {network}){auto}"
        line += protected_note(sandbox)
    ignored = sandbox.get("ignored") or []
    if ignored:
        line += f" · ignored, a project may only narrow it: {', '.join(ignored)}"
    return line


#: Tokens of tool descriptions past which a run's header says so (Claude Code warns there too).
TOOLS_TOKENS_WARN = 15_000


def tools_note(prompt: list[dict[str, Any]]) -> str | None:
    """A warning when the tools a run offers take more than :data:`TOOLS_TOKENS_WARN` of
    every call (``run.started``'s ``prompt`` sizes; about 4 characters a token)."""
    chars = sum(int(layer.get("chars", 0)) for layer in prompt if layer.get("name") == "tools")
    if chars // 4 <= TOOLS_TOKENS_WARN:
        return None
    return (f"tool descriptions take about {chars // 4:,} tokens of every call: fewer MCP servers "
            "or agents (an agent's tools list) would leave more room for the work")


def protected_note(sandbox: dict[str, Any], limit: int = 6) -> str:
    """What stays read-only inside a sandbox's writable folders (its protected paths, as
    relative to their folder as can be), and whether the session holds the home folder."""
    writable = [w for w in sandbox.get("writable") or [] if isinstance(w, str)]
    if sandbox.get("mode") != "workspace" or not writable:
        return ""

    def inside(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip("/") + "/")

    home = sandbox.get("home") or ""
    holds_home = bool(home) and any(inside(home, w) for w in writable)
    shown: list[str] = []
    for path in sandbox.get("protected") or []:
        folder = next((w for w in writable if inside(path, w) and path != w), None)
        if folder is None or (holds_home and inside(path, home)):
            continue
        shown.append(path[len(folder.rstrip("/")) + 1 :] if folder == writable[0] else path)
    note = ""
    if shown:
        more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
        note += f" · read-only: {', '.join(shown[:limit])}{more}"
    if holds_home:
        note += " · the session folder holds your home: its configuration is read-only, its credentials hidden"
    return note


def untrusted(e: dict[str, Any], limit: int = 6) -> str:
    """A ``project.untrusted`` event in one line: what was ignored, and how to trust it."""
    items = [f"{i.get('kind')} {i.get('name')}" for i in e.get("ignored", [])]
    shown = ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")
    return f"⚠ not trusted, so ignored: {shown} · to review and trust them: {e.get('hint')}"


def shorten(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def folded(text: str, lines: int = TASK_LINES) -> str:
    """A long text (a piped file, a command's expansion) as its first ``lines`` lines and
    a count of the rest: the header says what the task is, the log keeps it whole."""
    rows = text.rstrip("\n").split("\n")
    if len(rows) <= lines:
        return text
    rest = "\n".join(rows[lines:])
    return "\n".join(rows[:lines]) + f"\n… {len(rows) - lines} more lines ({size(len(rest.encode()))})"


def seconds(value: float) -> str:
    """A duration as roost writes it: 0.42s, 12.3s, 4m05s."""
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes}m{rest:02d}s"


def size(n: int) -> str:
    """A number of bytes, readable: ``512 B``, ``3.4 KiB``, ``1.2 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def media_lines(e: dict[str, Any]) -> list[str]:
    """The media parts an event carries (a task's images, a tool result's), one line each:
    ``[image 800x600, 45 KB]``, ``[document application/pdf, 120 KB]``."""
    lines = []
    for part in e.get("parts") or ():
        if not isinstance(part, dict):
            continue
        kind = str(part.get("type", "media"))
        if isinstance(part.get("width"), int) and isinstance(part.get("height"), int):
            what = f"{kind} {part['width']}x{part['height']}"
        else:
            what = f"{kind} {printable(str(part.get('media_type', '')))}"
        kilobytes = max(1, round(int(part.get("bytes") or 0) / 1024))
        lines.append(f"[{what}, {kilobytes:,} KB]")
    return lines


def tools_changed(e: dict[str, Any]) -> str:
    """A ``tools.changed`` event in one line: what disappeared and appeared since the last run."""
    parts = []
    if e.get("removed"):
        parts.append("gone: " + ", ".join(e["removed"]))
    if e.get("added"):
        parts.append("new: " + ", ".join(e["added"]))
    return "⚙ tools changed since the last run (the model is told) · " + " · ".join(parts)


def when(ts: float) -> str:
    """A timestamp as local time, to the second."""
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


#: Results named on a search's line; the rest are counted.
_NAMED = 3


def learned(e: dict[str, Any]) -> list[str]:
    """What a run was found to hold (``memory.learned``), a line each, with the id that
    ``roost memory forget`` takes."""
    return [
        f"remembered ({entry.get('scope')}, #{entry.get('id')}): {visible(str(entry.get('text', '')))}"
        for entry in e.get("entries") or () if isinstance(entry, dict)
    ]


def searched(content: Iterable[Any]) -> list[tuple[str, str]]:
    """What a reply says of the searches its provider ran (Anthropic's web search), as
    ``(kind, line)``: ``call`` (a search and its query), ``found`` (its results, or
    ``failed``: the error the provider gave), then ``source`` (each page its text cites,
    once, numbered)."""
    lines: list[tuple[str, str]] = []
    sources: dict[str, str] = {}
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "server_tool_use":
            query = (block.get("input") or {}).get("query", "")
            lines.append(("call", f"{block.get('name', 'search')} {visible(str(query))}"))
        elif kind == "web_search_tool_result":
            lines.append(_results(block.get("content")))
        for cite in block.get("citations") or () if kind == "text" else ():
            if isinstance(cite, dict) and cite.get("url"):
                sources.setdefault(str(cite["url"]), str(cite.get("title") or ""))
    for n, (url, title) in enumerate(sources.items(), start=1):
        lines.append(("source", f"[{n}] {visible(title)} {visible(url)}".replace("  ", " ")))
    return lines


def _results(content: Any) -> tuple[str, str]:
    from urllib.parse import urlsplit  # here: the light commands that render nothing skip its import
    if isinstance(content, dict):
        return "failed", f"search failed: {visible(str(content.get('error_code', 'error')))}"
    found = [r for r in content or () if isinstance(r, dict)]
    named = ", ".join(f"{visible(str(r.get('title', '')))} ({urlsplit(str(r.get('url', ''))).hostname})" for r in found[:_NAMED])
    more = f", and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    return "found", f"{len(found)} result{'s' if len(found) != 1 else ''}" + (f": {named}{more}" if found else "")


def session_tree(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``sessions.list`` rows as a tree: (depth, row), each fork right after its parent
    (depth one more), siblings in the order given. A row whose parent is not listed is a
    root."""
    ids = {row["id"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row.get("parent")
        children.setdefault(parent if parent in ids else None, []).append(row)
    out: list[tuple[int, dict[str, Any]]] = []
    stack = [(0, row) for row in reversed(children.get(None, []))]
    while stack:
        depth, row = stack.pop()
        out.append((depth, row))
        stack.extend((depth + 1, child) for child in reversed(children.get(row["id"], [])))
    return out


def tree_id(depth: int, row: dict[str, Any]) -> str:
    """A session's id indented under its parent, with the seq it was forked at."""
    if not depth:
        return str(row["id"])
    return "  " * (depth - 1) + f"└ {row['id']} @{row.get('forked_at')}"


def applied_diff(e: dict[str, Any]) -> str:
    """The change a finished edit or write made (its ``meta.diff``), or ``""``."""
    meta = e.get("meta") or {}
    diff = meta.get("diff") if isinstance(meta, dict) else None
    return diff if isinstance(diff, str) and not e.get("is_error") else ""


def todo_line(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One item of the model's checklist, marked by its status, and its style: an item in
    progress in the words of its ``activeForm``."""
    status = item.get("status")
    if status == "completed":
        return f"✓ {item.get('content', '')}", {"dim": True}
    if status == "in_progress":
        return f"▸ {item.get('activeForm') or item.get('content', '')}", {"fg": "cyan", "bold": True}
    return f"○ {item.get('content', '')}", {}


def brief(value: Any, limit: int = 100) -> str:
    """A tool call's input in one short line: its main argument when it has one."""
    if isinstance(value, dict):
        for key in ("command", "path", "pattern", "query", "url"):
            if isinstance(value.get(key), str):
                text = value[key]
                break
        else:
            if isinstance(value.get("todos"), list):
                return f"{len(value['todos'])} items"
            text = ", ".join(f"{k}={v!r}" for k, v in value.items())
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
