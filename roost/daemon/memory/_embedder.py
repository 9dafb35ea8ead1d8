"""Embeddings of memory entries, computed in the background, and of queries, bounded.

When the user's ``[memory] embeddings = "provider/model"`` names a model of an
OpenAI-compatible provider, :class:`Embedder` is given it (each time a folder's config is
read, and once from the user's config as the daemon starts) and its task embeds, in
batches of :data:`BATCH`, every entry with no vector by that model yet: entries added
later wake it. A changed model drops the old model's vectors and indexes anew (vectors are
kept by model). A run never waits on this task.

A search embeds its query too (:meth:`Embedder.query`), within a time limit: a run's
"similar memories" layer waits at most :data:`LAYER_SECONDS` for it; a query that cannot be
embedded in time (or fails) is searched by its words alone, and for :data:`QUIET_SECONDS`
after such a failure queries are not sent at all, so a slow or broken endpoint costs one
run that much, not every run.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

import trio

from ..providers import ProviderError, ProviderUnavailable
from ._entries import ENTRY_CHARS

if TYPE_CHECKING:
    from ..folder._config import Config
    from ..providers._registry import ProviderRegistry
    from ._index import MemoryIndex

__all__ = ["BATCH", "Embedder", "Embeds", "LAYER_SECONDS", "QUIET_SECONDS", "Target", "embed_as_configured",
           "embed_with", "embedding_target"]

log = logging.getLogger(__name__)

#: Entries embedded in one request.
BATCH = 32
#: How long a batch may take before it is given up (and tried again later).
BATCH_SECONDS = 60.0
#: How long a run's layer waits for its query's embedding.
LAYER_SECONDS = 0.25
#: How long a search asked for by a person or the model (memory.search, ``recall``) waits.
SEARCH_SECONDS = 5.0
#: After a query could not be embedded in time, how long queries go by their words alone.
QUIET_SECONDS = 60.0
#: The first wait after a batch failed (doubled each time, up to :data:`RETRY_MAX`).
RETRY_FIRST = 5.0
RETRY_MAX = 600.0


class Embeds(Protocol):
    """What embeds texts (``OpenAIProvider``)."""

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """The vector of each text, in order (raises ``ProviderError``)."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """The model that embeds: ``model_id`` (``provider/model``, what vectors are kept by),
    its name at the provider, and the provider."""

    model_id: str
    model: str
    client: Embeds


def embed_with(index: MemoryIndex | None, providers: ProviderRegistry, config: Config, environ: Mapping[str, str]) -> None:
    """Have ``index`` embed with the model ``config`` names now (a folder's config was read
    for a client with ``environ``); cheap: the provider is built once."""
    if index is None:
        return
    try:
        index.embedder.configure(embedding_target(providers, config, environ))
    except ProviderUnavailable as exc:
        index.embedder.keep(str(config.memory_embeddings), exc)


async def embed_as_configured(index: MemoryIndex, providers: ProviderRegistry) -> None:
    """As the daemon starts: embed with the model the user's config names, its key from the
    daemon's own environment (a config that cannot be read is said when a folder is read)."""
    from ..folder._config import ConfigError, load_config

    try:
        config = await trio.to_thread.run_sync(load_config)
    except ConfigError:
        return
    embed_with(index, providers, config, os.environ)


def embedding_target(providers: ProviderRegistry, config: Config, environ: Mapping[str, str]) -> Target | None:
    """The embedding model ``config`` names, resolved with ``environ``'s key (None: none is
    named).

    Raises:
        ProviderUnavailable: the model cannot be used (unknown provider, no key, or a
            provider with no ``/embeddings``).
    """
    named = config.memory_embeddings
    if named is None:
        return None
    # Before resolving: an Anthropic provider would import its SDK (most of a second).
    entry = config.providers.get(named.partition("/")[0])
    if entry is not None and entry.kind != "openai":
        raise ProviderUnavailable(f"{entry.name}: a {entry.kind} provider has no /embeddings")
    resolved = providers.resolve(named, config, environ)
    return Target(resolved.model_id, resolved.model, resolved.provider)  # type: ignore[arg-type]


class Embedder:
    """The index's embeddings (see the module); :meth:`run` is its background task."""

    def __init__(self, index: MemoryIndex) -> None:
        self._index = index
        #: The model that embeds now (None: lexical search only).
        self.target: Target | None = None
        self._wake = trio.Event()
        #: ``time.monotonic()`` until which queries are not embedded.
        self._quiet_until = 0.0
        #: What was said of a model that cannot be used (said once).
        self._said: set[str] = set()

    def configure(self, target: Target | None) -> None:
        """Embed with ``target`` from now on (None: stop); a new model wakes the task."""
        if target == self.target:
            return
        log.info("memory embeddings: %s", target.model_id if target else "none (lexical search only)")
        self.target, self._quiet_until = target, 0.0
        self.wake()

    def keep(self, model_id: str, problem: ProviderUnavailable) -> None:
        """The configured ``model_id`` cannot be resolved (this client has no key, say):
        the model in use stays if it is that one."""
        if self.target is None or self.target.model_id != model_id:
            if self.target is not None:
                self.configure(None)
            if problem.message not in self._said:
                self._said.add(problem.message)
                log.warning("memory embeddings by %s: not used: %s", model_id, problem.message)

    def wake(self) -> None:
        """Entries were added: embed them."""
        self._wake.set()

    async def run(self) -> None:
        """Forever: embed the entries that have no vector by the model configured."""
        retry, size = RETRY_FIRST, BATCH
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            target = self.target
            if target is None:
                continue
            await self._index.keep_vectors_of(target.model_id)
            while target is self.target:
                batch = await self._index.unembedded(target.model_id, size)
                if not batch:
                    retry = RETRY_FIRST
                    break
                failure = await self._embed(target, batch)
                if failure is None:
                    size = BATCH
                elif _refused(failure) and len(batch) > 1:
                    size = 1  # one by one, to find the entry the endpoint refuses
                elif _refused(failure):
                    log.warning("memory entry %d has no embedding by %s: %s", batch[0][0], target.model_id, failure)
                    await self._index.store_vectors(target.model_id, [(batch[0][0], [])])
                else:
                    why = failure.message if isinstance(failure, ProviderError) else f"no answer within {BATCH_SECONDS:g} s"
                    log.warning("memory embeddings by %s failed (again in %g s): %s", target.model_id, retry, why)
                    with trio.move_on_after(retry):
                        await self._changed(target)
                    retry = min(retry * 2, RETRY_MAX)

    async def _embed(self, target: Target, batch: list[tuple[int, str]]) -> ProviderError | trio.TooSlowError | None:
        """Embed and keep ``batch`` (id, text each); what went wrong, if anything."""
        try:
            with trio.fail_after(BATCH_SECONDS):
                vectors = await target.client.embed(target.model, [text for _, text in batch])
        except (ProviderError, trio.TooSlowError) as exc:
            return exc
        await self._index.store_vectors(target.model_id, [(entry, v) for (entry, _), v in zip(batch, vectors)])
        return None

    async def _changed(self, target: Target) -> None:
        """Return once the target is another than ``target``."""
        while self.target is target:
            await self._wake.wait()
            self._wake = trio.Event()

    async def query(self, text: str, within: float) -> tuple[str, list[float]] | None:
        """``text``'s embedding and the model's id, or None: no model, no answer within
        ``within`` seconds, or a failure (then none is asked for a while; see the module)."""
        target = self.target
        if target is None or time.monotonic() < self._quiet_until or not await self._index.has_vectors(target.model_id):
            return None
        with trio.move_on_after(within):
            try:
                vectors = await target.client.embed(target.model, [text[:ENTRY_CHARS]])
            except ProviderError as exc:
                log.warning("memory search by words alone for %g s: the query embedding failed: %s", QUIET_SECONDS, exc.message)
                self._quiet_until = time.monotonic() + QUIET_SECONDS
                return None
            return target.model_id, vectors[0]
        log.warning("memory search by words alone for %g s: no query embedding within %g s", QUIET_SECONDS, within)
        self._quiet_until = time.monotonic() + QUIET_SECONDS
        return None


def _refused(failure: ProviderError | trio.TooSlowError) -> bool:
    """Whether the endpoint refused what it was sent (400, 413, 422: an entry it cannot
    embed), rather than failed or could not be reached."""
    return isinstance(failure, ProviderError) and any(f" {status} " in failure.message for status in (400, 413, 422))
