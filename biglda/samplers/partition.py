"""One sweep on T threads of one table, by tomotopy's ``PARTITION`` (lightlda and cgs).

The documents are cut into R ranges of about equal tokens and the vocabulary into R ranges
of about equal cost, R a multiple of the T threads (the sampler's ``ranges_per_thread``). A
sweep (or a half of lightlda's) runs in R steps: in step ``s`` part ``i`` resamples the
tokens of document range ``i`` whose words are in range ``(i + s) mod R``. In a step no two
parts share a row of ``n_wk``, a document or a token, so they work on the one table without
locks. The T threads take the parts as they become ready, not a step at a time: part
``(i, s)`` waits for its document range's part of step ``s - 1`` and its word range's
(``(i + 1, s - 1)``), and for every part of step ``s - N_K_LAG``. Each part moves its own
copy of ``n_k``, which starts with every move of the steps up to ``s - N_K_LAG`` and its
own document range's since: the only approximation, so the chain is exact but for ``n_k``
(on one thread the samplers run their exact kernels instead). Each part draws from its own
stream, so the chain is the same on every run with the same R and lag, whichever thread
takes which part and when, but not the same for another R. The sweep's
delta is gathered a word range a part: from a snapshot of the rows where they are at most
``SNAPSHOT_ENTRIES_PER_TOKEN`` a token (:mod:`biglda.samplers.base`), else from the tokens
the kernels recorded as moved (``record``).

What depends on the tokens only (the cuts, each word's count, the samplers' token lists by
range) is kept between sweeps in a :class:`Layout` per tokens array (a shard's tokens do not
change), in the sampler's :class:`Layouts`; each sweep's :func:`scan` checks on the threads
that the tokens are still those it was made of. What a sweep keeps of the documents (their
counts or topic lists) it leaves to the next step of its clock (:meth:`Layouts.carry`): a
clock whose processes take turns sweeps W windows of one array, and rebuilding that state
and checking the tokens in each was work that grew with the shard, not the window.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, wait
from typing import Any

import numpy as np

from biglda.samplers import base
from biglda.samplers._kernels import _dense_delta, _moves_delta, _scan_count
from biglda.samplers.base import SweepResult, check_sweep_args
from biglda.samplers.parts import run_parts
from biglda.samplers.rng import _substream

# How many steps behind a part's ``n_k`` may be (:meth:`Partition.run_steps`), where the
# sampler gives none: 1 waits for every part of the step before; 2 lets a step start while
# the one before ends, which took the wait for a step's slowest part off cgs's sweep
# (pipelines/README.md, "Eighth session"). Each sampler passes its own (``N_K_LAG``).
N_K_LAG = 2


class Layout:
    """The cut of one tokens array into ``n_ranges`` ranges, kept between its sweeps.

    ``dcut`` cuts the documents into R ranges of about equal tokens, ``wcut`` the vocabulary
    into R ranges of about equal cost (word ``w``'s ``n_w[w]`` tokens weigh ``n_w[w] **
    word_cost_power``); ``range_of[w]`` is word ``w``'s range. ``lists`` holds what a sampler
    builds from the tokens and the cuts alone (its tokens by range), under a name of its
    choice; ``spare`` buffers a sweep gives back for the next (:meth:`take`, :meth:`give`).
    ``tokens`` and ``doc_ptr`` are copies, for :func:`scan` and :meth:`Layouts.find`; the
    layouts of one array's windows share theirs (``shared``: a layout of the same array whose
    copy equals ``tokens``, its ``n_w`` too).
    With a ``window`` ``(lo, hi)`` only its rows are cut into the ranges, every other word
    is in range -1 (no part visits its tokens), and ``n_tokens`` counts the window's tokens.
    """

    def __init__(self, tokens: np.ndarray, doc_ptr: np.ndarray, n_rows: int, n_ranges: int,
                 word_cost_power: float, n_w: np.ndarray,
                 window: tuple[int, int] | None = None, shared: Layout | None = None) -> None:
        n_docs = doc_ptr.shape[0] - 1
        if shared is not None:  # (a window's sibling: the same tokens, checked by scan)
            self.tokens, self.doc_ptr = shared.tokens, shared.doc_ptr
        else:
            self.tokens, self.doc_ptr = tokens.copy(), doc_ptr.copy()
        self.n_ranges = n_ranges
        self.n_w = n_w
        # the rows a sweep resamples the tokens of (all, or a window: the process's share of
        # the vocabulary in one step of a clock, biglda.trainer.worker): the window's cut
        # into ranges; its other words are in range -1, which no part visits
        wlo, whi = (0, n_rows) if window is None else (int(window[0]), int(window[1]))
        self.window = (wlo, whi)
        self.n_tokens = int(n_w[wlo:whi].sum()) if window is not None else tokens.shape[0]
        even = np.linspace(0, tokens.shape[0], n_ranges + 1)[1:-1]
        cost = np.cumsum(n_w[wlo:whi] ** word_cost_power)
        total = cost[-1] if len(cost) else 0.0
        self.dcut = self._cuts(np.searchsorted(doc_ptr, even), n_docs)
        self.wcut = wlo + self._cuts(
            np.searchsorted(cost, total * even / max(1, tokens.shape[0])), whi - wlo)
        self.range_of = (np.searchsorted(self.wcut, np.arange(n_rows), side="right")
                         - 1).astype(np.int32)
        if window is not None:
            self.range_of[:wlo] = -1
            self.range_of[whi:] = -1
        self.lists: dict[str, Any] = {}
        self._spare: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _cuts(inner: np.ndarray, end: int) -> np.ndarray:
        cuts = np.concatenate([[0], inner, [end]]).astype(np.int64)
        return np.minimum(np.maximum.accumulate(cuts), end)

    def list_of(self, name: str, build: Callable[[], Any]) -> Any:
        """``lists[name]``, built by ``build()`` the first time (under the layout's lock)."""
        with self._lock:
            if name not in self.lists:
                self.lists[name] = build()
            return self.lists[name]

    def take(self, name: str) -> Any:
        """Return a buffer given back under ``name`` by an earlier sweep, or None."""
        with self._lock:
            got = self._spare.get(name)
            return got.pop() if got else None

    def give(self, name: str, buffer: Any) -> None:
        """Keep ``buffer`` for the next sweep that takes ``name``."""
        with self._lock:
            self._spare.setdefault(name, []).append(buffer)


class Layouts:
    """A sampler's :class:`Layout` of each tokens array it swept lately (at most ``size``).

    Found by the array's address, length, ``doc_ptr``, rows, ranges and cost power; that
    the tokens themselves are unchanged is :func:`scan`'s to check. A layout holds a copy of
    its tokens (4 bytes a token) and the samplers' lists (8 bytes a token; lightlda's 16
    where it keeps its documents' counts, and those, at most 16 bytes a token, 32 over a
    window, where both halves' are kept for the clock's next step; cgs's
    SparseLDA its documents' topic lists, 8 bytes a token); the trainer
    sweeps one array a process, or one a round (up to 4), hence 4. The layouts of one
    array's windows of words count as that array's one (a process taking turns sweeps W
    windows a clock: with fewer kept, every step would count and list its tokens anew; each
    window's layout lists only its tokens, and they share one copy of the array's).
    """

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._items: dict[tuple, Layout] = {}
        self._lock = threading.Lock()
        # what the last sweep left for the next step of its clock: (its arrays, buffers)
        self._carried: tuple[tuple, dict[str, Any]] | None = None

    @staticmethod
    def key(tokens: np.ndarray, doc_ptr: np.ndarray, n_rows: int, n_ranges: int,
            word_cost_power: float, window: tuple[int, int] | None = None) -> tuple:
        """Return the lookup key of a layout."""
        return (tokens.ctypes.data, tokens.shape[0], doc_ptr.shape[0], n_rows, n_ranges,
                float(word_cost_power), window)

    def find(self, key: tuple, doc_ptr: np.ndarray) -> Layout | None:
        """Return the layout stored under ``key`` if its ``doc_ptr`` is this one, else None."""
        with self._lock:
            hit = self._items.get(key)
        return hit if hit is not None and np.array_equal(hit.doc_ptr, doc_ptr) else None

    @staticmethod
    def _arrays(key: tuple, z: np.ndarray) -> tuple:
        """Return what names a sweep's arrays: its layout's key but the window, and ``z``."""
        return (*key[:-1], z.ctypes.data, z.shape[0])

    def carry(self, key: tuple, z: np.ndarray, buffers: dict[str, Any]) -> None:
        """Keep what a finished sweep of ``z`` leaves for the next step of its clock.

        ``buffers``: the sampler's per-document state as the sweep left it (the documents'
        counts or topic lists), by name.
        """
        with self._lock:
            self._carried = (self._arrays(key, z), buffers)

    def carried(self, key: tuple, z: np.ndarray) -> tuple[dict[str, Any], bool]:
        """Take what the last sweep carried: ``(buffers, whether they were of these arrays)``.

        Taken either way (a sweep that does not carry them on leaves none behind); where
        they were not of this sweep's arrays they are buffers to reuse, nothing more.
        """
        with self._lock:
            got, self._carried = self._carried, None
        if got is None:
            return {}, False
        return got[1], got[0] == self._arrays(key, z)

    def drop_carried(self) -> None:
        """Forget what the last sweep carried (a sweep that keeps no such state wrote z)."""
        with self._lock:
            self._carried = None

    def sibling(self, key: tuple, doc_ptr: np.ndarray) -> Layout | None:
        """Return a layout of the same array as ``key``'s but another window, if one is kept."""
        with self._lock:
            hits = [v for k, v in self._items.items() if k[:-1] == key[:-1] and k != key]
        return next((h for h in hits if np.array_equal(h.doc_ptr, doc_ptr)), None)

    def add(self, key: tuple, layout: Layout) -> None:
        """Store ``layout`` under ``key`` (dropping the oldest array's beyond ``size``)."""
        with self._lock:
            self._items.pop(key, None)
            arrays = list(dict.fromkeys(k[:-1] for k in self._items))  # (key[-1]: window)
            if key[:-1] not in arrays and len(arrays) >= self.size:
                for k in [k for k in self._items if k[:-1] == arrays[0]]:
                    del self._items[k]
            self._items[key] = layout


class Partition:
    """One sweep on the threads of a :class:`Layout`: the threads' work, and the delta.

    With ``record`` the kernels list the tokens they move, and ``moved[r]`` collects those of
    word range ``r``; without, :meth:`snapshot` keeps the rows for the delta. ``pool_cpu``
    sums the CPU seconds of the pool's threads in :meth:`on_threads`.
    """

    def __init__(self, layout: Layout, pool: Executor, n_threads: int,
                 record: bool = True, lag: int | None = None) -> None:
        self.layout, self.pool, self.threads, self.record = layout, pool, n_threads, record
        self.lag = N_K_LAG if lag is None else lag
        self.n_ranges, self.dcut, self.wcut = layout.n_ranges, layout.dcut, layout.wcut
        self.range_of, self.n_w = layout.range_of, layout.n_w
        self.before: tuple[np.ndarray, np.ndarray] | None = None
        self.moved: list[list[np.ndarray]] = [[] for _ in range(layout.n_ranges)]
        self.pool_cpu = 0.0
        # the per-document state the last sweep left (:meth:`Layouts.carried`): ``current``
        # where it holds ``z`` as this sweep starts (a later step of the same clock), else
        # only buffers; ``keep``: what this sweep leaves for the next step
        self.carried: dict[str, Any] = {}
        self.current = False
        self.keep: dict[str, Any] = {}
        self.windowed = False  # (a step of a clock taken in turns: it may have a next step)

    def doc_state(self, name: str, shapes: list[tuple[int, ...]]
                  ) -> tuple[list[np.ndarray], bool]:
        """Return the per-document buffers ``name`` and whether they hold ``z`` now.

        The sampler's int32 buffers of ``shapes``: the clock's step before's where this
        sweep follows it (``current``), else a spare of the layout or new ones, for the
        sweep to build.
        """
        got = self.carried.get(name)
        if got is not None and [a.shape for a in got] == shapes:
            return list(got), self.current
        got = self.layout.take(name)
        if got is None or [a.shape for a in got] != shapes:
            got = [np.empty(sh, dtype=np.int32) for sh in shapes]
        return list(got), False

    def on_threads(self, kernel: Callable[..., Any], calls: list[tuple]) -> list[Any]:
        """Return ``[kernel(*calls[i]) for i]``, computed on the T threads."""
        c0 = time.thread_time()
        out, cpu = run_parts(self.pool, self.threads, len(calls), lambda i: kernel(*calls[i]))
        self.pool_cpu += max(0.0, cpu - (time.thread_time() - c0))
        return out

    def run_steps(self, kernel: Callable[..., Any],
                  args: Callable[[int, int, np.ndarray, np.uint64], tuple], n_k: np.ndarray,
                  state: np.uint64, tag: int) -> list[Any]:
        """Run the R steps' parts as each becomes ready; return every result, in step order.

        ``args(i, r, n_k_copy, state)`` gives ``kernel``'s arguments for document range
        ``i`` and word range ``r``; the kernel moves ``n_k_copy`` and returns a tuple whose
        last item is the tokens it moved. Part ``i`` of step ``s`` draws from the sub-stream
        ``(tag | s << 32, i)`` of ``state``. ``n_k`` gets every part's moves.

        No step waits for the whole step before it (a step's slowest part held every thread
        up): part ``(i, s)`` starts once its document range's part of step ``s - 1`` and its
        word range's (``(i + 1, s - 1)``) are done, and every part of step ``s - lag``. It
        starts from ``n_k`` with every move of the steps up to ``s - lag`` and its own
        document range's since. Which thread takes which part, and when, changes nothing:
        each part's rows, documents, ``n_k`` and stream are fixed by ``(i, s)``. With
        ``lag`` 1 this is the chain of a barrier after every step.
        """
        n_r, lag = self.n_ranges, max(1, int(self.lag))
        prefix = [n_k.copy()]  # prefix[c]: the sweep's start plus the moves of steps < c
        step_moves = [np.zeros_like(n_k) for _ in range(n_r)]
        # (i, s): part (i, s)'s moves, while a later part of range i needs them
        own: dict[tuple[int, int], np.ndarray] = {}
        left = [n_r] * n_r  # parts of each step not done yet
        done = np.zeros((n_r, n_r), dtype=bool)  # [s, i]
        results: list[Any] = [None] * (n_r * n_r)
        ready = [(0, i) for i in range(n_r)]  # a heap: the steps furthest behind first
        queued = set(ready)  # every part ever put on it
        complete = [0]  # steps 0 .. complete[0] - 1 are done
        failed: list[BaseException] = []
        cond = threading.Condition()

        def startable(s: int, i: int) -> bool:
            return (done[s - 1, i] and done[s - 1, (i + 1) % n_r]
                    and s - lag < complete[0])

        def start_k(s: int, i: int) -> np.ndarray:
            first = max(0, s - lag + 1)  # the own moves of steps first .. s - 1
            k = prefix[first].copy()
            for t in range(first, s):
                k += own[(i, t)]
            return k

        def finish(s: int, i: int, moves: np.ndarray) -> int:
            """Book part (i, s) as done; return how many parts became ready."""
            done[s, i] = True
            step_moves[s] += moves
            if lag > 1:
                own[(i, s)] = moves
                own.pop((i, s - lag + 1), None)  # (no later part of range i reads it)
            left[s] -= 1
            woke = 0
            candidates = [(s + 1, i), (s + 1, (i - 1) % n_r)] if s + 1 < n_r else []
            while complete[0] < n_r and left[complete[0]] == 0:
                prefix.append(prefix[-1] + step_moves[complete[0]])
                complete[0] += 1
                nxt = complete[0] - 1 + lag  # the step the lag held back
                if 0 < nxt < n_r:
                    candidates.extend((nxt, j) for j in range(n_r))
            for c in dict.fromkeys(candidates):
                if not done[c] and c not in queued and startable(*c):
                    queued.add(c)
                    heapq.heappush(ready, c)
                    woke += 1
            return woke

        def drain() -> float:
            c0 = time.thread_time()
            try:
                while True:
                    with cond:
                        while not ready and not failed and complete[0] < n_r:
                            cond.wait()
                        if failed or not ready:
                            cond.notify_all()
                            return time.thread_time() - c0
                        s, i = heapq.heappop(ready)
                        k = start_k(s, i)
                    own_k = k.copy()
                    sub = np.uint64(tag | (s << 32))
                    out = kernel(*args(i, (i + s) % n_r, own_k,
                                       np.uint64(_substream(state, sub, i))))
                    with cond:
                        results[s * n_r + i] = out
                        woke = finish(s, i, own_k - k)
                        if woke > 1:
                            cond.notify(woke - 1)  # (this thread takes one itself)
                        elif complete[0] == n_r:
                            cond.notify_all()
            except BaseException as exc:  # the others stop; the caller raises it
                with cond:
                    failed.append(exc)
                    cond.notify_all()
                return time.thread_time() - c0

        c0 = time.thread_time()
        futs = [self.pool.submit(drain) for _ in range(self.threads - 1)]
        try:
            cpu = drain()
        finally:
            wait(futs)  # no thread may still work on the sweep's arrays when it ends
        self.pool_cpu += max(0.0, cpu + sum(f.result() for f in futs)
                             - (time.thread_time() - c0))
        if failed:
            raise failed[0]
        for s in range(n_r):
            for i in range(n_r):
                self.moved[(i + s) % n_r].append(results[s * n_r + i][-1])
        n_k[...] = prefix[-1]
        return results

    def row_chunks(self, n_rows: int) -> np.ndarray:
        """Cuts of ``n_rows`` rows into runs of equal rows, a few a thread: int64 [n + 1].

        For the passes over every entry of the table (the snapshot and its diff), whose cost
        is the rows' and not their tokens': cut by word range, one range of rare words held
        most rows (Debian, 2 threads: 17,148 of 18,811), one thread copied and diffed them
        while the other waited (pipelines/README.md, "Eleventh session").
        """
        return np.linspace(0, n_rows, 4 * self.threads + 1).astype(np.int64)

    def snapshot(self, n_wk: np.ndarray, n_k: np.ndarray) -> None:
        """Keep copies of the rows and totals before the sweep (without ``record``).

        The rows are copied a run of rows on each thread (NumPy's copy releases the GIL),
        into the buffer of the layout's last sweep where it fits (fresh pages cost a fault
        each).
        """
        lo, hi = self.layout.window  # (the only rows a sweep over a window moves)
        rows = base.buffer_like(self.layout.take("snapshot"), n_wk[lo:hi])
        cut = self.row_chunks(hi - lo)
        self.on_threads(np.copyto, [(rows[cut[j]:cut[j + 1]], n_wk[lo + cut[j]:lo + cut[j + 1]])
                                    for j in range(len(cut) - 1)])
        self.before = (rows, n_k.copy())

    def delta(self, tokens: np.ndarray, z_old: np.ndarray, z: np.ndarray, n_wk: np.ndarray,
              n_k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return the sweep's delta, a run of rows (or a word range) on each thread.

        The runs' COOs, concatenated in row order, are the whole (sorted) COO.
        """
        if self.before is not None:
            old_wk, old_k = self.before
            lo, hi = self.layout.window
            cut = self.row_chunks(hi - lo)
            parts = self.on_threads(_dense_delta, [
                (old_wk[cut[j]:cut[j + 1]], n_wk[lo + cut[j]:lo + cut[j + 1]])
                for j in range(len(cut) - 1)])
            for j, p in enumerate(parts):
                p[0][:] += np.int32(lo + cut[j])  # (row ids of the slice)
            delta_k = n_k - old_k
            self.layout.give("snapshot", old_wk)
            self.before = None
        else:
            none = np.empty(0, dtype=np.int64)
            parts = self.on_threads(_moves_delta, [
                (np.concatenate(self.moved[r]) if self.moved[r] else none, tokens, z_old, z,
                 self.wcut[r], self.wcut[r + 1], n_wk.shape[1]) for r in range(self.n_ranges)])
            delta_k = np.sum([p[3] for p in parts], axis=0)
        words, topics, counts = (np.concatenate([p[j] for p in parts]) for j in range(3))
        return words, topics, counts, delta_k


def word_windows(word_cost: np.ndarray, n: int) -> list[tuple[int, int]]:
    """Cut the words ``0..V-1`` into ``n`` windows ``(lo, hi)`` of about equal cost.

    ``word_cost[w]``: what word ``w`` costs a sweep (its tokens, or as a sampler weighs them:
    ``n_w ** word_cost_power``). A word is never cut, so a window holds an equal share
    within one word's cost (the turns of ``--process-partition``).

    >>> word_windows(np.array([2, 1, 1, 2]), 2)
    [(0, 2), (2, 4)]
    """
    cum = np.cumsum(np.asarray(word_cost, dtype=np.float64))
    total = float(cum[-1]) if len(cum) else 0.0
    cuts = np.searchsorted(cum, total * np.arange(1, n) / n, side="right")
    edges = np.maximum.accumulate(np.concatenate([[0], cuts, [len(cum)]]).astype(np.int64))
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


_NO_TOKENS = np.empty(0, dtype=np.int32)  # no layout to compare the tokens with


def scan(tokens: np.ndarray, doc_ptr: np.ndarray, z: np.ndarray, n_rows: int, n_topics: int,
         pool: Executor, n_threads: int, n_ranges: int, word_cost_power: float,
         found: Layout | None, window: tuple[int, int] | None = None,
         sibling: Layout | None = None) -> tuple[Layout, bool, float]:
    """Run the token checks of :func:`check_sweep_args` on the threads; find the sweep's layout.

    Compares the tokens with those of ``found`` (the layout kept for this array, if any);
    where there is none or they differ, counts the words and makes a new :class:`Layout`.
    Where there is none but a ``sibling`` (the same array's layout of another window), the
    tokens are compared with its copy instead, and the new layout shares the copy and the
    counts of the words if they are the same (a window's layout then costs the array no
    copy of its own: 2P of them at P processes taking turns).
    Returns ``(layout, whether it is new, the pool threads' CPU seconds)``; raises what
    :func:`~biglda.samplers.base.token_errors` gives for the first bad word id or topic.
    """
    pool_cpu = 0.0
    cuts = np.linspace(0, tokens.shape[0], n_threads + 1).astype(np.int64)

    def part(i: int, against: Layout | None) -> tuple:
        if against is None:  # count the words too
            return _scan_count(tokens, z, cuts[i], cuts[i + 1], n_rows, n_topics, _NO_TOKENS,
                               True)
        bad_t, bad_z, same = base.scan_part(tokens, z, cuts[i], cuts[i + 1], n_rows, n_topics,
                                            against.tokens)
        return bad_t, bad_z, None, same

    def read(against: Layout | None) -> list[tuple]:
        nonlocal pool_cpu
        c0 = time.thread_time()
        out, used = run_parts(pool, n_threads, n_threads, lambda i: part(i, against))
        pool_cpu += max(0.0, used - (time.thread_time() - c0))
        return out

    against = found if found is not None else sibling
    parts = read(against)
    bad_t = min((int(p[0]) for p in parts if p[0] >= 0), default=-1)
    bad_z = min((int(p[1]) for p in parts if p[1] >= 0), default=-1)
    if bad_t >= 0 or bad_z >= 0:
        raise base.token_errors(z, n_rows, n_topics, bad_t, bad_z)
    same = against is not None and all(p[3] for p in parts)
    if same and found is not None:
        return found, False, pool_cpu
    if same and sibling is not None:  # another window of these tokens: its copy and counts
        return (Layout(tokens, doc_ptr, n_rows, n_ranges, word_cost_power, sibling.n_w,
                       window, shared=sibling), True, pool_cpu)
    if against is not None:  # the same array with other tokens: count them after all
        parts = read(None)
    n_w = np.asarray(np.sum([p[2] for p in parts], axis=0, dtype=np.int64))
    return (Layout(tokens, doc_ptr, n_rows, n_ranges, word_cost_power, n_w, window), True,
            pool_cpu)


def partitioned_sweep(run: Callable[..., Any], tokens, doc_ptr, z, n_wk, n_k, alpha, beta,
                      n_words, key, pool: Executor | None, n_threads: int,
                      word_cost_power: float, ranges_per_thread: int,
                      layouts: Layouts, n_k_lag: int | None = None,
                      window: tuple[int, int] | None = None,
                      follows: bool = False) -> SweepResult:
    """Check, sweep on ``n_threads`` threads and return the :class:`SweepResult`.

    ``run(part, alpha, state)`` sweeps (with the sampler's kernels, on the
    :class:`Partition` ``part``, passing them ``part.record``) and returns the accept rate
    or None. The documents and words are cut into R = ``ranges_per_thread`` x T ranges:
    R steps of R parts, which the threads take as they become ready (a thread the OS or a
    slow part held back takes fewer). ``layouts``: the sampler's, where this array's
    :class:`Layout` is kept. ``n_k_lag``: how many steps behind a part's ``n_k`` may be
    (:meth:`Partition.run_steps`; None: :data:`N_K_LAG`). ``window``: ``(lo, hi)``, resample
    only the tokens whose words (rows) are in ``[lo, hi)`` (every document's counts still
    hold all its tokens): one step of a clock whose processes take turns on the vocabulary
    (:func:`biglda.trainer.worker.run_group`); also on one thread. The result's
    ``n_tokens`` are the window's. ``follows``: this sweep is a later step of the clock whose
    step before was this sampler's last sweep, on the same arrays, and nothing else wrote
    ``z`` since (the caller's word: the trainer's steps). Then, where that last sweep was of
    these arrays, the tokens and topics are not checked again and the documents' state it
    kept (their counts or topic lists) is taken as it left it, not rebuilt from ``z``:
    the per-step work that grows with the shard, not the window (W = 2P steps a clock at
    P processes; pipelines/README.md, "Twentieth session").
    """
    if pool is None:
        raise ValueError(f"{n_threads} threads need a pool")
    alpha = check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key,
                             scan=False)
    t0, c0 = time.perf_counter(), time.thread_time()
    n_rows = n_wk.shape[0]
    # (one thread — a sweep over a window — has no other thread to keep apart: one part)
    n_ranges = 1 if n_threads == 1 else max(1, int(ranges_per_thread)) * n_threads
    if window is not None:
        window = (max(0, int(window[0])), min(n_rows, int(window[1])))
    at = Layouts.key(tokens, doc_ptr, n_rows, n_ranges, word_cost_power, window)
    carried, current = layouts.carried(at, z)
    current = current and follows
    found = layouts.find(at, doc_ptr)
    if current and found is not None:  # (the clock's first step checked these arrays)
        layout, new, scan_cpu = found, False, 0.0
    else:
        sibling = layouts.sibling(at, doc_ptr) if found is None and window is not None else None
        layout, new, scan_cpu = scan(tokens, doc_ptr, z, n_rows, n_k.shape[0], pool,
                                     n_threads, n_ranges, word_cost_power, found, window,
                                     sibling)
    if new:
        layouts.add(at, layout)
    # (one rule: a snapshot of the rows a sweep moves where they are few against its
    # tokens; a window's rows against the window's tokens)
    lo, hi = layout.window
    snap = (hi - lo) * n_wk.shape[1] <= base.SNAPSHOT_ENTRIES_PER_TOKEN * layout.n_tokens
    part = Partition(layout, pool, n_threads, record=not snap, lag=n_k_lag)
    part.pool_cpu += scan_cpu
    part.carried, part.current, part.windowed = carried, current, window is not None
    if snap:
        part.snapshot(n_wk, n_k)
    z_old = z if snap else z.copy()  # (only the moved tokens' delta reads the old topics)
    accept_rate = run(part, alpha, key.state())
    layouts.carry(at, z, part.keep)
    for name, buffer in carried.items():  # (another kernel's: stale now, a spare buffer)
        if name not in part.keep:
            layout.give(name, buffer)
    words, topics, counts, delta_k = part.delta(tokens, z_old, z, n_wk, n_k)
    return SweepResult(words, topics, counts, delta_k, layout.n_tokens, accept_rate,
                       time.perf_counter() - t0,
                       cpu_seconds=time.thread_time() - c0 + part.pool_cpu)
