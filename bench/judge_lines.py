"""Figure 10: judging a shell line, per line, over the table of tests/_shell_lines.py.

No daemon: the judge is pure, so this times it in the benchmark's own process. Every line
of the table (97 lines: rm spelled and wrapped every way, pipelines, substitutions,
here-documents, functions, assignments, redirections, ...; ``{f}`` filled in) is decided
as a ``bash`` call by ``roost.loop.decide`` in agent mode under the table's rules (deny
``bash(rm *)``; allow ``bash(ls*)``, ``bash(echo *)``, ``bash(git status*)``): parsing
with tree-sitter-bash, the walk, and matching every command against the rules. One round
decides the whole table; the figure is the median round divided by the lines in it, over
``--rounds`` rounds after 20 warm-up rounds. Also printed: ``judge`` alone (parse and walk,
no rules), the slowest line, and what importing the grammar adds to the daemon's start
(``python -X importtime``; the CLI never imports it).

    uv run python bench/judge_lines.py [--rounds 300]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REPO, Figure, median, parser, prepare, report  # noqa: E402

from roost.loop import Policy, decide, judge, parse_rule  # noqa: E402
from roost.loop._permissions import _judged  # noqa: E402
from tests._shell_lines import ALLOW, DENY, LINES  # noqa: E402

TARGET_MS = 0.2


def grammar_import_ms() -> tuple[float, float]:
    """What the grammar adds to the daemon's imports, and those imports in all (ms): the
    cumulative times of tree_sitter and tree_sitter_bash, and of roost.daemon.__main__, in
    a fresh interpreter (-X importtime)."""
    out = subprocess.run([PYTHON, "-X", "importtime", "-c", "import roost.daemon.__main__"], cwd=REPO,
                         capture_output=True, text=True, check=True).stderr
    cumulative = {line.split("|")[2].strip(): int(line.split("|")[1]) / 1000
                  for line in out.splitlines() if line.startswith("import time:") and "|" in line
                  and line.split("|")[1].strip().isdigit()}
    grammar = cumulative.get("tree_sitter", 0.0) + cumulative.get("tree_sitter_bash", 0.0)
    return grammar, cumulative.get("roost.daemon.__main__", 0.0)


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=300, help="timed rounds over the table (default 300)")
    args = p.parse_args()
    context = prepare(args)
    policy = Policy(tuple(parse_rule(r, "deny") for r in DENY) + tuple(parse_rule(r, "allow") for r in ALLOW),
                    home="/home/me")
    lines = [entry.line(f"f{i}") for i, entry in enumerate(LINES)]
    cwd = "/work/project"

    def decide_all() -> None:
        # Each line parsed again, as a line the daemon sees for the first time (decide
        # remembers the lines it judged lately).
        _judged.cache_clear()
        for line in lines:
            decide(policy, "agent", (), "bash", {"command": line}, cwd)

    def judge_all() -> None:
        for line in lines:
            judge(line)

    def rounds(work) -> list[float]:
        for _ in range(20):
            work()
        out = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            work()
            out.append((time.perf_counter() - t) * 1000 / len(lines))
        return out

    decided = rounds(decide_all)
    judged = rounds(judge_all)
    per_line = []
    for line in lines:
        times = []
        for _ in range(50):
            _judged.cache_clear()
            t = time.perf_counter()
            decide(policy, "agent", (), "bash", {"command": line}, cwd)
            times.append((time.perf_counter() - t) * 1000)
        per_line.append((median(times), line))
    slowest_ms, slowest = max(per_line)
    imports = [grammar_import_ms() for _ in range(5)]
    figures = [
        Figure(
            key="judge.decide_per_line_ms", title="judging a bash line (decide, per line)",
            value=median(decided), unit="ms", better="lower", target=TARGET_MS,
            how=f"median of {args.rounds} rounds deciding the {len(lines)} lines of tests/_shell_lines.py "
                "(agent mode, deny + allow rules), divided by the lines",
            details=[f"min {min(decided):.4f} ms, max {max(decided):.4f} ms a line",
                     f"slowest line {slowest_ms:.3f} ms: {slowest!r}"],
        ),
        Figure(
            key="judge.judge_per_line_ms", title="parsing and walking a bash line (judge)",
            value=median(judged), unit="ms", better="lower", informational=True,
            how="the same rounds calling roost.loop.judge alone (tree-sitter parse + walk, no rules)",
        ),
        Figure(
            key="judge.grammar_import_ms", title="the grammar's share of the daemon's imports",
            value=median([g for g, _ in imports]), unit="ms", better="lower", informational=True,
            how="cumulative import time of tree_sitter + tree_sitter_bash within `import roost.daemon.__main__` "
                f"in a fresh interpreter (-X importtime), median of 5; all of it: {median([d for _, d in imports]):.0f} ms",
        ),
    ]
    report("judge_lines", figures, args, context)


if __name__ == "__main__":
    main()
