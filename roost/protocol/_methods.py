"""The method catalogue: names, parameters and what each returns.

This table is the API: ``hello`` sends it to clients (like Neovim's api-info). Released
names and parameters never change; new ones are added and the API level goes up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ._errors import ErrorCode, RpcError
from ._version import API_COMPATIBLE, API_LEVEL, PROTOCOL_VERSION

#: The Python types a param's catalogue type accepts.
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,), "int": (int,), "bool": (bool,), "list": (list,), "number": (int, float),
    "int|str": (int, str), "map": (dict,),
}
#: The largest integer a param may be: every count, seq and limit is far below, and SQLite
#: stores up to 2^63 - 1.
_MAX_INT = 2**53

__all__ = ["API_COMPATIBLE", "API_LEVEL", "METHODS", "METHODS_BY_NAME", "PROTOCOL_VERSION", "Method", "Param"]


@dataclass(frozen=True, slots=True)
class Param:
    """One key of a method's parameter map."""

    name: str
    type: str
    required: bool = False
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC method: its name, parameters, and the keys of its result."""

    name: str
    doc: str
    params: tuple[Param, ...] = ()
    returns: tuple[str, ...] = field(default=())

    def describe(self) -> dict[str, Any]:
        """The method as listed by ``hello``."""
        return {
            "name": self.name,
            "doc": self.doc,
            "params": [
                {"name": p.name, "type": p.type, "required": p.required, "doc": p.doc}
                for p in self.params
            ],
            "returns": list(self.returns),
        }

    def check(self, params: Sequence[Any]) -> dict[str, Any]:
        """A request's params (one map) as this method takes them: a nil is an absent param
        (msgpack clients often send nil for "not given"), and every param is known, of its
        type, finite, at most 2^53 and without a NUL.

        Raises:
            RpcError: INVALID_PARAMS, naming the param and what is wrong.
        """
        if len(params) > 1 or (params and not isinstance(params[0], dict)):
            raise RpcError(ErrorCode.INVALID_PARAMS, f"{self.name} takes one map of params")
        given = {k: v for k, v in (params[0] if params else {}).items() if v is not None}
        checks = _CHECKS.get(self.name)
        if checks is None:
            checks = _CHECKS[self.name] = _checks(self)
        names, each = checks
        if not given.keys() <= names:
            # A misspelt param (``call-id``, ``sesion``) must not be silently ignored.
            unknown = ", ".join(repr(k) for k in sorted(given.keys() - names, key=str))
            known = ", ".join(p.name for p in self.params) or "none"
            raise RpcError(ErrorCode.INVALID_PARAMS, f"{self.name} has no param {unknown} (it takes {known})")
        for name, required, types, numeric, type_name in each:
            value = given.get(name)
            if value is None:
                if required:
                    raise RpcError(ErrorCode.INVALID_PARAMS, f"{self.name}: {name!r} is required")
                continue
            if type(value) is str and str in types:  # the usual param, checked at once
                if "\0" in value:
                    raise RpcError(ErrorCode.INVALID_PARAMS, f"{self.name}: {name!r} {_NUL}")
                continue
            if not isinstance(value, types) or (numeric and isinstance(value, bool)):
                raise RpcError(
                    ErrorCode.INVALID_PARAMS, f"{self.name}: {name!r} must be {type_name}, not {type(value).__name__}"
                )
            problem = _out_of_range(value)
            if problem:
                raise RpcError(ErrorCode.INVALID_PARAMS, f"{self.name}: {name!r} {problem}")
        return given


#: What checking a method's params needs, worked out at its first request (the catalogue
#: never changes): the names it takes, and per param (name, required, Python types, whether
#: a bool is refused as a number, its catalogue type).
_CHECKS: dict[str, tuple[frozenset[str], tuple[tuple[str, bool, tuple[type, ...], bool, str], ...]]] = {}


def _checks(method: Method) -> tuple[frozenset[str], tuple[tuple[str, bool, tuple[type, ...], bool, str], ...]]:
    each = tuple((p.name, p.required, _TYPES[p.type], p.type in ("int", "number", "int|str"), p.type) for p in method.params)
    return frozenset(p.name for p in method.params), each


_SESSION = Param("session", "str", True, "session id")
_ENV = Param(
    "env",
    "map",
    doc="the client's environment: commands run with it (less secrets), provider keys in it "
    "serve this call and stay in the daemon's memory (default: the daemon's)",
)

METHODS: tuple[Method, ...] = (
    Method(
        "hello",
        "Handshake: the daemon's version and the API catalogue.",
        (
            Param("client", "str", doc="client name"),
            Param("protocol", "int", doc="protocol version"),
            Param("catalogue", "bool", doc="false: leave out methods, events and errors (~18 KiB)"),
        ),
        ("api_level", "api_compatible", "version", "protocol", "pid", "home", "methods", "events", "errors"),
    ),
    Method(
        "status",
        "Daemon status, and whether commands can run sandboxed here (and if not, why); with "
        "`cwd`, the config files a dispatch there reads, their unknown keys, or why they cannot "
        "be used.",
        (Param("cwd", "str", doc="a folder whose config to check: `config` is {files, warnings, error}"), _ENV),
        ("pid", "version", "socket", "uptime", "sessions", "runs", "background_commands", "database", "sandbox", "config"),
    ),
    Method("shutdown", "Stop the daemon: runs are aborted and stored, then it exits.", (), ("ok",)),
    Method("sessions.list", "Every session, newest last.", (), ("sessions",)),
    Method(
        "sessions.prune",
        "Delete the sessions with no activity for `older_than` seconds (never one with a run "
        "in flight), with their events; `roost gc` then frees the outputs only they held.",
        (
            Param("older_than", "number", True, "seconds since a session's last event"),
            Param("dry_run", "bool", doc="only list what would be deleted"),
            Param("sessions", "list", doc="only these session ids (those a person was shown)"),
        ),
        ("sessions", "kept", "dry_run"),
    ),
    Method(
        "gc",
        "Remove the stored outputs (blobs) no event refers to any more; what that freed inside "
        "the database (the file keeps its size: later writes reuse the room).",
        (),
        ("blobs", "bytes", "database", "database_bytes", "free_bytes"),
    ),
    Method(
        "sessions.create",
        "Create an empty session.",
        (Param("cwd", "str", doc="working directory (default: the daemon's)"),),
        ("session",),
    ),
    Method(
        "sessions.fork",
        "A new session whose history is another's up to seq `at` (default: all of it), "
        "shared, not copied. A seq between a tool call and its result is moved back to the "
        "last point a model accepts (the end of a step, or the model call before it): "
        "`forked_at` says where the fork starts. A run cut there ends `aborted` in the fork "
        "(`ended_run`); the parent's goes on.",
        (_SESSION, Param("at", "int", doc="the last seq of the parent's history to keep")),
        ("session", "parent", "forked_at", "at", "last_seq", "ended_run"),
    ),
    Method(
        "sessions.export",
        "A session as JSON lines (format roost.session), a page at a time: the first page "
        "(no `since`) starts with the header line; call again with `since` = `next` (and the "
        "same `upto`) until `next` is null. Write the lines in order, one per line. A fork's "
        "export holds its whole history.",
        (
            _SESSION,
            Param("since", "int", doc="the last seq already exported (default 0: from the header)"),
            Param("upto", "int", doc="the last seq to export (default: the last stored now)"),
        ),
        ("session", "lines", "upto", "next"),
    ),
    Method(
        "sessions.import",
        "Import a file made by sessions.export as a new session (the file's id unless taken), "
        "sent in parts, one call after another: the first without `upload`, the next with the "
        "`upload` the first returned, the last with `done`. A wrong line refuses the whole "
        "file (IMPORT_INVALID, data.line); nothing is stored before the last part, and then "
        "all at once.",
        (
            Param("lines", "list", True, "the next lines of the file (str or UTF-8 bytes, no newline)"),
            Param("upload", "str", doc="the import these lines continue"),
            Param("done", "bool", doc="these are the last lines: import the session"),
        ),
        ("upload", "lines", "session", "original", "events"),
    ),
    Method(
        "attach",
        "Stream a session's events: stored ones after `since`, then live ones, no gap.",
        (_SESSION, Param("since", "int", doc="last seq already seen (default 0: everything)")),
        ("session", "last_seq"),
    ),
    Method(
        "detach",
        "Stop streaming a session's events.",
        (
            _SESSION,
            Param(
                "reason",
                "str",
                doc="why a shell leaves the session, as Claude Code's SessionEnd hooks are told: clear, resume, "
                "logout, prompt_input_exit or other (they run if the session has had a run and none is in flight)",
            ),
        ),
        ("ok",),
    ),
    Method(
        "dispatch",
        "Start a run on a task; returns at once with the session and run ids.",
        (
            Param(
                "task",
                "str",
                True,
                "what to do; `/name args` runs the custom command `name` (.claude/commands), "
                "`//...` is sent with one `/`",
            ),
            Param("session", "str", doc="existing session (default: a new one)"),
            Param("agent", "str", doc="agent name (default: default); its model, mode, tools, limits"),
            Param("mode", "str", doc="plan, agent (default: approvals), full (no approvals) or exec"),
            Param("model", "str", doc="provider/model, a Claude model name or alias (sonnet, opus, opusplan, ...)"),
            Param("cwd", "str", doc="working directory of a new session"),
            Param("max_turns", "int", doc="model calls allowed in this run"),
            Param("max_tokens", "int", doc="output tokens each reply may have (default: the agent's, else 8192)"),
            Param("think", "int|str", doc="thinking: off, low, medium, high, or a budget in tokens"),
            Param("attempts", "int", doc="exec mode: attempts (default 6)"),
            Param("time_box", "number", doc="exec mode: seconds for the whole run (default 1800)"),
            Param("request_id", "str", doc="idempotency key: a repeat returns the first run"),
            Param("attach", "bool", doc="also attach this connection to the session"),
            Param("yes", "bool", doc="approve every call that no rule denies"),
            Param("allow", "list", doc="more allow rules for this run, e.g. ['bash(npm test)']"),
            Param("ask", "list", doc="more ask rules for this run"),
            Param("deny", "list", doc="more deny rules for this run"),
            Param("approval_timeout", "number", doc="seconds before an unanswered request is denied"),
            Param(
                "append_system_prompt",
                "str",
                doc="text added to the end of the run's system prompt (its layer `appended`)",
            ),
            Param(
                "approved_lines",
                "list",
                doc="a custom command's !`command` lines a person approved, as written (see APPROVAL_NEEDED)",
            ),
            Param(
                "sandbox",
                "str",
                doc="where commands run: workspace (default: the folder writable, no network), "
                "read-only, or off; a project's config may narrow it",
            ),
            Param(
                "mcp_servers",
                "map",
                doc="MCP servers the client brings for this run, as .mcp.json's mcpServers: "
                "{name: {command, args, env} | {type: http, url, headers}}",
            ),
            Param(
                "images",
                "list",
                doc="images sent with the task: [{name, data: bytes (msgpack bin)}], PNG, JPEG, GIF or "
                "WebP, at most 12 MiB in all (DISPATCH_IMAGE_BYTES); each scaled down when large",
            ),
            _ENV,
        ),
        ("session", "run", "model", "warnings"),
    ),
    Method(
        "chat",
        "One model turn on a message list, streamed as text.delta events with this call's "
        "`chat` id; no tools are run and nothing is stored.",
        (
            Param("messages", "list", True, "[{role, content: str | [blocks]}]"),
            Param("model", "str", doc="provider/model, a Claude model name or alias (sonnet, opus, opusplan, ...)"),
            Param("system", "str", doc="system prompt"),
            Param("tools", "list", doc="[{name, description, input_schema}] offered to the model"),
            Param("max_tokens", "int"),
            Param("think", "int|str", doc="thinking: off, low, medium, high, or a budget in tokens"),
            Param("cwd", "str", doc="where project config is looked up"),
            _ENV,
        ),
        ("chat", "model", "content", "stop_reason", "usage", "latency", "cost"),
    ),
    Method(
        "steer",
        "Add a message to the run in flight.",
        (_SESSION, Param("text", "str", True), Param("images", "list", doc="images sent with it, as dispatch's")),
        ("ok",),
    ),
    Method(
        "abort",
        "Abort the run in flight (its model stream and tools are stopped at once); with "
        "after_step, let the step in flight finish (the reply and its tool calls, their results "
        "stored; calls that would wait for a person are refused), then end the run aborted.",
        (_SESSION, Param("after_step", "bool", doc="stop gracefully, after the step in flight")),
        ("ok", "run"),
    ),
    Method(
        "permission.respond",
        "Answer an open permission request; the first answer wins, every client sees "
        "permission.resolved.",
        (
            _SESSION,
            Param("call_id", "str", True, "the tool call asked about"),
            Param("decision", "str", True, "approve or deny"),
            Param("scope", "str", doc="once (default); session: add the request's session_rules for the "
                  "session; session_any: add its session_rules_any (the commands with any arguments)"),
            Param("reason", "str", doc="why it was denied (the model sees it)"),
        ),
        ("ok",),
    ),
    Method(
        "human.respond",
        "Answer an open ask_human question; the first answer is the tool's result.",
        (_SESSION, Param("call_id", "str", True), Param("answer", "str", True)),
        ("ok",),
    ),
    Method(
        "compact",
        "Summarize an idle session's older history now (a short run of mode compact); later "
        "runs see the summary instead.",
        (
            _SESSION,
            Param("model", "str", doc="the model that summarizes (default: the session's last)"),
            Param("keep_turns", "int", doc="recent replies kept whole (default 6)"),
            Param("instructions", "str", doc="what the summary should keep or stress (Claude Code's /compact [instructions])"),
            Param("attach", "bool", doc="also attach this connection to the session"),
            _ENV,
        ),
        ("session", "run"),
    ),
    Method(
        "mcp.list",
        "The MCP servers configured for a folder, each with the state of the server its config "
        "is (stopped, starting, ready, failed, or untrusted: the folder's files are not "
        "trusted), pid or URL, tool count, last error.",
        (Param("cwd", "str", doc="where project config (.roost/config.toml, .mcp.json) is looked up"), _ENV),
        ("servers", "problems"),
    ),
    Method(
        "mcp.restart",
        "Reconnect the MCP server a name means for a folder now (starting it if it is configured "
        "but not running); sessions of other folders sharing that server see the restart too.",
        (Param("name", "str", True, "the server's name in that folder's config"), Param("cwd", "str"), _ENV),
        ("ok", "server"),
    ),
    Method(
        "mcp.resources",
        "The resources the MCP servers of a folder list (servers that may run there, started if "
        "they are not, waiting a little for them): each with server, uri, reference (how a task "
        "names it: @server:uri), name, description, mime_type and size (null: not said).",
        (Param("cwd", "str", doc="where project config (.roost/config.toml, .mcp.json) is looked up"), _ENV),
        ("resources", "untrusted"),
    ),
    Method(
        "agents.list",
        "The agents for a folder (built-in, user, project), and files that could not be used; "
        "each agent with model_id (its model as the config resolves it), unknown_tools "
        "(names in its tools that no tool here has) and trusted (false: a project's agent that "
        "widens and waits for trust, listed with widens and warnings; no run gets it).",
        (Param("cwd", "str", doc="where project agents are looked up"), _ENV),
        ("agents", "problems"),
    ),
    Method(
        "commands.list",
        "The custom slash commands for a folder (Claude Code's .claude/commands/*.md, the "
        "user's and the project's), and files that could not be used; the prompts of the "
        "folder's MCP servers are among them, as mcp__server__prompt (kind mcp prompt).",
        (Param("cwd", "str", doc="where project commands are looked up"), _ENV),
        ("commands", "problems"),
    ),
    Method(
        "plugins.list",
        "The user's Claude Code plugins for a folder (installed as Claude Code installs them, "
        "enabled by enabledPlugins in its settings files): each with its version, marketplace, "
        "folder, whether it is enabled and by which file, the agents, commands, skills, hooks and "
        "MCP servers it brings, and its problems; problems of the records; untrusted: plugins a "
        "project's settings would turn on but may not (not trusted).",
        (Param("cwd", "str", doc="where the project's settings (enabledPlugins) are looked up"), _ENV),
        ("plugins", "problems", "untrusted"),
    ),
    Method(
        "prompt",
        "The system prompt a run would get, layer by layer.",
        (
            Param("session", "str", doc="a session (its folder, last agent and mode)"),
            Param("cwd", "str", doc="a folder, when no session is given"),
            Param("agent", "str"),
            Param("mode", "str"),
            Param("task", "str", doc="a task: the layer of similar memories recalled for it"),
            _ENV,
        ),
        ("agent", "mode", "layers", "text"),
    ),
    Method(
        "pending",
        "Open permission requests and questions, of one session or of all.",
        (Param("session", "str", doc="only this session"),),
        ("pending",),
    ),
    Method(
        "providers.list",
        "Configured providers, and whether each is usable (no network); with `model`, what "
        "that name comes to there, or why it cannot be used.",
        (
            Param("cwd", "str", doc="where project config is looked up"),
            _ENV,
            Param("model", "str", doc="a model name to check: `model` in the result is {id, problem}"),
        ),
        ("providers", "default_model", "files", "untrusted", "model"),
    ),
    Method(
        "trust.show",
        "What a folder's files say that widens what roost does (MCP servers, hooks, allow "
        "rules, providers, agents, ...), each marked trusted or not with the project files it "
        "runs (runs), what it sets as written (values), the variables of the environment it "
        "reads (variables: names, secret-looking ones marked), its broad grants (warnings) and "
        "since (new or changed since the folder was last trusted); and what trust would "
        "record: the files' digests and those it runs'.",
        (Param("cwd", "str", True, "a folder of the project"), _ENV),
        ("folder", "trusted", "current", "items", "files"),
    ),
    Method(
        "trust.add",
        "Trust a folder's files as trust.show showed them; a file changed since is refused "
        "(TRUST_CHANGED). Later changes to a file make it untrusted again.",
        (
            Param("cwd", "str", True, "a folder of the project"),
            Param("files", "map", True, "{path: digest} as trust.show returned them"),
            _ENV,
        ),
        ("folder", "files"),
    ),
    Method(
        "trust.list",
        "The trusted folders, each file with its recorded digest and whether it still has it.",
        (),
        ("folders",),
    ),
    Method(
        "trust.remove",
        "Stop trusting a folder: what its files widen is ignored again.",
        (Param("folder", "str", True, "the folder (a project root, as trust.list shows it)"),),
        ("ok", "removed"),
    ),
    Method(
        "memory.search",
        "What the daemon remembers that best matches a query (BM25 over the memory files' "
        "entries, earlier tasks with their answers, compaction summaries): the folder's "
        "project's and the user's, best first.",
        (
            Param("query", "str", True, "words to look for"),
            Param("cwd", "str", doc="the folder whose project's memory is searched (default: the daemon's)"),
            Param("all", "bool", doc="search every project's memory"),
            Param("limit", "int", doc="entries at most (default 10)"),
            _ENV,
        ),
        ("entries",),
    ),
    Method(
        "memory.list",
        "The newest memory entries of a folder's project and the user (or of all), newest first.",
        (
            Param("cwd", "str", doc="the folder whose project's memory is listed (default: the daemon's)"),
            Param("all", "bool", doc="every project's memory"),
            Param("limit", "int", doc="entries at most (default 100)"),
            _ENV,
        ),
        ("entries",),
    ),
    Method(
        "memory.forget",
        "Forget a memory entry for good (the same words are not remembered again there); an "
        "entry of a memory file leaves the file too.",
        (Param("id", "int", True, "the entry's id, as memory.list or memory.search gave it"),),
        ("forgotten",),
    ),
    Method(
        "schedules.add",
        "Run a task on a schedule: the daemon starts it as a run in a new session whenever the "
        "cron expression says, in a time zone (runs wait for approvals as any do).",
        (
            Param("cron", "str", True, "five fields (minute hour day month weekday), or @daily, @hourly, ..."),
            Param("task", "str", True, "what to do, as for dispatch"),
            Param("name", "str", doc="the schedule's name (default: from the task's first words)"),
            Param("cwd", "str", doc="the folder its runs work in (default: the daemon's)"),
            Param("agent", "str"),
            Param("model", "str"),
            Param("mode", "str", doc="agent (default), full, exec or plan"),
            Param("tz", "str", doc="the time zone the expression is read in (default: this machine's)"),
            Param("missed", "str", doc="a time due while the daemon was down: run once at start (once, the default) or skip"),
        ),
        ("schedule",),
    ),
    Method("schedules.list", "Every schedule: when it is next due, its last run.", (), ("schedules",)),
    Method("schedules.remove", "Delete a schedule.", (Param("name", "str", True),), ("ok",)),
    Method(
        "schedules.run",
        "Run a schedule's task now (when it is next due stays as it was).",
        (Param("name", "str", True),),
        ("schedule",),
    ),
    Method("schedules.pause", "Stop a schedule from coming due until resumed.", (Param("name", "str", True),), ("schedule",)),
    Method(
        "schedules.resume",
        "Let a paused schedule come due again (next after now).",
        (Param("name", "str", True),),
        ("schedule",),
    ),
    Method(
        "report",
        "A run's report, folded from its stored events: per run and per step the model time, "
        "time to first token, retries, tokens (input, output, cache read and write), cost, tool "
        "time by tool; approvals and questions and how long each waited, compactions, checks, "
        "and its sub-agents' runs nested. Figures an older daemon did not record are null.",
        (
            Param("session", "str", doc="the session (default: the run's); alone: its last run"),
            Param("run", "str", doc="the run (a sub-agent's too; default: the session's last)"),
        ),
        (
            "run", "session", "agent", "mode", "model", "task", "started", "ended", "reason", "error",
            "duration", "steps", "model_time", "ttft", "retries", "tool_time", "tools", "usage", "cost",
            "approvals", "questions", "compactions", "checks", "subagents", "total",
        ),
    ),
    Method(
        "events",
        "Stored events of a session after `since` (no streaming).",
        (_SESSION, Param("since", "int"), Param("limit", "int")),
        ("events", "last_seq"),
    ),
)

METHODS_BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}


_NUL = "must not hold a NUL character"


def _out_of_range(value: Any) -> str:
    """What is wrong with a value of the right type ("" when nothing)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > _MAX_INT:
        return f"must be between -{_MAX_INT} and {_MAX_INT}"
    if isinstance(value, str) and "\0" in value:
        return _NUL
    return ""
