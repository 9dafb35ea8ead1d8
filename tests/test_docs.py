"""The reference in docs/ says what the code does: every command and flag docs/cli.md names
exists, every one the CLI has is documented there, and docs/config.md documents exactly the
keys the daemon reads."""

from __future__ import annotations

import re
from pathlib import Path

import click

from roost.cli._main import _COMMANDS, cli
from roost.daemon.folder._config_keys import _SCHEMA

DOCS = Path(__file__).resolve().parents[1] / "docs"
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*|-[A-Za-z])(?![\w-])")


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    found: dict[str, click.Command] = {}
    for name in _COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        found[name] = command
    return found


def _flags(command: click.Command) -> set[str]:
    """Every option string of ``command`` and of its subcommands (``mcp restart``)."""
    flags = {opt for param in command.params if isinstance(param, click.Option) for opt in (*param.opts, *param.secondary_opts)}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            flags |= _flags(sub)
    return flags | {"--help", "-h"}


def _synopsis() -> list[str]:
    """The lines of docs/cli.md's code blocks that run roost."""
    text = (DOCS / "cli.md").read_text()
    blocks = re.findall(r"```(?:sh)?\n(.*?)```", text, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("roost ")]


def test_every_command_and_flag_the_cli_reference_names_exists() -> None:
    commands = _commands()
    named: set[str] = set()
    for line in _synopsis():
        usage = line.split("#", 1)[0]
        name = usage.split()[1]
        if name.startswith("-"):
            continue  # roost --host ..., roost --version
        assert name in commands, f"docs/cli.md names `roost {name}`, which does not exist"
        named.add(name)
        unknown = set(FLAG.findall(usage)) - _flags(commands[name]) - _flags(cli)
        assert not unknown, f"`roost {name}` has no {', '.join(sorted(unknown))} (docs/cli.md: {line})"
    assert set(commands) - named == set(), "commands docs/cli.md does not show in its synopsis"


def test_every_flag_of_the_cli_is_in_the_cli_reference() -> None:
    text = (DOCS / "cli.md").read_text()
    documented = set(FLAG.findall(text))
    missing = {
        f"roost {name} {flag}"
        for name, command in _commands().items()
        for flag in _flags(command) - {"--help", "-h"}
        if flag.startswith("--") and flag not in documented
    }
    assert not missing, f"docs/cli.md does not document: {', '.join(sorted(missing))}"


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
