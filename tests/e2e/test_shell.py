"""The interactive shell, for real: ``roost`` in tmux panes against a real daemon.

Each test runs its own tmux server (a socket in the test's short temp dir, no user config)
started with the test's environment, so every pane sees the test's socket, XDG dirs and
HOME. Keys go in with ``send-keys``; what is on screen comes back with ``capture-pane``,
polled until it shows what is expected or a deadline passes (no fixed sleeps). The tmux
server, and with it every shell, is killed at teardown; the e2e fixture stops the daemons.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from .conftest import E2E, ROOST, bash, text, wait_until

pytestmark = pytest.mark.skipif(
    subprocess.run(["which", "tmux"], capture_output=True).returncode != 0, reason="tmux is not installed"
)

#: What the toolbar says when nothing runs.
IDLE = "  idle │ "


class Pane:
    """One tmux pane running a command."""

    def __init__(self, tmux: Tmux, pane_id: str) -> None:
        self.tmux = tmux
        self.id = pane_id

    def keys(self, *keys: str) -> None:
        """Send keys by tmux name (``Enter``, ``C-c``, ``M-Enter``, ...)."""
        self.tmux.run("send-keys", "-t", self.id, *keys)

    def type(self, text: str) -> None:
        """Type ``text`` literally."""
        self.tmux.run("send-keys", "-t", self.id, "-l", text)

    def submit(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self.type(text)
        self.keys("Enter")

    def screen(self) -> str:
        """Everything in the pane, scrollback included, wrapped lines joined."""
        out = self.tmux.run("capture-pane", "-p", "-J", "-S", "-", "-t", self.id)
        return "\n".join(line.rstrip() for line in out.rstrip().split("\n"))

    def wait(self, expected: str | Callable[[str], bool], timeout: float = 15.0) -> str:
        """Poll the screen until it contains ``expected`` (or satisfies it); the screen."""
        check = expected if callable(expected) else (lambda screen: expected in screen)
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"pane {self.id}: no {expected!r} within {timeout} s; screen:\n{screen}")
            time.sleep(0.05)

    def input_line(self) -> str:
        """The line above the toolbar: the prompt and what is typed."""
        lines = self.screen().split("\n")
        (at,) = [i for i, line in enumerate(lines) if re.match(r"^ [0-9a-f]{6,} ", line)][-1:]
        return lines[at - 1]


class Tmux:
    """A tmux server of the test's own, with the test's environment."""

    def __init__(self, e2e: E2E) -> None:
        self.e2e = e2e
        self.socket = str(e2e.short / "tmux")
        self._started = False

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], env=self.e2e.env,
                              capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, f"tmux {' '.join(args)}: {done.stderr}"
        return done.stdout

    def open(self, *args: str, env: dict[str, str] | None = None) -> Pane:
        """A new window (120x40) running ``roost ARGS`` in the project folder.

        When the command ends the pane stays, showing ``[exit STATUS]``.
        """
        command = " ".join([ROOST, *args]) + '; echo "[exit $?]"; sleep 600'
        extra = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        where = ["-c", str(self.e2e.project), "-P", "-F", "#{pane_id}", *extra]
        if not self._started:
            self._started = True
            out = self.run("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", *where, command)
        else:
            out = self.run("new-window", "-d", *where, command)
        return Pane(self, out.strip())

    def kill(self) -> None:
        if self._started:
            subprocess.run(["tmux", "-S", self.socket, "kill-server"], env=self.e2e.env,
                           capture_output=True, timeout=10)


@pytest.fixture
def tmux(e2e: E2E) -> Iterator[Tmux]:
    server = Tmux(e2e)
    try:
        yield server
    finally:
        server.kill()


def runs_done(n: int) -> Callable[[str], bool]:
    """The screen shows ``n`` finished runs. A run's summary is committed after all its other
    lines, so they are on screen too (a reply's unfinished line shows earlier, live)."""
    return lambda screen: screen.count("■ ") >= n


def session_of(e2e: E2E) -> str:
    """The newest session (the one a shell just created)."""
    return e2e.json_out("sessions", "--json")[-1]["id"]


def between(screen: str, start: str, end: str) -> list[str]:
    """The lines from the last one starting with ``start`` to the next starting with ``end``."""
    lines = screen.split("\n")
    first = max(i for i, line in enumerate(lines) if line.startswith(start))
    last = next(i for i in range(first, len(lines)) if lines[i].startswith(end))
    return lines[first:last + 1]


def test_a_task_streams_while_its_run_goes_on(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script(
        [text("# Looking\n\nI'll **count** the files:\n\n- with `ls`\n"), bash("sleep 1.5; ls")],
        [text("There are three files.")],
        [text("Got both lines.")],
    )
    pane = tmux.open("shell", "--model", model, "--mode", "full")
    pane.wait(IDLE)
    pane.submit("count the files")
    # The reply is on screen while its tool still runs: it streamed, it was not replayed.
    pane.wait(lambda s: "I'll count the files:" in s and "running bash" in s)
    lines = between(pane.wait("■ done"), "› count the files", "■ done")
    assert re.fullmatch(r"● bash sleep 1\.5; ls · \d\.\d\ds", lines[6]), lines[6]
    assert lines[:6] + lines[7:-1] == [
        "› count the files",
        "Looking",
        "",
        "I'll count the files:",
        "",
        "• with ls",
        "  ⎿ a.txt",
        "    b.txt",
        "    c.py",
        "There are three files.",
    ]
    pane.wait(IDLE)
    # Esc-Enter starts a new line; Enter sends both.
    pane.type("line one")
    pane.keys("M-Enter")
    pane.submit("line two")
    screen = pane.wait(runs_done(2))
    assert "› line one\n  line two\nGot both lines." in screen
    history = Path(e2e.env["XDG_STATE_HOME"]) / "roost" / "shell_history"
    assert "+count the files" in history.read_text()


def test_typing_steers_and_ctrl_c_aborts_the_run_and_the_session_stays(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script([bash("sleep 30")], [text("Carrying on.")])
    pane = tmux.open("shell", "--model", model, "--mode", "full")
    pane.wait(IDLE)
    pane.submit("wait a long time")
    pane.wait("running bash")
    # While the run is in flight, what is typed steers it.
    pane.wait(lambda s: pane.input_line() == "steer ›")
    pane.submit("also this")
    pane.wait("» also this  (steering)")
    pane.keys("C-c")
    screen = pane.wait("■ aborted")
    assert "[exit" not in screen
    pane.wait(IDLE)
    pane.submit("go on")
    pane.wait(runs_done(2))
    pane.wait(IDLE)
    # Ctrl-C at an empty prompt with no run: detach.
    pane.keys("C-c")
    screen = pane.wait("[exit 0]")
    session = session_of(e2e)
    assert f"detached from session {session}" in screen
    assert e2e.session_row(session)["status"] == "done"


def test_detach_then_attach_shows_the_history_and_remembers_the_input(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script([text("Listing."), bash("ls")], [text("Three files here.")])
    first = tmux.open("shell", "--model", model, "--mode", "full")
    first.wait(IDLE)
    first.submit("list them")
    first.wait("■ done")
    first.wait(IDLE)
    first.keys("C-d")
    first.wait("[exit 0]")
    session = session_of(e2e)

    again = tmux.open("attach")  # the most recent session of this folder
    screen = again.wait(runs_done(1))
    assert f"── session {session} · {e2e.project}" in screen
    history = between(screen, "› list them", "■ done")
    assert history[:3] == ["› list them", "Listing.", history[2]]
    assert history[2].startswith("● bash ls · ")
    assert "Three files here." in history
    # The input history is kept across shells: Up brings back the task.
    again.keys("Up")
    again.wait(lambda s: again.input_line() == "› list them")


def test_the_shell_reattaches_when_the_daemon_restarts(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script([text("First answer.")], [text("Second answer.")])
    pane = tmux.open(env={"ROOST_MODEL": model})  # bare `roost` opens the shell
    pane.wait(IDLE)
    pane.submit("first task")
    pane.wait("First answer.")
    pane.wait(IDLE)
    e2e.ok("stop")
    pane.wait("reconnecting to the daemon")
    e2e.ok("sessions")  # starts a new daemon
    pane.wait("(back: re-attached from seq")
    pane.wait(IDLE)
    pane.submit("second task")
    screen = pane.wait(runs_done(2))
    assert "Second answer." in screen
    # Re-attaching replayed only what came after the last seq seen: nothing twice.
    assert screen.count("› first task") == 1 and screen.count("First answer.") == 1


def test_two_terminals_on_one_session_see_the_same_stream(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script(
        [text("Working on it."), bash("sleep 0.5; echo hi")],
        [text("All done.")],
        [text("Steered answer.")],
    )
    a = tmux.open("shell", "--model", model, "--mode", "full")
    a.wait(IDLE)
    session = session_of(e2e)
    b = tmux.open("attach", session[:6])
    b.wait(IDLE)
    if "clients" in e2e.session_row(session):
        a.wait("2 clients")
    a.submit("do the work")
    for pane in (a, b):
        pane.wait("running bash")
    lines = [between(pane.wait("■ done"), "› do the work", "■ done") for pane in (a, b)]
    assert lines[0] == lines[1]
    assert "All done." in lines[0]
    # Either terminal can type.
    b.wait(IDLE)
    b.submit("from the other one")
    for pane in (a, b):
        screen = pane.wait(runs_done(2))
        assert "› from the other one\nSteered answer." in screen


def test_an_approval_answered_in_one_terminal_vanishes_from_the_other(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script(
        [bash("echo approved-and-ran")],
        [text("Finished.")],
        [bash("echo never-runs")],
        [text("Denied, fine.")],
        [{"type": "tool_use", "name": "ask_human", "input": {"question": "Which one?", "choices": ["red", "blue"]}}],
        [text("Blue it is.")],
    )
    a = tmux.open("shell", "--model", model)  # agent mode: bash asks
    a.wait(IDLE)
    session = session_of(e2e)
    a.submit("run it")
    a.wait("╭ approve bash? echo approved-and-ran")
    # A terminal that attaches while the request is open shows it at once.
    b = tmux.open("attach", session)
    b.wait("╭ approve bash? echo approved-and-ran")
    b.keys("y")
    for pane in (a, b):
        screen = pane.wait(runs_done(1))
        assert re.search(r"✓ approved once by shell#\d+: bash echo approved-and-ran\n"
                         r"● bash echo approved-and-ran · .*\n  ⎿ approved-and-ran\nFinished\.", screen), screen
        assert "╭ approve" not in screen

    # Denied from the first terminal, with a reason; the other sees who and why.
    a.wait(IDLE)
    a.submit("try another")
    b.wait("╭ approve bash? echo never-runs")
    a.wait("╭ approve bash? echo never-runs")
    a.keys("n")
    a.wait("deny, reason")
    a.submit("not now")
    for pane in (a, b):
        screen = pane.wait(runs_done(2))
        assert re.search(r"✗ denied by shell#\d+: bash echo never-runs · not now\n", screen), screen
        assert "Denied, fine." in screen and "⎿ never-runs" not in screen
        assert "╭ approve" not in screen

    # A question: answered by its number in one terminal, gone from the other.
    b.wait(IDLE)
    b.submit("ask me")
    for pane in (a, b):
        pane.wait("╭ question: Which one?")
    a.wait(lambda s: a.input_line().startswith("answer ›"))
    a.submit("2")
    for pane in (a, b):
        screen = pane.wait(runs_done(3))
        assert re.search(r"✓ Which one\? → blue  \(answered by shell#\d+\)", screen), screen
        assert "Blue it is." in screen
        assert "╭ question" not in screen


def test_the_shell_asks_once_before_it_trusts_a_folder(e2e: E2E, tmux: Tmux) -> None:
    config = e2e.project / ".roost" / "config.toml"
    config.parent.mkdir()
    config.write_text('[permissions]\nallow = ["bash(touch *)"]\n')
    model = e2e.script([bash("touch made")], [text("Made it.")], [text("Again.")])
    pane = tmux.open("shell", "--model", model)
    pane.wait(IDLE)
    pane.submit("make a file")
    # The question and the lines above it may reach the screen in separate frames.
    screen = pane.wait(lambda s: "trust this folder? y / N ›" in s and "allow rule bash(touch *)" in s)
    assert f"{e2e.project} is not trusted" in screen
    pane.submit("y")
    # Trusted: the project's allow rule lets the command run without an approval.
    screen = pane.wait(runs_done(1))
    assert f"(trusted {e2e.project})" in screen and "Made it." in screen
    assert (e2e.project / "made").exists()
    assert str(e2e.project) in e2e.ok("trust", "--list").stdout
    pane.wait(IDLE)
    pane.submit("once more")
    screen = pane.wait(runs_done(2))
    assert screen.count("is not trusted; its files would widen") == 1


def test_slash_report_shows_the_daemons_report_of_the_last_run(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script([bash("sleep 0.2")], [text("Slept.")])
    pane = tmux.open("shell", "--model", model, "--mode", "full")
    pane.wait(IDLE)
    pane.submit("/report")
    pane.wait("has had no run yet [RUN_NOT_FOUND]")
    pane.submit("sleep a little")
    pane.wait(runs_done(1))
    pane.wait(IDLE)
    pane.submit("/report")
    screen = pane.wait(lambda s: "step 2" in s)
    run = e2e.json_out("report", "--json")["run"]
    assert f"  run     {run} · done · default · full · {model}" in screen
    assert re.search(r"  tools   \d\.\d\ds: bash ×1 \d\.\d\ds", screen)


def test_custom_commands_complete_and_run_from_the_shell(e2e: E2E, tmux: Tmux) -> None:
    commands = e2e.project / ".claude" / "commands"
    (commands / "frontend").mkdir(parents=True)
    (commands / "review.md").write_text("---\ndescription: Review a file\nargument-hint: FILE FOCUS\n---\nReview $0 for $1.\n")
    (commands / "frontend" / "component.md").write_text("Make a $ARGUMENTS component.\n")
    model = e2e.script([text("Reviewed.")], [text("Made.")])
    pane = tmux.open("shell", "--model", model, "--mode", "full")
    pane.wait(IDLE)
    pane.submit("/help")
    screen = pane.wait("Custom commands")
    assert re.search(r"/review FILE FOCUS +Review a file", screen)
    assert re.search(r"/component +Make a \$ARGUMENTS component\.", screen)
    pane.type("/revi")
    pane.wait("review  FILE FOCUS Review a file")  # the completion menu
    pane.keys("Tab")
    pane.wait(lambda s: "\n› /review\n" in s)
    pane.submit(" a.py speed")
    screen = pane.wait(runs_done(1))
    assert between(screen, "› /review a.py speed", "■ done")[:3] == [
        "› /review a.py speed", "  Review a.py for speed.", "Reviewed."
    ]
    pane.wait(IDLE)
    pane.submit("/frontend:component Button")
    screen = pane.wait(runs_done(2))
    assert "  Make a Button component." in screen
    pane.wait(IDLE)
    pane.submit("/nosuch thing")
    screen = pane.wait("no custom command /nosuch")
    assert "/component" in screen and "/review" in screen


def test_rewind_goes_on_in_a_fork_from_before_the_last_task(e2e: E2E, tmux: Tmux) -> None:
    model = e2e.script([text("First answer.")], [text("Second answer.")], [text("Third answer.")])
    pane = tmux.open("shell", "--model", model)
    pane.wait(IDLE)
    pane.submit("first task")
    pane.wait(runs_done(1))
    pane.submit("second task")
    pane.wait(runs_done(2))
    pane.wait(IDLE)
    session = session_of(e2e)
    pane.submit("/rewind")
    screen = pane.wait("(rewound 1 task: this is ")
    fork = re.search(r"this is ([0-9a-f]+), a fork of", screen).group(1)  # type: ignore[union-attr]
    pane.wait(IDLE)
    # The fork's history is the first task alone: the model answers it as the second call.
    pane.submit("another second task")
    pane.wait(lambda s: s.count("Second answer.") == 2)
    pane.wait(IDLE)
    tasks = [e["text"] for e in e2e.events(fork) if e["type"] == "message.user"]
    assert tasks == ["first task", "another second task"]
    assert [e["text"] for e in e2e.events(session) if e["type"] == "message.user"] == ["first task", "second task"]
    # Cut just before the second task's run started.
    starts = [e["seq"] for e in e2e.events(session) if e["type"] == "run.started"]
    row = e2e.session_row(fork)
    assert (row["parent"], row["forked_at"]) == (session, starts[1] - 1)
    pane.submit("/sessions")
    pane.wait(f"└ {fork} @{row['forked_at']}")


def test_other_tools_command_names_and_typos_lead_where_meant(e2e: E2E, tmux: Tmux) -> None:
    pane = tmux.open("shell", "--model", e2e.script([text("one")]))
    pane.wait(IDLE)
    first = session_of(e2e)
    pane.submit("/modle")
    pane.wait("did you mean /mode or /model?")
    # A model that cannot be used is refused when it is set, not at the next task.
    pane.submit("/model scripted/dmeo")
    pane.wait("not changed: scripted: no script file at")
    assert "did you mean scripted/demo?" in pane.screen()
    pane.submit("/model scripted/demo")
    pane.wait("(the next tasks use model scripted/demo)")
    # Claude Code's /clear starts afresh: a new session here.
    pane.submit("/clear")
    wait_until(lambda: len(e2e.json_out("sessions", "--json")) == 2, what="a new session")
    assert first in {row["id"] for row in e2e.json_out("sessions", "--json")}
    pane.submit("/help")
    pane.wait("(also /clear)")
    assert "(also /exit, /quit)" in pane.screen()
    pane.submit("/quit")
    pane.wait("detached from session")


def test_clear_and_leaving_end_the_session_for_claude_codes_hooks(e2e: E2E, tmux: Tmux) -> None:
    # The user's own SessionEnd hook (no trust needed): it logs each payload.
    log = e2e.tmp / "ended.jsonl"
    hook = f"python3 -c \"import sys; open('{log}', 'a').write(sys.stdin.read() + chr(10))\""
    settings = Path(e2e.env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"hooks": {"SessionEnd": [{"hooks": [{"type": "command", "command": hook}]}]}}))

    def ended() -> list[dict[str, str]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    pane = tmux.open("shell", "--model", e2e.script([text("First answer.")]))
    pane.wait(IDLE)
    pane.submit("first task")
    pane.wait(runs_done(1))
    pane.wait(IDLE)
    first = session_of(e2e)
    # Claude Code's /compact TEXT: the instructions go with the compaction.
    pane.submit("/compact keep the file names")
    wait_until(lambda: any(e.get("mode") == "compact" for e in e2e.events(first) if e["type"] == "run.started"),
               what="a compaction")
    [compaction] = [e for e in e2e.events(first) if e["type"] == "run.started" and e.get("mode") == "compact"]
    assert compaction["instructions"] == "keep the file names"
    pane.wait(IDLE)
    pane.submit("/clear")
    wait_until(lambda: len(ended()) == 1, what="the first session's end")
    assert [(e["session_id"], e["reason"], e["hook_event_name"]) for e in ended()] == [(first, "clear", "SessionEnd")]
    wait_until(lambda: len(e2e.json_out("sessions", "--json")) == 2, what="a new session")
    second = session_of(e2e)
    pane.wait(IDLE)
    pane.submit("second task")
    # (The screen may still count the first session's runs: the second's is asked of the daemon.)
    wait_until(lambda: e2e.session_row(second)["status"] == "done", what="the second session's run")
    pane.wait(IDLE)
    pane.keys("C-d")
    pane.wait("detached from session")
    wait_until(lambda: len(ended()) == 2, what="the second session's end")
    assert (ended()[1]["session_id"], ended()[1]["reason"]) == (second, "prompt_input_exit")
