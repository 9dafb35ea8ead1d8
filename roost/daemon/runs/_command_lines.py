"""A custom command's task made ready: its ``!`command``` lines judged and run, its ``@file``
references read.

A ``!`command``` line of a command runs before the task is sent, and its output takes its
place, as in Claude Code. It is a command the project's file (or the user's) runs on the
user's behalf, so it is held exactly as a model's bash call of the run would be:

- At dispatch (:func:`judge_lines`), each line is decided by the run's own permission
  policy (:func:`roost.loop.decide`: the user's rules, a trusted project's, the dispatch's
  flags, the mode) with the command's ``allowed-tools`` added as allow rules only where
  they apply (the user's own command, or a project's file the user trusted as it is: see
  ``_custom_commands``). Those rules go on applying to the run's calls, as Claude Code
  applies them while a command runs. A line the policy refuses stops the dispatch with one
  line saying which, and how to allow it. Lines it would ask about stop it too
  (:class:`LinesNeedApproval`, naming them all), unless the person approved those exact
  lines for this dispatch: a client at a terminal shows them, asks, and dispatches again
  with them (``approved_lines``); with nobody to ask, the message says how to allow them.
- When the run starts (:func:`run_lines`), the lines run through the bash tool in the run's
  sandbox (unsandboxed only in sandbox mode ``off``, like every command of the run), in the
  session's folder, with the run's tool environment; each output (stdout and stderr, an
  exit status other than 0 noted) replaces its line.

``@path`` (:func:`include_files`): each path the text names, relative to the session's
folder, that is a regular file inside the project (anywhere, if the user trusted the
folder) and that the run's policy lets a read tool read without asking (the user's deny
rules on ``read`` hold) is read, bounded, and sent after the text; a name that is no such
file stays as written, and is only text. An image or a PDF so named, in a command's text
or a typed task, is attached instead (:func:`attach_media`: the same rules; an image
checked and scaled down as ``read`` does, a PDF sent whole where the provider takes one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Collection, Mapping

from roost.loop import Policy, Rule, RuleError, decide, parse_rule, paths_named

from ..folder._claude_settings import CLAUDE_ONLY_TOOLS
from ..folder._command_text import SHELL_LINE, file_references, shell_lines
from ..folder._custom_commands import CustomCommand
from ..folder._files import read_bounded
from ..folder._project import Place
from ..sandbox import RunSandbox
from ..tools import ProcessLedger, ToolContext, ToolRegistry, real_path
from ..tools._media import MAX_INPUT_BYTES, Media, MediaError, image_media
from ..tools._pdf import MAX_DOCUMENT_BYTES, PdfError, pdf_document
from ..tools._read_media import IMAGE_SUFFIXES, PDF_SUFFIXES

#: A permission decision's words (``roost.loop``'s).
ALLOW, DENY = "allow", "deny"

#: Files ``@path`` includes, and the bytes of each.
MAX_FILES = 20
FILE_LIMIT = 256 * 1024
#: Seconds a ``!`command``` line may run.
LINE_TIMEOUT = 120.0


class LineRefused(Exception):
    """A ``!`command``` line the run's policy does not let run; the message says why."""


class LinesNeedApproval(LineRefused):
    """``!`command``` lines the run's policy would ask about, none refused: ``lines`` can
    run once a person approves them (the message says how to allow them otherwise)."""

    def __init__(self, message: str, lines: tuple[str, ...]) -> None:
        super().__init__(message)
        self.lines = lines


def granted_rules(command: CustomCommand) -> tuple[Rule, ...]:
    """The command's ``allowed-tools`` as allow rules, if they apply (see the module
    docstring); a tool roost has no rule for grants nothing."""
    if not command.granted:
        return ()
    rules = []
    for text in command.allowed_tools:
        if text.split("(", 1)[0].strip() in CLAUDE_ONLY_TOOLS:
            continue
        try:
            rules.append(parse_rule(text, ALLOW, command.source))
        except RuleError:
            continue
    return tuple(rules)


def judge_lines(
    command: CustomCommand, task: str, policy: Policy, mode: str, cwd: str, approved: Collection[str] = ()
) -> tuple[str, ...]:
    """The ``!`command``` lines of ``task``, each allowed by ``policy`` in ``mode`` or, where
    it would ask, one of the ``approved`` lines (as written). Blocking: a few lstat calls
    (where a line's redirections lead).

    Raises:
        LineRefused: a line the policy refuses (the first such).
        LinesNeedApproval: lines it would ask about that are not ``approved`` (all of them).
    """
    lines = tuple(shell_lines(task))
    where = f"/{command.short} ({command.source})"
    asking: list[tuple[str, str]] = []
    for line in lines:
        input = {"command": line}
        decision = decide(policy, mode, (), "bash", input, cwd, _resolved(cwd, paths_named("bash", input)))
        if decision.action == DENY:
            raise LineRefused(f"{where}: !`{line}` is refused: {decision.reason}")
        if decision.action != ALLOW and line not in approved:
            asking.append((line, decision.reason))
    if asking:
        if command.allowed_tools and not command.granted and command.kind == "command":
            how = f"its allowed-tools apply once you trust the folder (roost trust {Path(command.source).parent})"
        else:
            how = "allow it with an allow rule (bash(...) in config.toml, Bash(...) in the command's allowed-tools or --allowedTools)"
        said = "; ".join(f"!`{line}` ({reason})" for line, reason in asking)
        raise LinesNeedApproval(
            f"{where}: {said} would need approval: approve at a terminal, or {how}", tuple(line for line, _ in asking)
        )
    return lines


async def run_lines(
    tools: ToolRegistry,
    task: str,
    lines: tuple[str, ...],
    cwd: str,
    sandbox: RunSandbox | None,
    env: Mapping[str, str] | None,
    ledger: ProcessLedger | None,
) -> str:
    """``task`` with each of ``lines`` (its ``!`command``` lines, judged) replaced by what
    it printed, run as the run's commands run: in ``sandbox`` (None: sandbox mode off)."""
    outputs: list[str] = []
    for line in lines:
        ctx = ToolContext(cwd=cwd, ledger=ledger, timeout=LINE_TIMEOUT, env=env, sandbox=sandbox)
        result = await tools.call("bash", {"command": line}, ctx)
        outputs.append(result.text.rstrip("\n"))
    done = iter(outputs)
    # The lines are the text's first ones: what ``@path`` added after it is only text.
    return SHELL_LINE.sub(lambda match: next(done), task, count=len(lines))


def include_files(task: str, place: Place, policy: Policy) -> str:
    """``task`` with the files its ``@path`` references name after it (see the module
    docstring), each one ``policy`` lets a read tool read without asking. Blocking: call
    it in a worker thread."""
    included: list[str] = []
    within = None if place.trusted else place.root
    for name in file_references(task)[:MAX_FILES]:
        path = os.path.join(place.cwd, os.path.expanduser(name))
        if not os.path.isfile(path) or _attached(name):
            continue  # (an image or a PDF is attached: attach_media)
        # As a read of the run would be decided (in agent mode: plan mode runs no tools,
        # yet its task may name files), deny and ask rules and the outside check included.
        decision = decide(policy, "agent", (), "read", {"path": path}, place.cwd, _resolved(place.cwd, (path,)))
        if decision.action != ALLOW:
            included.append(f'<file path="{name}">not included: {decision.reason}</file>')
            continue
        try:
            data = read_bounded(path, FILE_LIMIT, within=within)
        except OSError as exc:
            included.append(f'<file path="{name}">not included: {exc}</file>')
            continue
        text = data.decode("utf-8", errors="replace")
        included.append(f'<file path="{name}">\n{text.rstrip()}\n</file>')
    return "\n\n".join([task, *included]) if included else task


def attach_media(names: list[str], place: Place, policy: Policy) -> list[tuple[str, Media | str]]:
    """The images (``.png``, ``.jpg``, ``.jpeg``, ``.gif``, ``.webp``) and PDFs a task's
    ``@path`` references ``names`` (see :func:`media_references`), read under the rules
    :func:`include_files` reads files under; each the media to send (an image scaled down
    when large, a PDF whole), or why it is not sent. Blocking."""
    attached: list[tuple[str, Media | str]] = []
    within = None if place.trusted else place.root
    for name in names:
        path = os.path.join(place.cwd, os.path.expanduser(name))
        if not os.path.isfile(path):
            continue
        decision = decide(policy, "agent", (), "read", {"path": path}, place.cwd, _resolved(place.cwd, (path,)))
        if decision.action != ALLOW:
            attached.append((name, f"not attached: {decision.reason}"))
            continue
        pdf = name.lower().endswith(PDF_SUFFIXES)
        try:
            data = read_bounded(path, MAX_DOCUMENT_BYTES if pdf else MAX_INPUT_BYTES, within=within)
            attached.append((name, pdf_document(data) if pdf else image_media(data)))
        except (OSError, MediaError, PdfError) as exc:
            attached.append((name, f"not attached: {exc}"))
    return attached


def media_references(task: str) -> list[str]:
    """The ``@path`` references of ``task`` that name media, for :func:`attach_media` (no
    file is looked at: most tasks name none, and need no worker thread for them)."""
    return [n for n in file_references(task) if _attached(n)][:MAX_FILES]


def _attached(name: str) -> bool:
    """Whether ``@name`` attaches media rather than includes text."""
    return os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES + PDF_SUFFIXES


def _resolved(cwd: str, paths: tuple[str, ...]) -> dict[str, str]:
    """Where ``paths``, the working directory and the home folder really lead, for
    :func:`roost.loop.decide` (an impossible path is decided as named)."""
    resolved = {}
    for path in (*paths, cwd, os.path.expanduser("~")):
        try:
            resolved[path] = real_path(cwd, path)
        except (OSError, ValueError):
            continue
    return resolved
