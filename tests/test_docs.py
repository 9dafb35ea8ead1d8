"""The reference in docs/ says what the code does: every command, subcommand and flag that
docs/cli.md (or the README, or any other page) names exists, each command's synopsis in
docs/cli.md shows every option it has, and docs/config.md documents exactly the keys the
daemon reads. The README stays a newcomer's page (at most ~1,500 words)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from roost.cli._main import _COMMANDS, cli
from roost.cli._exits import EXIT_STATUS
from roost.cli.shell._slash import COMMANDS as SLASH
from roost.daemon.folder._config_keys import _SCHEMA

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*|-[A-Za-z])(?![\w-])")
#: Options every command takes: roost's own, before the command, and help.
_GLOBAL = {opt for param in cli.params if isinstance(param, click.Option) for opt in param.opts} | {"--help", "-h"}


def _commands() -> dict[str, click.Command]:
    """Every command and subcommand, by its words after ``roost``: ``dispatch``, ``mcp serve``."""
    ctx = click.Context(cli)
    found: dict[str, click.Command] = {}

    def walk(name: str, command: click.Command) -> None:
        found[name] = command
        if isinstance(command, click.Group):
            for sub, subcommand in command.commands.items():
                walk(f"{name} {sub}", subcommand)

    for name in _COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        walk(name, command)
    return found


def _options(command: click.Command) -> list[click.Option]:
    return [param for param in command.params if isinstance(param, click.Option)]


def _flags(command: click.Command) -> set[str]:
    return {opt for param in _options(command) for opt in (*param.opts, *param.secondary_opts)} | _GLOBAL


def _named(usage: str, commands: dict[str, click.Command]) -> str:
    """The command a usage line (the words after ``roost``) runs: the longest known prefix,
    so ``mcp restart NAME`` is ``mcp restart``; an unknown word after a group is an error."""
    words = usage.split()
    name = words[0]
    assert name in commands, f"no command `roost {name}`"
    for word in words[1:]:
        command = commands[name]
        if not isinstance(command, click.Group) or word.startswith(("-", "[")):
            break
        assert f"{name} {word}" in commands, f"no command `roost {name} {word}`"
        name = f"{name} {word}"
    return name


def _synopsis() -> list[str]:
    """The usage lines of docs/cli.md's code blocks, after ``roost``, each with its
    continuation lines (``               [--json] [--detach]``) joined and comments cut."""
    text = (DOCS / "cli.md").read_text()
    lines: list[str] = []
    for block in re.findall(r"```(?:sh)?\n(.*?)```", text, re.S):
        for raw in block.splitlines():
            usage = raw.split("#", 1)[0].strip()
            if usage.startswith("roost "):
                lines.append(usage.removeprefix("roost "))
            elif usage.startswith("[") and lines:
                lines[-1] += " " + usage
    return [line for line in lines if not line.startswith("-")]  # roost --version


def _mentions() -> list[tuple[str, str]]:
    """Every command line of the README and docs/ that runs roost, after ``roost``, and the
    page it is on: in code blocks (a segment of a pipeline too) and in inline code."""
    found: list[tuple[str, str]] = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = page.read_text()
        blocks = re.findall(r"```(?:sh|console|bash)?\n(.*?)```", text, re.S)
        lines = [raw.split(" #", 1)[0] for block in blocks for raw in block.splitlines()]
        inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for line in lines + inline:
            # Quoted words are a task or a rule, not flags; a pipeline's segments run apart.
            line = re.sub(r"\"[^\"]*\"|'[^']*'", "ARG", line)
            for segment in re.split(r"\s(?:\||&&|;|>|<)\s", line):
                segment = segment.strip().removeprefix("uv run ").removeprefix("exec ")
                # roost --version, roost COMMAND --help: no command named
                if segment.startswith("roost ") and not segment.split()[1].startswith("-") and not segment.split()[1].isupper():
                    found.append((page.name, segment.removeprefix("roost ")))
    return found


def test_every_command_and_flag_the_cli_reference_names_exists() -> None:
    commands = _commands()
    for usage in _synopsis():
        name = _named(usage, commands)
        unknown = set(FLAG.findall(usage)) - _flags(commands[name])
        assert not unknown, f"`roost {name}` has no {', '.join(sorted(unknown))} (docs/cli.md: roost {usage})"


def test_the_cli_reference_shows_every_command_and_each_of_its_options() -> None:
    commands = _commands()
    shown: dict[str, set[str]] = {}
    for usage in _synopsis():
        shown.setdefault(_named(usage, commands), set()).update(FLAG.findall(usage))
    assert set(commands) - set(shown) == set(), "commands docs/cli.md's synopsis does not show"
    missing = {
        f"roost {name} {'/'.join(option.opts)}"
        for name, command in commands.items()
        for option in _options(command)
        if not option.hidden and not set(option.opts + option.secondary_opts) & shown[name]
    }
    assert not missing, f"docs/cli.md's synopsis does not show: {', '.join(sorted(missing))}"


def test_every_roost_command_the_readme_and_docs_write_exists() -> None:
    commands = _commands()
    mentions = _mentions()
    assert len(mentions) > 50  # the scan reads the pages
    wrong = []
    for page, usage in mentions:
        try:
            name = _named(usage, commands)
        except AssertionError as exc:
            wrong.append(f"{page}: `roost {usage}`: {exc}")
            continue
        unknown = set(FLAG.findall(usage)) - _flags(commands[name])
        if unknown:
            wrong.append(f"{page}: `roost {usage}`: no {', '.join(sorted(unknown))}")
    assert not wrong, "\n".join(wrong)


def test_the_cli_reference_documents_exactly_the_shells_slash_commands() -> None:
    text = (DOCS / "cli.md").read_text()
    table = text.split("## The shell", 1)[1].split("\n## ", 1)[0]
    documented = {name for row in re.findall(r"^\| (`/.*?) \| .* \|$", table, re.M) for name in re.findall(r"`/(\w+)", row)}
    builtin = {name for command in SLASH for name in (command.name, *command.aliases)}
    assert documented == builtin, f"docs/cli.md: {sorted(documented - builtin)} are no slash commands; {sorted(builtin - documented)} are not shown"


def test_the_cli_reference_gives_each_stop_reason_its_exit_status() -> None:
    text = (DOCS / "cli.md").read_text()
    paragraph = text.split("**Exit status of dispatch**", 1)[1].split("\n- ", 1)[0]
    said = dict(re.findall(r"`(\d+)` ([^`]*)", paragraph))
    for reason, status in EXIT_STATUS.items():
        assert re.search(rf"\b{reason}\b", said.get(str(status), "")), f"docs/cli.md: exit status {status} is {reason}"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of ``page``'s headings: lower case, punctuation dropped,
    spaces as dashes."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_link_between_the_pages_leads_somewhere() -> None:
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # https://...
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (fragment and fragment not in _anchors(linked)):
                broken.append(f"{page.name}: {target}")
    assert not broken, f"links that lead nowhere: {', '.join(broken)}"


def test_the_readme_links_every_page_of_the_reference() -> None:
    readme = (ROOT / "README.md").read_text()
    unlinked = [page.name for page in sorted(DOCS.glob("*.md")) if f"(docs/{page.name})" not in readme]
    assert not unlinked, f"README.md's Documentation does not link {', '.join(unlinked)}"


def test_the_readme_is_a_newcomers_page() -> None:
    words = len((ROOT / "README.md").read_text().split())
    assert words <= 1500, f"README.md has {words} words: the reference belongs in docs/"


def _schema_keys() -> set[str]:
    """Every key config.toml has, as docs/config.md writes them: ``default_model``,
    ``[providers.NAME] kind``, ``[models]``, ``[tools.env] pass``..."""
    keys: set[str] = set()
    for top, held in _SCHEMA.items():
        if held is None:
            keys.add(top)
        elif isinstance(held, tuple):
            keys |= {f"[{top}.NAME] {key}" for key in held[1]}
        elif isinstance(held, frozenset):
            keys |= {f"[{top}] {key}" for key in held}
        elif not held:
            keys.add(f"[{top}]")
        else:
            for sub, inner in held.items():
                keys |= {f"[{top}.{sub}] {key}" for key in inner} if inner else {f"[{top}.{sub}.NAME]"}
    return keys


def _documented_keys() -> set[str]:
    """The keys of docs/config.md's table of every key (a row may name several)."""
    text = (DOCS / "config.md").read_text()
    table = text.split("## Every key", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for row in re.findall(r"^\| (`.*?) \| .* \|$", table, re.M):
        table_name = re.match(r"`(\[[^\]]+\])`", row)
        names = re.findall(r"`([^`]+)`", row)
        if table_name and len(names) > 1:
            keys |= {f"{table_name.group(1)} {name}" for name in names[1:]}
        else:
            keys.add(names[0])
    # Prices are written per model: "provider/model" is the NAME.
    return {re.sub(r'\."provider/model"\]', ".NAME]", key) for key in keys}


def test_the_config_reference_documents_exactly_the_keys_the_daemon_reads() -> None:
    documented, read = _documented_keys(), _schema_keys()
    assert documented - read == set(), "docs/config.md documents keys the daemon does not read"
    assert read - documented == set(), "keys the daemon reads that docs/config.md does not document"
