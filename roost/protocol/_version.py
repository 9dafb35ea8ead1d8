"""The protocol's and the API's version numbers (the catalogue itself is in ``_methods``)."""

from __future__ import annotations

#: Version of the wire protocol (message framing and kinds).
PROTOCOL_VERSION = 1
#: Level of the method API; raised whenever methods or parameters are added (9: env on
#: agents.list, prompt, trust.show and trust.add, which read it already; a param no method
#: has is refused with INVALID_PARAMS; 10: dispatch's append_system_prompt; 11: plugins.list;
#: 12: providers.list's model, status's cwd and config, dispatch's warnings and approved_lines,
#: APPROVAL_NEEDED, permission.respond's scope session_any, permission.requested's
#: session_rules_any, an edit's diff in tool.finished; 13: compact's instructions, detach's
#: reason, status's background_commands, mcp.resources; 14: dispatch's mcp_servers, dispatch's
#: and steer's images, memory.search, memory.list, memory.forget, prompt's task, schedules.*,
#: memory.learned).
API_LEVEL = 14
#: The oldest API level this daemon still serves unchanged.
API_COMPATIBLE = 1
