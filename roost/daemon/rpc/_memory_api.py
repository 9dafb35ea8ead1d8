"""The methods of memory: search it, list it, forget an entry (see ``roost.daemon.memory``).

A folder's memory is the user's and its project's (by the project's root); ``all`` reaches
every project's.
"""

from __future__ import annotations

from typing import Any

from roost.protocol import ErrorCode, RpcError

from ..memory import MemoryIndex
from ..memory._files import USER_SCOPE, sync_memory_files
from ._api_part import ApiPart, Handler, checked_cwd, client_environ
from ._connection import Connection


class MemoryApi(ApiPart):
    """``memory.*``."""

    def table(self) -> dict[str, Handler]:
        """This part's methods and their handlers."""
        return {"memory.search": self.search, "memory.list": self.listed, "memory.forget": self.forget}

    async def search(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        index, scopes = await self._scopes(params)
        found = await index.search(params["query"], scopes, _limit(params, 10))
        return {"entries": [e.to_map() for e in found]}

    async def listed(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        index, scopes = await self._scopes(params)
        return {"entries": [e.to_map() for e in await index.entries(scopes, _limit(params, 100))]}

    async def forget(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        gone = await self._index().forget(params["id"])
        if gone is None:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"no memory entry {params['id']}")
        return {"forgotten": gone.to_map()}

    def _index(self) -> MemoryIndex:
        index = self.conductor.planner.memory
        if index is None:
            raise RpcError(ErrorCode.INVALID_PARAMS, "this daemon keeps no memory index")
        return index

    async def _scopes(self, params: dict[str, Any]) -> tuple[MemoryIndex, list[str] | None]:
        """The index, and the scopes the request reaches (its folder's memory files indexed
        as they are now)."""
        index = self._index()
        if params.get("all"):
            return index, None
        setup = await self._folder(checked_cwd(params.get("cwd")), client_environ(params))
        await sync_memory_files(index, setup.place)
        return index, [USER_SCOPE, str(setup.place.root)]


def _limit(params: dict[str, Any], default: int) -> int:
    limit = params.get("limit", default)
    if limit < 1:
        raise RpcError(ErrorCode.INVALID_PARAMS, "limit must be at least 1")
    return int(limit)
