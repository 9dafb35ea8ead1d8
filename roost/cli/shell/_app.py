"""The prompt_toolkit side of the shell: layout, keys, history, printing above the prompt.

The application is not full screen: the transcript goes into the terminal's own scrollback,
printed above the application, and the application draws only what still changes under it:
the live area (a reply's unfinished line, tools running, an open approval or question), the
input, the completion menu and the toolbar.

Printing above the prompt erases the application, writes, and lets it redraw. That is what
prompt_toolkit's ``run_in_terminal`` does too, but it also puts the terminal back in cooked
mode while it writes, so a key typed in that moment would be echoed into the transcript.
A reply commits several lines a second, so :meth:`Screen.print` does the erase, write and
redraw itself without leaving raw mode (calling ``Application._redraw`` as ``in_terminal``
does: the one private name used here), and batches what arrives within :data:`FLUSH_DELAY`
into one write.

What the keys do, and what is shown, is up to the :class:`Controller` (the shell).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Protocol

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import Completer
from prompt_toolkit.filters import Condition, has_completions
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.layout.menus import CompletionsMenuControl
from prompt_toolkit.renderer import print_formatted_text
from prompt_toolkit.styles import Style

from ._display import Fragments, Lines, join_lines, plain

#: Seconds output is gathered before it is written above the prompt (one write per batch).
FLUSH_DELAY = 0.02
#: The keys that answer an open approval at an empty prompt (``_approval_keys`` says what
#: each means; 1 and 2 pick a scope for the session), upper case too.
APPROVAL_KEYS = (*"ysan12", *"YSAN")

STYLE = Style.from_dict({
    "dim": "#8a8a8a",
    "bold": "bold",
    "user": "bold",
    "user.marker": "ansicyan bold",
    "tool.name": "ansicyan bold",
    "tool.ok": "ansigreen",
    "tool.error": "ansired bold",
    "tool.result": "#9e9e9e",
    "tool.error-text": "ansired",
    "ok": "ansigreen",
    "ok.bold": "ansigreen bold",
    "warn": "ansiyellow",
    "diff.add": "ansigreen",
    "diff.del": "ansired",
    "diff.hunk": "ansicyan",
    "warn.bold": "ansiyellow bold",
    "error": "ansired",
    "reasoning": "#8a8a8a italic",
    "spinner": "ansicyan",
    "subagent": "ansimagenta",
    "request": "bold",
    "request.title": "ansiyellow bold",
    "key": "ansicyan bold",
    "prompt": "ansicyan bold",
    "prompt.request": "ansiyellow bold",
    "toolbar": "bg:#303030 #d0d0d0",
    "toolbar.session": "bg:#005f87 #ffffff bold",
    "toolbar.idle": "bg:#303030 ansigreen",
    "toolbar.busy": "bg:#303030 ansicyan bold",
    "toolbar.warn": "bg:#303030 ansiyellow bold",
    "md.h1": "bold underline ansiblue",
    "md.h2": "bold ansiblue",
    "md.h3": "bold",
    "md.bold": "bold",
    "md.em": "italic",
    "md.code": "ansiyellow",
    "md.link": "underline ansiblue",
    "md.url": "#8a8a8a",
    "md.quote": "italic #b2b2b2",
    "md.bullet": "ansicyan",
    "md.rule": "#6c6c6c",
    "md.fence": "#6c6c6c",
    "code.keyword": "ansimagenta bold",
    "code.string": "ansigreen",
    "code.comment": "#8a8a8a italic",
    "code.number": "ansiyellow",
    "code.variable": "ansicyan",
})


class Controller(Protocol):
    """What the screen asks of the shell."""

    def live(self) -> Lines:
        """What to draw above the input."""

    def toolbar(self) -> Fragments:
        """The bottom line."""

    def prompt(self) -> Fragments:
        """The prompt in front of the input."""

    def approval_open(self) -> bool:
        """Whether keys at an empty prompt answer an approval."""

    def submit(self, text: str) -> bool:
        """Enter was pressed with ``text`` in the input; False: it was not taken (it stays)."""

    def abort_if_running(self) -> bool:
        """Ctrl-C: abort the run in flight; False when there is none."""

    def detach(self) -> None:
        """Leave the shell (the session and its run go on in the daemon)."""

    def approval_key(self, key: str) -> None:
        """A key of :data:`APPROVAL_KEYS` was pressed while an approval is open."""

    def toggle_reasoning(self) -> None:
        """Ctrl-O: reasoning in full, or collapsed."""

    def can_go_back(self) -> bool:
        """Whether Escape goes back to the approval's keys."""

    def go_back(self) -> None:
        """Escape from a denial's reason or a scope's choice: back to the approval."""


def history_file() -> str:
    """Where the input history is kept: ``roost/shell_history`` in the user state dir.

    The same folder as the daemon's state (platformdirs' user state dir), found with the
    standard library because the CLI does not import platformdirs.
    """
    if sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Application Support")
    else:
        base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "roost", "shell_history")


class Screen:
    """The prompt_toolkit application of one shell.

    Resource handling:
        :meth:`run` runs the application until :meth:`exit`; output printed after that is
        written straight to the terminal.
    """

    def __init__(self, controller: Controller, completer: Completer, history: str | None) -> None:
        self._controller = controller
        self._pending: Lines = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self.buffer = Buffer(
            multiline=True,
            completer=completer,
            complete_while_typing=True,
            history=_open_history(history),
        )
        self.app: Application[None] = Application(
            layout=Layout(self._layout()),
            key_bindings=self._keys(),
            style=STYLE,
            full_screen=False,
            erase_when_done=True,
            min_redraw_interval=0.03,
        )

    @property
    def width(self) -> int:
        """The terminal's width in columns."""
        return self.app.output.get_size().columns

    async def run(self, banner: Lines) -> None:
        """Print ``banner``, then run until :meth:`exit`."""
        # The banner also keeps the application off the screen's first row: erasing from
        # there is a full clear to tmux, which would push the erased lines into its history.
        self._pending[:0] = banner
        self.flush()
        await self.app.run_async()
        self.flush()

    def exit(self) -> None:
        """Stop the application (what is pending is still printed)."""
        future = self.app.future  # set while the application runs
        if self.app.is_running and future is not None and not future.done():
            self.app.exit()

    def invalidate(self) -> None:
        """Redraw soon (prompt_toolkit coalesces redraws)."""
        self.app.invalidate()

    def print(self, lines: Lines) -> None:
        """Commit ``lines`` to the transcript above the application, soon, in order."""
        if not lines:
            return
        self._pending.extend(lines)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(FLUSH_DELAY, self.flush)

    def flush(self) -> None:
        """Write what :meth:`print` gathered now, without waiting for the batch to fill."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._pending:
            return
        text, self._pending = join_lines(self._pending), []
        app = self.app
        drawn = app.is_running and not app.is_done
        if drawn:
            app.renderer.erase()
        print_formatted_text(app.output, FormattedText(text), STYLE, color_depth=app.color_depth)
        app.output.flush()
        if drawn:
            # As run_in_terminal does: the application is drawn again below what was written,
            # at once (invalidate() could leave the prompt off screen for a redraw interval).
            app.renderer.request_absolute_cursor_position()
            app._redraw()

    # -- layout and keys ---------------------------------------------------------------------

    def _layout(self) -> HSplit:
        # Our fragments become prompt_toolkit's FormattedText here, where it takes them: its
        # list type also admits fragments with a mouse handler, which ours never have.
        controller = self._controller

        def live() -> FormattedText:
            lines = controller.live()
            return FormattedText(join_lines(lines)[:-1] if lines else [])

        def line_prefix(line: int, wrap_count: int) -> FormattedText:
            prompt = controller.prompt()
            if line == 0 and wrap_count == 0:
                return FormattedText(prompt)
            return FormattedText([("", " " * len(plain(prompt)))])

        def toolbar() -> FormattedText:
            return FormattedText(controller.toolbar())

        return HSplit([
            ConditionalContainer(
                Window(FormattedTextControl(live), wrap_lines=True, dont_extend_height=True),
                filter=Condition(lambda: bool(controller.live())),
            ),
            Window(
                BufferControl(self.buffer),
                get_line_prefix=line_prefix,
                wrap_lines=True,
                dont_extend_height=True,
                height=Dimension(min=1, max=12),
            ),
            # Not prompt_toolkit's CompletionsMenu, which grows to its maximum height here.
            ConditionalContainer(
                Window(CompletionsMenuControl(), height=Dimension(min=1, max=8), dont_extend_height=True,
                       style="class:completion-menu"),
                filter=has_completions,
            ),
            Window(FormattedTextControl(toolbar), height=1, style="class:toolbar"),
        ])

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()
        controller = self._controller
        buffer = self.buffer
        empty = Condition(lambda: not buffer.text)

        @keys.add("enter")
        def _(event: KeyPressEvent) -> None:
            state = buffer.complete_state
            if state is not None and state.current_completion is not None:
                buffer.apply_completion(state.current_completion)
                return
            text = buffer.text
            if not controller.submit(text):
                return
            if text.strip():
                buffer.append_to_history()
            buffer.reset()

        @keys.add("escape", "enter")
        def _(event: KeyPressEvent) -> None:
            buffer.insert_text("\n")

        @keys.add("c-c")
        def _(event: KeyPressEvent) -> None:
            if controller.abort_if_running():
                return
            if buffer.text:
                buffer.reset()
            else:
                controller.detach()

        @keys.add("c-d", filter=empty)
        def _(event: KeyPressEvent) -> None:
            controller.detach()

        approval = empty & Condition(controller.approval_open)
        for key in APPROVAL_KEYS:
            keys.add(key, filter=approval)(lambda event: controller.approval_key(event.data))

        @keys.add("escape", filter=Condition(controller.can_go_back))
        def _(event: KeyPressEvent) -> None:
            controller.go_back()

        @keys.add("c-o")
        def _(event: KeyPressEvent) -> None:
            controller.toggle_reasoning()

        return keys


def _open_history(path: str | None) -> History:
    if path is None:
        return InMemoryHistory()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(path)
