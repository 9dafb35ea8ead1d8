"""A real OpenSSH server on 127.0.0.1, for the remote-host tests and bench/ssh_overhead.py.

:class:`Sshd` makes a throwaway host key and a client key (``ssh-keygen``), an
``sshd_config`` that lets only that key in (as the user running the tests; root in CI:
``PermitRootLogin prohibit-password``), and an ``ssh_config`` that trusts only that host
key; it runs ``sshd -D`` on a free port, not as a system service, with a home of its own
for the remote shell (``SetEnv HOME``: the user's rc files are not run). ``ssh_command`` is what
``ROOST_SSH_COMMAND`` takes; ``remote_command(env)`` is a remote roost command line that runs
this venv's ``roost`` with ``env`` (its own socket and home: a second daemon).

If sshd cannot run here, :meth:`Sshd.start` raises :class:`SshdUnavailable` saying why;
callers fail with that message (the tests must not skip).
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: This venv's roost: what the remote side runs.
ROOST = str(Path(sys.executable).parent / "roost")


class SshdUnavailable(RuntimeError):
    """sshd is not installed, or does not start here (the message says what it said)."""


class Sshd:
    """An sshd of our own in ``folder`` (keys, configs, its log).

    Resource handling:
        :meth:`start` starts it, :meth:`stop` stops it and the shared ssh connections
        whose control sockets are in the folders given to :meth:`close_masters`.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = 0
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``ssh://user@127.0.0.1:port``."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    @property
    def ssh_command(self) -> str:
        """``ssh -F <our config>``: for ``ROOST_SSH_COMMAND``."""
        return f"ssh -F {shlex.quote(str(self.folder / 'ssh_config'))}"

    def remote_command(self, env: dict[str, str]) -> str:
        """A remote roost command line: this venv's roost, with ``env`` set."""
        assigned = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        return f"env {assigned} {shlex.quote(ROOST)}"

    def start(self) -> None:
        """Make the keys and configs, start sshd, and wait until a key login works.

        Raises:
            SshdUnavailable: no sshd or ssh-keygen, or sshd exits or never lets us in.
        """
        sshd = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
        if sshd is None or not shutil.which("ssh-keygen") or not shutil.which("ssh"):
            raise SshdUnavailable("OpenSSH is not installed (apt-get install openssh-server openssh-client)")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.folder / key)],
                           check=True, capture_output=True)
        (self.folder / "home").mkdir(mode=0o700, exist_ok=True)
        (self.folder / "authorized_keys").write_text((self.folder / "client_key.pub").read_text())
        self.port = _free_port()
        (self.folder / "sshd_config").write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.folder / 'host_key'}\n"
            f"AuthorizedKeysFile {self.folder / 'authorized_keys'}\n"
            f"PidFile {self.folder / 'sshd.pid'}\n"
            # Not a system service: no PAM; keys in a temp folder (not the user's home).
            "UsePAM no\n"
            "StrictModes no\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "AllowAgentForwarding no\n"
            "AllowTcpForwarding no\n"
            "X11Forwarding no\n"
            "PrintMotd no\n"
            # The remote shell's home is ours: the user's own rc files (which may start
            # anything, and take their time) are not part of what is measured or tested.
            f"SetEnv HOME={self.folder / 'home'}\n"
            "LogLevel VERBOSE\n"
        )
        host_key = (self.folder / "host_key.pub").read_text().strip()
        (self.folder / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key}\n")
        (self.folder / "ssh_config").write_text(
            "Host *\n"
            f"  IdentityFile {self.folder / 'client_key'}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.folder / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            "  LogLevel ERROR\n"
        )
        # sshd refuses to start without its privilege separation folder.
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        log = open(self.folder / "sshd.log", "wb")
        self.process = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(self.folder / "sshd_config")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 15
        while True:
            if self.process.poll() is not None:
                raise SshdUnavailable(f"sshd exited with status {self.process.returncode}: {self.log()}")
            probe = subprocess.run(
                [*shlex.split(self.ssh_command), "-o", "BatchMode=yes", "-o", "ControlPath=none",
                 "-p", str(self.port), f"{self.user}@127.0.0.1", "true"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True,
            )
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise SshdUnavailable(f"cannot log in to our sshd: {probe.stderr.strip()}; sshd says: {self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        """What sshd wrote (its last 2,000 characters)."""
        try:
            return (self.folder / "sshd.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def master_pids(self, control_folder: Path) -> list[int]:
        """The pids of the shared ssh connections whose control sockets are in ``control_folder``."""
        pids = []
        for control in sorted(control_folder.glob("*")) if control_folder.is_dir() else []:
            check = subprocess.run(
                [*shlex.split(self.ssh_command), "-o", f"ControlPath={control}", "-O", "check", "x"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True,
            )
            if "pid=" in check.stderr:
                pids.append(int(check.stderr.split("pid=")[1].split(")")[0]))
        return pids

    def close_masters(self, control_folder: Path) -> None:
        """End the shared ssh connections whose control sockets are in ``control_folder``."""
        for pid in self.master_pids(control_folder):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Stop sshd (sessions still open end with their connections)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
