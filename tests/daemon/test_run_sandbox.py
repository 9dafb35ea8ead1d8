"""One sandbox per run, for real (bwrap, the spawner, bash): a run's commands share it, and
a sub-agent's unless its own is narrower; runs never do; it ends with its run; a command
gets nothing of the spawner's; what a command leaves behind ends with it; a trusted
project's hooks run inside it while the user's own do not."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
from pathlib import Path

import pytest
import trio

from roost.daemon.rpc._server import Daemon
from roost.daemon.sandbox import Bubblewrap, RunSandbox, Sandbox, build_policy
from roost.daemon.tools import ProcessLedger, ToolRegistry
from roost.protocol.trio_client import TrioClient, open_client
from tests._procs import with_marker

from .conftest import bash, events_until, finished, text, trust, user_dir, write, write_script
from .test_sandbox import INSIDE, results, run, sandboxed

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)")

#: What a command prints to name its sandbox: when the sandbox's pid 1 (bwrap) started.
WHICH_SANDBOX = "cut -d' ' -f22 /proc/1/stat"


def sandboxes_of(folder: Path) -> set[int]:
    """The bwrap sandboxes whose command line names ``folder``: the pid of each one's first
    bwrap (the one outside; the second is the sandbox's pid 1)."""
    return {pid for pid in with_marker(str(folder)) if _comm(pid) == "bwrap" and _comm(_parent(pid)) != "bwrap"}


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


async def wait_for(condition: object, what: str, timeout: float = 5) -> None:
    with trio.fail_after(timeout):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.01)


# -- through the daemon --------------------------------------------------------------------


async def test_a_runs_commands_share_one_sandbox_which_ends_with_the_run_and_runs_never_share(
    daemon: Daemon, project: Path
) -> None:
    waiting = f"cat /tmp/note; {WHICH_SANDBOX}; touch a-waits; while [ ! -e a-goes ]; do sleep 0.01; done"
    model = write_script(project, [bash(f"echo one > /tmp/note; {WHICH_SANDBOX}")], [bash(waiting)], [text("done")])
    async with open_client(daemon.socket_path) as first, open_client(daemon.socket_path) as second:
        started = await first.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
        await wait_for((project / "a-waits").exists, "the first run's second command")
        # One sandbox for the run, built at its first command and kept for the second.
        assert len(sandboxes_of(project)) == 1
        # Another run in the same folder, meanwhile, has a sandbox of its own.
        other = results(await run(second, project, [bash(f"cat /tmp/note; {WHICH_SANDBOX}")]))
        (project / "a-goes").touch()
        events = await events_until(first, finished(started["run"]))
    one, two = (r["result"].split() for r in results(events))
    assert two[0] == "one" and two[1] == one[0]
    (theirs,) = other
    assert "/tmp/note: No such file or directory" in theirs["result"]
    assert theirs["result"].split()[-1] != one[0]
    # Gone with the run: bwrap, and the spawner and commands in its pid namespace.
    await wait_for(lambda: not sandboxes_of(project), "the sandboxes to end", timeout=2)


async def test_a_run_without_commands_builds_no_sandbox(client: TrioClient, project: Path) -> None:
    (ended,) = [e for e in await run(client, project) if e["type"] == "run.finished"]
    assert ended["reason"] == "done" and not sandboxes_of(project)
    ledger = Path(os.environ["ROOST_SOCKET"] + ".tools") / "journal"
    assert not ledger.exists() or ledger.read_text() == ""


async def test_a_timeout_ends_the_commands_group_and_the_run_goes_on_in_its_sandbox(
    client: TrioClient, project: Path
) -> None:
    marker = f"3{secrets.randbelow(10**6)}.5"
    slow = bash(f"echo kept > /tmp/kept; sleep {marker} & sleep {marker}; wait", timeout=0.5)
    after = bash("cat /tmp/kept; pgrep -x sleep || echo none left")
    timed_out, then = results(await run(client, project, [slow], [after]))
    assert timed_out["is_error"] and "[killed: timed out after 0.5 s]" in timed_out["result"]
    assert then["result"] == "kept\nnone left\n" and not with_marker(marker)


async def test_a_killed_run_sandbox_is_built_again_once_then_the_run_ends(client: TrioClient, project: Path) -> None:
    # `kill -9 -1` kills every process the command may signal: the spawner among them.
    steps = [[bash("echo x > /tmp/lost; kill -9 -1")], [bash("cat /tmp/lost; kill -9 -1")], [bash("echo never")]]
    events = await run(client, project, *steps)
    first, second, third = results(events)
    assert first["is_error"] and "[exit status -9]" in first["result"]
    # Built again (an empty /tmp), once.
    assert "/tmp/lost: No such file or directory" in second["result"]
    why = "the sandbox cannot start: it ended twice during the run"
    assert third["is_error"] and why in third["result"]
    ended = events[-1]
    assert ended["reason"] == "error" and ended["error"].startswith(why)


async def test_a_sub_agent_shares_its_callers_sandbox_unless_its_own_is_narrower(
    client: TrioClient, project: Path
) -> None:
    look = bash(f"cat /tmp/note; {WHICH_SANDBOX}")
    for name, mode in (("same", ""), ("careful", "sandbox: read-only\n")):
        model = write_script(project, [look], [text(f"{name} done")], name=f"{name}.json")
        write(user_dir() / "agents" / f"{name}.md", f"---\nname: {name}\nmodel: {model}\ntools: [bash]\n{mode}---\nLook.\n")
    asks = [{"type": "tool_use", "name": name, "input": {"message": "look"}} for name in ("same", "careful")]
    lead = write_script(project, [bash(f"echo mine > /tmp/note; {WHICH_SANDBOX}")], [asks[0]], [asks[1]], [text("done")])
    write(user_dir() / "agents" / "lead.md", f"---\nname: lead\nmodel: {lead}\ntools: [bash, same, careful]\n---\nLead.\n")
    started = await client.call("dispatch", yes=True, task="t", agent="lead", cwd=str(project), attach=True)
    events = await events_until(client, finished(started["run"]))
    first, *_ = (r["result"] for r in results(events) if not r.get("path"))
    nested = {r["path"][0]: r["result"] for r in results(events) if r.get("path")}
    calls = [e["call_id"] for e in events if e["type"] == "tool.started" and not e.get("path")]
    same, careful = nested[calls[1]], nested[calls[2]]
    mine = first.split()[-1]
    assert same.split() == ["mine", mine]
    assert "/tmp/note: No such file or directory" in careful and careful.split()[-1] != mine


async def test_a_stuck_spawner_is_killed_with_its_sandbox_and_the_run_goes_on(client: TrioClient, project: Path) -> None:
    # Stopped, the spawner cannot end the command the timeout kills: the whole sandbox is.
    # It stops the spawner only once the spawner has had time to say the command started
    # (stopped before that, the command is reported not run: a different story).
    stuck = bash("sleep 0.5; echo x > /tmp/lost; kill -STOP 2; sleep 30", timeout=1.5)
    # About 3 s (KILL_GRACE, then a new sandbox); the bound only catches a hang, on a
    # machine as loaded as CI's can be.
    with trio.fail_after(30):
        events = await run(client, project, [stuck], [bash("cat /tmp/lost")])
    killed, then = results(events)
    assert killed["is_error"] and "[killed: timed out after 1.5 s]" in killed["result"]
    assert "/tmp/lost: No such file or directory" in then["result"]  # a new sandbox
    assert events[-1]["reason"] == "done"


# -- through the tool, in one run's sandbox --------------------------------------------------


async def test_a_command_gets_dev_null_for_stdin_and_no_other_descriptor(project: Path) -> None:
    async with sandboxed(project) as ctx:
        listed = await ToolRegistry().call("bash", {"command": "readlink /proc/self/fd/0; ls /proc/self/fd"}, ctx)
    # 3: the folder ls itself opens.
    assert listed.text == "/dev/null\n0\n1\n2\n3\n"


#: Run in the sandbox: tries every descriptor of the spawner (pid 2) by /proc and by
#: pidfd_getfd(2), printing GOT for each it could have.
REACH_THE_SPAWNER = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
assert b"marshal" in open("/proc/2/cmdline", "rb").read(), "pid 2 is the spawner"
pidfd = os.pidfd_open(2)
fds = os.listdir("/proc/2/fd")
print(len(fds), "descriptors")
for n in fds:
    try:
        os.close(os.open(f"/proc/2/fd/{n}", os.O_RDONLY))
        print("GOT", n, "by /proc")
    except OSError as exc:
        print("refused", n, exc.strerror)
    if libc.syscall(438, pidfd, int(n), 0) >= 0:
        print("GOT", n, "by pidfd_getfd")
"""


async def test_a_command_cannot_reach_the_spawners_descriptors(project: Path) -> None:
    (project / "reach.py").write_text(REACH_THE_SPAWNER)
    async with sandboxed(project) as ctx:
        # The real interpreter: a virtual environment's link may lie where the sandbox hides.
        tried = await ToolRegistry().call("bash", {"command": f"{os.path.realpath(sys.executable)} -I reach.py"}, ctx)
    assert not tried.is_error, tried.text
    assert "descriptors" in tried.text and "GOT" not in tried.text
    assert "refused" in tried.text


async def test_what_a_command_left_outside_its_group_ends_once_no_command_runs(project: Path) -> None:
    marker = secrets.randbelow(10**6)
    left, grouped, other = (f"3{marker}.{n}" for n in (25, 5, 75))
    sandbox = Sandbox(Bubblewrap())
    await sandbox.probe()
    confined = sandbox.confine(build_policy(str(project)))
    assert confined is not None
    ledger = ProcessLedger(project.parent / "ledger")
    env = dict(os.environ)
    async with RunSandbox(confined, str(project), ledger=ledger) as box:
        running = await box.spawn(["sleep", other], cwd=str(project), env=env)
        assert set(ledger.recorded()) == {box.pid}
        # Started once the one that leaves its group has left it.
        leaves = f"setsid sh -c 'echo left > left; exec sleep {left}' & sleep {grouped} & "
        leaves += "until [ -s left ]; do sleep 0.01; done; echo started"
        quick = await box.spawn(["bash", "-c", leaves], cwd=str(project), env=env)
        assert await quick.stdout.receive_some() == b"started\n"
        assert await quick.wait() == 0
        # Its group ends with it; what left the group lasts while another command runs.
        await wait_for(lambda: not with_marker(grouped), "the command's group to end", timeout=2)
        assert with_marker(left)
        running.kill()
        assert await running.wait() == -9
        await wait_for(lambda: not with_marker(left), "what it left to end", timeout=2)
        await quick.stdout.aclose()
        await running.stdout.aclose()
    assert box.pid is None and ledger.recorded() == {}
    ledger.close()


async def test_a_spawn_fails_as_an_unsandboxed_one_would(project: Path) -> None:
    async with sandboxed(project) as ctx:
        assert ctx.sandbox is not None
        with pytest.raises(FileNotFoundError) as program:
            await ctx.sandbox.spawn(["no-such-program"], cwd=str(project), env=dict(os.environ))
        with pytest.raises(FileNotFoundError) as folder:
            await ctx.sandbox.spawn(["true"], cwd=str(project / "gone"), env=dict(os.environ))
    assert str(program.value) == "[Errno 2] No such file or directory: 'no-such-program'"
    assert str(folder.value) == f"[Errno 2] No such file or directory: '{project / 'gone'}'"


# -- hooks ---------------------------------------------------------------------------------


async def test_a_trusted_projects_hooks_run_in_the_sandbox_and_the_users_own_do_not(
    client: TrioClient, project: Path, tmp_path: Path
) -> None:
    beside = tmp_path / "beside"
    beside.mkdir()
    # Each hook tries to leave a file beside the project, and says whether it is inside.
    def leaves(who: str) -> str:
        return f"echo {who} > {beside}/{who}; if {INSIDE}; then touch {project}/{who}-inside; fi"

    deny = json.dumps({"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "not that"}})
    guard = f"{leaves('claude')}; grep -q forbidden && echo '{deny}'; true"
    claude = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard}]}]}
    write(project / ".claude" / "settings.json", json.dumps({"hooks": claude}))
    change = f"{leaves('roost')}; grep -q fine && echo '{json.dumps({'result': 'changed by the project'})}'; true"
    write(project / ".roost" / "config.toml", f"[[hooks.post_tool]]\ncommand = {json.dumps(change)}\n")
    write(user_dir() / "config.toml", f"[[hooks.pre_tool]]\ncommand = {json.dumps(leaves('user'))}\n")
    await trust(client, project)
    events = await run(client, project, [bash("echo forbidden")], [bash("echo fine")])
    blocked, changed = results(events)
    # The project's hooks still block and change calls...
    assert blocked["is_error"] and blocked["result"] == "blocked by a hook: not that"
    assert changed["result"] == "changed by the project"
    # ...from inside the sandbox, where nothing beside the project is writable.
    assert (project / "claude-inside").exists() and (project / "roost-inside").exists()
    assert not (beside / "claude").exists() and not (beside / "roost").exists()
    # The user's own hook ran as the user configured it.
    assert (beside / "user").read_text() == "user\n" and not (project / "user-inside").exists()
