"""A real client no one here wrote reads roost's stream: Anthropic's Claude Agent SDK for
TypeScript, given roost as its Claude Code executable, runs a one-shot ``query()`` against
the fake Anthropic server and gets its result.

The SDK starts the executable with ``--output-format stream-json --verbose --input-format
stream-json --model=...``, answers nothing until its ``initialize`` control request is
answered, writes the prompt as a ``user`` message on standard input, and closes it once it
has the ``result``. The wrapper only puts ``dispatch`` before those flags: every one of them
is roost's own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._agent_sdk import ensure_agent_sdk
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import ROOST, E2E

QUERY = """
import {{ query }} from {sdk};
const messages = [];
for await (const message of query({{
  prompt: process.argv[2],
  options: {{ pathToClaudeCodeExecutable: process.argv[3], model: "claude-test", cwd: process.argv[4] }},
}})) messages.push(message);
console.log(JSON.stringify(messages));
"""


def test_the_agent_sdk_runs_a_query_through_roost(e2e: E2E, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: install Node.js 18 or later to run the Agent SDK test", pytrace=False)
    sdk = ensure_agent_sdk()
    wrapper = tmp_path / "claude"
    wrapper.write_text(f'#!/bin/sh\nexec {ROOST} dispatch "$@"\n')
    wrapper.chmod(0o755)
    script = tmp_path / "query.mjs"
    script.write_text(QUERY.format(sdk=json.dumps(sdk.as_uri())))
    reply = {
        "content": [{"type": "text", "text": "Hello from the fake model."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 6},
    }
    with serve_anthropic([reply]) as server:
        env = dict(e2e.env, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.base_url)
        done = subprocess.run(
            [node, str(script), "Say hello.", str(wrapper), str(e2e.project)],
            cwd=e2e.project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr
        [request] = server.requests
    # The model got the SDK's prompt as the task, under the model the SDK named.
    assert request.body["model"] == "claude-test"
    assert request.body["messages"][0]["content"][0]["text"] == "Say hello."
    messages = json.loads(done.stdout)
    init, assistant, result = messages
    assert init["type"] == "system" and init["subtype"] == "init" and init["cwd"] == str(e2e.project)
    assert assistant["type"] == "assistant"
    assert assistant["message"]["content"] == [{"type": "text", "text": "Hello from the fake model."}]
    assert result["type"] == "result" and result["subtype"] == "success" and not result["is_error"]
    assert result["result"] == "Hello from the fake model." and result["num_turns"] == 1
    assert result["session_id"] == init["session_id"] == assistant["session_id"]
    assert result["usage"]["input_tokens"] == 12 and result["usage"]["output_tokens"] == 6
