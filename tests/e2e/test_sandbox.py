"""The sandbox as a person meets it: the run header and ``roost status`` say where commands
run, ``--sandbox`` changes it, a missing bwrap is said out loud (a run's commands do not
run, and the run says how to run them anyway), and a killed daemon takes its sandboxed
commands with it."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal

import pytest

from tests._procs import with_marker

from .conftest import E2E, alive, bash, detach, text, wait_until

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)")


def test_the_header_says_where_commands_run_and_the_flag_changes_it(e2e: E2E) -> None:
    model = e2e.script([bash("touch made")], [text("Done.")])
    out = e2e.ok("dispatch", "--yes", "make a file", "--model", model).stdout.splitlines()
    assert out[1] == f"sandbox: workspace (writes: {e2e.project}, private /tmp; no network)"
    assert (e2e.project / "made").exists()
    assert "sandbox  bubblewrap (" in e2e.ok("status").stdout

    model = e2e.script([bash("touch again")], [text("Done.")])
    done = e2e.ok("dispatch", "--yes", "again", "--model", model, "--sandbox", "read-only", "--json")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    started = next(e for e in events if e["type"] == "run.started")
    assert (started["sandbox"]["mode"], started["sandbox"]["available"]) == ("read-only", True)
    (result,) = [e for e in events if e["type"] == "tool.finished"]
    assert result["is_error"] and "[the sandbox (read-only) may be why this failed" in result["result"]
    assert not (e2e.project / "again").exists()


def test_without_bwrap_status_and_header_say_so_and_a_command_ends_the_run(e2e: E2E) -> None:
    e2e.env["ROOST_BWRAP"] = "/nonexistent/bwrap"
    e2e.ok("daemon")  # started with that environment
    status = e2e.ok("status").stdout
    assert (
        "sandbox  UNAVAILABLE: /nonexistent/bwrap not found (install the bubblewrap package); "
        "commands will not run (with --sandbox off they run unsandboxed)"
    ) in status
    model = e2e.script([bash("touch ../outside")], [text("Done.")])
    done = e2e.roost("dispatch", "--yes", "go", "--model", model)
    out = done.stdout.splitlines()
    assert out[1] == (
        "sandbox: UNAVAILABLE (/nonexistent/bwrap not found (install the bubblewrap package)) "
        "— commands will not run (--sandbox off runs them unsandboxed)"
    )
    assert done.returncode == 1 and out[-1].startswith("■ error · 1 turns")
    assert out[-1].endswith(
        "the sandbox cannot start: /nonexistent/bwrap not found (install the bubblewrap package). This run's "
        'commands run only inside it; to run them without one, dispatch with --sandbox off, or set [sandbox] mode = "off" '
        "in config.toml"
    )
    assert not (e2e.tmp / "outside").exists()
    model = e2e.script([bash("touch ../outside")], [text("Done.")])
    e2e.ok("dispatch", "--yes", "go", "--model", model, "--sandbox", "off")
    assert (e2e.tmp / "outside").exists()


def test_a_killed_daemon_takes_its_sandboxed_commands_with_it(e2e: E2E) -> None:
    marker = f"3{secrets.randbelow(10**6)}.75"
    model = e2e.script([bash(f"sleep {marker} & setsid sleep {marker} & wait")])
    detach(e2e, "a long tool call", "--model", model)
    wait_until(lambda: len(with_marker(marker)) >= 3, what="the sandboxed commands")
    daemon = e2e.status()["pid"]
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 5, what="the daemon to die")
    # No ledger needed: bwrap dies with its parent, and the pid namespace with bwrap.
    wait_until(lambda: not with_marker(marker), 2, what="the sandboxed commands to end")
