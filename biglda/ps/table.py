"""The table actor: a row range of the word-topic table ``n_wk`` and its part of ``n_k``.

:class:`TableShard` holds rows ``[row_start, row_stop)`` of ``n_wk`` (int32) and their column
sums (this actor's part of ``n_k``; the global ``n_k`` is the sum of the parts). Pushes are
pre-aggregated COO deltas, one per (worker shard, table shard, clock), idempotent: the actor
keeps the last applied clock of every worker shard and ignores a push whose clock is not newer.

Pulls by clock ("move as little as possible"; a delta of a clock is much smaller than the rows
it touches once K is in the hundreds). What the server does per clock grows with the entries
that changed, not with the number of clients:

* **Fold once.** Once every writer's push of clock ``c`` has arrived (where the
  log-likelihood snapshot is taken), the first pull that needs it sums that clock's entries
  once into ``D_c`` (none does when a puller has a single other writer): unique
  (row, topic) pairs sorted by row with a ``row_ptr`` index over this actor's rows, and its
  ``dk`` (:func:`biglda.ps._kernels.fold`: a merge of the pushes, each sorted by (word,
  topic), or a counting sort by row; no global sort).
* **Serve slices.** A pull gets, for every folded clock it holds nothing of, the slice of
  ``D_c`` on its rows: a gather through ``row_ptr`` (over its vocabulary, or over the rows of
  ``D_c`` through its mask, whichever is shorter), no sort; several clocks (SSP) are merged.
  ``D_c`` contains the puller's own moves too, which its cache has already: the server takes
  them out of the slice (the slice is sorted by (row, topic), so that is a binary search per
  own entry: O(own log slice)). Taking them out here rather than in the cache keeps replies
  to what *others* changed — with two pullers the own half would double the bytes — and the
  protocol as it was; integer sums do not depend on the order, so BSP stays bit-identical.
* **The per-writer log only for the frontier.** Entries of clocks not folded yet stay per
  writer; a pull past the folded clocks (SSP's "whatever has arrived") gets the other writers'
  entries of those clocks from it as before, so SSP freshness is unchanged. A folded clock's
  per-writer entries stay as long as the log kept them before (until every other shard has
  received them) and while their writer may still be served that clock folded (its own moves
  to take out): a puller that holds part of a clock gets the rest per writer, and a pull with
  a single other writer is that writer's entry (cheaper than a slice less one's own moves).
  ``D_c`` is dropped once every puller has all of clock ``c``.

Pulling by clock rather than "whatever arrived" makes BSP deterministic: the same seed and
layout (processes x threads x shards) give the same run. The actor also keeps the word part of
the log-likelihood, Σ lgamma(n_wk + β) - lgamma(β), up to date incrementally (exact: each
applied entry adds lgamma(new+β) - lgamma(old+β)), and snapshots it with its ``n_k`` part the
moment every shard's push of a clock has arrived; under BSP this is exactly the table after
that clock. :meth:`TableShard.info` counts the work of pulls (entries scanned, gathered and
merged) so tests check that one pull's cost does not grow with the number of clients.

Actor methods are vectorized and short: the hot paths are numba loops (``_kernels``), never
``np.add.at``. Sync methods of all actors on one worker share one thread. Workers and the
driver reach it through :class:`biglda.ps.client.TableClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.ps._kernels import (
    add_coo,
    apply_delta_ll,
    first_outside,
    fold,
    gather,
    lgamma_table,
    row_chunks,
    subtract_sorted,
    sum_sorted,
    top_rows,
)
from biglda.ps.protocol import NO_CLOCK

_EMPTY = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class LogEntry:
    """One writer's applied push of one clock: local rows, topics, counts (int32) and its dk."""

    writer: int
    rows: np.ndarray
    topics: np.ndarray
    counts: np.ndarray
    dk: np.ndarray


@dataclass(frozen=True, eq=False)
class FoldedClock:
    """Every writer's delta of one clock, summed: ``D_c``.

    ``row_ptr`` int64 [R + 1] (row ``r``'s entries are ``[row_ptr[r], row_ptr[r + 1])``),
    ``topics``/``counts`` int32 [U] sorted by (row, topic), ``rows`` int64: the distinct rows
    that changed, ``dk`` int64 [K].
    """

    row_ptr: np.ndarray
    topics: np.ndarray
    counts: np.ndarray
    rows: np.ndarray
    dk: np.ndarray


#: A push of at least this many entries is applied in chunks of :data:`APPLY_CHUNK` entries
#: (whole rows) on the worker process's threads, see :meth:`TableShard._apply`.
PARALLEL_APPLY_ENTRIES = 1 << 20
APPLY_CHUNK = 1 << 17
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _worker_threads() -> int:
    """Return the threads of the Dask worker whose task or actor call runs this, else 1."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


def _apply_pool(n_threads: int) -> ThreadPoolExecutor | None:
    """Return a shared pool of ``n_threads`` threads; None for one.

    (A worker's threads sample; while a push is applied, its sampling has ended.)
    """
    if n_threads <= 1:
        return None
    with _POOLS_LOCK:
        if n_threads not in _POOLS:
            _POOLS[n_threads] = ThreadPoolExecutor(n_threads, thread_name_prefix="biglda-apply")
        return _POOLS[n_threads]


class TableShard:
    """Rows ``[row_start, row_stop)`` of ``n_wk`` and their part of ``n_k`` (a Dask actor).

    Parameters
    ----------
    index, row_start, row_stop : which table shard and which global word ids it holds.
    n_topics : K.  n_shards : number of worker (document) shards that push to it.
    beta : the topic-word prior (for the incremental log-likelihood).

    Examples
    --------
    >>> ps = TableShard(0, 0, 3, n_topics=2, n_shards=1, beta=0.1)
    >>> ps.push(0, 0, np.array([1]), np.array([0]), np.array([2]))
    True
    >>> ps.push(0, 0, np.array([1]), np.array([0]), np.array([2]))  # repeated: ignored
    False
    >>> int(ps.n_wk[1, 0]), int(ps.n_k[0])
    (2, 2)
    """

    def __init__(self, index: int, row_start: int, row_stop: int, n_topics: int,
                 n_shards: int, beta: float) -> None:
        self.index = int(index)
        self.row_start = int(row_start)
        self.row_stop = int(row_stop)
        self.n_topics = int(n_topics)
        self.n_shards = int(n_shards)
        self.beta = float(beta)
        self.n_wk = np.zeros((self.row_stop - self.row_start, self.n_topics), dtype=np.int32)
        self.n_k = np.zeros(self.n_topics, dtype=np.int64)
        # compiled (or loaded) now, not at the run's first top-words call or push: after a
        # fresh install that compile stalled a later clock (biglda.samplers.warm)
        top_rows(np.zeros((1, 1), dtype=self.n_wk.dtype), 1)
        first_outside(np.zeros(1, dtype=np.int32), 0, 1)  # (and the first push's check)
        self.row_ll = 0.0  # Σ over entries of lgamma(n + β) - lgamma(β)
        # a large push is applied on as many threads as the worker that creates the actor
        # has, found here: a call through biglda.ps.calls.SameProcess runs on the actor's
        # thread outside Dask's task state, where get_worker() fails (until 2026-11-26's
        # sixth session every in-process push was applied on one thread that way)
        self.apply_threads = _worker_threads()
        self.parallel_applies = 0  # pushes applied in chunks on several threads
        self._lg = lgamma_table(self.beta)
        self.applied = np.full(self.n_shards, NO_CLOCK, dtype=np.int64)  # last clock per shard
        # per-writer entries by clock: the frontier (clocks not folded yet), and folded ones
        # some reader lacks or whose writer may still be served them folded (see _trim)
        self._log: dict[int, list[LogEntry]] = {}
        self._folded: dict[int, FoldedClock] = {}  # D_c of folded clocks not yet everyone's
        self._folded_upto = NO_CLOCK  # every clock <= this one is complete (may be folded)
        # received[reader, writer]: newest clock of writer's deltas the reader acknowledged
        self._received = np.full((self.n_shards, self.n_shards), NO_CLOCK, dtype=np.int64)
        self._vocab: dict[int, np.ndarray] = {}  # reader -> its sorted local rows
        self._masks: dict[int, np.ndarray] = {}
        # reader -> the shards whose reads it makes (one cache per worker process: its other
        # shards push, never pull; they have what their reader has, for trimming the log)
        self._members: dict[int, np.ndarray] = {}
        self._snap_clock = NO_CLOCK
        self._snapshots: dict[int, tuple[float, np.ndarray]] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.n_pushes = 0
        self.n_ignored = 0
        # work counters (entries, not seconds): see info()
        self.n_pulls = 0
        self.n_advances = 0        # pulls that send nothing (processes taking turns)
        self.fold_entries = 0      # pushed entries summed into folded clocks
        self.pull_rows_probed = 0  # row_ptr lookups / mask tests to cut D_c slices
        self.pull_gathered = 0     # D_c entries copied out
        self.pull_log_scanned = 0  # per-writer log entries masked (frontier, partial clocks)
        self.pull_merged = 0       # entries summed when a reply has several parts
        self.pull_own = 0          # the puller's own entries taken out of D_c slices
        self.pull_entries_out = 0  # (word, topic) entries sent
        # writer -> (clock, its offers of that clock so far): early updates, see offer()
        self._offers: dict[int, tuple[int, list[tuple[np.ndarray, ...]]]] = {}
        self.offer_entries_in = 0
        self.offer_entries_out = 0
        # the steps of --process-partition: window -> {(clock, step): (writer, words, topics,
        # counts)}, the newest clock dropped on each window, and the event a reader waits on
        self._steps: dict[int, dict[tuple[int, int],
                                    tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._steps_dropped: dict[int, int] = {}
        self._step_events: dict[int, asyncio.Event] = {}
        self.step_entries_in = 0
        self.step_entries_out = 0

    # -- pushes -------------------------------------------------------------------------
    def push(self, shard: int, clock: int, words: np.ndarray, topics: np.ndarray,
             counts: np.ndarray, log: bool = True) -> bool:
        """Apply one shard's aggregated delta of one clock; return False if it was a repeat.

        ``words`` are global word ids inside this actor's row range. ``log=False`` (the initial
        recount) applies without logging: every shard attaches after all initial pushes.
        """
        shard, clock = int(shard), int(clock)
        self.bytes_in += words.nbytes + topics.nbytes + counts.nbytes
        if clock <= self.applied[shard]:
            self.n_ignored += 1
            return False
        words = np.asarray(words)
        # the rows are the ids themselves on the first table shard (no copy: the log keeps
        # the caller's array, which it does not change, see biglda.ps.calls)
        same = self.row_start == 0 and words.dtype == np.int32
        cuts = self._chunks(words) if same else None
        # a large delta sorted by row (a sweep's) is in range if its ends are: its order was
        # checked by the chunking, on the threads; anything else is read once, here (a read
        # of the whole delta on one thread was a third of a 1 x 16 clock's push)
        if cuts is not None:
            inside = words[0] >= self.row_start and words[-1] < self.row_stop
        else:
            inside = first_outside(words, self.row_start, self.row_stop) < 0
        if not inside:
            raise ValueError(f"push to table shard {self.index} has word ids outside "
                             f"[{self.row_start}, {self.row_stop})")
        rows = words
        if not same:
            rows = (words - self.row_start).astype(np.int32)
            cuts = self._chunks(rows)
        topics = np.asarray(topics).astype(np.int32, copy=False)
        counts = np.asarray(counts).astype(np.int32, copy=False)
        dk = np.zeros(self.n_topics, dtype=np.int64)
        self.row_ll += self._apply(rows, topics, counts, dk, cuts)
        self.n_k += dk
        self.applied[shard] = clock
        self.n_pushes += 1
        kept = self._offers.get(shard)
        if kept is not None and kept[0] < clock:  # (see offer(): kept one clock longer)
            del self._offers[shard]
        if log:
            self._log.setdefault(clock, []).append(LogEntry(shard, rows, topics, counts, dk))
        low = int(self.applied.min())
        if low > self._snap_clock:
            self._folded_upto = low  # complete: folded by the first pull that needs it
            self._snap_clock = low
            self._snapshots[low] = self._state_after(low)
        return True

    def _chunks(self, rows: np.ndarray) -> np.ndarray | None:
        """Chunk boundaries of a large delta sorted by row, checked on the threads; else None.

        None for a delta below :data:`PARALLEL_APPLY_ENTRIES` entries or not sorted by row:
        it is applied on one thread. The chunks depend on the delta only.
        """
        if len(rows) < PARALLEL_APPLY_ENTRIES:
            return None
        return row_chunks(rows, APPLY_CHUNK, self._run)

    def _run(self, f: Any, n: int) -> list[Any]:
        """``[f(0), ..., f(n - 1)]``, on the worker process's threads where it has several."""
        pool = _apply_pool(self.apply_threads)
        return list(map(f, range(n))) if pool is None else list(pool.map(f, range(n)))

    def _apply(self, rows: np.ndarray, topics: np.ndarray, counts: np.ndarray,
               dk: np.ndarray, cuts: np.ndarray | None) -> float:
        """Apply a pushed delta to the rows and ``dk``; return the change of ``row_ll``.

        A large delta sorted by row (a sweep's; ``cuts`` from :meth:`_chunks`) goes in chunks
        of whole rows, on the worker process's threads: on one thread the apply was among the
        largest serial steps of a clock on 16 (pipelines/README.md, "16 cores"). The chunks
        and the order of the sum depend on the delta only, so the table is the same on any
        threads.
        """
        args = (self.beta, self._lg)
        if cuts is None:
            return apply_delta_ll(self.n_wk, rows, topics, counts, *args, dk)
        dks = np.zeros((len(cuts) - 1, self.n_topics), dtype=np.int64)
        self.parallel_applies += _apply_pool(self.apply_threads) is not None

        def chunk(i: int) -> float:
            a, b = cuts[i], cuts[i + 1]
            return apply_delta_ll(self.n_wk, rows[a:b], topics[a:b], counts[a:b], *args,
                                  dks[i])

        lls = self._run(chunk, len(cuts) - 1)
        dk += dks.sum(axis=0)
        return float(sum(lls))  # in chunk order

    def _fold(self, clock: int) -> FoldedClock:
        """``D_c`` of a complete clock, summed once.

        All its per-writer entries are logged until then: the pull that asks lacks every one
        of them, see :meth:`_trim`.
        """
        d = self._folded.get(clock)
        if d is None:
            # (the empty pushes of a process cache's other shards add nothing)
            entries = [e for e in self._log[clock] if len(e.rows)] or self._log[clock][:1]
            rows = np.concatenate([e.rows for e in entries])
            topics = np.concatenate([e.topics for e in entries])
            counts = np.concatenate([e.counts for e in entries])
            starts = np.cumsum([0] + [len(e.rows) for e in entries])
            row_ptr, d_topics, d_counts = fold(rows, topics, counts, len(self.n_wk),
                                               self.n_topics, starts)
            self.fold_entries += len(rows)
            d = FoldedClock(row_ptr, d_topics, d_counts, np.flatnonzero(np.diff(row_ptr)),
                            np.sum([e.dk for e in entries], axis=0))
            self._folded[clock] = d
        return d

    def _state_after(self, clock: int) -> tuple[float, np.ndarray]:
        """``(row_ll, n_k part)`` of the table after every shard's clock ``clock``, no later.

        Under SSP faster shards may already have pushed later clocks; their deltas are still in
        the per-writer log (not complete: the slowest shard has not pushed them), so they are
        taken out and put back (exact integer arithmetic on the table; the LL of the cut is
        computed on the way). This makes the reported joint LL that of one consistent state:
        every shard after ``clock``.
        """
        later = [e for c in sorted(self._log) if c > clock for e in self._log[c]]
        if not later:
            return self.row_ll, self.n_k.copy()
        ll = self.row_ll
        n_k = self.n_k.copy()
        scratch = np.zeros(self.n_topics, dtype=np.int64)
        for e in reversed(later):
            ll += apply_delta_ll(self.n_wk, e.rows, e.topics, -e.counts, self.beta, self._lg,
                                 scratch)
            n_k -= e.dk
        for e in later:
            apply_delta_ll(self.n_wk, e.rows, e.topics, e.counts, self.beta, self._lg, scratch)
        return ll, n_k

    # -- pulls --------------------------------------------------------------------------
    def attach(self, shard: int, words: np.ndarray, upto: int, members: Any = ()
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Register a shard's vocabulary here; return its rows as of clock ``upto``.

        ``words``: sorted unique global ids in this range. Returns ``(rows [n, K], n_k part,
        received)``: the table without the deltas of clocks after ``upto`` (those come
        with later pulls), so what a shard sees does not depend on when it asked — under BSP
        the same seed and shard layout give the same run. ``received`` (int64 [n_shards]) is
        what to pass to the next :meth:`pull`: ``upto``, or less for a writer that has not
        pushed ``upto`` yet. ``members``: other shards this one reads for (a process cache:
        they push, this one pulls), so the log is trimmed by what this reader has.
        """
        shard, upto = int(shard), int(upto)
        self._members[shard] = np.asarray([int(m) for m in members if int(m) != shard],
                                          dtype=np.int64)
        rows = np.asarray(words, dtype=np.int64) - self.row_start
        mask = np.zeros(len(self.n_wk), dtype=bool)
        mask[rows] = True
        self._masks[shard] = mask
        self._vocab[shard] = rows
        out = self.n_wk[rows]
        n_k = self.n_k.copy()
        local = None
        for c in sorted(self._folded):
            if c > upto:  # folded: one slice of D_c (its per-writer entries may be trimmed)
                d = self._folded[c]
                if local is None:
                    local = np.full(len(self.n_wk), -1, dtype=np.int64)
                    local[rows] = np.arange(len(rows))
                r, t, k = gather(d.row_ptr, d.topics, d.counts, rows)
                add_coo(out, local[r], t, -k)
                n_k -= d.dk
        for c in sorted(self._log):
            if c > upto and c not in self._folded:  # not folded (yet): per writer
                if local is None:
                    local = np.full(len(self.n_wk), -1, dtype=np.int64)
                    local[rows] = np.arange(len(rows))
                for e in self._log[c]:
                    keep = mask[e.rows]
                    add_coo(out, local[e.rows[keep]], e.topics[keep], -e.counts[keep])
                    n_k -= e.dk
        # a writer that has not pushed ``upto`` yet (SSP) still owes its later clocks
        received = np.minimum(self.applied, upto)
        self._received[shard] = received
        self._share_received(shard)
        self.bytes_out += out.nbytes + n_k.nbytes
        return out, n_k, received

    def _share_received(self, shard: int) -> None:
        """Give a process cache's other shards what its reader has, and all of its own."""
        members = self._members.get(shard)
        if members is not None and len(members):
            self._received[members] = self._received[shard]
            self._received[members, shard] = self.applied[shard]

    def _others(self, shard: int, received: np.ndarray) -> np.ndarray:
        return np.delete(received, shard)

    def pull(self, shard: int, received: np.ndarray, upto: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Other shards' deltas of clocks in ``(received[writer], upto]``, on this shard's rows.

        Returns ``(received', words (global), topics, counts, dk)``, merged (each (word, topic)
        once); ``dk`` is the change of this actor's ``n_k`` part (all rows, not only the
        shard's). Folded clocks the shard holds nothing of come as slices of ``D_c`` less its
        own entries; clocks it holds in part and clocks not folded yet, per writer.
        ``received`` is the shard's own record of what it has, so a retried pull returns the
        same again and loses nothing; it also acknowledges those deltas, which lets the log be
        trimmed. Pushes of one writer arrive in clock order, so everything of a writer up to
        the newest clock returned has been delivered.
        """
        shard, upto = int(shard), int(upto)
        received = np.asarray(received, dtype=np.int64).copy()
        mask = self._masks.get(shard)
        if mask is None:
            raise RuntimeError(f"shard {shard} pulled from table shard {self.index} before attach")
        np.maximum(self._received[shard], received, out=self._received[shard])
        self.n_pulls += 1
        others = self._others(shard, received)
        lo = int(others.max()) if len(others) else int(received[shard])
        hi = max(lo, min(self._folded_upto, upto))
        dk = np.zeros(self.n_topics, dtype=np.int64)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if len(others):  # (a single writer has nothing to receive but its own moves)
            vocab = self._vocab[shard]
            for c in sorted(c for c in self._log if lo < c <= hi):
                # the shard has no writer's c, so every writer's entry is still logged
                theirs = [e for e in self._log[c] if e.writer != shard and len(e.rows)]
                if not theirs:  # only its own process wrote (its members push empty deltas)
                    continue
                if len(theirs) == 1:  # one other writer: its entry is the answer
                    e = theirs[0]
                    keep = mask[e.rows]
                    self.pull_log_scanned += len(e.rows)
                    parts.append((e.rows[keep], e.topics[keep], e.counts[keep]))
                    dk += e.dk
                    continue
                d = self._fold(c)
                # Cut by the vocabulary through row_ptr, or the changed rows by the mask:
                # whichever is shorter.
                sel = vocab if len(vocab) <= len(d.rows) else d.rows[mask[d.rows]]
                self.pull_rows_probed += min(len(vocab), len(d.rows))
                part = gather(d.row_ptr, d.topics, d.counts, sel)
                self.pull_gathered += len(part[0])
                dk += d.dk
                own = [e for e in self._log[c] if e.writer == shard]
                if own:  # its own moves are in its cache already: out of the slice
                    e = own[0]
                    keep = mask[e.rows]  # (all of them, unless it pushed foreign words)
                    part = subtract_sorted(*part, e.rows[keep], e.topics[keep],
                                           e.counts[keep], self.n_topics)
                    self.pull_own += len(e.rows)
                    dk -= e.dk
                else:  # D_c keeps net zeros (see fold): none goes on the wire
                    nonzero = part[2] != 0
                    part = (part[0][nonzero], part[1][nonzero], part[2][nonzero])
                parts.append(part)
            had = received.copy()
            if hi > lo:  # then upto >= hi: the clocks held in part (<= lo) come below
                np.maximum(received, hi, out=received)
            # clocks held in part (folded or not: the entries are kept, see _trim) and the
            # frontier: other writers' entries the shard does not have yet
            least = int(others.min())  # clocks <= this one it has from every writer
            for c in sorted(c for c in self._log
                            if c <= upto and (c > hi or least < c <= lo)):
                for e in self._log[c]:
                    if e.writer == shard or had[e.writer] >= c:
                        continue
                    keep = mask[e.rows]
                    self.pull_log_scanned += len(e.rows)
                    parts.append((e.rows[keep], e.topics[keep], e.counts[keep]))
                    dk += e.dk
                    received[e.writer] = max(received[e.writer], c)
        if len(parts) > 1:  # slices of one D_c or one push: sorted, unique (row, topic)
            self.pull_merged += sum(len(p[0]) for p in parts)
            rows, topics, counts = sum_sorted(parts)
        elif parts:
            rows, topics, counts = parts[0]
        else:
            rows = topics = counts = _EMPTY
        self._share_received(shard)
        self._trim()
        words = rows + np.int32(self.row_start)
        self.pull_entries_out += len(words)
        self.bytes_out += words.nbytes + topics.nbytes + counts.nbytes + dk.nbytes
        return received, words, topics, counts, dk

    def _trim(self) -> None:
        """Drop what nobody needs any more.

        ``D_c`` once every puller has all of clock ``c``; a folded clock's per-writer entry
        once every other shard has it and its writer can no longer be served that clock
        folded (it acknowledged some other writer's ``c``).

        Acknowledged, not sent: a reply may be lost and the pull retried with the older
        ``received``, which must find the same entries.
        """
        got = self._received.copy()
        top = np.iinfo(np.int64).max
        np.fill_diagonal(got, top)
        low = got.min(axis=0)  # per writer: the clock every reader has
        everyone = int(low.min())
        np.fill_diagonal(got, np.iinfo(np.int64).min)
        # per writer as a reader: its pulls serve folded only clocks after this one
        past = got.max(axis=1) if self.n_shards > 1 else np.full(1, top)
        for c in [c for c in self._folded if c <= everyone]:
            del self._folded[c]
        for c in [c for c in self._log if c <= self._folded_upto]:
            kept = [e for e in self._log[c] if c > low[e.writer] or c > past[e.writer]]
            if kept:
                self._log[c] = kept
            else:
                del self._log[c]
        # clocks not complete stay: the slowest shard's snapshot and the folds need them

    # -- managed communication ----------------------------------------------------------
    def offer(self, shard: int, clock: int, words: np.ndarray, topics: np.ndarray,
              counts: np.ndarray) -> int:
        """Keep an early update of shard ``shard``'s ``clock`` for the other readers.

        Not applied to the table, not logged, not in the log-likelihood: the clock's push
        stays the record (it holds these moves too). The offers of a clock stay until the
        writer's next push (a reader that has not asked since still gets them); readers
        that received the clock are never sent them. Readers fold offers into their caches
        and take them out again when they receive the clock
        (:class:`biglda.ps.managed.EarlyUpdates`). An offer of a clock already pushed (a
        late call) is ignored. Returns how many offers of that clock the writer has here
        (0: ignored).
        """
        shard, clock = int(shard), int(clock)
        if clock <= self.applied[shard]:
            return 0
        rows = (np.asarray(words) - self.row_start).astype(np.int32, copy=False)
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self.n_wk)):
            raise ValueError(f"offer to table shard {self.index} has word ids outside "
                             f"[{self.row_start}, {self.row_stop})")
        kept = self._offers.get(shard)
        if kept is None or kept[0] != clock:  # (an older clock's offers went with its push)
            kept = self._offers[shard] = (clock, [])
        kept[1].append((rows, np.asarray(topics).astype(np.int32, copy=False),
                        np.asarray(counts).astype(np.int32, copy=False)))
        self.offer_entries_in += len(rows)
        self.bytes_in += 3 * rows.nbytes
        return len(kept[1])

    def offers(self, shard: int, got: np.ndarray, received: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Other writers' offers the reader ``shard`` lacks, on its rows.

        ``got`` int64 [n_shards, 2]: per writer, the clock of the offers the reader has and
        how many of them (``got[w] = (clock, n)``); ``received``: what it has of the table
        (its pull state). An offer of writer ``w``'s clock ``c`` goes only to a reader that
        has received ``w``'s clock ``c - 1`` and not ``c``: it is a change of the state the
        reader holds, so a count it previews never goes below zero there. Returns ``(got',
        writers, words (global), topics, counts)``, entry by entry; the clock of an entry is
        ``got'[writer, 0]``. The work is proportional to the offers kept (of the writers'
        last clocks), not to the number of readers.
        """
        shard = int(shard)
        mask = self._masks.get(shard)
        if mask is None:
            raise RuntimeError(f"shard {shard} asked table shard {self.index} for offers "
                               f"before attach")
        got = np.array(got, dtype=np.int64).reshape(self.n_shards, 2)
        received = np.asarray(received, dtype=np.int64)
        skip = {shard, *self._members.get(shard, np.zeros(0, np.int64)).tolist()}
        parts = []
        for writer, (clock, kept) in self._offers.items():
            if writer in skip or received[writer] != clock - 1:
                continue
            start = int(got[writer, 1]) if got[writer, 0] == clock else 0
            end = len(kept)
            for rows, topics, counts in kept[start:end]:
                keep = mask[rows]
                parts.append((np.full(int(keep.sum()), writer, np.int32), rows[keep],
                              topics[keep], counts[keep]))
            got[writer] = clock, end
        if parts:
            writers, rows, topics, counts = (np.concatenate(x) for x in zip(*parts, strict=True))
        else:
            writers = rows = topics = counts = _EMPTY
        words = rows + np.int32(self.row_start)
        self.offer_entries_out += len(words)
        self.bytes_out += 4 * words.nbytes
        return got, writers, words, topics, counts

    # -- the steps of --process-partition -----------------------------------------------
    async def post_step(self, writer: int, clock: int, window: int, step: int,
                        words: np.ndarray, topics: np.ndarray, counts: np.ndarray) -> int:
        """Keep writer ``writer``'s moves of ``step`` of ``clock`` on window ``window``.

        For the processes that resample the window after it, in this clock or the next
        (:meth:`window_steps`); ``words`` are global ids of the window's rows (any table
        shard's: this actor is the window's mailbox, not its rows' keeper). Like offers,
        never applied: the clock's push holds the moves too. A post of clock ``c`` drops the
        window's posts of clocks up to ``c - 2``: it was made after the window's first step
        of ``c``, which waited for every step of ``c - 1`` on it, whose readers had read
        those. Returns how many steps of ``clock`` the window has here; 0: a post of a
        clock dropped already (ignored). Runs on the worker's event loop, as
        :meth:`window_steps` does.
        """
        clock, window, step = int(clock), int(window), int(step)
        if clock <= self._steps_dropped.get(window, NO_CLOCK):
            return 0
        posts = self._steps.setdefault(window, {})
        posts[clock, step] = (int(writer), np.asarray(words).astype(np.int32, copy=False),
                              np.asarray(topics).astype(np.int32, copy=False),
                              np.asarray(counts).astype(np.int32, copy=False))
        if clock - 2 > self._steps_dropped.get(window, NO_CLOCK):
            self._steps_dropped[window] = clock - 2
            for key in [key for key in posts if key[0] <= clock - 2]:
                del posts[key]
        self.step_entries_in += len(words)
        self.bytes_in += 12 * len(words)
        event = self._step_events.pop(window, None)
        if event is not None:
            event.set()
        return sum(1 for c, _ in posts if c == clock)

    async def window_steps(self, window: int, steps: list[tuple[int, int]], wait: float
                           ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] | None:
        """Return the posts of ``steps`` (``(clock, step)`` pairs) on ``window``, in order.

        ``[(writer, words, topics, counts)]``, once all are here; None if they did not all
        come within ``wait`` seconds (the caller asks again, or gives up). Exactly those
        steps, whenever asked: what a reader folds does not depend on timing (BSP stays
        deterministic).
        """
        window = int(window)
        steps = [(int(c), int(s)) for c, s in steps]
        deadline = time.monotonic() + wait
        while True:
            dropped = self._steps_dropped.get(window, NO_CLOCK)
            if any(c <= dropped for c, _ in steps):
                raise RuntimeError(f"steps {steps} asked of table shard {self.index} after "
                                   f"its posts of clock {dropped} on words' range {window} "
                                   f"were dropped")
            posts = self._steps.get(window, {})
            if all(key in posts for key in steps):
                out = [posts[key] for key in steps]
                self.step_entries_out += sum(len(p[1]) for p in out)
                self.bytes_out += 12 * sum(len(p[1]) for p in out)
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            event = self._step_events.setdefault(window, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), left)

    def advance(self, shard: int, upto: int) -> np.ndarray:
        """Record that reader ``shard`` has every writer's deltas of clocks up to ``upto``.

        A pull that sends nothing: processes taking turns folded every other process's moves
        as the windows' posts (their caches are exact), so a pull would only bring them
        again. Every writer must have pushed ``upto`` (the clock's admission says so); the
        log is trimmed as after a pull. Returns the reader's ``received``.
        """
        shard, upto = int(shard), int(upto)
        if int(self.applied.min()) < upto:
            raise RuntimeError(f"shard {shard} advanced to clock {upto} on table shard "
                               f"{self.index}, which has pushes only up to "
                               f"{int(self.applied.min())}")
        np.maximum(self._received[shard], upto, out=self._received[shard])
        self.n_advances += 1
        self._share_received(shard)
        self._trim()
        return self._received[shard].copy()

    def push_advance(self, shard: int, clock: int, words: np.ndarray, topics: np.ndarray,
                     counts: np.ndarray, upto: int) -> np.ndarray:
        """:meth:`push`, then :meth:`advance` to ``upto``: one call where a clock had two.

        Processes taking turns advance at the push of clock ``c`` to ``c - 2``, the clock
        their advance at ``c``'s start named (every writer had pushed it then). Returns the
        reader's ``received``.
        """
        self.push(shard, clock, words, topics, counts)
        return self.advance(shard, upto)

    # -- read-outs ----------------------------------------------------------------------
    def snapshot(self, clock: int) -> tuple[float, np.ndarray] | None:
        """``(row_ll, n_k part)`` when every shard's push of ``clock`` had arrived (popped)."""
        snap = self._snapshots.pop(int(clock), None)
        for c in [c for c in self._snapshots if c < int(clock)]:
            del self._snapshots[c]
        return snap

    def table(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``(row_start, n_wk rows, n_k part)`` — the whole shard (final model, tests)."""
        return self.row_start, self.n_wk.copy(), self.n_k.copy()

    def top_words(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the ``n`` largest rows of each topic here: ``(global word ids, counts)``.

        Both are [n, K].
        """
        n = min(int(n), len(self.n_wk))
        if n == 0:
            return np.zeros((0, self.n_topics), np.int64), np.zeros((0, self.n_topics), np.int32)
        idx, counts = top_rows(self.n_wk, n)
        return idx + self.row_start, counts.astype(np.int32)

    def info(self) -> dict[str, Any]:
        """Return the counters: bytes, pushes, log length, applied clocks, work of pulls.

        Bytes in/out, pushes applied/ignored, log length, applied clocks, the threads a
        large push is applied on (``apply_threads``) and how many were (``parallel_applies``),
        the pulls that sent nothing (``advances``), and the work of
        pulls in entries (``fold_entries``: pushed entries summed into folded clocks; per
        pull: ``pull_rows_probed``, ``pull_gathered``, ``pull_log_scanned``,
        ``pull_merged``, ``pull_own``, ``pull_entries_out``).
        """
        return {"index": self.index, "rows": [self.row_start, self.row_stop],
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "pushes": self.n_pushes, "ignored": self.n_ignored,
                "log_entries": sum(len(v) for v in self._log.values()),
                "folded_clocks": len(self._folded), "folded_upto": self._folded_upto,
                "applied": self.applied.tolist(), "apply_threads": self.apply_threads,
                "parallel_applies": self.parallel_applies,
                "row_ll": self.row_ll, "nbytes": int(self.n_wk.nbytes),
                "pulls": self.n_pulls, "advances": self.n_advances,
                "fold_entries": self.fold_entries,
                "pull_rows_probed": self.pull_rows_probed,
                "pull_gathered": self.pull_gathered, "pull_log_scanned": self.pull_log_scanned,
                "pull_merged": self.pull_merged, "pull_own": self.pull_own,
                "pull_entries_out": self.pull_entries_out,
                "offers_kept": sum(len(v[1]) for v in self._offers.values()),
                "offer_entries_in": self.offer_entries_in,
                "offer_entries_out": self.offer_entries_out,
                "step_entries_in": self.step_entries_in,
                "step_entries_out": self.step_entries_out}
