"""Folded clocks: caches stay exact under BSP and SSP schedules, and one pull's work and bytes
do not grow with the number of clients.

Oracles: the table recounted from every move (NumPy), what each cache must hold given what it
received (the initial table, its own moves, other shards' deltas up to its ``received``), and,
for the cost, the changed (word, topic) entries on the puller's rows counted by NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_moves import moves

from biglda.ps import ALL_CLOCKS, ShardCache, TableShard
from biglda.ps.calls import InProcess
from biglda.ps.client import TableClient
from biglda.ps.sizing import row_bounds

K = 5
BETA = 0.1


def _tables(n_words: int, n_parts: int, n_shards: int) -> tuple[TableClient, list[TableShard]]:
    bounds = row_bounds(n_words, n_parts)
    shards = [TableShard(a, int(bounds[a]), int(bounds[a + 1]), K, n_shards, BETA)
              for a in range(len(bounds) - 1)]
    return TableClient(tuple(InProcess(s) for s in shards), bounds), shards


@pytest.mark.parametrize(("staleness", "n_parts", "n_shards"),
                         [(0, 1, 4), (0, 2, 4), (1, 2, 4), (2, 1, 4), (3, 2, 4), (0, 2, 2),
                          (2, 2, 2), (1, 1, 3)])
def test_caches_hold_exactly_what_they_received(staleness, n_parts, n_shards):
    """Random SSP schedules (shards race ahead up to the bound, pull "whatever arrived"); every
    cache equals init + own moves + other shards' deltas it received, after every pull."""
    rng = np.random.default_rng(7 + staleness)
    n_words, n_clocks = 40, 8
    tables, actors = _tables(n_words, n_parts, n_shards)
    caches, delta = [], {}  # delta[(shard, clock)] = dense [V, K]
    truth = np.zeros((n_words, K), dtype=np.int64)
    for s in range(n_shards):
        tokens = rng.integers(0, n_words, 60).astype(np.int32)
        cache = ShardCache(s, tokens, tables.bounds, K)
        local = np.zeros((cache.n_local, K), dtype=np.int32)
        np.add.at(local, (cache.tokens, rng.integers(0, K, len(tokens))), 1)
        cache.push_counts(tables, -1, local, timeout=1)
        truth[cache.vocab] += local
        caches.append(cache)
    init = truth.copy()
    clock = [0] * n_shards
    own = [np.zeros((n_words, K), np.int64) for _ in range(n_shards)]
    while min(clock) < n_clocks:
        ready = [s for s in range(n_shards)
                 if clock[s] < n_clocks and clock[s] - min(clock) <= staleness]
        s = int(rng.choice(ready))
        cache = caches[s]
        upto = clock[s] - 1 if staleness == 0 else ALL_CLOCKS
        if clock[s] == 0:
            cache.attach(tables, upto, timeout=1)
        else:
            cache.refresh(tables, upto, timeout=1)
        # the oracle of what it holds: init + own moves + others' deltas it received
        want = init + own[s]
        for (w, c), d in delta.items():
            if w == s:
                continue
            for a in range(tables.n_parts):
                lo, hi = tables.bounds[a], tables.bounds[a + 1]
                if c <= cache.received[a][w]:
                    want[lo:hi] += d[lo:hi]
        np.testing.assert_array_equal(cache.n_wk, want[cache.vocab])
        np.testing.assert_array_equal(cache.n_k, want.sum(0))
        w, t, c, _ = moves(rng, cache.n_wk, 8)  # a sweep: its moves are seen at once, pushed once
        np.add.at(cache.n_wk, (w, t), c)
        np.add.at(cache.n_k, t, c)
        d = np.zeros((n_words, K), np.int64)
        np.add.at(d, (cache.vocab[w], t), c)
        delta[(s, clock[s])] = d
        own[s] += d
        truth += d
        cache.push(tables, clock[s], w, t, c, timeout=1)
        cache.push(tables, clock[s], w, t, c, timeout=1)  # a retried push is ignored
        clock[s] += 1
    for cache in caches:  # everyone done: a last pull brings every cache to the table
        cache.refresh(tables, ALL_CLOCKS if staleness else n_clocks - 1, timeout=1)
        np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
        np.testing.assert_array_equal(cache.n_k, truth.sum(0))
    for a, actor in enumerate(actors):
        np.testing.assert_array_equal(actor.n_wk, truth[tables.bounds[a]:tables.bounds[a + 1]])
    for cache in caches:  # and then everything was received by everyone: nothing is kept
        cache.refresh(tables, ALL_CLOCKS if staleness else n_clocks - 1, timeout=1)
    info = [actor.info() for actor in actors]
    assert all(i["log_entries"] == 0 and i["folded_clocks"] == 0 for i in info), info
    assert all(i["pull_gathered"] > 0 for i in info) or n_shards == 2  # slices were served
    if staleness:  # and so were the frontier and clocks held in part, per writer
        assert all(i["pull_log_scanned"] > 0 for i in info)
    elif n_shards > 2:  # BSP: every pull is one slice of one folded clock
        assert all(i["pull_log_scanned"] == i["pull_merged"] == 0 for i in info)


def _cost_of_one_pull(n_writers: int) -> tuple[dict, int, int]:
    """N writers push one clock whose union of changes is the same for every N (disjoint parts
    of a fixed set, plus a hot set every writer changes); shard 0 then pulls that clock.

    Returns the puller's share of the table shard's work counters, the bytes of the reply and
    the oracle: the (word, topic) entries on the puller's rows the other writers changed.
    """
    rng = np.random.default_rng(11)
    n_rows, n_topics, n_changed, n_hot = 4000, 40, 8000, 400
    pairs = rng.choice(n_rows * n_topics, n_changed + n_hot, replace=False)
    hot, rest = pairs[:n_hot], pairs[n_hot:]
    ps = TableShard(0, 0, n_rows, n_topics, n_writers, BETA)
    vocab = np.sort(rng.choice(n_rows, n_rows // 2, replace=False))
    for s in range(n_writers):
        ps.attach(s, vocab if s == 0 else np.arange(n_rows), -1)
    changed = np.zeros(n_rows * n_topics, np.int64)  # by the other writers
    for s, part in enumerate(np.array_split(rest, n_writers)):
        flat = np.sort(np.concatenate([part, hot]))  # a push is sorted by word
        counts = np.where(rng.random(len(flat)) < 0.5, -1, 1).astype(np.int32)
        if s:
            np.add.at(changed, flat, counts)
        ps.push(s, 0, (flat // n_topics).astype(np.int32), (flat % n_topics).astype(np.int32),
                counts)
    before = ps.info()
    got = np.full(n_writers, -1, np.int64)
    received, words, topics, counts, _dk = ps.pull(0, got, 0)
    after = ps.info()
    assert received.tolist() == [0] * n_writers
    work = {k: after[k] - before[k] for k in after if k.startswith("pull_")}
    work["fold_entries"] = after["fold_entries"]
    nbytes = after["bytes_out"] - before["bytes_out"]
    on_rows = changed.reshape(n_rows, n_topics)[vocab]
    got_dense = np.zeros((n_rows, n_topics), np.int64)
    np.add.at(got_dense, (words, topics), counts)
    np.testing.assert_array_equal(got_dense[vocab], on_rows)  # exact: others' changes
    ps.pull(1, got, 0)  # the next puller is served from the same fold: no entry summed again
    assert ps.info()["fold_entries"] == after["fold_entries"]
    return work, nbytes, int(np.count_nonzero(on_rows))


def test_one_pull_costs_the_same_for_2_to_16_writers():
    """The work of serving one puller (rows probed, entries gathered, own entries taken out,
    scanned, merged) and the bytes it gets do not grow with the number of writers; the
    server's per-clock fold work is the entries pushed, once (not once per puller)."""
    costs = {n: _cost_of_one_pull(n) for n in (2, 4, 8, 16)}
    base_work, _, _ = costs[2]
    touched = {n: w["pull_rows_probed"] + w["pull_gathered"] + w["pull_log_scanned"]
               + w["pull_merged"] + w["pull_own"] for n, (w, _, _) in costs.items()}
    for n, (work, nbytes, changed) in costs.items():
        assert work["pull_merged"] == 0  # a gather (or the one other writer's entry), no sort
        if n > 2:  # a slice of the folded clock less its own entries, no log scan
            assert work["pull_log_scanned"] == 0 and work["pull_own"] > 0
        assert work["pull_entries_out"] == changed
        assert work["pull_gathered"] <= changed + work["pull_own"]  # + its own, taken out
        assert nbytes == changed * 12 + 40 * 8  # (word, topic, count) int32 + dk int64 [K]
        assert touched[n] <= 2 * touched[2], touched
        # each pushed entry summed once, by the first pull that needs the folded clock (with
        # one other writer none does: its entry is the answer)
        assert work["fold_entries"] == (8000 + n * 400 if n > 2 else 0)
    assert base_work["pull_rows_probed"] <= 2000  # at most the puller's vocabulary


@pytest.mark.parametrize("n_runs", [1, 2, 3, 7])
def test_fold_merge_and_sort_agree_with_numpy(n_runs):
    """A clock's pushes summed by the k-way merge (sorted pushes), by the row sort (any order)
    and by NumPy give the same (row, topic, count) list; net zeros are kept."""
    from biglda.ps._kernels import fold, gather

    rng = np.random.default_rng(n_runs)
    n_rows, n_topics = 30, 7
    runs = [np.unique(rng.integers(0, n_rows * n_topics, 40)) for _ in range(n_runs)]
    flat = np.concatenate(runs)
    counts = rng.integers(-2, 3, len(flat)).astype(np.int32)
    rows, topics = (flat // n_topics).astype(np.int32), (flat % n_topics).astype(np.int32)
    starts = np.cumsum([0] + [len(r) for r in runs])
    keys, inv = np.unique(flat, return_inverse=True)
    want = np.bincount(inv, weights=counts).astype(np.int32)
    shuffled = rng.permutation(len(flat))
    for got in (fold(rows, topics, counts, n_rows, n_topics, starts, merge_runs=8),
                fold(rows, topics, counts, n_rows, n_topics, starts, merge_runs=0),
                fold(rows[shuffled], topics[shuffled], counts[shuffled], n_rows, n_topics,
                     starts)):
        r, t, c = gather(*got, np.arange(n_rows))
        np.testing.assert_array_equal(r.astype(np.int64) * n_topics + t, keys)
        np.testing.assert_array_equal(c, want)


def test_subtract_sorted_takes_entries_out_and_drops_zeros():
    from biglda.ps._kernels import subtract_sorted

    def arrays():
        return (np.array([0, 0, 3, 5], np.int32), np.array([1, 2, 0, 4], np.int32),
                np.array([2, 1, 1, 3], np.int32))

    r, t, c = subtract_sorted(*arrays(), np.array([5, 0]), np.array([4, 2]), np.array([1, 1]),
                              6)
    assert (r.tolist(), t.tolist(), c.tolist()) == ([0, 3, 5], [1, 0, 4], [2, 1, 2])
    # a pair the first lacks (not in a folded clock, but handled): appended, negated
    r, t, c = subtract_sorted(*arrays(), np.array([5, 4]), np.array([4, 0]), np.array([3, 2]),
                              6)
    assert (r.tolist(), t.tolist(), c.tolist()) == ([0, 0, 3, 4], [1, 2, 0, 0], [2, 1, 1, -2])


def test_sum_sorted_equals_merge_coo():
    # Oracle: merge_coo (sort everything, sum, drop zeros). sum_sorted merges parts that are
    # each sorted and unique in one pass per pair; parts out of order must still come out
    # right (they take the general path), and one part comes back as it is.
    from biglda.ps._kernels import merge_coo, sum_sorted

    rng = np.random.default_rng(0)
    n_unsorted = 0
    for _ in range(300):
        parts = []
        for _ in range(int(rng.integers(1, 6))):
            flat = np.unique(rng.integers(0, 40 * K, int(rng.integers(0, 50))))
            c = rng.integers(-3, 4, len(flat))
            c[c == 0] = 1
            r, t = flat // K, flat % K
            if rng.random() < 0.2 and len(r) > 1:
                o = rng.permutation(len(r))
                r, t, c = r[o], t[o], c[o]
                n_unsorted += 1
            parts.append((r.astype(np.int32), t.astype(np.int32), c.astype(np.int32)))
        nonempty = [p for p in parts if len(p[0])]
        got = sum_sorted(parts)
        if len(nonempty) == 1:
            want = nonempty[0]
        elif nonempty:
            want = merge_coo(*(np.concatenate([p[i] for p in parts]) for i in range(3)), K)
        else:
            want = (np.zeros(0, np.int32),) * 3
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == np.int32
    assert n_unsorted > 20


def test_top_rows_are_the_largest_of_each_column():
    # Oracle: a stable NumPy sort of each column by count descending (ties by row ascending).
    from biglda.ps._kernels import top_rows

    rng = np.random.default_rng(1)
    for n_rows, n_cols, n in ((50, 7, 5), (30, 4, 30), (200, 12, 1), (9, 3, 4)):
        table = rng.poisson(1.5, (n_rows, n_cols)).astype(np.int32)
        table[:, 0] = 0  # a column of ties only
        rows, counts = top_rows(table, n)
        order = np.argsort(-table, axis=0, kind="stable")[:n]
        np.testing.assert_array_equal(rows, order)
        np.testing.assert_array_equal(counts, np.take_along_axis(table, order, axis=0))


def test_table_top_words_are_global_ids():
    bounds = np.array([0, 6, 10])
    shard = TableShard(1, int(bounds[1]), int(bounds[2]), K, 1, BETA)
    shard.n_wk[:] = np.arange(4 * K, dtype=np.int32).reshape(4, K) % 7
    ids, counts = shard.top_words(2)
    want = np.argsort(-shard.n_wk, axis=0, kind="stable")[:2]
    np.testing.assert_array_equal(ids, want + 6)
    np.testing.assert_array_equal(counts, np.take_along_axis(shard.n_wk, want, axis=0))
    assert counts.dtype == np.int32
