"""A folder's methods: what a project sets up, as a run there would see it (providers, MCP
servers, agents, custom commands, the user's Claude Code plugins, the system prompt), and
the trust that lets it widen."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Mapping, TypeVar

import trio

from roost.protocol import MODES, ErrorCode, RpcError

from ..folder._agents import Agent, unknown_tools
from ..folder._config import Config
from ..folder._custom_commands import skill_commands
from ..folder._models import ModelNameError
from ..folder._plugin_report import plugin_report
from ..folder._prompt import compose, render
from ..folder._scripts import unchanged
from ..folder._setup import FolderSetup
from ..folder._trust import TrustError, TrustStore, item_record, since
from ..mcp import UnknownServer
from ..memory._recall import recall_layer
from ..providers import ProviderError
from ..runs._settings import SettingsError, find_agent
from ._api_part import ApiPart, Handler, checked_cwd, client_environ
from ._connection import Connection

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: Seconds commands.list and mcp.resources wait for the folder's MCP servers to start.
LISTING_WAIT = 10.0


class FolderApi(ApiPart):
    """Answers the methods on a folder and its trust."""

    def table(self) -> dict[str, Handler]:
        """This part's methods and their handlers."""
        return {
            "providers.list": self.providers_list,
            "mcp.list": self.mcp_list,
            "mcp.restart": self.mcp_restart,
            "mcp.resources": self.mcp_resources,
            "agents.list": self.agents_list,
            "commands.list": self.commands_list,
            "plugins.list": self.plugins_list,
            "prompt": self.prompt,
            "trust.show": self.trust_show,
            "trust.add": self.trust_add,
            "trust.list": self.trust_list,
            "trust.remove": self.trust_remove,
        }

    async def providers_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        environ = client_environ(params)
        setup = await self._folder(checked_cwd(params.get("cwd")), environ)
        config = setup.config
        out = []
        for name, entry in sorted(config.providers.items()):
            usable, why = self.conductor.planner.providers.usable(entry, environ)
            out.append(
                {
                    "name": name,
                    "kind": entry.kind,
                    "base_url": entry.base_url,
                    "api_key_env": entry.api_key_env or None,
                    "key_present": bool(entry.api_key(environ)),
                    "usable": usable,
                    "problem": why or None,
                    "models": dict(entry.models),
                    "headers": sorted(entry.headers),
                    "timeout": entry.timeout,
                    "max_retries": entry.max_retries,
                    "source": entry.source,
                }
            )
        checked = None
        if params.get("model"):
            try:
                resolved = self.conductor.planner.resolve(params["model"], setup, environ)
                checked = {"id": resolved.model_id, "problem": None}
            except ProviderError as exc:
                checked = {"id": None, "problem": exc.message}
        return {
            "providers": out,
            "default_model": config.default_model,
            "files": list(config.files),
            "untrusted": setup.untrusted_notice(),
            "model": checked,
        }

    async def mcp_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(checked_cwd(params.get("cwd")), client_environ(params))
        found = setup.mcp_config
        listing = self.conductor.mcp.status(found.servers, found.untrusted) if self.conductor.mcp is not None else []
        return {"servers": listing, "problems": list(found.problems), "untrusted": setup.untrusted_notice()}

    async def mcp_restart(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        mcp = self.conductor.mcp
        setup = await self._folder(checked_cwd(params.get("cwd")), client_environ(params))
        servers = setup.mcp
        name = params["name"]
        if mcp is None or name not in servers:
            untrusted = setup.mcp_config.untrusted.get(name)
            if untrusted is not None:
                raise RpcError(
                    ErrorCode.INVALID_PARAMS,
                    f"the MCP server {name!r} ({untrusted.source}) is not trusted: review it with roost trust {setup.root}",
                )
            raise RpcError(ErrorCode.INVALID_PARAMS, f"no MCP server {name!r} is configured here ({', '.join(sorted(servers)) or 'none'})")
        # The server that name is here: another folder's server of that name is not touched.
        mine = {name: servers[name]}
        try:
            await mcp.restart(servers[name])
        except UnknownServer:
            await mcp.ensure(mine)
        [status] = mcp.status(mine)
        return {"ok": status["state"] == "ready", "server": status}

    async def mcp_resources(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(checked_cwd(params.get("cwd")), client_environ(params))
        resources = await self._listing(setup, "resources")
        return {"resources": [resource.describe() for resource in resources], "untrusted": setup.untrusted_notice()}

    async def _listing(self, setup: FolderSetup, kind: str) -> list[Any]:
        """The prompts or resources of the folder's servers that may run (a project's
        untrusted ones never start), starting those not running (waiting a little: one
        slow to start is left out of this listing)."""
        mcp = self.conductor.mcp
        if mcp is None or not setup.mcp:
            return []
        await mcp.ensure(setup.mcp, timeout=LISTING_WAIT)
        return mcp.prompts(setup.mcp) if kind == "prompts" else mcp.resources(setup.mcp)

    async def agents_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        environ = client_environ(params)
        setup = await self._folder(checked_cwd(params.get("cwd")), environ)
        found = setup.agents
        tools = self.conductor.planner.tools.names()
        servers = {*setup.mcp, *setup.mcp_config.untrusted}

        def listed(agent: Agent, trusted: bool = True) -> dict[str, Any]:
            model = _model_id(agent, setup.config, setup.environment(environ))
            unknown = unknown_tools(agent, tools, servers, found.agents)
            return {**agent.describe(), "model_id": model, "unknown_tools": list(unknown), "trusted": trusted}

        # A project's agent that waits for trust is listed too, marked, with why it waits.
        why = {item.source: item for item in found.widening if not item.trusted}
        waiting = [
            {**listed(a, False), "widens": why[a.source].detail, "warnings": list(why[a.source].warnings)}
            for a in found.untrusted
        ]
        every = [listed(a) for _, a in sorted(found.agents.items())] + waiting
        return {
            "agents": sorted(every, key=lambda a: (a["name"], not a["trusted"])),
            "problems": list(found.problems),
            "untrusted": [item.to_map() for item in found.widening if not item.trusted],
        }

    async def commands_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        environ = client_environ(params)
        setup = await self._folder(checked_cwd(params.get("cwd")), environ)
        place = setup.place
        skills = await trio.to_thread.run_sync(skill_commands, place.root, place.trusted)
        commands = setup.commands.with_skills(skills)
        prompts = [prompt.describe() for prompt in await self._listing(setup, "prompts")]
        return {"commands": commands.describe() + prompts, "problems": list(commands.problems)}

    async def plugins_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(checked_cwd(params.get("cwd")), client_environ(params))
        return await trio.to_thread.run_sync(plugin_report, setup)

    async def prompt(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        mode = params.get("mode")
        agent_name = params.get("agent")
        summary = ""
        if params.get("session"):
            session = await self._session(params["session"])
            cwd = session.state.cwd
            summary = session.state.summary
            last = session.state.run
            agent_name = agent_name or (last.settings.agent if last else session.state.last_agent)
            mode = mode or (last.settings.mode if last else session.state.last_mode)
        else:
            cwd = checked_cwd(params.get("cwd"))
        setup = await self._folder(cwd, client_environ(params))
        try:
            agent = find_agent(setup, agent_name)
        except SettingsError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None
        mode = mode or agent.mode or "agent"
        if mode not in MODES:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"mode must be one of {', '.join(MODES)}")
        # The tools a run of the agent would get, as far as the skills layer cares.
        tools = agent.tools if agent.tools is not None else self.conductor.planner.tools.names()
        layers = await compose(
            agent, mode, setup.place, summary, tools=tools, cache=self.conductor.planner.prompts, rules=setup.rules.always
        )
        if params.get("task"):
            layers += await recall_layer(self.conductor.planner.memory, agent.memory, params["task"], setup.place)
        return {
            "agent": agent.name,
            "mode": mode,
            "layers": [{"name": x.name, "text": x.text, "chars": len(x.text), "source": x.source} for x in layers],
            "text": render(layers),
        }

    async def trust_show(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(checked_cwd(params["cwd"]), client_environ(params))
        trusted, record = await self._with_trust(lambda store: (store.snapshot().has_folder(setup.root), store.items(setup.root)))
        return {
            "folder": setup.root,
            "trusted": trusted,
            "current": not setup.ignored,
            # Each item: new or changed since the folder was last trusted (None: as it was).
            "items": [{**item.to_map(), "since": since(item, record)} for item in setup.widening],
            "files": _widening_files(setup),
        }

    async def trust_add(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        given = params["files"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
            raise RpcError(ErrorCode.INVALID_PARAMS, "trust.add: files must map paths to digests (strings)")
        setup = await self._folder(checked_cwd(params["cwd"]), client_environ(params))
        files = _widening_files(setup)
        if files != given:
            changed = sorted(set(files.items()) ^ set(given.items()))
            names = ", ".join(dict.fromkeys(path for path, _ in changed))
            raise RpcError(
                ErrorCode.TRUST_CHANGED,
                f"what {setup.root} widens changed since it was shown ({names}); nothing was "
                "trusted: look again with roost trust",
                {"folder": setup.root, "files": files},
            )
        await self._with_trust(lambda store: store.add(setup.root, files, item_record(setup.widening)))
        log.info("trusted %s (%d files)", setup.root, len(files))
        return {"folder": setup.root, "files": files}

    async def trust_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"folders": await self._with_trust(_trust_listing)}

    async def trust_remove(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        given = os.path.abspath(os.path.expanduser(params["folder"]))

        def remove(store: TrustStore) -> str | None:
            # Recorded as the folder was reached (through a link, say), or as its real path.
            for folder in dict.fromkeys((given, os.path.realpath(given))):
                if store.remove(folder):
                    return folder
            return None

        removed = await self._with_trust(remove)
        if removed:
            log.info("no longer trusted: %s", removed)
        return {"ok": True, "removed": removed is not None, "folder": removed or given}

    async def _with_trust(self, use: Callable[[TrustStore], _T]) -> _T:
        """``use(store)`` in a worker thread; a broken store is CONFIG_INVALID."""
        store = self.conductor.planner.trust
        if store is None:
            raise RpcError(ErrorCode.INVALID_PARAMS, "this daemon keeps no trust store")
        try:
            return await trio.to_thread.run_sync(use, store)
        except TrustError as exc:
            raise RpcError(ErrorCode.CONFIG_INVALID, str(exc)) from None


def _widening_files(setup: FolderSetup) -> dict[str, str]:
    """The files that widen, with the digests of their content as it was read, and the
    project files their entries run."""
    return setup.trust_files


def _trust_listing(store: TrustStore) -> list[dict[str, Any]]:
    """The trusted folders, each file marked current (same content) or changed."""
    out = []
    for record in store.records():
        files = []
        for path, recorded in sorted(record["files"].items()):
            current = unchanged(path, record["folder"], recorded)
            files.append({"path": path, "digest": recorded, "current": current, "missing": not os.path.lexists(path)})
        out.append({**record, "files": files})
    return out


def _model_id(agent: Agent, config: Config, environ: Mapping[str, str]) -> str | None:
    """The model ``agent`` runs on as ``config`` and the client's variables name it (None:
    its caller's; a name that leads in a circle: as written, its run says why)."""
    if not agent.model:
        return None
    try:
        return config.model_id(agent.model, environ, plan=agent.mode == "plan")
    except ModelNameError:
        return agent.model
