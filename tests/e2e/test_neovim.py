"""The Neovim client in contrib/ drives a run through the public protocol, in a headless Neovim."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import E2E

LUA = Path(__file__).resolve().parents[2] / "contrib" / "clients" / "roost.lua"

SCRIPT = """
local roost = dofile(%r)
local started = roost.dispatch("list the files here and count them", {model = "scripted/demo"})
local types = {}
local finished = roost.wait(started, function(e)
  table.insert(types, e.type)
  if e.type == "permission.requested" then
    roost.respond(started.session, e.call_id, "approve", "session")
  end
end, 20000)
vim.fn.writefile({vim.fn.json_encode({started = started, finished = finished, types = types})}, %r)
"""


@pytest.mark.skipif(shutil.which("nvim") is None, reason="needs Neovim (.ci/run installs it)")
def test_neovim_dispatches_and_follows_a_run(e2e: E2E) -> None:
    e2e.ok("daemon")
    out = e2e.tmp / "nvim.json"
    lua = e2e.tmp / "drive.lua"
    lua.write_text(SCRIPT % (str(LUA), str(out)))
    done = subprocess.run(
        ["nvim", "--headless", "-u", "NONE", "-c", f"luafile {lua}", "-c", "qa!"],
        cwd=e2e.project, env=e2e.env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["finished"]["reason"] == "done" and result["finished"]["run"] == result["started"]["run"]
    assert result["types"][0] == "session.created" and result["types"][-1] == "run.finished"
    assert result["types"].count("tool.finished") == 2
    # Both commands asked (agent mode) and were approved from Neovim: `ls -1A` for the
    # session, which does not cover the `wc -l` in the second.
    assert result["types"].count("permission.requested") == 2
    assert result["types"].count("permission.resolved") == 2
    assert e2e.events(result["started"]["session"])[-1]["reason"] == "done"
