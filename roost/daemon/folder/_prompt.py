"""The system prompt, composed from layers: stable ones first, so a prompt cache covers the
longest prefix.

1. agent: the agent's instructions
2. mode: what the run mode expects
3. bootstrap: OS, Python, date, project path, git branch
4. instructions: the user's ``~/.claude/CLAUDE.md``, then AGENTS.md, CLAUDE.md,
   .claude/CLAUDE.md, CLAUDE.local.md and .roost/INSTRUCTIONS.md from the project root down to the working
   directory, each followed by the files it imports (``@path``, as in Claude Code); Claude
   Code's rules without ``paths`` (``_claude_rules``), the user's after ``~/.claude/CLAUDE.md``,
   the project's last
5. skills: name and description of each SKILL.md folder, bounded, only for a run that has
   the ``skill`` tool (which reads one)
6. memory: the user's and the project's memory files (the ``remember`` tool appends)
7. repo map: the project's files, source first and none under dot or vendored folders,
   and for Python their top-level definitions (bounded)
8. summary: the session's summary after a compaction

Each layer is composed for every run; its size goes into ``run.started``. Every file is
read bounded and only if it is a regular file (``_files``); a project's instruction or
memory file that links out of the project is skipped, trusted or not, and so is a file
that a project's instruction file imports from outside the project. The user's own files (in
``~/.claude`` and the config dir) and what they import need no trust.

What does not change between runs is kept in a :class:`PromptCache` (one per daemon): each
file's text or outline while the file's stat is the same, and the project's file list while
its git index, ``HEAD`` and top folder are (and for at most a minute: a file added or
removed deeper down changes none of them). A file changed within the last two seconds is read
again at every run, since file times are coarse and a change right after a read could leave
them equal.
"""

from __future__ import annotations

import ast
import datetime
import errno
import logging
import os
import platform
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Sequence, TypeVar

import trio

from ..tools import Repository, UnreadableRepository, find_repository, walk_files, work_tree_files
from ._agents import Agent
from ._claude_rules import ClaudeRule
from ._files import FileRefused, read_head
from ._project import Place, claude_home, find_skills, memory_files, taking_turns

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Files merged into the instructions layer, in each folder from the root down.
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md", ".roost/INSTRUCTIONS.md")
#: Characters the repo map may take, and the files it looks at.
REPO_MAP_LIMIT = 8000
REPO_MAP_FILES = 2000
#: Characters one instruction or memory file may add.
FILE_LIMIT = 20000
#: How deep ``@path`` imports nest (Claude Code's limit), and the characters all the
#: imported files of the instructions layer may add.
IMPORT_DEPTH = 5
IMPORTS_LIMIT = 40000
#: Characters the skills layer may take, and one skill's line.
SKILLS_LIMIT = 6000
SKILL_LINE = 200
#: Bytes of a Python file read for the repo map's outline.
OUTLINE_LIMIT = 512 * 1024
#: Seconds within which a file's change may not show in its stat yet: such a file is not kept.
RACY_SECONDS = 2.0
#: Seconds a project's file list is kept at most (its signature misses deep untracked files).
LISTING_MAX_AGE = 60.0
#: Files the walk of a folder outside git gathers at most for the repo map (a home folder
#: holds millions; the map shows REPO_MAP_FILES).
WALK_LIMIT = 20000
#: Files whose text or outline the cache keeps at most (least recently used go first).
CACHE_ENTRIES = 4096

MODE_INSTRUCTIONS = {
    "plan": (
        "Plan mode: do not change anything and do not call tools. Reply with a plan only: a "
        "numbered list of steps, one line each, each ending with the files it touches, like\n"
        "1. Add the retry loop to the client. Files: src/client.py, tests/test_client.py"
    ),
    "agent": (
        "Agent mode: use the tools to do the task. Writes, edits and shell commands may wait "
        "for a person's approval; a denied call comes back as an error with their reason: "
        "respect it and find another way, or ask with ask_human."
    ),
    "full": "Full mode: use the tools to do the task; no call waits for approval.",
    "exec": (
        "Exec mode: work until the task is done; then the project's check runs, and if it "
        "fails you get its output and another attempt. Make the check pass."
    ),
}


@dataclass(frozen=True, slots=True)
class Layer:
    """One part of the system prompt."""

    name: str
    text: str
    #: Where it came from: files, or what produced it.
    source: str = ""


class PromptCache:
    """What composing found in files that have not changed since (see the module docstring).

    Thread-safe: layers are composed in worker threads, several at once.
    """

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self._entries = entries
        self._files: OrderedDict[tuple[str, str], tuple[tuple[int, ...], Any]] = OrderedDict()
        self._listings: dict[str, tuple[tuple[Any, ...], float, list[str]]] = {}
        self._lock = threading.Lock()

    def derived(self, kind: str, path: Path, derive: Callable[[], T]) -> T:
        """``derive()``, the value ``kind`` of the file ``path``, kept while its stat is the
        same. A missing or unreadable file, or one changed just now, is not kept."""
        key = (kind, os.fspath(path))
        signature = _signature(path)
        with self._lock:
            kept = self._files.get(key)
            if kept is not None and signature is not None and kept[0] == signature:
                self._files.move_to_end(key)
                return kept[1]
        value = derive()
        if signature is not None and not _racy(signature):
            with self._lock:
                self._files[key] = (signature, value)
                self._files.move_to_end(key)
                while len(self._files) > self._entries:
                    self._files.popitem(last=False)
        return value

    def known_files(self, root: Path, repository: Repository | None) -> list[str]:
        """The project's files the repo map can show (:func:`mapped_files`, at most
        :data:`REPO_MAP_FILES`): those kept while the folder itself (and in a git work
        tree, ``repository``, its git index and ``HEAD``) is unchanged, for at most
        :data:`LISTING_MAX_AGE` seconds (a file added or removed deeper down changes none
        of those); else in a git work tree the files git lists (read without git), and
        anywhere else a walk (at most :data:`WALK_LIMIT` files, none under a dot or
        vendored folder). Blocking: run it in a thread.
        """
        # Taken before listing: a change made meanwhile shows at the next run.
        signature = (_signature(root),) if repository is None else _listing_signature(root, repository)
        with self._lock:
            kept = self._listings.get(os.fspath(root))
        if kept is not None and kept[0] == signature and time.monotonic() - kept[1] < LISTING_MAX_AGE:
            return list(kept[2])
        files = None
        if repository is not None:
            try:
                files = work_tree_files(root, repository)
            except UnreadableRepository as exc:
                log.warning("%s is mapped without its git ignore rules: %s", root, exc)
        if files is None:
            # No git to ask: a walk, of what the map can show only (a home folder's hidden
            # and vendored trees are skipped), and bounded, then kept as git's list is.
            files = walk_files(root, descend=_mapped_name, limit=WALK_LIMIT)
        return self._keep_files(root, signature, files)

    def _keep_files(self, root: Path, signature: tuple[Any, ...], files: list[str]) -> list[str]:
        """Keep what the repo map can show of ``files``, listed after ``signature`` was
        taken; return that part."""
        # The map's part only: a large repository's whole list would be copied and sorted
        # again at every run (100,000 files: ~45 ms).
        shown = mapped_files(files)[:REPO_MAP_FILES]
        if signature and not any(s is None or _racy(s) for s in signature):
            with self._lock:
                self._listings[os.fspath(root)] = (signature, time.monotonic(), list(shown))
        return shown


def _signature(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(signature: tuple[int, ...]) -> bool:
    # A change within RACY_SECONDS might not have moved the (coarse) file times yet.
    return time.time_ns() - max(signature[3], signature[4]) < RACY_SECONDS * 1e9


def _listing_signature(root: Path, repository: Repository) -> tuple[tuple[int, ...] | None, ...]:
    git_dir = repository.git_dir
    return (_signature(git_dir / "index"), _signature(git_dir / "HEAD"), _signature(root))


async def compose(
    agent: Agent,
    mode: str,
    place: Place,
    summary: str = "",
    *,
    tools: Collection[str],
    cache: PromptCache | None = None,
    rules: Sequence[ClaudeRule] = (),
) -> list[Layer]:
    """The layers for a run of ``agent`` in ``mode`` at ``place`` (the session's folder and
    its project, as its folder's setup found them) that is offered ``tools``; empty ones
    are left out.

    A trusted project's skills may link outside it. Files are read in a worker thread, so
    a large project never blocks the daemon. ``cache``: keeps what did not change for the
    next run (None: everything is read). ``rules``: Claude Code's rules that always apply
    (read with the folder's setup).
    """
    cache = cache if cache is not None else PromptCache(entries=0)
    # Only a run that can read a skill gets the list (a plan gets no tools at all).
    skills = "skill" in tools and mode != "plan"

    def in_thread() -> list[Layer]:
        try:
            repository = find_repository(place.root)
        except UnreadableRepository as exc:
            log.warning("%s is mapped without git: %s", place.root, exc)
            repository = None
        files = cache.known_files(place.root, repository)
        return _layers(agent, mode, place, repository, files, summary, skills, cache, rules)

    # One worker thread for everything: the file list is read, not asked of git.
    return await trio.to_thread.run_sync(in_thread)


def _layers(
    agent: Agent,
    mode: str,
    place: Place,
    repository: Repository | None,
    files: list[str],
    summary: str,
    skills: bool,
    cache: PromptCache,
    rules: Sequence[ClaudeRule],
) -> list[Layer]:
    root = place.root
    # A project's instruction and memory files, and what they import, are read only inside
    # the project, trusted or not: a trusted folder's CLAUDE.md that later imports
    # @~/.aws/credentials, or an AGENTS.md that becomes a link to ~/.ssh/id_rsa, is no
    # reason to put those in the prompt. (The user's own files read anything.)
    within = root
    layers = [
        Layer("agent", agent.instructions, agent.source),
        Layer("mode", MODE_INSTRUCTIONS.get(mode, ""), f"{mode} mode"),
        Layer("bootstrap", _bootstrap(place.cwd, root, repository), "this machine"),
        _instructions(root, Path(place.cwd), within, cache, rules),
        _skills(root, place.trusted, place.plugin_skills) if skills else Layer("skills", ""),
        _memory(root, within, cache),
        _repo_map(root, files, cache),
        Layer("summary", summary_text(summary), "compaction"),
    ]
    return [layer for layer in layers if layer.text.strip()]


def summary_text(summary: str) -> str:
    """The summary layer's text ("" when there is no summary)."""
    if not summary:
        return ""
    return f"Summary of the conversation so far (earlier messages were compacted into it):\n{summary}"


def render(layers: list[Layer]) -> str:
    """The system prompt the model gets."""
    return "\n\n".join(layer.text.strip() for layer in layers)


def sizes(layers: list[Layer]) -> list[dict[str, object]]:
    """Each layer's name, size in characters and source, as recorded in ``run.started``."""
    return [{"name": layer.name, "chars": len(layer.text), "source": layer.source} for layer in layers]


def _bootstrap(cwd: str, root: Path, repository: Repository | None) -> str:
    facts = [
        f"OS: {platform.system()} {platform.release()}",
        f"Python: {platform.python_version()}",
        f"Date: {datetime.date.today().isoformat()}",
        f"Project: {root}",
    ]
    if Path(cwd) != root:
        facts.append(f"Working directory: {cwd}")
    branch = _git_branch(root, repository)
    if branch:
        facts.append(f"Git branch: {branch}")
    return "Facts about this session:\n" + "\n".join(f"- {fact}" for fact in facts)


def _git_branch(root: Path, repository: Repository | None) -> str | None:
    # Read, not run: no git process for every run. The project's own .git (inside it) was
    # read when its repository was found: its HEAD is not read again.
    if repository is not None and repository.head and _own_git_dir(root, repository):
        head = repository.head
    else:
        try:
            head = read_head(root / ".git" / "HEAD", 4096, within=root).decode("utf-8", "replace").strip()
        except OSError:
            return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else head[:12]


def _own_git_dir(root: Path, repository: Repository) -> bool:
    """Whether ``repository``'s git folder is the project's ``.git``, inside the project."""
    real = Path(os.path.realpath(root))
    return repository.git_dir == Path(os.path.realpath(root / ".git")) and repository.git_dir.is_relative_to(real)


def _instructions(root: Path, cwd: Path, within: Path | None, cache: PromptCache, rules: Sequence[ClaudeRule]) -> Layer:
    folders = [root]
    if cwd != root and cwd.is_relative_to(root):
        for part in cwd.relative_to(root).parts:
            folders.append(folders[-1] / part)
    found = _Instructions(cache)
    found.add(claude_home() / "CLAUDE.md", None)
    found.rules(rule for rule in rules if rule.own)
    for folder in folders:
        for name in INSTRUCTION_FILES:
            found.add(folder / name, within)
    found.rules(rule for rule in rules if not rule.own)
    return Layer("instructions", "\n\n".join(found.parts), ", ".join(found.sources))


#: ``@path`` at the start of a line or after a blank, as Claude Code finds imports.
_IMPORT = re.compile(r"(?:^|(?<=\s))@([^\s`]+)")
#: Inline code, where an ``@`` is no import.
_CODE_SPAN = re.compile(r"(`+).+?\1")
#: The line that opens or closes a fenced code block.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


class _Instructions:
    """The instruction files of a layer, each followed by what it imports (``@path``).

    Every file is read once (so a cycle of imports ends where it closes); imports nest at
    most ``IMPORT_DEPTH`` deep and add at most ``IMPORTS_LIMIT`` characters in all. A file
    imports with the reach it was read with: the user's anything, a project's (trusted or
    not) only files inside the project.
    """

    def __init__(self, cache: PromptCache) -> None:
        self._cache = cache
        self.parts: list[str] = []
        #: The files read, and the imports that were not (with why).
        self.sources: list[str] = []
        self._seen: set[str] = set()
        self._left = IMPORTS_LIMIT

    def add(self, path: Path, within: Path | None) -> None:
        """A top-level instruction file (if there is one), then what it imports."""
        text = self._once(path, within, FILE_LIMIT)
        if text:
            self.parts.append(f"Instructions from {path}:\n{text}")
            self.sources.append(str(path))
            self._imports(path, text, within, 1)

    def rules(self, rules: Iterable[ClaudeRule]) -> None:
        """Claude Code's rules, as read with the folder's setup (they import nothing)."""
        for rule in rules:
            self.parts.append(f"Instructions from {rule.source}:\n{rule.text}")
            self.sources.append(rule.source)

    def _imports(self, importer: Path, text: str, within: Path | None, depth: int) -> None:
        for name in imports(text):
            path = Path.home() / name[2:] if name.startswith("~/") else importer.parent / name
            if not path.exists():
                continue  # "@someone" is often a mention, not a file
            if self._left <= 0:
                self.sources.append(f"{path} (not read: imports are limited to {IMPORTS_LIMIT} characters)")
                return
            try:
                imported = self._once(path, within, min(FILE_LIMIT, self._left), refuse=True)
            except FileRefused:
                self.sources.append(f"{path} (not read: it leads outside the project)")
                continue
            if not imported:
                continue
            self._left -= len(imported)
            self.parts.append(f"Instructions from {path} (imported by {importer}):\n{imported}")
            self.sources.append(f"{path} (imported)")
            if depth < IMPORT_DEPTH:
                self._imports(path, imported, within, depth + 1)

    def _once(self, path: Path, within: Path | None, limit: int, refuse: bool = False) -> str:
        """The file's text; "" when it was read before or cannot be read (with ``refuse``,
        a file outside ``within`` raises ``FileRefused``)."""
        if not os.path.exists(path):  # most names looked for: no realpath for those
            return ""
        real = os.path.realpath(path)
        if real in self._seen:
            return ""
        text = self._cache.derived(
            f"text {within} {limit} {refuse}", path, lambda: _read(path, within, limit, refuse=refuse)
        )
        if text:
            self._seen.add(real)
        return text


def imports(text: str) -> list[str]:
    """The paths ``text`` imports, in order, once each: every ``@path`` at the start of a
    line or after a blank, outside inline code and fenced code blocks."""
    found: list[str] = []
    fence = ""
    for line in text.splitlines():
        mark = _FENCE.match(line)
        if fence:
            if mark and mark[1][0] == fence[0] and len(mark[1]) >= len(fence):
                fence = ""
            continue
        if mark:
            fence = mark[1]
            continue
        for match in _IMPORT.finditer(_CODE_SPAN.sub(" ", line)):
            # "see @docs/style.md." ends a sentence, not the file's name.
            found.append(match[1].rstrip(".,;:!?)]}\"'"))
    return [name for name in dict.fromkeys(found) if name]


def _skills(root: Path, trusted: bool, plugins: tuple[tuple[str, str], ...]) -> Layer:
    skills = find_skills(root, trusted, plugins)
    if not skills:
        return Layer("skills", "")
    # The project's and the user's take turns: when the list is cut, neither's many crowd
    # out the other's.
    named = sorted(skills.items())
    ordered = taking_turns([i for i in named if not i[1].own], [i for i in named if i[1].own])
    lines: list[str] = []
    size = 0
    for shown, (name, skill) in enumerate(ordered):
        line = f"- {name}: {_one_line(skill.description)}"
        if size + len(line) > SKILLS_LIMIT:
            lines.append(
                f"- ... and {len(ordered) - shown} more skills (asked for one it does not know, the "
                "skill tool names them all)"
            )
            break
        lines.append(line)
        size += len(line) + 1
    text = "Skills you can read with the skill tool when one fits the task:\n" + "\n".join(lines)
    folders = dict.fromkeys(str(skill.path.parent.parent) for _, skill in ordered)
    return Layer("skills", text, ", ".join(folders))


def _one_line(text: str) -> str:
    """The first line of a description, cut to ``SKILL_LINE`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= SKILL_LINE else line[: SKILL_LINE - 1].rstrip() + "…"


def _memory(root: Path, within: Path | None, cache: PromptCache) -> Layer:
    parts, sources = [], []
    for scope, path in memory_files(root).items():
        bound = None if scope == "user" else within
        text = cache.derived(f"text {bound}", path, lambda: _read(path, bound))
        if text:
            parts.append(f"Remembered ({scope}, {path}):\n{text}")
            sources.append(str(path))
    if not parts:
        return Layer("memory", "")
    return Layer("memory", "\n\n".join(parts) + "\n(Add to memory with the remember tool.)", ", ".join(sources))


#: Folders the repo map leaves out (besides those whose name starts with a dot): what
#: other people wrote or a build made.
_NOT_MAPPED = frozenset({"node_modules", "vendor", "third_party", "dist", "build", "target", "__pycache__", "site-packages"})
#: What counts as source, listed before the project's other files.
_SOURCE = frozenset(
    ".py .pyi .js .jsx .mjs .ts .tsx .go .rs .java .kt .scala .c .h .cc .cpp .hpp .cs .rb .php .swift .lua .ex "
    ".exs .zig .sh .sql".split()
)


def _mapped_name(name: str) -> bool:
    """Whether the repo map shows a file or folder of this name (and what is in it): the
    rule of :func:`mapped_files`, for a walk to skip what it would drop."""
    return not name.startswith(".") and name not in _NOT_MAPPED


def mapped_files(files: list[str]) -> list[str]:
    """The files the repo map lists, source first: none under a dot or vendored folder."""
    # String tests rather than a call per part: a listing holds up to WALK_LIMIT paths, or
    # all of a large repository's.
    kept = [p for p in files if not (p.startswith(".") or "/." in p) and _NOT_MAPPED.isdisjoint(p.split("/"))]
    # A path's last dot starts its extension (a dot in a folder's name leaves "/" after it,
    # which no extension holds).
    return sorted(kept, key=lambda p: p[p.rfind(".") :] not in _SOURCE)


def _repo_map(root: Path, files: list[str], cache: PromptCache) -> Layer:
    files = mapped_files(files)[:REPO_MAP_FILES]
    lines: list[str] = []
    size = 0
    for path in files:
        entry = [path]
        if path.endswith(".py"):
            source = root / path
            entry += [f"  {d}" for d in cache.derived(f"outline {root}", source, lambda: _outline(source, root))]
        chunk = "\n".join(entry)
        if size + len(chunk) > REPO_MAP_LIMIT:
            lines.append(f"... ({len(files) - len(lines)} more files not shown)")
            break
        lines.append(chunk)
        size += len(chunk) + 1
    if not lines:
        return Layer("repo map", "")
    return Layer("repo map", "Files of the project (Python with its top-level definitions):\n" + "\n".join(lines), str(root))


def _outline(path: Path, root: Path) -> list[str]:
    try:
        tree = ast.parse(read_head(path, OUTLINE_LIMIT, within=root))
    except (OSError, SyntaxError, ValueError):
        return []
    except (RecursionError, MemoryError):
        # A file made to choke the parser (thousands of nested brackets or operators)
        # fails no dispatch: it is listed, and said to be left out.
        return ["(not outlined: it nests too deep to parse)"]
    out = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out.append(f"class {node.name}")
            out += [
                f"  def {item.name}({_args(item)})"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_")
            ]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(f"{'async ' if isinstance(node, ast.AsyncFunctionDef) else ''}def {node.name}({_args(node)})")
    return out


def _args(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    names = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
    return ", ".join(names)


def _read(path: Path, within: Path | None, limit: int = FILE_LIMIT, *, refuse: bool = False) -> str:
    """A file's text, cut to ``limit`` characters ("" when it cannot be read; with
    ``refuse``, a file outside ``within`` raises ``FileRefused``)."""
    try:
        # At most 4 bytes a character: enough bytes for ``limit`` characters.
        text = read_head(path, limit * 4, within=within).decode("utf-8", errors="replace")
    except FileRefused as exc:
        if refuse and exc.errno == errno.EACCES:
            raise
        return ""
    except OSError:
        return ""
    return text.removeprefix("\ufeff")[:limit].strip()
