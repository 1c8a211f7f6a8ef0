"""The worker-side cache of one document shard: its local vocabulary and its rows of ``n_wk``.

A shard's tokens are remapped once to local word ids ``0..V_local-1`` (``vocab`` holds the
global id of each, sorted), so the sampler works on a dense ``[V_local, K]`` block: the rows this
shard needs, nothing else. The sampler applies the shard's own moves to the block in place (a
worker always sees its own updates); :meth:`ShardCache.push` sends this clock's delta, split by
table shard, one call per table shard; :meth:`ShardCache.refresh` pulls what *other* shards
pushed for clocks up to the one just finished and not received yet (merged deltas restricted
to this vocabulary, see :class:`biglda.ps.table.TableShard`) and adds them. So the block always
equals: the initial table + every other shard's deltas received + this shard's own moves —
what SSP asks for, and under BSP exactly the table after the previous clock.

Refresh policy: every clock, after the SSP wait, with every delta up to the previous clock that
has arrived. The staleness bound is enforced by the wait (no shard starts clock c before all
finished c - s), so a lazier policy ("refresh only when the cache is older than c - s") would
only move the same merged deltas later and in bigger lumps; pulling each clock keeps the cache
as fresh as the bound and the network allow, at the price of one call per table shard.
"""

from __future__ import annotations

import numpy as np

from biglda.ps._kernels import add_coo, take_ids
from biglda.ps.calls import call_all
from biglda.ps.client import TableClient

#: A cache maps global word ids to its rows with a table of every id up to its largest
#: when that table has at most this many entries per word it holds, else by binary search.
LUT_SPARSITY = 16


class ShardCache:
    """Cached rows of one document shard.

    Parameters
    ----------
    shard : the document shard's index (its identity for pushes and pulls).
    tokens : int32 [N] global word ids of the shard.
    bounds : int64 [A+1] row boundaries of the table shards.
    n_topics : K.

    Attributes
    ----------
    vocab : int32 [V_local] sorted global ids of the words in the shard.
    tokens : int32 [N] local ids (rows of ``n_wk``).
    n_wk : int32 [V_local, K].  n_k : int64 [K] (global totals as seen by this shard).
    """

    def __init__(self, shard: int, tokens: np.ndarray, bounds: np.ndarray, n_topics: int) -> None:
        self.shard = int(shard)
        vocab, local = np.unique(np.asarray(tokens), return_inverse=True)
        self.vocab = vocab.astype(np.int32)
        self.tokens = local.astype(np.int32).reshape(-1)
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self.n_topics = int(n_topics)
        # local ids [split[a], split[a+1]) live on table shard a
        self.split = np.searchsorted(self.vocab, self.bounds).astype(np.int64)
        self.split[0], self.split[-1] = 0, len(self.vocab)
        # every word of the table: local ids are the global ones (one process that holds the
        # corpus), and a push sends its delta's ids as they are, no gather (an id out of
        # range is still one out of the table's, which checks)
        self.identity = (len(self.vocab) == int(self.bounds[-1])
                         and int(self.vocab[-1]) == len(self.vocab) - 1)
        self.n_wk = np.zeros((len(self.vocab), self.n_topics), dtype=np.int32)
        self.n_k = np.zeros(self.n_topics, dtype=np.int64)
        self.received: list[np.ndarray | None] = [None] * (len(self.bounds) - 1)
        # calls sent and not yet answered: (futures, what, whether they answer ``received``)
        self._pending: list[tuple[list, str, bool]] = []
        self.bytes_pulled = 0
        self.bytes_pushed = 0
        self.members: tuple[int, ...] = ()  # other shards this cache reads for (ProcessCache)
        # global id -> row, where the vocabulary is dense enough for a table of all ids up to
        # its largest: a gather instead of a binary search per pulled entry (pipelines/
        # README.md, "Prefetching the entries a word's tokens read")
        top = int(self.vocab[-1]) + 1 if len(self.vocab) else 0
        self._rows: np.ndarray | None = None
        if top <= LUT_SPARSITY * max(1, len(self.vocab)):
            self._rows = np.full(top, -1, dtype=np.int32)
            self._rows[self.vocab] = np.arange(len(self.vocab), dtype=np.int32)

    def local_ids(self, words: np.ndarray) -> np.ndarray:
        """Return the rows of ``n_wk`` of global word ids, all in the vocabulary."""
        if self.identity:
            return np.asarray(words, dtype=np.int32)
        if self._rows is not None:
            return self._rows[words]
        return np.searchsorted(self.vocab, words).astype(np.int32)

    def rows_of(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Return ``(rows, keep)`` of global word ids some of which this cache may not hold.

        ``rows[keep]`` are the rows of ``words[keep]``; ``keep`` None: every word is here.
        """
        words = np.asarray(words)
        if self.identity:
            return words.astype(np.int32, copy=False), None
        if self._rows is not None:
            inside = words < len(self._rows)
            rows = np.full(len(words), -1, dtype=np.int32)
            rows[inside] = self._rows[words[inside]]
            keep = rows >= 0
        else:
            rows = np.searchsorted(self.vocab, words).astype(np.int32)
            keep = rows < len(self.vocab)
            keep[keep] = self.vocab[rows[keep]] == words[keep]
        return rows, (None if bool(keep.all()) else keep)

    @property
    def n_local(self) -> int:
        """Return the number of words this cache holds rows of (its local vocabulary)."""
        return len(self.vocab)

    def global_ids(self, words: np.ndarray) -> np.ndarray:
        """Return the global word ids (int32) of local ones.

        The identity's ids go as they are (an id out of range is one out of the table's too,
        which checks); else a gather that checks the range.
        """
        if self.identity and words.dtype == np.int32:
            return words
        return take_ids(self.vocab, words)

    def _by_table_shard(self, words: np.ndarray, *arrays: np.ndarray) -> list[tuple]:
        """Split a COO delta (local word ids) into one part per table shard (global ids)."""
        n_parts = len(self.bounds) - 1
        ids = self.global_ids
        if n_parts == 1:
            return [(ids(words), *arrays)]
        if len(words) < 2 or bool(np.all(words[1:] >= words[:-1])):
            # sweep deltas come sorted by word: each table shard's part is a slice (an id
            # past the ends would fall in none)
            if len(words) and (words[0] < 0 or words[-1] >= len(self.vocab)):
                raise IndexError(f"local word ids {words[0]}..{words[-1]} outside "
                                 f"[0, {len(self.vocab)})")
            cuts = np.searchsorted(words, self.split)
            return [(ids(words[cuts[a]:cuts[a + 1]]), *(x[cuts[a]:cuts[a + 1]] for x in arrays))
                    for a in range(n_parts)]
        part = np.searchsorted(self.split, words, side="right") - 1
        order = np.argsort(part, kind="stable")
        cuts = np.searchsorted(part[order], np.arange(n_parts + 1))
        out = []
        for a in range(n_parts):
            idx = order[cuts[a]:cuts[a + 1]]
            out.append((ids(words[idx]), *(x[idx] for x in arrays)))
        return out

    def push(self, tables: TableClient, clock: int, words: np.ndarray, topics: np.ndarray,
             counts: np.ndarray, timeout: float, log: bool = True, advance: int | None = None,
             wait: bool = True) -> int:
        """Push this clock's delta (local word ids): one call per table shard; return bytes sent.

        ``advance``: also :meth:`advance` to that clock, in the same calls (logged pushes).
        ``wait=False`` (with ``advance``): send the calls and return; their answers (and
        ``received``) are taken by :meth:`settle`, which every later push, pull, advance or
        attach calls first, so a table shard never gets this shard's next clock before this
        one. (Processes taking turns: nothing reads the table during the clock, and the
        driver's snapshot waits for the push: :meth:`TableClient.snapshots`.)
        """
        self.settle(timeout)
        # (int32 local ids stay int32: no copy of the delta's ids to int64 and back)
        words = np.asarray(words)
        if words.dtype != np.int32:
            words = words.astype(np.int64)
        topics = np.asarray(topics, dtype=np.int32)
        counts = np.asarray(counts, dtype=np.int32)
        parts, sent = [], 0
        for w, t, c in self._by_table_shard(words, topics, counts):
            sent += w.nbytes + t.nbytes + c.nbytes
            parts.append((w, t, c))
        if advance is None:
            tables.push(self.shard, clock, parts, timeout, log=log)
        elif not log:
            raise AssertionError("an advance goes with a logged push")
        else:
            futs = tables.send_push_advance(self.shard, clock, parts, advance)
            self._pending.append((futs, f"shard {self.shard}: push of clock {clock}, "
                                        f"advance to {advance}", True))
            if wait:
                self.settle(timeout)
        self.bytes_pushed += sent
        return sent

    def defer(self, futures: list, what: str) -> None:
        """Keep the futures of calls sent for this cache: :meth:`settle` takes their answers."""
        self._pending.append((futures, what, False))

    def settle(self, timeout: float) -> None:
        """Wait for the answers of the calls sent without waiting (``push(wait=False)``).

        The push's answers are its advance's ``received``. A failed call raises here (a
        :class:`biglda.errors.ClusterError` after ``timeout``), naming its clock.
        """
        pending, self._pending = self._pending, []
        for futs, what, is_advance in pending:
            answers = call_all(futs, timeout, what)
            if is_advance:
                self.received = list(answers)

    def push_counts(self, tables: TableClient, clock: int, n_wk_local: np.ndarray,
                    timeout: float) -> int:
        """Push a dense local count block (the initial recount of ``z``) as COO, not logged."""
        words, topics = np.nonzero(n_wk_local)
        counts = n_wk_local[words, topics]
        return self.push(tables, clock, words, topics, counts, timeout, log=False)

    def attach(self, tables: TableClient, upto: int, timeout: float) -> int:
        """Fetch this shard's rows as of clock ``upto`` from every table shard; return bytes."""
        self.settle(timeout)
        vocab_parts = [self.vocab[self.split[a]:self.split[a + 1]]
                       for a in range(len(self.bounds) - 1)]
        got = 0
        self.n_k[:] = 0
        for a, (rows, nk, received) in enumerate(
                tables.attach(self.shard, vocab_parts, upto, timeout, self.members)):
            self.n_wk[self.split[a]:self.split[a + 1]] = rows
            self.n_k += nk
            self.received[a] = received
            got += rows.nbytes + nk.nbytes
        self.bytes_pulled += got
        return got

    def refresh(self, tables: TableClient, upto: int, timeout: float) -> int:
        """Add other shards' deltas of clocks up to ``upto`` not received yet; return bytes."""
        self.settle(timeout)
        got = 0
        have = [r for r in self.received if r is not None]
        if len(have) != len(self.received):
            raise AssertionError(f"shard {self.shard}: refresh before attach")
        for a, (received, words, topics, counts, dk) in enumerate(
                tables.pull(self.shard, have, upto, timeout)):
            if len(words):
                add_coo(self.n_wk, self.local_ids(words), topics, counts)
            self.n_k += dk
            self.received[a] = received
            got += words.nbytes + topics.nbytes + counts.nbytes + dk.nbytes
        self.bytes_pulled += got
        return got

    def advance(self, tables: TableClient, upto: int, timeout: float) -> int:
        """Record on every table shard that this cache has every delta up to ``upto``.

        For a cache that got the other processes' moves another way, exactly (the turns'
        posts, :mod:`biglda.ps.managed`): a pull would bring them again. Returns 0 (bytes
        pulled).
        """
        self.settle(timeout)
        if any(r is None for r in self.received):
            raise AssertionError(f"shard {self.shard}: advance before attach")
        self.received = list(tables.advance(self.shard, upto, timeout))
        return 0

