"""Figure 11: a daemon reached over ssh (``roost --host``), next to the same daemon reached
locally: RPC round trip, per-step overhead of a run, and ``roost status``.

One daemon (the benchmark's own) is reached two ways: through its socket, and through a
real OpenSSH server started on 127.0.0.1 for the benchmark (tests/_sshd.py: a throwaway
host key and client key, ``ssh -F`` its own config), whose remote command runs this venv's
``roost bridge`` with the daemon's socket. Loopback has no network latency: what is left is
ssh's own cost (encryption, its mux, the remote session) and the bridge's relay.

- *RPC round trip*: ``detach`` on a bogus session, sequential, ``perf_counter_ns`` around
  ``Client.call``, on one ``Client.connect_ssh`` connection and on one ``Client.connect``
  connection, alternating in blocks of 200; medians.
- *Per step*: as bench/step_overhead.py (``scripted``, ``--sandbox off``, ``--yes``): wall
  time of ``roost dispatch --json`` for 20 tool steps minus 1, / 19, with and without
  ``--host``, runs interleaved; the events of every step cross ssh.
- *status*: ``roost --host URL status`` with the shared connection already open, next to
  ``roost status``, and ``ssh HOST true`` on the shared connection (a remote session and its
  shell, which every remote command pays; here with no rc files: a real user's add
  theirs), interleaved.

    uv run python bench/ssh_overhead.py [--calls 3000] [--runs 7]
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    BenchEnv,
    Figure,
    median,
    parser,
    percentile,
    prepare,
    report,
    run_timed,
    roost_exe,
    spread,
    tool_steps_script,
)

from rpc_roundtrip import time_calls  # noqa: E402
from tests._sshd import Sshd, SshdUnavailable  # noqa: E402

LONG, SHORT = 20, 1


def rpc_pair(env: BenchEnv, url: str, command: str, calls: int) -> tuple[list[float], list[float]]:
    """Round trips (µs) of ``detach`` over ssh and over the socket, alternating in blocks."""
    from roost.protocol import Client

    bogus = {"session": "s-no-such-session"}
    remote, local = [], []
    with Client.connect_ssh(url, command=command, client="bench", timeout=None) as over_ssh, \
            env.client(timeout=None) as direct:
        time_calls(over_ssh, "detach", bogus, 300)  # warm-up
        time_calls(direct, "detach", bogus, 300)
        block = 200
        for _ in range(max(1, calls // block)):
            remote += time_calls(over_ssh, "detach", bogus, block)
            local += time_calls(direct, "detach", bogus, block)
    return remote, local


def per_step(env: BenchEnv, ssh_env: dict[str, str], runs: int) -> dict[str, dict[int, list[float]]]:
    """Wall seconds of 1-step and 20-step dispatches, locally and over ssh, interleaved."""
    scripts = {n: env.write_script(f"steps{n}.json", tool_steps_script(n)) for n in (SHORT, LONG)}
    walls: dict[str, dict[int, list[float]]] = {"local": {SHORT: [], LONG: []}, "ssh": {SHORT: [], LONG: []}}
    for i in range(runs + 1):  # the first round is a warm-up
        for where, extra in (("local", None), ("ssh", ssh_env)):
            for steps in (SHORT, LONG):
                ran = env.run_roost("dispatch", "benchmark task", "--model", f"scripted/{scripts[steps]}",
                                    "--sandbox", "off", "--yes", "--max-turns", "40", "--json",
                                    "--cwd", str(env.project), env=extra, stdout=subprocess.PIPE)
                last = json.loads(ran.proc.stdout.splitlines()[-1])
                assert last["type"] == "run.finished" and last["reason"] == "done", last
                if i:
                    walls[where][steps].append(ran.wall)
    return walls


def status_walls(env: BenchEnv, ssh_env: dict[str, str], sshd: Sshd, runs: int) -> dict[str, list[float]]:
    """Wall seconds of ``roost status`` locally and over ssh, and of ``ssh HOST true``."""
    from roost.protocol import SshHost, ssh_argv

    true_argv = ssh_argv(SshHost.parse(sshd.url), [], command="true")
    out: dict[str, list[float]] = {"local": [], "ssh": [], "ssh true": []}
    for i in range(runs + 1):
        walls = {
            "local": run_timed([roost_exe(), "status"], env.env, env.project).wall,
            "ssh": run_timed([roost_exe(), "status"], {**env.env, **ssh_env}, env.project).wall,
            "ssh true": run_timed(true_argv, {**env.env, **ssh_env}, env.project).wall,
        }
        if i:
            for key, wall in walls.items():
                out[key].append(wall)
    return out


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000, help="timed round trips each way (default 3000)")
    p.add_argument("--runs", type=int, default=7, help="rounds of dispatches and status (default 7)")
    args = p.parse_args()
    context = prepare(args)
    sshd = Sshd(Path(tempfile.mkdtemp(prefix="rb-sshd-", dir="/tmp")))
    try:
        sshd.start()
    except SshdUnavailable as exc:
        sys.exit(f"bench: cannot measure without a real sshd: {exc}")
    try:
        with BenchEnv("ssh") as env:
            env.start_daemon()
            command = sshd.remote_command({key: env.env[key] for key in (
                "ROOST_SOCKET", "HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")})
            # The local side of `--host`: its control sockets next to the env's socket.
            ssh_env = {"ROOST_HOST": sshd.url, "ROOST_SSH_COMMAND": sshd.ssh_command,
                       "ROOST_REMOTE_COMMAND": command}
            # Client.connect_ssh in this process reads them too.
            os.environ.update(ssh_env, ROOST_SOCKET=env.env["ROOST_SOCKET"])
            try:
                remote, local = rpc_pair(env, sshd.url, command, args.calls)
                walls = per_step(env, ssh_env, args.runs)
                status = status_walls(env, ssh_env, sshd, args.runs)
            finally:
                sshd.close_masters(env.root / "ssh")
    finally:
        sshd.stop()
        shutil.rmtree(sshd.folder, ignore_errors=True)
    step = {where: (median(w[LONG]) - median(w[SHORT])) / (LONG - SHORT) * 1000 for where, w in walls.items()}
    context.append(f"sshd: OpenSSH on 127.0.0.1, remote command {shlex.split(command)[-1]} bridge, "
                   f"ControlMaster shared connection")
    context.append(f"dispatch walls, s (min / median / max): local 1 step {spread(walls['local'][SHORT])}, "
                   f"20 steps {spread(walls['local'][LONG])}; ssh 1 step {spread(walls['ssh'][SHORT])}, "
                   f"20 steps {spread(walls['ssh'][LONG])}")
    context.append(f"`ssh HOST true` on the shared connection (a remote session: sshd, the shell, no rc "
                   f"files): {spread(status['ssh true'], 1000)} ms")
    figures = [
        Figure(
            key="ssh.rpc_median_us", title="RPC round trip over ssh (Client, detach)",
            value=median(remote), unit="µs", better="lower",
            how=f"median of {len(remote):,} sequential `detach` calls on one Client.connect_ssh connection "
                f"(ssh mux → sshd → roost bridge → socket), blocks of 200 alternating with the local client",
            details=[f"p50 {median(remote):.0f} µs, p90 {percentile(remote, 90):.0f} µs, "
                     f"p99 {percentile(remote, 99):.0f} µs"],
        ),
        Figure(
            key="ssh.rpc_local_median_us", title="RPC round trip, same daemon, local socket",
            value=median(local), unit="µs", better="lower", informational=True,
            how="the same calls on one Client.connect connection, interleaved with the above",
            details=[f"p99 {percentile(local, 99):.0f} µs; ssh adds {median(remote) - median(local):.0f} µs a call"],
        ),
        Figure(
            key="ssh.step_ms", title="per-step overhead over ssh (scripted)",
            value=step["ssh"], unit="ms", better="lower",
            how=f"(median wall of `roost --host URL dispatch` with {LONG} tool steps − with {SHORT}) / "
                f"{LONG - SHORT}, --sandbox off, {args.runs} rounds after a warm-up, interleaved with local",
        ),
        Figure(
            key="ssh.step_local_ms", title="per-step overhead, same daemon, local",
            value=step["local"], unit="ms", better="lower", informational=True,
            how="the same dispatches without --host",
            details=[f"ssh adds {step['ssh'] - step['local']:.2f} ms a step"],
        ),
        Figure(
            key="ssh.status_ms", title="roost --host URL status (shared connection open)",
            value=median(status["ssh"]) * 1000, unit="ms", better="lower",
            how=f"Popen to exit, median of {args.runs} after a warm-up; includes `ssh HOST true` "
                f"(see above) and the remote `roost bridge` starting",
            details=[f"min / median / max: {spread(status['ssh'], 1000)} ms"],
        ),
        Figure(
            key="ssh.status_local_ms", title="roost status, same daemon, local",
            value=median(status["local"]) * 1000, unit="ms", better="lower", informational=True,
            how="the same, without --host, interleaved",
            details=[f"min / median / max: {spread(status['local'], 1000)} ms"],
        ),
    ]
    report("Over ssh", figures, args, context)


if __name__ == "__main__":
    main()
