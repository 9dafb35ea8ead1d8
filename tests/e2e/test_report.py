"""``roost report``: a run's report from the real command, by run, by session, or the last."""

from __future__ import annotations

import json

from .conftest import E2E, bash, text


def test_report_by_run_by_session_and_of_the_last_run_here(e2e: E2E) -> None:
    model = e2e.script([bash("sleep 0.2")], [text("slept")])
    e2e.ok("dispatch", "--yes", "--sandbox", "off", "sleep a little", "--model", model)
    by_default = json.loads(e2e.ok("report", "--json").stdout)
    session, run = by_default["session"], by_default["run"]
    assert json.loads(e2e.ok("report", run, "--json").stdout) == by_default
    assert json.loads(e2e.ok("report", session[:6], "--json").stdout)["run"] == run
    assert by_default["reason"] == "done" and len(by_default["steps"]) == 2
    assert by_default["tools"]["bash"]["calls"] == 1 and by_default["tools"]["bash"]["time"] >= 0.2
    shown = e2e.ok("report", run).stdout.splitlines()
    assert shown[0].startswith(f"run     {run} · done · default · agent · {model} · ")
    assert any(line.startswith("tools   ") and "bash ×1" in line for line in shown)
    assert any(line.startswith("step 2  model ") for line in shown)
    missing = e2e.roost("report", "rfffffffffff")
    assert missing.returncode == 10 and "no run 'rfffffffffff' [RUN_NOT_FOUND]" in missing.stderr


def test_report_in_a_folder_with_no_session_says_so(e2e: E2E) -> None:
    other = e2e.tmp / "elsewhere"
    other.mkdir()
    nothing = e2e.roost("report", cwd=other)
    assert nothing.returncode == 2 and f"no session in {other} yet" in nothing.stderr
