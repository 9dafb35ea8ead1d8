"""`roost agents`, `roost prompt` and plan mode from the command line."""

from __future__ import annotations

from .conftest import E2E, text


def test_agents_prompt_and_a_plan(e2e: E2E) -> None:
    agents = e2e.project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(
        "---\nname: code-reviewer\ndescription: Reviews code.\ntools: Read, Grep\nmodel: sonnet\n---\nReview.\n"
    )
    (agents / "broken.md").write_text("---\nname: [\n---\n")
    (agents / "team").mkdir()
    (agents / "team" / "explorer.md").write_text(
        "---\nname: explorer\ndescription: Use it when: exploring\ntools: Read, WebSearch, NotebookEdit, ExitPlanMode\n---\nLook.\n"
    )
    (e2e.project / "AGENTS.md").write_text("Always run the tests.\n")
    listed = e2e.roost("agents")
    assert listed.returncode == 0
    assert "code-reviewer  (sonnet = anthropic/claude-sonnet-4-6; tools: read, grep)" in listed.stdout
    assert f"{agents / 'reviewer.md'} · description 13 chars" in listed.stdout
    assert f"skipped: {agents / 'broken.md'}:" in listed.stderr
    # WebSearch is roost's web_search (whether a run gets it, its dispatch says).
    assert "explorer: tools roost does not have: ExitPlanMode (its runs go without them)" in listed.stderr

    shown = e2e.ok("prompt", "--agent", "code-reviewer", "--mode", "plan").stdout
    marks = [line.split(" (")[0] for line in shown.splitlines() if line.startswith("── ")]
    assert marks[:4] == ["── agent", "── mode", "── bootstrap", "── instructions"]
    assert "Always run the tests." in shown and "Plan mode:" in shown

    model = e2e.script([text("1. Add a test. Files: tests/test_a.py\n2. Fix it. Files: a.py")])
    planned = e2e.ok("dispatch", "fix a", "--mode", "plan", "--model", model).stdout
    assert "  1. Add a test.  [tests/test_a.py]" in planned and "  2. Fix it.  [a.py]" in planned


def test_compact_by_hand(e2e: E2E) -> None:
    import json

    script = e2e.tmp / "compact.json"
    script.write_text(json.dumps({
        "responses": [{"content": [text(f"reply {n}")]} for n in range(3)],
        "summaries": [{"content": [text("We said hello three times.")]}],
    }))
    model = f"scripted/{script}"
    session = json.loads(e2e.ok("dispatch", "one", "--model", model, "--json").stdout.splitlines()[0])["session"]
    for task in ("two", "three"):
        e2e.ok("dispatch", task, "--model", model, "--session", session)
    done = e2e.ok("compact", session, "--keep-turns", "1")
    assert "into a" in done.stdout and "We said hello three times." in done.stdout
    shown = e2e.ok("prompt", session).stdout
    assert "── summary" in shown and "We said hello three times." in shown
