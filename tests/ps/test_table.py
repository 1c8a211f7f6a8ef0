"""The table actor in-process: idempotent pushes, merged pulls, attach by clock, snapshots.

Oracles: a dense NumPy table updated with the same deltas (np.add.at, slow but obviously right)
and the log-likelihood computed from scratch with scipy's gammaln.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln

from biglda.ps.table import TableShard

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
    ps = TableShard(0, 10, 30, n_topics=K, n_shards=2, beta=BETA)
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
    ps = TableShard(0, 0, 20, n_topics=K, n_shards=3, beta=BETA)
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
    assert ps.info()["log_entries"] == 0 and ps.info()["folded_clocks"] == 0


def test_attach_excludes_deltas_after_the_clock_asked_for():
    rng = np.random.default_rng(2)
    ps = TableShard(0, 0, 20, n_topics=K, n_shards=2, beta=BETA)
    init = _random_delta(rng, 0, 20)
    ps.push(0, -1, *init, log=False)
    table0 = ps.n_wk.copy()
    ps.attach(0, np.arange(20), -1)
    ps.push(0, 0, *_random_delta(rng, 0, 20))  # shard 0 already finished clock 0
    rows, nk, received = ps.attach(1, np.arange(0, 20, 3), -1)
    np.testing.assert_array_equal(rows, table0[0:20:3])
    np.testing.assert_array_equal(nk, table0.sum(0))
    _, w, _t, _c, _ = ps.pull(1, received, 0)  # and the clock-0 delta comes with the next pull
    assert len(w) > 0 and set(np.unique(w)) <= set(range(0, 20, 3))


def test_snapshot_when_every_shard_pushed_the_clock():
    ps = TableShard(0, 0, 4, n_topics=K, n_shards=2, beta=BETA)
    one = (np.array([1], np.int32), np.array([2], np.int32), np.array([3], np.int32))
    ps.push(0, 0, *one)
    assert ps.snapshot(0) is None
    ps.push(1, 0, *one)
    ll, nk = ps.snapshot(0)
    assert math.isclose(ll, _row_ll(ps.n_wk)) and nk[2] == 6


def test_snapshot_under_ssp_is_the_state_after_the_clock():
    """A fast shard's later pushes are not in the snapshot of a clock (a consistent cut)."""
    rng = np.random.default_rng(5)
    ps = TableShard(0, 0, 30, n_topics=K, n_shards=2, beta=BETA)
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


def test_push_advance_is_a_push_then_an_advance():
    """One call at a clock's push where processes taking turns made two: the same table,
    the same ``received`` and the same trimmed log as the push and the advance apart; an
    advance past what every writer pushed still fails."""
    rng = np.random.default_rng(3)
    one = TableShard(0, 0, 20, n_topics=K, n_shards=2, beta=BETA)
    two = TableShard(0, 0, 20, n_topics=K, n_shards=2, beta=BETA)
    for ps in (one, two):
        ps.attach(0, np.arange(20, dtype=np.int64), -1)
        ps.attach(1, np.arange(20, dtype=np.int64), -1)
    for clock in range(4):
        for shard in range(2):
            w, t, c = _random_delta(rng, 0, 20)
            upto = clock - 2
            if upto < 0:
                one.push(shard, clock, w, t, c)
                two.push(shard, clock, w, t, c)
                continue
            got = one.push_advance(shard, clock, w, t, c, upto)
            two.push(shard, clock, w, t, c)
            np.testing.assert_array_equal(got, two.advance(shard, upto))
    np.testing.assert_array_equal(one.n_wk, two.n_wk)
    assert {k: v for k, v in one.info().items() if k != "bytes_in"} == \
        {k: v for k, v in two.info().items() if k != "bytes_in"}
    assert one.info()["advances"] == 4 and one.info()["log_entries"] < 8
    w, t, c = _random_delta(rng, 0, 20)
    with pytest.raises(RuntimeError, match="pushes only up to"):
        one.push_advance(0, 4, w, t, c, 4)  # writer 1 has not pushed clock 4
