"""Model names as Claude Code writes them: full and dated ids, its aliases and its
environment variables, under the user's ``[models]``; through the daemon, what reaches the
Anthropic Messages API (a local fake) is checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._models import ModelNameError, model_id
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, text, user_dir, write, write_script

DEFAULT = "anthropic/claude-sonnet-4-6"


def named(name: str | None, aliases: dict[str, str] | None = None, plan: bool = False, **environ: str) -> str:
    return model_id(name, aliases or {}, DEFAULT, environ, plan=plan)


@pytest.mark.parametrize(
    "name, plan, expected",
    [
        ("sonnet", False, "anthropic/claude-sonnet-4-6"),
        ("opus", False, "anthropic/claude-opus-4-5"),
        ("haiku", False, "anthropic/claude-haiku-4-5"),
        ("fable", False, "anthropic/claude-fable-5"),
        ("best", False, "anthropic/claude-opus-4-5"),
        ("opusplan", False, "anthropic/claude-sonnet-4-6"),
        ("opusplan", True, "anthropic/claude-opus-4-5"),
        ("sonnet[1m]", False, "anthropic/claude-sonnet-4-6[1m]"),
        ("opus[1m]", False, "anthropic/claude-opus-4-5[1m]"),
        ("default", False, DEFAULT),
        (None, False, DEFAULT),
        ("claude-sonnet-4", False, "anthropic/claude-sonnet-4"),
        ("claude-opus-4-1-20250805", False, "anthropic/claude-opus-4-1-20250805"),
        ("claude-3-5-haiku-latest", False, "anthropic/claude-3-5-haiku-latest"),
        ("claude-sonnet-4-5[1m]", False, "anthropic/claude-sonnet-4-5[1m]"),
        ("anthropic/claude-test", False, "anthropic/claude-test"),
        ("scripted/demo", False, "scripted/demo"),
        # Neither provider/model nor Claude's: as it is (the registry says what is wrong).
        ("gpt-4o", False, "gpt-4o"),
    ],
)
def test_claude_codes_names_and_aliases(name: str | None, plan: bool, expected: str) -> None:
    assert named(name, plan=plan) == expected


@pytest.mark.parametrize(
    "variable, name",
    [
        ("ANTHROPIC_DEFAULT_SONNET_MODEL", "sonnet"),
        ("ANTHROPIC_DEFAULT_OPUS_MODEL", "opus"),
        ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "haiku"),
        ("ANTHROPIC_SMALL_FAST_MODEL", "haiku"),
        ("ANTHROPIC_DEFAULT_FABLE_MODEL", "fable"),
    ],
)
def test_each_variable_names_its_aliass_model(variable: str, name: str) -> None:
    assert named(name, **{variable: "claude-x-20250101"}) == "anthropic/claude-x-20250101"
    # A gateway's own name for it is Anthropic's too; [1m] still asks for the window.
    assert named(f"{name}[1m]", **{variable: "team-model"}) == "anthropic/team-model[1m]"


def test_the_variables_as_claude_code_reads_them() -> None:
    # opusplan and best go by the opus and sonnet variables.
    env = {"ANTHROPIC_DEFAULT_OPUS_MODEL": "claude-opus-4-1", "ANTHROPIC_DEFAULT_SONNET_MODEL": "claude-sonnet-4"}
    assert named("opusplan", plan=True, **env) == "anthropic/claude-opus-4-1"
    assert named("opusplan", **env) == "anthropic/claude-sonnet-4"
    assert named("best", **env) == "anthropic/claude-opus-4-1"
    # The deprecated variable only where the new one is not set.
    assert named("haiku", ANTHROPIC_SMALL_FAST_MODEL="claude-old", ANTHROPIC_DEFAULT_HAIKU_MODEL="claude-new") == "anthropic/claude-new"
    # ANTHROPIC_MODEL: the model when nothing names one (above default_model), an alias or a name.
    assert named(None, ANTHROPIC_MODEL="claude-opus-4-1-20250805") == "anthropic/claude-opus-4-1-20250805"
    assert named(None, ANTHROPIC_MODEL="opus", ANTHROPIC_DEFAULT_OPUS_MODEL="claude-opus-4-1") == "anthropic/claude-opus-4-1"
    assert named(None, ANTHROPIC_MODEL="openai/gpt-4o") == "openai/gpt-4o"
    # ... but a name said beats it, and `default` clears it, as in Claude Code.
    assert named("haiku", ANTHROPIC_MODEL="opus") == "anthropic/claude-haiku-4-5"
    assert named("default", ANTHROPIC_MODEL="opus") == DEFAULT
    # A variable's value is the model's, not a name of anything else: no "anthropic/" twice.
    assert named("sonnet", ANTHROPIC_DEFAULT_SONNET_MODEL="anthropic/claude-sonnet-4") == "anthropic/claude-sonnet-4"


def test_models_in_the_config_win_over_variables_and_the_builtin_mapping() -> None:
    aliases = {"sonnet": "openai/gpt-4o", "fast": "haiku", "best": "fable", "mine": "claude-sonnet-4"}
    env = {"ANTHROPIC_DEFAULT_SONNET_MODEL": "claude-sonnet-4", "ANTHROPIC_DEFAULT_HAIKU_MODEL": "claude-3-5-haiku-latest"}
    assert named("sonnet", aliases, **env) == "openai/gpt-4o"  # [models] > variable > built-in
    assert named("opusplan", aliases, **env) == "openai/gpt-4o"  # opusplan is sonnet, as mapped
    assert named("sonnet[1m]", aliases) == "openai/gpt-4o"  # not Claude: no window to ask for
    # What an alias maps to is read again: a variable, an alias, a Claude name.
    assert named("fast", aliases, **env) == "anthropic/claude-3-5-haiku-latest"
    assert named("best", aliases) == "anthropic/claude-fable-5"
    assert named("mine", aliases) == "anthropic/claude-sonnet-4"
    # A whole id may be mapped too; default_model may be an alias.
    assert named("anthropic/claude-sonnet-4-6", {"anthropic/claude-sonnet-4-6": "openai/gpt-4o"}) == "openai/gpt-4o"
    assert model_id(None, {}, "opus", {}) == "anthropic/claude-opus-4-5"


def test_names_that_lead_in_a_circle_are_refused() -> None:
    with pytest.raises(ModelNameError, match="a -> b -> a"):
        named("a", {"a": "b", "b": "a"})
    with pytest.raises(ModelNameError, match="sonnet -> sonnet"):
        named("sonnet", ANTHROPIC_DEFAULT_SONNET_MODEL="sonnet")


# Through the daemon, against the fake Messages API.


async def run(client: TrioClient, project: Path, env: dict[str, str] | None = None, **params: Any) -> list[dict[str, Any]]:
    """A dispatch with the client's environment (the test's, plus ``env``) sent along."""
    started = await client.call("dispatch", task="go", cwd=str(project), attach=True, env={**os.environ, **(env or {})}, **params)
    events = await events_until(client, finished(started["run"]))
    assert events[-1]["reason"] == "done", events[-1]
    return events


async def test_an_agents_dated_claude_id_reaches_anthropic(client: TrioClient, project: Path, anthropic: Any) -> None:
    write(project / ".claude" / "agents" / "architect.md", "---\nname: architect\ndescription: Designs.\nmodel: claude-opus-4-1-20250805\n---\nDesign it.\n")
    listed = await client.call("agents.list", cwd=str(project))
    architect = next(a for a in listed["agents"] if a["name"] == "architect")
    assert (architect["model"], architect["model_id"]) == ("claude-opus-4-1-20250805", "anthropic/claude-opus-4-1-20250805")
    events = await run(client, project, agent="architect")
    assert next(e for e in events if e["type"] == "run.started")["model"] == "anthropic/claude-opus-4-1-20250805"
    assert [r.body["model"] for r in anthropic.requests] == ["claude-opus-4-1-20250805"]


async def test_dispatch_aliases_and_the_clients_variables_reach_anthropic(
    client: TrioClient, project: Path, anthropic: Any
) -> None:
    await run(client, project, model="sonnet")
    await run(client, project, model="sonnet", env={"ANTHROPIC_DEFAULT_SONNET_MODEL": "claude-sonnet-4-5-20250929"})
    await run(client, project, env={"ANTHROPIC_MODEL": "haiku", "ANTHROPIC_SMALL_FAST_MODEL": "claude-3-5-haiku-latest"})
    await run(client, project, model="opusplan", mode="plan")
    await run(client, project, model="opusplan")
    assert [r.body["model"] for r in anthropic.requests] == [
        "claude-sonnet-4-6", "claude-sonnet-4-5-20250929", "claude-3-5-haiku-latest", "claude-opus-4-5", "claude-sonnet-4-6"
    ]
    # Only a [1m] name asks for the long window.
    assert "context-1m" not in anthropic.requests[0].headers.get("anthropic-beta", "")


async def test_a_1m_alias_asks_for_the_long_window(client: TrioClient, project: Path, anthropic: Any) -> None:
    events = await run(client, project, model="sonnet[1m]")
    started = next(e for e in events if e["type"] == "run.started")
    assert started["model"] == "anthropic/claude-sonnet-4-6[1m]"
    [request] = anthropic.requests
    assert request.body["model"] == "claude-sonnet-4-6"
    assert "context-1m-2025-08-07" in request.headers["anthropic-beta"].split(",")


async def test_a_commands_claude_model_and_the_users_models_table(client: TrioClient, project: Path, anthropic: Any) -> None:
    write(project / ".claude" / "commands" / "quick.md", "---\nmodel: claude-3-5-haiku-latest\n---\nBe quick about $ARGUMENTS.\n")
    events = await client.call("dispatch", task="/quick it", cwd=str(project), attach=True, env=dict(os.environ))
    await events_until(client, finished(events["run"]))
    assert anthropic.requests[-1].body["model"] == "claude-3-5-haiku-latest"

    # The user's [models] maps an alias to any provider, over the client's variable.
    model = write_script(project, [text("Scripted.")])
    write(user_dir() / "config.toml", f'[models]\nopus = "{model}"\n')
    events = await run(client, project, model="opus", env={"ANTHROPIC_DEFAULT_OPUS_MODEL": "claude-opus-4-1"})
    assert events[-1]["text"] == "Scripted." and len(anthropic.requests) == 1


async def test_names_that_are_no_model_are_refused_with_the_reason(client: TrioClient, project: Path) -> None:
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", model="gpt-4o", cwd=str(project))
    assert info.value.code == ErrorCode.MODEL_UNAVAILABLE and "not of the form provider/model" in info.value.message
    write(user_dir() / "config.toml", '[models]\na = "b"\nb = "a"\n')
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", model="a", cwd=str(project))
    assert info.value.code == ErrorCode.MODEL_UNAVAILABLE and "leads in a circle" in info.value.message


async def test_a_projects_files_still_cannot_name_the_test_model(client: TrioClient, project: Path) -> None:
    # However it is spelled: with a [1m] suffix, through an alias the project's own
    # (untrusted) config maps, or the project's agent naming it.
    write(project / ".roost" / "config.toml", '[models]\nsonnet = "scripted/demo"\n')
    write(project / ".claude" / "agents" / "sly.md", "---\nname: sly\ndescription: x\nmodel: scripted/demo[1m]\n---\nGo.\n")
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", agent="sly", cwd=str(project))
    assert "cannot name scripted/demo[1m]" in info.value.message
    write(project / ".claude" / "agents" / "sly.md", "---\nname: sly\ndescription: x\nmodel: sonnet\n---\nGo.\n")
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", agent="sly", cwd=str(project), env={"PATH": os.environ["PATH"]})
    # sonnet stayed Anthropic's: the project's mapping is not applied, so the key is missing.
    assert info.value.code == ErrorCode.MODEL_UNAVAILABLE and "ANTHROPIC_API_KEY" in info.value.message
