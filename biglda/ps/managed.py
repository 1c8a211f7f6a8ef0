"""Managed communication (Bösen: Wei et al., SoCC 2015): early updates under a byte budget.

Under SSP a worker's moves reach the others only with its clock's push. With
``--comm-budget MB/s`` a worker process sweeps each clock in :data:`ROUNDS` rounds of
documents and, between rounds, sends part of what it changed so far early — the entries of
largest relative magnitude ``|Δn_wk| / (n_wk + 1)`` first, as many as the budget allows
for the time since its last send — and folds into its cache what the others sent, so its
caches are fresher than the staleness bound requires.

How it stays exact where it must (:class:`EarlyUpdates` keeps the books):

* **The push stays the record.** Early updates are *offers*: the table actor keeps them
  beside the table, never applies, logs or scores them, and drops a writer's offers when
  its next clock's push arrives (the push of their clock holds every move they previewed,
  and a reader holding that clock is never sent them). So the table,
  the log-likelihood, checkpoints and recovery are those of plain SSP, and the table equals
  the recount of ``z`` whenever a clock is complete.
* **Taken out on receipt.** A reader adds offers to its cache and records them by (writer,
  clock); when a pull brings that writer's clock, it subtracts them again, so the cache is
  once more "table as received + own moves" (the SSP invariant), exactly.
* **Never below zero.** An offer of writer ``w``'s clock ``c`` reaches only readers holding
  ``w``'s clock ``c - 1``, and each entry sent is the whole of that entry's change since it
  was last sent, so what a reader has of ``w``'s counts is always a state ``w`` really had.

What it costs: bytes (every early entry is sent again in the push) and the reproducibility
of a run (when an offer arrives depends on timing, so BSP with a budget is no longer
bit-identical for a seed). Off by default (budget 0): then nothing of this runs. Measured
in ``pipelines/README.md`` ("Managed communication").

The same class carries the steps of ``--process-partition`` (no budget): in step ``s`` of
a clock process ``p`` resamples one window of the vocabulary, which no other process
resamples in that step. It posts the step's whole delta to that window's mailbox (one table
shard, :meth:`EarlyUpdates.send_step`), and before a step it folds the window's posts since
it last had it, those of the processes that had it in between
(:meth:`EarlyUpdates.wait_window`): exactly those, so what a reader folds does not depend on
when it asks and BSP stays deterministic. They are not taken out again: the process pulls
nothing (its cache is exact from the posts), so no books are kept for them. One call out
and one in per step, whatever the number of processes, and neither a round trip on the
sweep's path: the question is asked before the step before is swept
(:meth:`EarlyUpdates.ask_window`), the post sent without waiting for its answer; a process
waits only for the one that had its window last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from biglda.ps._kernels import add_coo, add_sorted
from biglda.ps.cache import ShardCache
from biglda.ps.client import TableClient
from biglda.ps.protocol import NO_CLOCK

#: Rounds of documents per clock when managed communication is on (sends between rounds).
ROUNDS = 4
#: Bytes of one (word, topic, count) entry on the wire.
ENTRY_BYTES = 12
#: Seconds a window's mailbox holds a question for the steps before it answers without them.
STEP_WAIT = 0.5

_EMPTY = np.zeros(0, dtype=np.int32)


class EarlyUpdates:
    """The early updates a worker process sends and receives, for its cache.

    Parameters
    ----------
    cache : the process's cache (its ``shard`` is the writer's identity).
    budget : bytes per second this process may send early (> 0), or None: whole steps
        only (:meth:`send_step`).
    n_shards : number of document shards of the run.
    """

    def __init__(self, cache: ShardCache, budget: float | None, n_shards: int) -> None:
        if budget is not None and not budget > 0:
            raise ValueError(f"the budget must be > 0 bytes/s, got {budget}")
        self.cache = cache
        self.rate = 0.0 if budget is None else float(budget)
        n_parts = len(cache.bounds) - 1
        self.got = [np.stack([np.full(n_shards, NO_CLOCK, np.int64),
                              np.zeros(n_shards, np.int64)], axis=1) for _ in range(n_parts)]
        # per table shard: folded offers not taken out yet, as
        # (writer, clock, local words, topics, counts) batches
        self.batches: list[list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]] = [
            [] for _ in range(n_parts)]
        self.pending = (_EMPTY.astype(np.int64), _EMPTY, _EMPTY)
        self.allowance = 0.0
        self.last = 0.0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.entries_sent = 0
        self.entries_received = 0

    # -- sending -------------------------------------------------------------------------
    def start_clock(self, now: float) -> None:
        """Forget the last clock's unsent changes (its push sent them); the budget restarts."""
        self.pending = (_EMPTY.astype(np.int64), _EMPTY, _EMPTY)
        self.allowance = 0.0
        self.last = now

    def add(self, deltas: Sequence[tuple[np.ndarray, ...]]) -> None:
        """Add sweep deltas ``(words, topics, counts, ...)`` (local ids) to what is unsent.

        Each is sorted by (word, topic) and unique (a sweep's delta), as the unsent list is:
        a linear merge.
        """
        for d in deltas:
            if len(d[0]):
                self.pending = add_sorted(self.pending, d[:3])

    def choose(self, n: int) -> np.ndarray:
        """Return the indices of the ``n`` unsent entries of largest relative magnitude.

        ``|Δ| / (n_wk + 1)`` with ``n_wk`` the cache's count (its own moves included), sorted
        by (word, topic).
        """
        words, topics, counts = self.pending
        if n >= len(words):
            return np.arange(len(words))
        rel = np.abs(counts) / (np.abs(self.cache.n_wk[words, topics]) + 1.0)
        return np.sort(np.argpartition(-rel, n - 1)[:n])

    def send(self, tables: TableClient, clock: int, now: float, timeout: float) -> int:
        """Send what the budget allows since the last send; return the bytes sent."""
        self.allowance += self.rate * max(0.0, now - self.last)
        self.last = now
        n = min(int(self.allowance // ENTRY_BYTES), len(self.pending[0]))
        if n <= 0:
            return 0
        idx = self.choose(n)
        words, topics, counts = (x[idx] for x in self.pending)
        keep = np.ones(len(self.pending[0]), dtype=bool)
        keep[idx] = False
        self.pending = tuple(x[keep] for x in self.pending)  # type: ignore[assignment]
        parts = [(w.astype(np.int32, copy=False), t, c)
                 for w, t, c in self.cache._by_table_shard(words, topics, counts)]
        tables.offer(self.cache.shard, clock, parts, timeout)
        sent = n * ENTRY_BYTES
        self.allowance -= sent
        self.bytes_sent += sent
        self.entries_sent += n
        return sent

    def send_step(self, tables: TableClient, clock: int, window: int, step: int,
                  words: np.ndarray, topics: np.ndarray, counts: np.ndarray) -> Any:
        """Post one step's whole delta on ``window`` (local ids) to the window's mailbox.

        For the processes that resample the window after this one in the clock
        (:meth:`wait_window`). Returns the call's future without waiting for the mailbox's
        answer (the sender sweeps on: :func:`biglda.ps.calls.call_all` on the futures before
        the clock's push says that every post arrived).
        """
        words = np.asarray(words)
        fut = tables.send_step(self.cache.shard, clock, window, step,
                               self.cache.global_ids(words.astype(np.int32, copy=False)),
                               np.asarray(topics, np.int32), np.asarray(counts, np.int32))
        self.bytes_sent += len(words) * ENTRY_BYTES
        self.entries_sent += len(words)
        return fut

    # -- receiving -----------------------------------------------------------------------
    def ask_window(self, tables: TableClient, window: int, steps: Sequence[tuple[int, int]],
                   wait: float = STEP_WAIT) -> Any:
        """Ask the mailbox now for what :meth:`wait_window` folds; pass it the answer's future.

        Asked before the step before is swept, the posts come while it sweeps (one round
        trip off each step's start). The mailbox answers within ``wait`` s either way; an
        answer without them makes :meth:`wait_window` ask again.
        """
        return tables.ask_window_steps(window, steps, wait)

    def wait_window(self, tables: TableClient, window: int, steps: Sequence[tuple[int, int]],
                    into: Sequence[tuple[np.ndarray, np.ndarray]], timeout: float,
                    alive: Callable[[], bool] | None = None, wait: float = STEP_WAIT,
                    asked: Any = None, k_from: int | None = None) -> int | None:
        """Fold the moves of ``steps`` (``(clock, step)`` pairs) on ``window``, once all came.

        Exactly those steps' (one other process's each), so what a reader folds does not
        depend on when it asks: BSP stays deterministic. Only the rows this cache holds;
        ``n_k`` takes those same entries for posts of clocks from ``k_from`` on (None: all),
        the rows alone for older ones (the caller sets ``n_k`` from the clocks' totals). The
        mailbox answers once they are all there or after ``wait`` seconds; then ``alive()``
        says whether the run still goes on (a process lost: None, the attempt is given up);
        TimeoutError past ``timeout``. ``asked``: the future of :meth:`ask_window` for the
        same steps, answered first. Returns the bytes received.
        """
        start = time.monotonic()
        steps = list(steps)
        while True:
            posts = tables.window_steps(window, steps, wait, timeout, asked=asked)
            asked = None
            if posts is not None:
                break
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"shard {self.cache.shard}: the steps {steps} on words' "
                                   f"range {window} did not come within {timeout:g} s")
            if alive is not None and not alive():
                return None
        cache, got = self.cache, 0
        for (clock, _), (_, words, topics, counts) in zip(steps, posts, strict=True):
            local, keep = cache.rows_of(words)
            if keep is not None:
                local, topics, counts = local[keep], topics[keep], counts[keep]
            self._add(into, local, topics, counts, k_from is None or clock >= k_from)
            got += ENTRY_BYTES * len(words)
            self.entries_received += len(words)
        self.bytes_received += got
        return got

    def _add(self, into: Sequence[tuple[np.ndarray, np.ndarray]], local: np.ndarray,
             topics: np.ndarray, counts: np.ndarray, with_k: bool = True) -> None:
        """Add received entries (local ids) to each ``(n_wk, n_k)`` of ``into``.

        ``with_k``: to ``n_k`` too (else to the rows only).
        """
        dk = (np.bincount(topics, weights=counts, minlength=self.cache.n_topics).astype(np.int64)
              if with_k else None)
        for n_wk, n_k in into:
            add_coo(n_wk, local, topics, counts)
            if dk is not None:
                n_k += dk

    def receive(self, tables: TableClient, into: Sequence[tuple[np.ndarray, np.ndarray]],
                timeout: float) -> int:
        """Fold the offers others sent since the last call into ``into``; return bytes.

        ``into``: the ``(n_wk, n_k)`` tables to add them to — the cache's first (its books
        are kept for it) and the sampling threads' copies of it.
        """
        cache = self.cache
        received = [r for r in cache.received if r is not None]
        if len(received) != len(cache.received):
            raise AssertionError("early updates before the cache attached")
        got = 0
        replies = tables.offers(cache.shard, self.got, received, timeout)
        for a, (now_got, writers, words, topics, counts) in enumerate(replies):
            self.got[a] = np.asarray(now_got, dtype=np.int64)
            if not len(words):
                continue
            local = cache.local_ids(words)
            self._add(into, local, topics, counts)
            for w in np.unique(writers):
                sel = writers == w
                self.batches[a].append((int(w), int(self.got[a][w, 0]), local[sel],
                                        topics[sel], counts[sel]))
            got += 4 * words.nbytes
            self.entries_received += len(words)
        self.bytes_received += got
        return got

    def settle(self) -> None:
        """Take out of the cache the offers of every clock a pull has brought since.

        Call after each refresh: the pulled clock holds the moves they previewed.
        """
        cache = self.cache
        for a, batches in enumerate(self.batches):
            received = cache.received[a]
            if received is None:
                continue
            kept = []
            for writer, clock, local, topics, counts in batches:
                if clock <= received[writer]:
                    self._add([(cache.n_wk, cache.n_k)], local, topics, -counts)
                else:
                    kept.append((writer, clock, local, topics, counts))
            self.batches[a] = kept

    def outstanding(self) -> int:
        """Entries folded in and not taken out yet (0 once every previewed clock arrived)."""
        return sum(len(b[2]) for batches in self.batches for b in batches)
