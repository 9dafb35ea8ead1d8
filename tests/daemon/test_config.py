"""Configuration files, provider resolution, providers.list, chat and costs, for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.daemon.folder._config import ConfigError, load_config
from roost.daemon.folder._project import user_config_file
from roost.daemon.providers import ProviderRegistry, ProviderUnavailable
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import bash, events_until, finished, text, trusting, write_script


def _user_config(body: str) -> Path:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def test_builtins_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    config = load_config(None)
    assert set(config.providers) == {"anthropic", "openai", "scripted"}
    assert config.providers["openai"].base_url == "http://127.0.0.1:9/v1"
    assert config.providers["anthropic"].api_key_env == "ANTHROPIC_API_KEY"
    assert config.default_model == "anthropic/claude-sonnet-4-6"
    monkeypatch.setenv("ROOST_MODEL", "scripted/demo")
    assert load_config(None).default_model == "scripted/demo"


def test_user_then_project_override_key_by_key(tmp_path: Path) -> None:
    user = _user_config(
        'default_model = "ollama/small"\n'
        "[providers.ollama]\n"
        'kind = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\napi_key_env = ""\n'
        'models = { small = "qwen3:8b" }\nheaders = { "x-a" = "1" }\n'
        "[models]\nfast = \"anthropic/claude-haiku-4-5\"\n"
    )
    project = tmp_path / "proj"
    (project / ".roost").mkdir(parents=True)
    (project / "sub").mkdir()
    (project / ".roost" / "config.toml").write_text(
        "[providers.ollama]\ntimeout = 30\nheaders = { \"x-b\" = \"2\" }\n"
        "[prices.\"ollama/qwen3:8b\"]\ninput = 1\noutput = 2\n"
    )
    untrusted = load_config(str(project / "sub"))
    assert untrusted.providers["ollama"].timeout == 600.0 and untrusted.prices["ollama/qwen3:8b"].output == 2.0
    assert [(w.kind, w.name, w.trusted) for w in untrusted.widening] == [("provider", "ollama", False)]
    config = load_config(str(project / "sub"), trust=trusting(project / ".roost" / "config.toml"))
    assert [(w.kind, w.name, w.trusted) for w in config.widening] == [("provider", "ollama", True)]
    ollama = config.providers["ollama"]
    assert (ollama.kind, ollama.base_url, ollama.timeout, ollama.api_key_env) == (
        "openai", "http://127.0.0.1:11434/v1", 30.0, ""
    )
    assert ollama.headers == {"x-a": "1", "x-b": "2"}
    assert ollama.source == str(project / ".roost" / "config.toml")
    assert config.files == (str(user), str(project / ".roost" / "config.toml"))
    assert config.default_model == "ollama/small"
    assert config.prices["ollama/qwen3:8b"].output == 2.0
    assert not ollama.needs_key()
    assert load_config(str(tmp_path)).providers["ollama"].timeout == 600.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[providers.x\n", "config.toml"),
        ('[providers.x]\nkind = "gopher"\n', "needs kind"),
        ('[providers.anthropic]\napi_key = "sk-secret"\n', "api_key is not read from files"),
        ('[providers.anthropic]\ntimeout = "soon"\n', "timeout must be a number"),
        ('default_model = 3\n', "default_model must be a string"),
        ('[prices."a/b"]\ninput = "cheap"\n', "prices"),
        ('[[guardrails.rules]]\npattern = "x"\naction = "shout"\n', "action must be stop or warn"),
        ("[tools.web_fetch]\nallow_private = 1\n", "allow_private must be true or false"),
        ("[tools.web_fetch]\nallow_privat = true\n", "[tools.web_fetch] has no allow_privat"),
    ],
)
def test_bad_config_is_a_clear_error(body: str, message: str) -> None:
    path = _user_config(body)
    with pytest.raises(ConfigError) as error:
        load_config(None)
    assert message in str(error.value) and str(path) in str(error.value)
    assert "sk-secret" not in str(error.value)


def test_only_the_users_config_lets_web_fetch_reach_private_addresses(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".roost").mkdir(parents=True)
    settings = project / ".roost" / "config.toml"
    settings.write_text("[tools.web_fetch]\nallow_private = true\n")
    assert not load_config(str(project)).fetch_private
    assert not load_config(str(project), trust=trusting(settings)).fetch_private
    _user_config("[tools.web_fetch]\nallow_private = true\n")
    assert load_config(str(project)).fetch_private


def test_resolution_and_its_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    _user_config('[models]\nmine = "scripted/demo"\n[providers.local]\nkind = "scripted"\nmodels = { d = "demo" }\n')
    registry = ProviderRegistry()
    config = load_config(None)
    assert registry.resolve("mine", config, {}).model_id == "scripted/demo"
    local = registry.resolve("local/d", config)
    assert (local.model, local.model_id) == ("demo", "local/demo")
    assert registry.resolve("scripted/demo", config).provider is registry.resolve("mine", config).provider
    for model_id, needle in (
        ("nope/x", "unknown provider 'nope'"),
        ("plain", "not of the form provider/model"),
        ("anthropic/claude-test", "ANTHROPIC_API_KEY is not set"),
        ("openai/gpt-4o", "OPENAI_API_KEY is not set"),
    ):
        with pytest.raises(ProviderUnavailable) as error:
            registry.resolve(model_id, config, {})
        assert needle in error.value.message


async def test_providers_list_through_the_daemon(client: TrioClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-sentinel-key")
    _user_config('[providers.ollama]\nkind = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\napi_key_env = ""\n')
    listing = await client.call("providers.list", cwd=os.getcwd())
    by_name = {p["name"]: p for p in listing["providers"]}
    assert by_name["anthropic"]["usable"] and by_name["anthropic"]["key_present"]
    assert not by_name["openai"]["usable"] and "OPENAI_API_KEY" in by_name["openai"]["problem"]
    assert by_name["ollama"]["usable"] and by_name["ollama"]["api_key_env"] is None
    assert "sk-sentinel-key" not in repr(listing)


async def test_a_bad_config_file_refuses_dispatch_clearly(client: TrioClient, project: Path) -> None:
    path = _user_config("[providers\n")
    with pytest.raises(RpcError) as error:
        await client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project))
    assert error.value.code == ErrorCode.CONFIG_INVALID and str(path) in error.value.message


async def test_costs_per_step_and_per_run_when_the_price_is_known(client: TrioClient, project: Path) -> None:
    (project / "usage.json").write_text(
        '{"responses": [{"content": [{"type": "tool_use", "name": "bash", "input": {"command": "true"}}],'
        ' "usage": {"input_tokens": 1000000, "output_tokens": 0}},'
        ' {"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 0, "output_tokens": 500000}}]}'
    )
    _user_config(f'[prices."scripted/{project}/usage.json"]\ninput = 2.0\noutput = 10.0\n')
    run = await client.call("dispatch", yes=True, task="t", model=f"scripted/{project}/usage.json", cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    steps = [e["cost"] for e in events if e["type"] == "step.finished"]
    assert steps == [2.0, 5.0]
    assert events[-1]["cost"] == 7.0


async def test_chat_streams_one_turn_and_stores_nothing(client: TrioClient, project: Path) -> None:
    model = write_script(project, [text("hello from chat"), bash("ls")])
    before = (await client.call("status"))["sessions"]
    reply = await client.call(
        "chat", messages=[{"role": "user", "content": "hi"}], model=model, cwd=str(project),
        tools=[{"name": "bash", "description": "shell", "input_schema": {"type": "object"}}],
    )
    assert reply["stop_reason"] == "tool_use" and reply["model"] == model
    assert [b["type"] for b in reply["content"]] == ["text", "tool_use"]
    deltas = []
    while len("".join(deltas)) < len("hello from chat"):
        note = await client.notifications.receive()
        assert note.params[0]["chat"] == reply["chat"] and note.params[0]["session"] is None
        deltas.append(note.params[0]["text"])
    assert "".join(deltas) == "hello from chat"
    assert (await client.call("status"))["sessions"] == before
    for messages, needle in (([], "end with a user message"), ([{"role": "system", "content": "x"}], "role")):
        with pytest.raises(RpcError) as error:
            await client.call("chat", messages=messages, model=model)
        assert error.value.code == ErrorCode.INVALID_PARAMS and needle in error.value.message
    history = [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    with pytest.raises(RpcError) as failed:
        await client.call("chat", messages=history, model=model, cwd=str(project))
    assert failed.value.code == ErrorCode.MODEL_FAILED and "this is call 2" in failed.value.message
