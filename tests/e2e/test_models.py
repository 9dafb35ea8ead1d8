"""roost providers and roost chat, as a user runs them."""

from __future__ import annotations

import json

from .conftest import E2E


def test_providers_lists_usable_and_unusable_ones_without_the_network(e2e: E2E) -> None:
    config = e2e.project / ".roost" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        '[providers.ollama]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = ""\n'
    )
    untrusted = e2e.json_out("providers", "--json")
    assert "ollama" not in {p["name"] for p in untrusted["providers"]}
    assert untrusted["untrusted"]["ignored"][0]["name"] == "ollama"
    e2e.ok("trust", "--yes")
    listing = e2e.json_out("providers", "--json")
    by_name = {p["name"]: p for p in listing["providers"]}
    assert set(by_name) == {"anthropic", "openai", "scripted", "ollama"}
    assert by_name["ollama"]["usable"] and by_name["ollama"]["source"] == str(config)
    assert not by_name["anthropic"]["usable"]
    text = e2e.ok("providers").stdout
    assert "ollama" in text and "ANTHROPIC_API_KEY is not set" in text and str(config) in text


def test_chat_streams_one_turn(e2e: E2E) -> None:
    done = e2e.ok("chat", "hello", "--model", "scripted/demo")
    assert done.stdout.startswith("I'll list the files in this folder first.")
    assert '→ bash {"command": "ls -1A"}' in done.stdout
    assert "■ tool_use · scripted/demo" in done.stderr
    out = e2e.ok("chat", "hello", "--model", "scripted/demo", "--json").stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["type"] == "chat.finished" and lines[-1]["stop_reason"] == "tool_use"
    assert all(line["type"] == "text.delta" and line["chat"] == lines[-1]["chat"] for line in lines[:-1])
    # Nothing was stored: chat makes no session.
    assert e2e.json_out("sessions", "--json") == []
    refused = e2e.roost("chat", "hello", "--model", "nosuch/x")
    assert refused.returncode == 10 and "unknown provider 'nosuch'" in refused.stderr
