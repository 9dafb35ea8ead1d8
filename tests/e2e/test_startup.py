"""The commands people run most start light: ``roost --version``, ``status`` and ``pending``
import nothing they do not use (no asyncio, prompt_toolkit, trio, anthropic, ...), checked
on the real command against a real daemon. How fast they start is a figure in bench/."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.test_layout import CLI_HEAVY

from .conftest import E2E

_RUN = """
import atexit, json, sys
heavy = set(sys.argv[1].split(","))
out = sys.argv[2]
def report():
    with open(out, "w") as f:
        json.dump(sorted(m for m in sys.modules if m in heavy or m.split(".")[0] in heavy), f)
atexit.register(report)
sys.argv = ["roost", *sys.argv[3:]]
from roost.cli import main
main()
"""


#: What a command that talks to the local daemon does not use either: the socket module (the
#: client uses the C socket type), the ssh support and the config file (only --host needs
#: them), dataclasses, and the protocol's method catalogue.
LOCAL_UNUSED = ("socket", "selectors", "dataclasses", "shlex", "tomllib", "roost.protocol._ssh",
                "roost.protocol._methods")


def test_version_status_and_pending_import_only_what_they_use(e2e: E2E) -> None:
    e2e.ok("daemon")
    for args in (["--version"], ["status"], ["pending"], ["status", "--json"]):
        report = e2e.tmp / "modules.json"
        done = subprocess.run(
            [sys.executable, "-c", _RUN, ",".join(CLI_HEAVY + LOCAL_UNUSED), str(report), *args],
            cwd=e2e.project, env=e2e.env, capture_output=True, text=True, timeout=30,
        )
        assert done.returncode == 0, (args, done.stderr)
        assert json.loads(report.read_text()) == [], args
