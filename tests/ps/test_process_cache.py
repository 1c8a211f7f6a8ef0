"""One cache per worker process: two processes of several shards each stay exact under BSP
(each cache = the table after the previous clock, plus its own moves), a pull's reply holds only
the other process's changes, and the table's log is trimmed by what the lead received (the
process's other shards never pull)."""

from __future__ import annotations

import numpy as np
import pytest
from ps_moves import moves, start_process_cache

import biglda.ps.cache as cache_module
from biglda.ps import TableShard
from biglda.ps._kernels import add_coo
from biglda.ps.calls import InProcess
from biglda.ps.client import TableClient
from biglda.ps.process_cache import add_deltas
from biglda.ps.sizing import row_bounds

K = 4


@pytest.mark.parametrize("sparsity", [cache_module.LUT_SPARSITY, 0],
                         ids=["rows-by-table", "rows-by-search"])
def test_process_caches_are_exact_and_trim_the_log(sparsity, monkeypatch):
    monkeypatch.setattr(cache_module, "LUT_SPARSITY", sparsity)
    rng = np.random.default_rng(3)
    n_words, n_parts, groups = 30, 2, [[0, 1, 2], [3, 4]]
    bounds = row_bounds(n_words, n_parts)
    actors = [TableShard(a, int(bounds[a]), int(bounds[a + 1]), K, 5, 0.1)
              for a in range(n_parts)]
    tables = TableClient(tuple(InProcess(a) for a in actors), bounds)
    caches, truth = [], np.zeros((n_words, K), dtype=np.int64)
    for members in groups:
        cache, init = start_process_cache(rng, members, n_words, 50, bounds, tables, K)
        truth[cache.vocab] += init
        caches.append(cache)
    for clock in range(6):
        for cache in caches:
            if clock == 0:
                cache.attach(tables, clock - 1, 5.0)
            else:
                cache.refresh(tables, clock - 1, 5.0)
            # BSP: the cache is the table after the previous clock
            np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
            assert cache.n_k.sum() == truth.sum()
        for cache in caches:
            # two "threads": one sweeps on the cache, one on a copy merged in after
            words, topics, counts, dk = moves(rng, cache.n_wk, 6)
            add_coo(cache.n_wk, words.astype(np.int64), topics, counts)
            cache.n_k += dk
            other = moves(rng, cache.n_wk, 6)
            add_deltas(cache.n_wk, cache.n_k, [other])
            cache.push_all(tables, clock, [(words, topics, counts, dk), other], 5.0)
            for w, t, c, _ in [(words, topics, counts, dk), other]:
                np.add.at(truth, (cache.vocab[w], t), c)
    # every shard's clock advanced; the log keeps at most the last clocks, not all of them
    for a in actors:
        info = a.info()
        assert info["applied"] == [5] * 5
        assert info["log_entries"] <= 2 * 5
        assert info["pulls"] == 2 * 5  # one pull per process per clock (after the attach)


def test_local_ids_by_table_and_by_search_agree():
    """A dense vocabulary maps ids through a table, a sparse one by binary search: same rows."""
    rng = np.random.default_rng(0)
    for tokens in (rng.integers(0, 200, 1000), rng.integers(0, 10, 50) * 100_000):
        cache = cache_module.ShardCache(0, tokens.astype(np.int32), np.array([0, 10**7]), K)
        words = rng.choice(cache.vocab, 500)
        rows = cache.local_ids(words)
        assert (cache._rows is not None) == (tokens.max() < 1000)
        np.testing.assert_array_equal(cache.vocab[rows], words)
        np.testing.assert_array_equal(rows, np.searchsorted(cache.vocab, words))


def test_one_process_costs_the_server_no_fold():
    # One process of three shards (the lead pushes the moves, the others empty deltas): its
    # pulls have nothing to receive, and the server sums and scans nothing for them.
    rng = np.random.default_rng(4)
    n_words, members = 20, [0, 1, 2]
    bounds = row_bounds(n_words, 1)
    actor = TableShard(0, 0, n_words, K, len(members), 0.1)
    tables = TableClient((InProcess(actor),), bounds)
    cache, _ = start_process_cache(rng, members, n_words, 80, bounds, tables, K)
    cache.attach(tables, -1, 5.0)
    for clock in range(5):
        if clock:
            assert cache.refresh(tables, clock - 1, 5.0) > 0  # (the reply's headers)
        np.testing.assert_array_equal(cache.n_wk, actor.n_wk[cache.vocab])
        d = moves(rng, cache.n_wk, 5)
        add_deltas(cache.n_wk, cache.n_k, [d])
        cache.push_all(tables, clock, [d], 5.0)
    np.testing.assert_array_equal(cache.n_wk, actor.n_wk[cache.vocab])
    assert actor.fold_entries == actor.pull_gathered == actor.pull_own == 0
    assert actor.pull_entries_out == 0


@pytest.mark.parametrize("n_parts", [1, 2])
def test_a_cache_of_every_word_pushes_its_ids_as_they_are(n_parts):
    # A process that holds every word of the table (one process of the corpus): its local ids
    # are the global ones, so its pushes skip the mapping and the table still ends equal to
    # the truth; a word missing (a sparser process) keeps the mapping. An id past the
    # vocabulary is still refused (by the table, or where the push is cut by table shard).
    rng = np.random.default_rng(5)
    n_words = 12
    bounds = row_bounds(n_words, n_parts)
    actors = [TableShard(a, int(bounds[a]), int(bounds[a + 1]), K, 1, 0.1)
              for a in range(n_parts)]
    tables = TableClient(tuple(InProcess(a) for a in actors), bounds)
    tokens = np.concatenate([np.arange(n_words), rng.integers(0, n_words, 200)]).astype(np.int32)
    cache = cache_module.ShardCache(0, tokens, bounds, K)
    assert cache.identity
    assert not cache_module.ShardCache(0, tokens[tokens != 3], bounds, K).identity
    assert not cache_module.ShardCache(0, tokens[tokens != n_words - 1], bounds, K).identity
    truth = np.zeros((n_words, K), dtype=np.int64)
    cache.n_wk += 3
    cache.push_counts(tables, -1, cache.n_wk, 5.0)
    truth += 3
    for clock in range(4):
        words, topics, counts, _ = moves(rng, cache.n_wk, 8)
        add_coo(cache.n_wk, words.astype(np.int64), topics, counts)
        cache.push(tables, clock, words, topics, counts, 5.0)
        np.add.at(truth, (words, topics), counts)
    table = np.concatenate([a.n_wk for a in actors])
    np.testing.assert_array_equal(table, truth)
    np.testing.assert_array_equal(cache.local_ids(np.arange(n_words)), np.arange(n_words))
    with pytest.raises((ValueError, IndexError), match="outside"):
        cache.push(tables, 9, np.array([n_words], np.int32), np.array([0], np.int32),
                   np.array([1], np.int32), 5.0)
