"""A session continued with other tools: `roost dispatch` and `roost logs` say what changed."""

from __future__ import annotations

from pathlib import Path

from .conftest import E2E, text


def test_dispatch_and_logs_show_the_tools_that_went_and_came(e2e: E2E) -> None:
    agents = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "agents"
    agents.mkdir(parents=True)
    model = e2e.script([text("one")], [text("two")])
    (agents / "narrow.md").write_text(f"---\nname: narrow\nmodel: {model}\ntools: [read, bash]\n---\nWork.\n")
    first = e2e.ok("dispatch", "--yes", "--agent", "narrow", "look")
    assert "tools changed" not in first.stdout
    session = e2e.json_out("sessions", "--json")[0]["id"]
    (agents / "narrow.md").write_text(f"---\nname: narrow\nmodel: {model}\ntools: [read, glob]\n---\nWork.\n")
    second = e2e.ok("dispatch", "--yes", "--agent", "narrow", "--session", session, "again")
    said = "⚙ tools changed since the last run (the model is told) · gone: bash · new: glob"
    assert said in second.stdout.splitlines()
    assert e2e.ok("logs", session).stdout.splitlines().count(said) == 1
