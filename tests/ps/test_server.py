"""Parameter server: table shards, idempotent pushes, merged pulls, SSP clock, memory check.

Oracles: a dense NumPy table updated with the same deltas (np.add.at, slow but obviously right)
and the log-likelihood computed from scratch with scipy's gammaln.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from scipy.special import gammaln

from biglda.errors import ConfigError
from biglda.ps.cache import ShardCache
from biglda.ps.server import (
    ClockServer,
    PSShard,
    check_table_fits,
    row_bounds,
    start_parameter_server,
)

K = 6
BETA = 0.05


def _random_delta(rng, lo, hi, m=40):
    words = rng.integers(lo, hi, m)
    topics = rng.integers(0, K, m)
    counts = rng.integers(1, 4, m)
    return words.astype(np.int32), topics.astype(np.int32), counts.astype(np.int32)


def _row_ll(table):
    return float((gammaln(table + BETA) - gammaln(BETA)).sum())


def test_push_applies_once_and_tracks_loglik():
    rng = np.random.default_rng(0)
    ps = PSShard(0, 10, 30, n_topics=K, n_shards=2, beta=BETA)
    oracle = np.zeros((20, K), dtype=np.int64)
    for clock in range(3):
        for shard in range(2):
            w, t, c = _random_delta(rng, 10, 30)  # repeated (w, t) pairs on purpose
            assert ps.push(shard, clock, w, t, c)
            np.add.at(oracle, (w - 10, t), c)
            assert not ps.push(shard, clock, w, t, c)  # a retried push changes nothing
    np.testing.assert_array_equal(ps.n_wk, oracle)
    np.testing.assert_array_equal(ps.n_k, oracle.sum(0))
    assert math.isclose(ps.row_ll, _row_ll(oracle), rel_tol=1e-9)
    assert ps.info()["ignored"] == 6
    with pytest.raises(ValueError, match="outside"):
        ps.push(0, 9, np.array([5], np.int32), np.array([0], np.int32), np.array([1], np.int32))


def test_pull_returns_other_shards_changes_on_own_rows_only():
    rng = np.random.default_rng(1)
    ps = PSShard(0, 0, 20, n_topics=K, n_shards=3, beta=BETA)
    mine = np.arange(0, 20, 2)
    rows, nk, got0 = ps.attach(0, mine, -1)
    for s in (1, 2):
        ps.attach(s, np.arange(20), -1)
    assert rows.shape == (10, K) and not rows.any() and not nk.any()
    expected = np.zeros((20, K), dtype=np.int64)
    for clock in (0, 1):
        for s in range(3):
            w, t, c = _random_delta(rng, 0, 20)
            ps.push(s, clock, w, t, c)
            if s != 0 and clock == 0:
                np.add.at(expected, (w, t), c)
    received, w, t, c, dk = ps.pull(0, got0, 0)  # only clock 0, though clock 1 is there
    assert received[1:].tolist() == [0, 0]
    got = np.zeros((20, K), dtype=np.int64)
    np.add.at(got, (w, t), c)
    assert set(np.unique(w)) <= set(mine)
    np.testing.assert_array_equal(got[mine], expected[mine])
    np.testing.assert_array_equal(dk, expected.sum(0))
    assert len(np.unique(w.astype(np.int64) * K + t)) == len(w)  # merged
    # a retried pull with the same `received` returns the same
    again = ps.pull(0, got0, 0)
    np.testing.assert_array_equal(again[3], c)
    # once every reader received clock 1 of every writer, the log is empty
    for s in range(3):
        ps.pull(s, np.full(3, 1), 1)
    assert ps.info()["log_entries"] == 0


def test_attach_excludes_deltas_after_the_clock_asked_for():
    rng = np.random.default_rng(2)
    ps = PSShard(0, 0, 20, n_topics=K, n_shards=2, beta=BETA)
    init = _random_delta(rng, 0, 20)
    ps.push(0, -1, *init, log=False)
    table0 = ps.n_wk.copy()
    ps.attach(0, np.arange(20), -1)
    ps.push(0, 0, *_random_delta(rng, 0, 20))  # shard 0 already finished clock 0
    rows, nk, received = ps.attach(1, np.arange(0, 20, 3), -1)
    np.testing.assert_array_equal(rows, table0[0:20:3])
    np.testing.assert_array_equal(nk, table0.sum(0))
    _, w, t, c, _ = ps.pull(1, received, 0)  # and the clock-0 delta comes with the next pull
    assert len(w) > 0 and set(np.unique(w)) <= set(range(0, 20, 3))


def test_snapshot_when_every_shard_pushed_the_clock():
    ps = PSShard(0, 0, 4, n_topics=K, n_shards=2, beta=BETA)
    one = (np.array([1], np.int32), np.array([2], np.int32), np.array([3], np.int32))
    ps.push(0, 0, *one)
    assert ps.snapshot(0) is None
    ps.push(1, 0, *one)
    ll, nk = ps.snapshot(0)
    assert math.isclose(ll, _row_ll(ps.n_wk)) and nk[2] == 6


def test_clock_server_staleness_bound():
    async def scenario(s):
        clock = ClockServer(n_shards=2, staleness=s)
        assert await clock.wait(0, 0, timeout=0.01) == "wait"  # nobody initialized
        await clock.tick(0, 0)
        await clock.tick(1, 0)
        assert await clock.wait(0, 0, timeout=0.01) == "go"
        # shard 0 runs ahead while shard 1 stays at 0 completed clocks
        ahead = 0
        for c in range(1, 8):
            await clock.tick(0, c)
            if await clock.wait(0, c, timeout=0.01) != "go":
                break
            ahead = c
        waiter = asyncio.ensure_future(clock.wait(0, ahead + 1, timeout=2.0))
        await asyncio.sleep(0.01)
        await clock.tick(1, 7)  # unblocks the waiter
        result = await waiter
        await clock.stop(3)
        assert await clock.wait(1, 3, timeout=0.01) == "stop"
        return ahead, result

    assert asyncio.run(scenario(0)) == (0, "go")
    assert asyncio.run(scenario(2)) == (2, "go")
    assert asyncio.run(scenario(math.inf)) == (7, "go")


def test_table_too_large_is_a_config_error_that_says_what_fits():
    check_table_fits(1000, 100, {"a": 2**30, "b": 2**30})
    with pytest.raises(ConfigError, match=r"K <= \d+ fits"):
        check_table_fits(10**6, 10**4, {"a": 2**30, "b": 2**30})
    check_table_fits(10**6, 10**4, {"a": 0})  # no limit: not checked


def test_row_bounds_cover_the_vocabulary():
    b = row_bounds(10, 3)
    assert b[0] == 0 and b[-1] == 10 and np.all(np.diff(b) > 0)
    assert len(row_bounds(2, 5)) == 3


def test_caches_on_a_real_cluster_match_the_recount(local_cluster):
    """Two shards push deltas through two table shards on two workers; caches stay exact."""
    client = local_cluster
    workers = sorted(client.scheduler_info()["workers"])
    n_words, n_shards = 50, 2
    ps = start_parameter_server(client, n_words, K, n_shards, BETA, staleness=0,
                                workers=workers)
    assert len(set(ps.workers)) == 2
    rng = np.random.default_rng(3)
    caches, tables = [], []
    for s in range(n_shards):
        tokens = rng.integers(0, n_words, 300).astype(np.int32)
        cache = ShardCache(s, tokens, ps.bounds, K)
        z = rng.integers(0, K, len(tokens))
        local = np.zeros((cache.n_local, K), dtype=np.int32)
        np.add.at(local, (cache.tokens, z), 1)
        cache.push_counts(ps.shards, -1, local, timeout=30)
        caches.append(cache)
        tables.append(local)
    truth = np.zeros((n_words, K), dtype=np.int64)
    for cache, local in zip(caches, tables, strict=True):
        truth[cache.vocab] += local
        cache.attach(ps.shards, -1, timeout=30)
    for cache in caches:  # both inits were pushed before either attached: exact rows
        np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
    for clock in range(3):
        for cache in caches:
            # a valid move: take one count away from a nonzero cell, give it to another topic
            w = rng.integers(0, cache.n_local, 20)
            t_from = cache.n_wk[w].argmax(1)
            t_to = rng.integers(0, K, 20)
            words = np.concatenate([w, w]).astype(np.int32)
            topics = np.concatenate([t_from, t_to]).astype(np.int32)
            counts = np.concatenate([-np.ones(20), np.ones(20)]).astype(np.int32)
            np.add.at(cache.n_wk, (words, topics), counts)  # own moves seen at once
            np.add.at(cache.n_k, topics, counts)
            np.add.at(truth, (cache.vocab[words], topics), counts)
            cache.push(ps.shards, clock, words, topics, counts, timeout=30)
            cache.push(ps.shards, clock, words, topics, counts, timeout=30)  # retried: ignored
        for cache in caches:
            cache.refresh(ps.shards, clock, timeout=30)
            np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
            np.testing.assert_array_equal(cache.n_k, truth.sum(0))
    server = np.zeros_like(truth)
    for start, rows, _nk in (a.table().result(timeout=30) for a in ps.shards):
        server[start:start + len(rows)] = rows
    np.testing.assert_array_equal(server, truth)
    assert all(c.bytes_pulled > 0 and c.bytes_pushed > 0 for c in caches)


def test_snapshot_under_ssp_is_the_state_after_the_clock():
    """A fast shard's later pushes are not in the snapshot of a clock (a consistent cut)."""
    rng = np.random.default_rng(5)
    ps = PSShard(0, 0, 30, n_topics=K, n_shards=2, beta=BETA)
    for s in (0, 1):
        ps.attach(s, np.arange(30), -1)
    oracle = np.zeros((30, K), dtype=np.int64)
    init = _random_delta(rng, 0, 30)
    for s in (0, 1):
        ps.push(s, -1, *init, log=False)
        np.add.at(oracle, (init[0], init[1]), init[2])
    for clock in (0, 1, 2):  # shard 0 runs ahead
        w, t, c = _random_delta(rng, 0, 30)
        ps.push(0, clock, w, t, c)
        if clock == 0:
            np.add.at(oracle, (w, t), c)
    w, t, c = _random_delta(rng, 0, 30)
    ps.push(1, 0, w, t, c)
    np.add.at(oracle, (w, t), c)
    before = ps.n_wk.copy()
    ll, nk = ps.snapshot(0)
    assert math.isclose(ll, _row_ll(oracle), rel_tol=1e-9)
    np.testing.assert_array_equal(nk, oracle.sum(0))
    np.testing.assert_array_equal(ps.n_wk, before)  # the table is left as it was
