"""Figure 20: recall over 100,000 memory entries: search latency, lexical and by vector, and
the index's size per entry.

No daemon: the memory index (``roost.daemon.memory.MemoryIndex``) runs in the benchmark's
process on a trio loop, as the daemon runs it (SQLite on its one worker thread). An index of
``--entries`` entries (90 % in one project's scope, 10 % in the user's) of 12-40 words each,
drawn from a vocabulary of 5,000 words with Zipf-like frequencies, is built; then each
entry gets a ``--dims``-dimension vector (random, as the index's cost does not depend on
what the vectors mean) through the index's own ``store_vectors``, as the background
embedder stores them. Queries are 3-8 words of the same vocabulary but its 50 commonest
(they stand for the stop words a query leaves out: the, of, ...), searched in the
project's and the user's scopes (every entry), 8 results, as a run's layer asks:

- *lexical*: FTS5 BM25 alone (no embeddings model);
- *vector*: a query of stop words only, so the nearest vectors alone rank it (the sign
  bits' Hamming distance over every entry, the best 100 rescored by exact cosine);
- *hybrid*: both lists (20 each) fused by reciprocal rank, what a search does with a model.

Also printed: lexical queries that do take the 50 commonest words (each in 5-15 % of the
entries: BM25 scores every entry that has any query word, so such a query costs more).
The query's embedding is given at once by an in-process stand-in for the endpoint (what
the endpoint takes is its own, bounded by 0.25 s for a run's layer). ``--queries`` timed
searches of each after 20 warm-up; p50 and p99. Also printed: the first vector search
(loading the sign bits into memory), the RSS that adds, and the time to build.
*Size per entry*: (memory.db + its WAL, checkpointed) / entries, words only and with the
vectors.

    uv run python bench/recall.py [--entries 100000] [--dims 384] [--queries 300]
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trio  # noqa: E402

from _common import Figure, median, parser, percentile, prepare, read_proc_status, report  # noqa: E402

from roost.daemon.memory import MemoryIndex  # noqa: E402
from roost.daemon.memory._embedder import Target  # noqa: E402

TARGET_MS = 20.0
MODEL = "bench/embed"


class _Instant:
    """The endpoint's stand-in: a random vector at once."""

    def __init__(self, dims: int) -> None:
        self.dims = dims

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        return [_vector(self.dims) for _ in texts]


def _vector(dims: int) -> list[float]:
    return [float(x) for x in array("b", os.urandom(dims))]


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


async def measure(args) -> list[Figure]:
    rng = random.Random(7)
    vocab = [f"w{n}{chr(97 + n % 26)}" for n in range(5000)]
    weights = [1 / (n + 1) for n in range(5000)]
    tmp = Path(tempfile.mkdtemp(prefix="rb-recall-", dir="/tmp"))
    path = tmp / "memory.db"
    index = MemoryIndex.open(path)
    empty = _db_bytes(path)
    started = time.perf_counter()
    db = index._db  # the bulk load goes straight to SQLite: the figure is search, not add

    def load() -> None:
        with db:
            db.execute("BEGIN")
            for n in range(args.entries):
                words = rng.choices(vocab, weights, k=rng.randint(12, 40))
                index._add("user" if n % 10 == 0 else "/project", "learned", " ".join(words), f"session {n}", time.time())

    await trio.to_thread.run_sync(load)
    built_words = time.perf_counter() - started
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    words_bytes = _db_bytes(path) - empty
    started = time.perf_counter()
    while batch := await index.unembedded(MODEL, 1000):
        await index.store_vectors(MODEL, [(entry, _vector(args.dims)) for entry, _ in batch])
    built_vectors = time.perf_counter() - started
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    all_bytes = _db_bytes(path) - empty
    count = await index.count()

    scopes = ["user", "/project"]

    def query() -> str:
        return " ".join(rng.choices(vocab[50:], weights[50:], k=rng.randint(3, 8)))

    def common_query() -> str:
        return " ".join(rng.choices(vocab, weights, k=rng.randint(3, 8)))

    async def timed(make, within) -> list[float]:
        for _ in range(20):
            await index.search(make(), scopes, 8, embed_within=within)
        out = []
        for _ in range(args.queries):
            q = make()
            t = time.perf_counter()
            await index.search(q, scopes, 8, embed_within=within)
            out.append((time.perf_counter() - t) * 1000)
        return out

    lexical = await timed(query, None)
    common = await timed(common_query, None)
    rss_before = read_proc_status(os.getpid())["VmRSS"]
    index.embedder.configure(Target(MODEL, "embed", _Instant(args.dims)))
    t = time.perf_counter()
    await index.search("the of and", scopes, 8)
    first = (time.perf_counter() - t) * 1000
    rss_bits = (read_proc_status(os.getpid())["VmRSS"] - rss_before) / 1024
    vector = await timed(lambda: "the of and", 5.0)
    hybrid = await timed(query, 5.0)
    await index.close()
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()

    def fig(key: str, title: str, times: list[float], how: str) -> list[Figure]:
        return [
            Figure(key=f"recall.{key}_p50_ms", title=f"recall over {count:,} entries, {title} (p50)",
                   value=median(times), unit="ms", better="lower", target=TARGET_MS, how=how,
                   details=[f"min {min(times):.2f} ms, max {max(times):.2f} ms"]),
            Figure(key=f"recall.{key}_p99_ms", title=f"recall over {count:,} entries, {title} (p99)",
                   value=percentile(times, 99), unit="ms", better="lower", target=TARGET_MS,
                   how=f"the same {args.queries} searches"),
        ]

    return [
        *fig("lexical", "lexical", lexical, f"{args.queries} searches of 3-8 words, FTS5 BM25 alone, 8 results, "
             "the user's and the project's scopes (every entry)"),
        Figure(key="recall.lexical_common_p50_ms", title=f"recall over {count:,} entries, lexical, common words (p50)",
               value=median(common), unit="ms", better="lower", informational=True,
               how="the lexical searches with the 50 commonest words too (the worst case: not stop words here)",
               details=[f"p99 {percentile(common, 99):.1f} ms"]),
        *fig("vector", "vector", vector, f"a stop-word query, so the {args.dims}-d vectors alone rank it: Hamming "
             "distance of the sign bits over every entry, the best 100 rescored by exact cosine"),
        *fig("hybrid", "hybrid", hybrid, "the lexical queries with a model: BM25 and vector lists fused by reciprocal "
             "rank (k=60); the query's embedding given at once"),
        Figure(key="recall.bytes_per_entry_words", title="memory index size per entry, words only",
               value=words_bytes / count, unit="B", better="lower", informational=True,
               how=f"(memory.db + WAL, checkpointed) - an empty one, / {count:,} entries of 12-40 words",
               details=[f"built in {built_words:.1f} s"]),
        Figure(key="recall.bytes_per_entry_vectors", title=f"memory index size per entry, with {args.dims}-d vectors",
               value=all_bytes / count, unit="B", better="lower", informational=True,
               how="the same with each entry's vector: float16 at unit length and its sign bits",
               details=[f"vectors stored in {built_vectors:.1f} s",
                        f"first vector search (loads the sign bits into memory): {first:.0f} ms, "
                        f"RSS +{rss_bits:.1f} MiB"]),
    ]


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, default=100_000, help="entries in the index (default 100000)")
    p.add_argument("--dims", type=int, default=384, help="dimensions of each vector (default 384)")
    p.add_argument("--queries", type=int, default=300, help="timed searches of each kind (default 300)")
    args = p.parse_args()
    context = prepare(args)
    figures = trio.run(measure, args)
    report("recall", figures, args, context)


if __name__ == "__main__":
    main()
