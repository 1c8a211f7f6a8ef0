"""One sweep on T threads of one table, by tomotopy's ``PARTITION`` (lightlda and cgs).

The documents are cut into T ranges of about equal tokens and the vocabulary into T ranges
of about equal cost. A sweep (or a half of lightlda's) runs in T steps: in step ``s``
thread ``i`` resamples the tokens of document range ``i`` whose words are in range
``(i + s) mod T``. In a step no two threads share a row of ``n_wk``, a document or a token,
so they work on the one table without locks. Each moves its own copy of ``n_k``, and the
copies' moves are summed at the step's end: the only approximation, so the chain is exact
but for ``n_k`` (on one thread the samplers run their exact kernels instead). Each part
draws from its own stream, so the chain is the same on every run with the same T, whichever
thread takes which part, but not the same for another T. The sweep's delta is gathered a
word range on each thread: from a snapshot of the rows where they are at most
``SNAPSHOT_ENTRIES_PER_TOKEN`` a token (:mod:`biglda.samplers.base`), else from the tokens
the kernels recorded as moved (``record``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import numpy as np

from biglda.samplers import base
from biglda.samplers._kernels import _dense_delta, _moves_delta
from biglda.samplers.base import SweepResult, check_sweep_args
from biglda.samplers.parts import run_parts
from biglda.samplers.rng import _substream


class Partition:
    """The ranges of one sweep on ``n_threads`` threads, and the threads' work.

    ``dcut`` cuts the documents into T ranges of about equal tokens, ``wcut`` the vocabulary
    into T ranges of about equal cost (word ``w``'s ``n_w[w]`` tokens weigh ``n_w[w] **
    word_cost_power``); ``range_of[w]`` is word ``w``'s range. With ``record`` the kernels
    list the tokens they move, and ``moved[r]`` collects those of word range ``r``; without,
    :meth:`snapshot` keeps the rows for the delta. ``pool_cpu`` sums the CPU seconds of the
    pool's threads in :meth:`on_threads`.
    """

    def __init__(self, tokens: np.ndarray, doc_ptr: np.ndarray, n_rows: int, pool: Executor,
                 n_threads: int, word_cost_power: float = 1.0, record: bool = True) -> None:
        n_docs = doc_ptr.shape[0] - 1
        self.pool, self.t, self.record = pool, n_threads, record
        self.before: tuple[np.ndarray, np.ndarray] | None = None
        even = np.linspace(0, tokens.shape[0], n_threads + 1)[1:-1]
        self.n_w = np.bincount(tokens, minlength=n_rows)  # each word's tokens
        cost = np.cumsum(self.n_w ** word_cost_power)
        total = cost[-1] if len(cost) else 0.0
        self.dcut = self._cuts(np.searchsorted(doc_ptr, even), n_docs)
        self.wcut = self._cuts(np.searchsorted(cost, total * even / max(1, tokens.shape[0])),
                               n_rows)
        self.range_of = (np.searchsorted(self.wcut, np.arange(n_rows), side="right")
                         - 1).astype(np.int32)
        self.moved: list[list[np.ndarray]] = [[] for _ in range(n_threads)]
        self.pool_cpu = 0.0

    @staticmethod
    def _cuts(inner: np.ndarray, end: int) -> np.ndarray:
        cuts = np.concatenate([[0], inner, [end]]).astype(np.int64)
        return np.minimum(np.maximum.accumulate(cuts), end)

    def on_threads(self, kernel: Callable[..., Any], calls: list[tuple]) -> list[Any]:
        """Return ``[kernel(*calls[i]) for i]``, computed on the T threads."""
        c0 = time.thread_time()
        out, cpu = run_parts(self.pool, self.t, len(calls), lambda i: kernel(*calls[i]))
        self.pool_cpu += max(0.0, cpu - (time.thread_time() - c0))
        return out

    def run_steps(self, kernel: Callable[..., Any],
                  args: Callable[[int, int, np.ndarray, np.uint64], tuple], n_k: np.ndarray,
                  state: np.uint64, tag: int) -> list[Any]:
        """Run the T steps; return every part's result, in step order.

        ``args(i, r, n_k_copy, state)`` gives ``kernel``'s arguments for document range
        ``i`` and word range ``r``; the kernel moves ``n_k_copy`` and returns a tuple whose
        last item is the tokens it moved. ``n_k`` gets every copy's moves after each step.
        Part ``i`` of step ``s`` draws from the sub-stream ``(tag | s << 32, i)`` of ``state``.
        """
        results = []
        for step in range(self.t):
            own_k = [n_k.copy() for _ in range(self.t)]
            cells = [(i, (i + step) % self.t) for i in range(self.t)]
            sub = np.uint64(tag | (step << 32))
            out = self.on_threads(kernel, [
                args(i, r, own_k[i], np.uint64(_substream(state, sub, i)))  # (an int)
                for i, r in cells])
            for (_, r), res in zip(cells, out, strict=True):
                self.moved[r].append(res[-1])
            n_k += np.sum(own_k, axis=0) - self.t * n_k  # every copy's moves
            results.extend(out)
        return results

    def snapshot(self, n_wk: np.ndarray, n_k: np.ndarray) -> None:
        """Keep copies of the rows and totals before the sweep (without ``record``).

        The rows are copied a word range on each thread (NumPy's copy releases the GIL).
        """
        rows = np.empty_like(n_wk)
        self.on_threads(np.copyto, [(rows[self.wcut[r]:self.wcut[r + 1]],
                                     n_wk[self.wcut[r]:self.wcut[r + 1]])
                                    for r in range(self.t)])
        self.before = (rows, n_k.copy())

    def delta(self, tokens: np.ndarray, z_old: np.ndarray, z: np.ndarray, n_wk: np.ndarray,
              n_k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return the sweep's delta, a word range on each thread.

        The ranges' COOs, concatenated in word order, are the whole (sorted) COO.
        """
        if self.before is not None:
            old_wk, old_k = self.before
            parts = self.on_threads(_dense_delta, [
                (old_wk[self.wcut[r]:self.wcut[r + 1]], n_wk[self.wcut[r]:self.wcut[r + 1]])
                for r in range(self.t)])
            for r, p in enumerate(parts):
                p[0][:] += np.int32(self.wcut[r])  # (row ids of the slice)
            delta_k = n_k - old_k
        else:
            none = np.empty(0, dtype=np.int64)
            parts = self.on_threads(_moves_delta, [
                (np.concatenate(self.moved[r]) if self.moved[r] else none, tokens, z_old, z,
                 self.wcut[r], self.wcut[r + 1], n_wk.shape[1]) for r in range(self.t)])
            delta_k = np.sum([p[3] for p in parts], axis=0)
        words, topics, counts = (np.concatenate([p[j] for p in parts]) for j in range(3))
        return words, topics, counts, delta_k


def partitioned_sweep(run: Callable[..., Any], tokens, doc_ptr, z, n_wk, n_k, alpha, beta,
                      n_words, key, pool: Executor | None, n_threads: int,
                      word_cost_power: float = 1.0) -> SweepResult:
    """Check, sweep on ``n_threads`` threads and return the :class:`SweepResult`.

    ``run(part, alpha, state)`` sweeps (with the sampler's kernels, on the
    :class:`Partition` ``part``, passing them ``part.record``) and returns the accept rate
    or None.
    """
    if pool is None:
        raise ValueError(f"{n_threads} threads need a pool")
    alpha = check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key)
    t0, c0 = time.perf_counter(), time.thread_time()
    snap = n_wk.size <= base.SNAPSHOT_ENTRIES_PER_TOKEN * tokens.shape[0]  # (one rule)
    part = Partition(tokens, doc_ptr, n_wk.shape[0], pool, n_threads, word_cost_power,
                     record=not snap)
    if snap:
        part.snapshot(n_wk, n_k)
    z_old = z if snap else z.copy()  # (only the moved tokens' delta reads the old topics)
    accept_rate = run(part, alpha, key.state())
    words, topics, counts, delta_k = part.delta(tokens, z_old, z, n_wk, n_k)
    return SweepResult(words, topics, counts, delta_k, int(tokens.shape[0]), accept_rate,
                       time.perf_counter() - t0,
                       cpu_seconds=time.thread_time() - c0 + part.pool_cpu)
