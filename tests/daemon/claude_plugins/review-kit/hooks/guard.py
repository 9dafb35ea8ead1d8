"""A PreToolUse hook as Claude Code runs it: the call on stdin, CLAUDE_PLUGIN_ROOT and
CLAUDE_PROJECT_DIR in the environment, exit 2 with the reason on stderr to refuse."""

import json
import os
import sys

payload = json.load(sys.stdin)
seen = {"tool_input": payload.get("tool_input"), "plugin_root": os.environ.get("CLAUDE_PLUGIN_ROOT")}
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "plugin-hook.jsonl"), "a") as log:
    log.write(json.dumps(seen) + "\n")
if payload["tool_input"]["command"].startswith("rm "):
    print("review-kit: rm is not allowed; move files aside instead", file=sys.stderr)
    sys.exit(2)
