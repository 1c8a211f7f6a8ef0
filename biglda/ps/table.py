"""The table actor: a row range of the word-topic table ``n_wk`` and its part of ``n_k``.

:class:`TableShard` holds rows ``[row_start, row_stop)`` of ``n_wk`` (int32) and their column
sums (this actor's part of ``n_k``; the global ``n_k`` is the sum of the parts). Pushes are
pre-aggregated COO deltas, one per (worker shard, table shard, clock), idempotent: the actor
keeps the last applied clock of every worker shard and ignores a push whose clock is not newer.
Every applied push is also kept in a short log, so a worker shard pulls only the deltas of
*other* shards it has not received yet, up to a given clock, restricted to its own vocabulary
and merged into one delta ("move as little as possible": a delta of a clock is typically much
smaller than the rows it touches once K is in the hundreds). Pulling by clock rather than
"whatever arrived" makes BSP deterministic: the same seed and shard layout give the same run,
on any number of workers. The log is trimmed to what some shard has not received yet. The
actor also keeps the word part of the log-likelihood, Σ lgamma(n_wk + β) − lgamma(β), up to
date incrementally (exact: each applied entry adds lgamma(new+β) − lgamma(old+β)), and
snapshots it with its ``n_k`` part the moment every shard's push of a clock has arrived; under
BSP this is exactly the table after that clock.

Actor methods are vectorized and short: the hot paths are one numba loop over a delta
(``_kernels``), never ``np.add.at``. Sync methods of all actors on one worker share one thread.
Workers and the driver reach it through :class:`biglda.ps.client.TableClient`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from biglda.ps._kernels import add_coo, apply_delta_ll, lgamma_table, merge_coo
from biglda.ps.protocol import NO_CLOCK


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
        self.row_ll = 0.0  # Σ over entries of lgamma(n + β) − lgamma(β)
        self._lg = lgamma_table(self.beta)
        self.applied = np.full(self.n_shards, NO_CLOCK, dtype=np.int64)  # last clock per shard
        # log entries: (writer shard, clock, rows (local), topics, counts, dk)
        self._log: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        # received[reader, writer]: newest clock of writer's deltas the reader has
        self._received = np.full((self.n_shards, self.n_shards), NO_CLOCK, dtype=np.int64)
        self._masks: dict[int, np.ndarray] = {}
        self._snap_clock = NO_CLOCK
        self._snapshots: dict[int, tuple[float, np.ndarray]] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.n_pushes = 0
        self.n_ignored = 0

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
        rows = np.asarray(words, dtype=np.int64) - self.row_start
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self.n_wk)):
            raise ValueError(f"push to table shard {self.index} has word ids outside "
                             f"[{self.row_start}, {self.row_stop})")
        topics = np.asarray(topics)
        counts = np.asarray(counts, dtype=np.int32)
        dk = np.zeros(self.n_topics, dtype=np.int64)
        self.row_ll += apply_delta_ll(self.n_wk, rows, topics, counts, self.beta, self._lg, dk)
        self.n_k += dk
        self.applied[shard] = clock
        self.n_pushes += 1
        if log:
            self._log.append((shard, clock, rows.astype(np.int32), topics.astype(np.int32),
                              counts, dk))
        low = int(self.applied.min())
        if low > self._snap_clock:
            self._snap_clock = low
            self._snapshots[low] = self._state_after(low)
        return True

    def _state_after(self, clock: int) -> tuple[float, np.ndarray]:
        """``(row_ll, n_k part)`` of the table after every shard's clock ``clock`` and nothing later.

        Under SSP faster shards may already have pushed later clocks; their deltas are still in
        the log (the slowest shard has not received them), so they are taken out and put back
        (exact integer arithmetic on the table; the LL of the cut is computed on the way). This
        makes the reported joint LL that of one consistent state: every shard after ``clock``.
        """
        later = [e for e in self._log if e[1] > clock]
        if not later:
            return self.row_ll, self.n_k.copy()
        ll = self.row_ll
        n_k = self.n_k.copy()
        scratch = np.zeros(self.n_topics, dtype=np.int64)
        for _, _, r, t, c, dk in reversed(later):
            ll += apply_delta_ll(self.n_wk, r, t, -c, self.beta, self._lg, scratch)
            n_k -= dk
        for _, _, r, t, c, _ in later:
            apply_delta_ll(self.n_wk, r, t, c, self.beta, self._lg, scratch)
        return ll, n_k

    # -- pulls --------------------------------------------------------------------------
    def attach(self, shard: int, words: np.ndarray, upto: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Register a shard's vocabulary here; return its rows as of clock ``upto``.

        ``words``: sorted unique global ids in this range. Returns ``(rows [n, K], n_k part,
        received)``: the table without the logged deltas of clocks after ``upto`` (those come
        with later pulls), so what a shard sees does not depend on when it asked — under BSP
        the same seed and shard layout give the same run. ``received`` (int64 [n_shards]) is
        what to pass to the next :meth:`pull`: ``upto``, or less for a writer that has not
        pushed ``upto`` yet.
        """
        shard, upto = int(shard), int(upto)
        rows = np.asarray(words, dtype=np.int64) - self.row_start
        mask = np.zeros(len(self.n_wk), dtype=bool)
        mask[rows] = True
        self._masks[shard] = mask
        out = self.n_wk[rows].copy()
        n_k = self.n_k.copy()
        later = [e for e in self._log if e[1] > upto]
        if later:
            local = np.full(len(self.n_wk), -1, dtype=np.int64)
            local[rows] = np.arange(len(rows))
            for _, _, r, t, c, dk in later:
                keep = mask[r]
                add_coo(out, local[r[keep]], t[keep], -c[keep])
                n_k -= dk
        # a writer that has not pushed ``upto`` yet (SSP) still owes its later clocks
        received = np.minimum(self.applied, upto)
        self._received[shard] = received
        self.bytes_out += out.nbytes + n_k.nbytes
        return out, n_k, received

    def pull(self, shard: int, received: np.ndarray, upto: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Other shards' deltas of clocks in ``(received[writer], upto]``, on this shard's rows.

        Returns ``(received', words (global), topics, counts, dk)``, merged (each (word, topic)
        once); ``dk`` is the change of this actor's ``n_k`` part (all rows, not only the
        shard's). ``received`` is the shard's own record of what it has, so a retried pull
        returns the same again and loses nothing; it also acknowledges those deltas, which
        lets the log be trimmed. Pushes of one writer arrive in clock order, so everything of a
        writer up to the newest clock returned has been delivered.
        """
        shard, upto = int(shard), int(upto)
        received = np.asarray(received, dtype=np.int64).copy()
        mask = self._masks.get(shard)
        if mask is None:
            raise RuntimeError(f"shard {shard} pulled from table shard {self.index} before attach")
        np.maximum(self._received[shard], received, out=self._received[shard])
        parts = [e for e in self._log
                 if e[0] != shard and received[e[0]] < e[1] <= upto]
        dk = np.zeros(self.n_topics, dtype=np.int64)
        if parts:
            rows = np.concatenate([e[2] for e in parts])
            topics = np.concatenate([e[3] for e in parts])
            counts = np.concatenate([e[4] for e in parts])
            for writer, clock, *_, part_dk in parts:
                dk += part_dk
                received[writer] = max(received[writer], clock)
            keep = mask[rows]
            rows, topics, counts = rows[keep], topics[keep], counts[keep]
            if len(parts) > 1:  # one push already has unique (word, topic) pairs
                rows, topics, counts = merge_coo(rows, topics, counts, self.n_topics)
        else:
            rows = topics = counts = np.zeros(0, dtype=np.int32)
        self._trim()
        words = (rows + self.row_start).astype(np.int32)
        self.bytes_out += words.nbytes + topics.nbytes + counts.nbytes + dk.nbytes
        return received, words, topics.astype(np.int32), counts, dk

    def _trim(self) -> None:
        """Drop log entries every other shard has received (diagonal: a writer never reads its own)."""
        if not self._log:
            return
        got = self._received.copy()
        np.fill_diagonal(got, np.iinfo(np.int64).max)
        low = got.min(axis=0)  # per writer: the clock every reader has
        # ... and clocks after the slowest shard's stay for its snapshot (see _state_after)
        slowest = int(self.applied.min())
        self._log = [e for e in self._log if e[1] > low[e[0]] or e[1] > slowest]

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
        """The ``n`` largest rows of each topic here: ``(global word ids, counts)``, both [n, K]."""
        n = min(int(n), len(self.n_wk))
        if n == 0:
            return np.zeros((0, self.n_topics), np.int64), np.zeros((0, self.n_topics), np.int32)
        idx = np.argpartition(-self.n_wk, n - 1, axis=0)[:n]
        counts = np.take_along_axis(self.n_wk, idx, axis=0)
        return idx.astype(np.int64) + self.row_start, counts

    def info(self) -> dict[str, Any]:
        """Counters: bytes in/out, pushes applied/ignored, log length, applied clocks."""
        return {"index": self.index, "rows": [self.row_start, self.row_stop],
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "pushes": self.n_pushes, "ignored": self.n_ignored,
                "log_entries": len(self._log), "applied": self.applied.tolist(),
                "row_ll": self.row_ll, "nbytes": int(self.n_wk.nbytes)}
