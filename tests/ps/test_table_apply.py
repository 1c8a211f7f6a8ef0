"""A large push is applied in chunks of whole rows on threads: the same table as one apply."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import biglda.ps.table as table_mod
from biglda.ps._kernels import apply_delta_ll, first_outside, lgamma_table, row_chunks, take_ids
from biglda.ps.table import TableShard


def _delta(rng, n_rows, n_topics, n, sort=True):
    rows = rng.integers(0, n_rows, n).astype(np.int32)
    topics = rng.integers(0, n_topics, n).astype(np.int32)
    if sort:
        order = np.lexsort((topics, rows))
        rows, topics = rows[order], topics[order]
    return rows, topics, rng.integers(1, 4, n).astype(np.int32)


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("threads", [None, 3])
def test_chunked_push_equals_one_apply(monkeypatch, sort, threads):
    # chunks of 64 entries (whole rows) from 300 entries on: the table, n_k and row_ll of
    # the chunked apply are those of one serial apply, on 3 threads or on this one; an
    # unsorted delta takes the serial path
    monkeypatch.setattr(table_mod, "PARALLEL_APPLY_ENTRIES", 300)
    monkeypatch.setattr(table_mod, "APPLY_CHUNK", 64)
    pool = ThreadPoolExecutor(threads) if threads else None
    monkeypatch.setattr(table_mod, "_apply_pool", lambda n: pool)
    rng = np.random.default_rng(0)
    n_rows, n_topics = 40, 7
    ts = TableShard(0, 0, n_rows, n_topics, n_shards=1, beta=0.1)
    ref = np.zeros((n_rows, n_topics), dtype=np.int32)
    ref_k = np.zeros(n_topics, dtype=np.int64)
    ref_ll = 0.0
    for clock in range(3):
        rows, topics, counts = _delta(rng, n_rows, n_topics, 2000, sort)
        assert ts.push(0, clock, rows, topics, counts)
        ref_ll += apply_delta_ll(ref, rows, topics, counts, 0.1, lgamma_table(0.1), ref_k)
    np.testing.assert_array_equal(ts.n_wk, ref)
    np.testing.assert_array_equal(ts.n_k, ref_k)
    assert ts.row_ll == pytest.approx(ref_ll, rel=1e-12)
    if pool is not None:
        pool.shutdown()


@pytest.mark.parametrize("where", ["first", "last", "middle, unsorted"])
def test_large_push_with_an_id_out_of_range_is_refused_before_any_change(monkeypatch, where):
    # a large sorted delta's range is checked by its ends (its order is checked while it is
    # cut into chunks); an unsorted one is read whole: either way nothing is applied
    monkeypatch.setattr(table_mod, "PARALLEL_APPLY_ENTRIES", 300)
    monkeypatch.setattr(table_mod, "APPLY_CHUNK", 64)
    rng = np.random.default_rng(3)
    n_rows, n_topics = 40, 7
    ts = TableShard(0, 0, n_rows, n_topics, n_shards=1, beta=0.1)
    rows, topics, counts = _delta(rng, n_rows, n_topics, 2000)
    if where == "first":
        rows[0] = -1
    elif where == "last":
        rows[-1] = n_rows
    else:
        rows[1000] = n_rows
    with pytest.raises(ValueError, match="outside"):
        ts.push(0, 0, rows, topics, counts)
    assert not ts.n_wk.any() and not ts.n_k.any() and ts.row_ll == 0.0
    assert ts.info()["pushes"] == 0


def test_row_chunks_keep_rows_whole_and_refuse_unsorted():
    rng = np.random.default_rng(1)
    rows = np.sort(rng.integers(0, 50, 5000)).astype(np.int32)
    serial = lambda f, n: [f(i) for i in range(n)]  # noqa: E731
    cuts = row_chunks(rows, 100, serial)
    assert cuts[0] == 0 and cuts[-1] == len(rows) and np.all(np.diff(cuts) > 0)
    assert all(rows[c] != rows[c - 1] for c in cuts[1:-1])  # no row in two chunks
    with ThreadPoolExecutor(4) as pool:
        assert np.array_equal(cuts, row_chunks(rows, 100, lambda f, n: list(pool.map(f, range(n)))))
    bad = rows.copy()
    bad[2500], bad[2501] = 49, 0  # one descent, inside a chunk
    assert row_chunks(bad, 100, serial) is None
    edge = rows.copy()
    edge[99], edge[100] = 10, 5  # a descent at a chunk's first entry (rows[99] is ~1)
    assert edge[98] <= 10
    assert row_chunks(edge, 100, serial) is None


def test_take_ids_and_first_outside_against_numpy():
    # the push path's id mapping and range check, against NumPy's gather and comparisons
    rng = np.random.default_rng(2)
    ids = np.sort(rng.choice(10_000, 500, replace=False)).astype(np.int32)
    for dtype in (np.int32, np.int64):
        idx = rng.integers(0, len(ids), 3000).astype(dtype)
        got = take_ids(ids, idx)
        assert got.dtype == np.int32 and np.array_equal(got, ids[idx])
        bad = idx.copy()
        bad[1234] = len(ids)
        with pytest.raises(IndexError, match=f"index {len(ids)} out of range"):
            take_ids(ids, bad)
    words = ids[rng.integers(0, len(ids), 3000)]
    assert first_outside(words, int(words.min()), int(words.max()) + 1) == -1
    hi = int(words[77])  # the first word id >= hi is outside [0, hi)
    assert first_outside(words, 0, hi) == int(np.flatnonzero(words >= hi)[0])
    assert first_outside(words[:0], 0, 1) == -1


def _push_large_in_process(tables, n_entries: int) -> dict:
    """In a worker task: push a sorted delta through this process's own table shard."""
    local = tables.in_this_process()
    rng = np.random.default_rng(3)
    key = np.unique(rng.integers(0, 2000 * 1000, 2 * n_entries))[:n_entries]
    words, topics = (key // 1000).astype(np.int32), (key % 1000).astype(np.int32)
    local.push(0, 0, [(words, topics, np.ones(len(key), dtype=np.int32))], timeout=60)
    return local.actors[0].info().result(timeout=60)


def test_a_push_from_the_workers_own_process_is_applied_on_its_threads(embedded_cluster):
    # The trainer pushes through SameProcess: the call runs on the actor's thread outside
    # Dask's task state, where get_worker() fails. The shard learns the worker's threads
    # when it is created, so a large in-process push is still applied in chunks on them
    # (until the fix every such push was applied on one thread).
    from biglda.ps.startup import start_parameter_server

    n = table_mod.PARALLEL_APPLY_ENTRIES + 1000  # (a table of 2,000 rows x 1,000 topics)
    client = embedded_cluster(1, 2)  # one process of 2 threads, shared by the session
    ps = start_parameter_server(client, 2000, 1000, 1, 0.1, staleness=0,
                                workers=sorted(client.scheduler_info()["workers"]))
    try:
        info = client.submit(_push_large_in_process, ps.tables, n,
                             pure=False).result(timeout=120)
    finally:
        ps.close()
    assert info["apply_threads"] == 2
    assert info["parallel_applies"] == 1 and info["pushes"] == 1
