"""The scripted provider's own knobs (its replay is tested through the daemon everywhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from roost.daemon.providers import ModelRequest, ProviderError
from roost.daemon.providers._scripted import ScriptedProvider


def request(path: Path) -> ModelRequest:
    return ModelRequest(model=str(path), system="", messages=({"role": "user", "content": [{"type": "text", "text": "go"}]},))


async def test_a_response_waits_its_delay_before_it_starts(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"responses": [{"delay": 2.5, "content": [{"type": "text", "text": "late"}]}]}))
    seen: list[float] = []
    started = trio.current_time()
    reply = await ScriptedProvider().stream(request(script), lambda kind, text: seen.append(trio.current_time()))
    assert reply.content == ({"type": "text", "text": "late"},)
    assert seen and seen[0] - started >= 2.5


@pytest.mark.parametrize("delay", [-1, "soon", True, float("nan")])
async def test_a_delay_that_is_not_seconds_is_an_error(tmp_path: Path, delay: object) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"responses": [{"delay": delay, "content": []}]}))
    with pytest.raises(ProviderError, match="delay must be seconds"):
        await ScriptedProvider().stream(request(script), lambda kind, text: None)
