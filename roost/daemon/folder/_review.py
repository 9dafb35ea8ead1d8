"""What ``roost trust`` warns of: grants broader than they look, and the variables an item
reads from the user's environment.

A :class:`~._trust.Widening` says what an item of a project's files would do; the loaders
ask this module, as they make one, for a short reason per grant that hands over much more
than its words suggest, so that the user sees it marked before trusting:

- an allow rule is judged by what it lets through, with :func:`roost.loop.decide` itself:
  probe calls (any command; curl or wget; code given on a command line; any file in the
  project or outside it; any URL; any tool) decided with that rule alone. A rule written to
  look narrow (``bash(c* *)``) is judged by what it matches, not by how it reads;
- a command (a hook's line, an MCP server's program and arguments) that downloads code and
  runs it: ``curl … | sh``, ``bash <(wget …)``, ``npx -y pkg``, ``uvx pkg``;
- a mode that runs without approvals (an agent's ``full`` or ``exec``, Claude Code's
  ``bypassPermissions``), a guardrail switched off, a secret handed to every command;
- an environment variable a project sets that changes which programs run or where
  requests (and keys) go.

Variables: the names an item's values expand from the user's environment (``${VAR}``, and
``$VAR`` in a shell line); never their values. Whether a name looks secret is
``runs._environ``'s judgement, the one that keeps such variables from tool processes.

Nothing here does IO: the probes are decided as if in ``/project`` of a user at ``/home/user``.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Callable, Iterable, Sequence

from roost.loop import Policy, RuleError, decide, judge, parse_rule

from ..runs._environ import is_secret

#: Where the probes are decided: a project, and the home folder of its user.
_HOME = "/home/user"
_CWD = "/project"

#: Commands that, allowed together, mean any command at all.
_ANY_COMMAND = ("zz-roost-probe --any", "rm -rf build", "git push --force origin main", "sh x.sh", "Xq9 y")
#: Programs that download (and can send a file out).
_DOWNLOADS = ("curl https://example.com/x", "wget https://example.com/x")
#: Command lines that run code given on the command line or fetched from a registry.
_RUNS_CODE = (
    "python3 -c x", "python -c x", "node -e x", "perl -e x", "ruby -e x", "php -r x", "sh x.sh", "bash x.sh",
    "npx pkg", "uvx pkg", "pipx run pkg", "bunx pkg", "make x", "find . -exec x ;", "xargs x",
)
#: Paths that, allowed together, mean any file of the project.
_ANY_PROJECT_FILE = ("a.txt", "src/deep/x.py", ".github/workflows/ci.yml", "Makefile")
#: Files of a project that run later: by CI, by make, by npm, by direnv.
_RUN_LATER = (".github/workflows/ci.yml", "Makefile", "package.json", ".envrc", "setup.py", "conftest.py")
#: Paths outside the project: the user's own files.
_OUTSIDE = (f"{_HOME}/.bashrc", f"{_HOME}/.ssh/id_rsa", "/etc/hosts")
_ANY_URL = ("https://example.com/x", "http://203.0.113.5/upload")

#: Programs that fetch code (or a package) and run it, by the words that start them.
_FETCH_AND_RUN: dict[tuple[str, ...], str] = {
    ("npx",): "npm", ("bunx",): "npm", ("pnpx",): "npm", ("pnpm", "dlx"): "npm", ("yarn", "dlx"): "npm",
    ("npm", "exec"): "npm", ("uvx",): "PyPI", ("pipx", "run"): "PyPI", ("uv", "tool", "run"): "PyPI",
}
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "httpie"})
_RUNNERS = frozenset({
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "node", "perl", "ruby", "php", "source", ".", "eval",
})
#: ``curl … | sh`` as text, for a line the judge could not take apart.
_PIPED_TO_SHELL = re.compile(r"\b(?:curl|wget)\b[^|;&]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b")

#: Environment variables that change what runs, by name (a glob of names): the reason.
_ENV_RUNS = (
    (("PATH",), "changes which programs run"),
    (("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_*"), "loads its libraries into every program"),
    (("BASH_ENV", "ENV", "PROMPT_COMMAND", "ZDOTDIR"), "runs a file in every shell"),
    (("NODE_OPTIONS", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB",
      "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS"), "changes the code programs load"),
    (("GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_CONFIG_*", "GIT_EXTERNAL_DIFF",
      "EDITOR", "VISUAL", "PAGER", "GIT_PAGER"), "runs a program of its choosing"),
)
#: Variables that say where requests go: a model's calls, with the user's key.
_ENV_SENDS = re.compile(r".*(?:_BASE_URL|_API_BASE|_API_URL|_ENDPOINT)|https?_proxy|all_proxy", re.IGNORECASE)

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
_SHELL_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")
#: What a shell sets or roost sets for a hook: not the user's environment speaking.
_HOOK_VARIABLES = frozenset({"CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "HOME", "PWD", "OLDPWD", "IFS", "RANDOM"})


@functools.lru_cache(maxsize=512)
def rule_warnings(text: str) -> tuple[str, ...]:
    """What an allow rule (as written: roost's or Claude Code's syntax) lets through that is
    broad, a reason each (none for a rule that cannot be parsed: it is refused elsewhere)."""
    try:
        rule = parse_rule(text, "allow")
    except RuleError:
        return ()
    policy = Policy(rules=(rule,), home=_HOME)

    def allowed(tool: str, **input: str) -> bool:
        return decide(policy, "agent", (), tool, input, _CWD).action == "allow"

    if allowed("zz_roost_probe__any") and allowed("bash", command=_ANY_COMMAND[0]):
        return ("every tool, any command and any file, without asking",)
    found: list[str] = []
    if all(allowed("bash", command=c) for c in _ANY_COMMAND):
        found.append("runs any command without asking")
    else:
        fetched = [c.split()[0] for c in _DOWNLOADS if allowed("bash", command=c)]
        if fetched:
            found.append(f"runs {' and '.join(fetched)} without asking: downloads, and can send files out")
        code = dict.fromkeys(c.split()[0] for c in _RUNS_CODE if allowed("bash", command=c))
        if code:
            found.append(f"runs code it is given without asking ({', '.join(code)})")
    found += _file_warnings(allowed)
    secret = [p.replace(_HOME, "~") for p in _OUTSIDE if allowed("read", path=p)]
    if secret:
        found.append(f"reads your files outside the project without asking ({', '.join(secret)})")
    if all(allowed("web_fetch", url=u) for u in _ANY_URL):
        found.append("fetches any URL without asking: what the model read can leave that way")
    return tuple(found)


def _file_warnings(allowed: Callable[..., bool]) -> list[str]:
    """What a rule lets ``write`` and ``edit`` change without asking, if that is broad."""

    def verb(path: str) -> str:
        tools = [tool for tool in ("write", "edit") if allowed(tool, path=path)]
        return " and ".join({"write": "writes", "edit": "edits"}[t] for t in tools)

    found = []
    outside = {p.replace(_HOME, "~"): verb(p) for p in _OUTSIDE if verb(p)}
    if outside:
        found.append(f"{next(iter(outside.values()))} files outside the project without asking ({', '.join(outside)})")
    every = {verb(p) for p in _ANY_PROJECT_FILE}
    if len(every) == 1 and "" not in every:
        found.append(f"{every.pop()} any file of the project without asking (CI workflows and Makefiles too)")
    else:
        later = {p: verb(p) for p in _RUN_LATER if verb(p)}
        if later:
            found.append(f"{next(iter(later.values()))} files that run later without asking ({', '.join(later)})")
    return found


def command_warnings(line: str) -> tuple[str, ...]:
    """What a shell line (a hook's command) does that fetches code and runs it."""
    programs = [(os.path.basename(c.words[0]), c.words[1:]) for c in judge(line).commands if c.words]
    return _fetch_and_run(programs, line)


def argv_warnings(argv: Sequence[str]) -> tuple[str, ...]:
    """What a program and its arguments (an MCP server's) do that fetches code and runs it:
    a shell's ``-c`` line is judged as a hook's would be."""
    if not argv:
        return ()
    name = os.path.basename(argv[0])
    if name in _RUNNERS and "-c" in argv[1:-1]:
        return command_warnings(argv[argv.index("-c", 1) + 1])
    return _fetch_and_run([(name, tuple(argv[1:]))], "")


def _fetch_and_run(programs: Sequence[tuple[str, Sequence[str]]], line: str) -> tuple[str, ...]:
    found = []
    names = {name for name, _ in programs}
    if (names & _DOWNLOADERS and names & _RUNNERS) or _PIPED_TO_SHELL.search(line):
        seen = " and ".join(sorted(names & (_DOWNLOADERS | _RUNNERS)))
        found.append("downloads code and runs it" + (f" ({seen})" if seen else ""))
    for name, args in programs:
        words = (name, *args)
        for start, registry in _FETCH_AND_RUN.items():
            if words[: len(start)] == start:
                package = next((a for a in args[len(start) - 1 :] if not a.startswith("-")), "")
                found.append(f"downloads a package from {registry} and runs it: {' '.join((*start, package))}".rstrip())
    return tuple(dict.fromkeys(found))


def mode_warnings(mode: str | None) -> tuple[str, ...]:
    """What a mode an agent or a settings file sets skips."""
    if mode == "full":
        return ("runs every tool call without asking (mode full)",)
    if mode == "exec":
        return ("runs every tool call without asking (mode exec)",)
    return ()


def env_warnings(name: str, value: str) -> tuple[str, ...]:
    """What setting the environment variable ``name`` to ``value`` changes, if it changes
    what runs or where requests go."""
    for names, reason in _ENV_RUNS:
        if any(re.fullmatch(n.replace("*", ".*"), name) for n in names):
            return (f"{reason} ({name})",)
    if _ENV_SENDS.fullmatch(name):
        return (f"sends requests, and the keys they carry, to {value} ({name})",)
    return ()


def expanded(values: Iterable[str]) -> tuple[str, ...]:
    """The variables ``${VAR}`` (and ``${VAR:-default}``) in ``values`` name, in order."""
    return tuple(dict.fromkeys(m.group(1) for v in values for m in _VAR.finditer(v)))


def shell_variables(line: str) -> tuple[str, ...]:
    """The variables a shell line reads (``$VAR``, ``${VAR}``), but those roost or the
    shell set."""
    names = (m.group(1) or m.group(2) for m in _SHELL_VAR.finditer(line))
    return tuple(dict.fromkeys(n for n in names if n not in _HOOK_VARIABLES))


def secret_warnings(variables: Iterable[str], to: str) -> tuple[str, ...]:
    """A reason for the secret-looking variables whose values go to ``to``."""
    secret = [name for name in variables if is_secret(name)]
    return (f"{to} gets the value of {', '.join(secret)}, which looks secret",) if secret else ()
