#!/usr/bin/env bash
# Run a task through roost and print only the tool calls and the final answer, using the
# public event stream of `roost dispatch --json` and jq.
#   contrib/clients/dispatch-summary.sh "list the files here and count them" scripted/demo --yes
# Extra arguments go to `roost dispatch` (--yes, --mode full, --allow RULE, ...); without
# them, calls that need approval wait for `roost approve` from any terminal.
set -euo pipefail
task=${1:?usage: dispatch-summary.sh TASK [MODEL] [DISPATCH OPTIONS...]}
model=${2:-${ROOST_MODEL:-scripted/demo}}

roost dispatch "$task" --model "$model" --json "${@:3}" | jq -r '
  if .type == "tool.started" then "tool: \(.name) \(.input | tostring)"
  elif .type == "permission.requested" then "waiting: \(.tool) \(.input | tostring): roost approve \(.session) \(.call_id)"
  elif .type == "tool.finished" then "  -> \(if .is_error then "error" else "ok" end) (\(.size) chars)"
  elif .type == "run.finished" then "\(.reason): \(.text)"
  else empty end'
exit "${PIPESTATUS[0]}"
