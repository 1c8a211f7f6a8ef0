"""cgs's kernels beyond the tiny-corpus posterior tests: the full conditional at K > 16 (the
dense kernel's lanes, blocks and padding), the row-density and expected-moves measures and
the per-sweep switch between SparseLDA and the dense kernel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z
from biglda.samplers.cgs_cpu import (
    DENSE_ABOVE_THREADS,
    DENSE_CAP_FROM_THREADS,
    SPARSE_BELOW,
    _move_share,
    _row_density,
    _topic_bits,
    _word_lists,
)

_VARIANTS = [{"variant": "plain"}, {"dense_above": 2.0}, {"variant": "dense"}]


def _one_draw_case(n_topics, seed):
    """A shard whose last document's first token has a known conditional.

    Document 0 (30 tokens of other words) is swept first, so the kernels' scratch rows are
    used before the token of interest; its moves change n_k by a few counts against the
    1e8 of other words' counts, which leaves that token's conditional unchanged to ~1e-7.
    Returns the sweep's arguments and the exact conditional ``p [K]`` of token 30.
    """
    rng = np.random.default_rng(seed)
    n_words, global_v = 8, 50
    tokens = np.concatenate([rng.integers(0, 6, 30), [6, 7]]).astype(np.int32)
    doc_ptr = np.array([0, 30, 32], dtype=np.int64)
    z = rng.integers(0, n_topics, 32).astype(np.uint16)
    z[30], z[31] = 5, 11
    other = (rng.random((n_words, n_topics)) < 0.3) * rng.geometric(0.05, (n_words, n_topics))
    n_wk = count_from_z(tokens, doc_ptr, z, n_words, n_topics)[0] + other.astype(np.int32)
    n_k = n_wk.sum(axis=0) + rng.integers(10**8, 3 * 10**8, n_topics)  # words not cached here
    alpha = rng.uniform(0.02, 0.5, n_topics)
    beta = 0.05
    wk = n_wk[6].astype(np.float64)
    nk = n_k.astype(np.float64)
    wk[5] -= 1
    nk[5] -= 1
    n_dk = np.zeros(n_topics)
    n_dk[11] = 1
    p = (n_dk + alpha) * (wk + beta) / (nk + global_v * beta)
    return (tokens, doc_ptr, z, n_wk, n_k, alpha, beta, global_v), p / p.sum()


@pytest.mark.parametrize("params", _VARIANTS, ids=["plain", "sparse", "dense"])
@pytest.mark.parametrize("n_topics", [37, 100])
def test_a_draw_follows_the_full_conditional(params, n_topics):
    # p(k) ∝ (n_dk + alpha_k)(n_wk + beta) / (n_k + V beta) without the token, at K > 16:
    # K = 37 leaves a partial last block of the dense kernel's 16 lanes, K = 100 six full
    # ones. Each sweep starts from the same state with its own random stream.
    (tokens, doc_ptr, z0, n_wk0, n_k0, alpha, beta, global_v), p = _one_draw_case(n_topics, 3)
    sampler = get_sampler("cgs", **params)
    n_draws = 12000
    counts = np.zeros(n_topics, dtype=np.int64)
    for it in range(n_draws):
        z, n_wk, n_k = z0.copy(), n_wk0.copy(), n_k0.copy()
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, global_v, RandomKey(3, it))
        counts[z[30]] += 1
    expected = p * n_draws
    rare = expected < 5
    obs = np.append(counts[~rare], counts[rare].sum())
    exp = np.append(expected[~rare], expected[rare].sum())
    stat, pvalue = chisquare(obs, exp)
    assert pvalue > 1e-3, f"chi2={stat:.1f} on {len(obs) - 1} dof, p={pvalue:.2e}"


def _density_oracle(tokens, n_wk, stride=1):
    rows = [w for w in range(n_wk.shape[0]) if w % stride == 0]
    occ = np.bincount(tokens, minlength=n_wk.shape[0])[rows]
    share = (n_wk[rows] != 0).mean(axis=1)
    return float((occ * share).sum() / occ.sum())


def test_row_density_is_the_token_weighted_share_of_non_zero_topics():
    rng = np.random.default_rng(0)
    n_wk = (rng.random((40, 23)) < rng.random((40, 1))).astype(np.int32) * 3
    tokens = rng.zipf(1.5, 500).astype(np.int32) % 40
    assert _row_density(tokens, n_wk, 10**6) == pytest.approx(_density_oracle(tokens, n_wk))
    # bounded reading: every stride-th row, stride = 1 + V K // max_entries
    stride = 1 + (40 * 23) // 200
    assert stride > 1
    assert _row_density(tokens, n_wk, 200) == pytest.approx(
        _density_oracle(tokens, n_wk, stride))
    assert _row_density(tokens[:0], n_wk, 10**6) == 0.0


def test_word_lists_hold_each_rows_topics_by_count_descending_with_room_for_new_ones():
    # SparseLDA's per-word lists: a row's non-zero (count << bits | topic), sorted descending
    # (rows of up to 32 topics by insertion, longer ones by np.sort), capacity
    # min(K, nnz + occurrences); words without occurrences get an empty list
    rng = np.random.default_rng(3)
    n_words, n_topics = 30, 70
    nnz = rng.integers(0, n_topics + 1, n_words)  # (0, a few, > 32, every topic)
    nnz[:4] = [0, 1, 33, n_topics]
    n_wk = np.zeros((n_words, n_topics), dtype=np.int32)
    for w in range(n_words):
        n_wk[w, rng.choice(n_topics, nnz[w], replace=False)] = rng.integers(1, 5, nnz[w])
    tokens = rng.integers(0, n_words - 3, 400).astype(np.int32)  # (the last 3 words: none)
    occ = np.bincount(tokens, minlength=n_words)
    bits = _topic_bits(n_topics)
    start, length, packed = _word_lists(tokens, n_wk, bits)
    for w in range(n_words):
        topics = np.flatnonzero(n_wk[w])
        want = np.sort((n_wk[w, topics].astype(np.int64) << bits) | topics)[::-1]
        if occ[w] == 0:
            want = want[:0]
        assert length[w] == len(want)
        np.testing.assert_array_equal(packed[start[w]:start[w] + length[w]], want)
        assert start[w + 1] - start[w] == (min(n_topics, len(want) + occ[w]) if occ[w] else 0)


def _move_share_oracle(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, docs):
    """1 - mean p(own topic | rest) over the tokens of ``docs``, each conditional enumerated."""
    stay = []
    for d in docs:
        zd = z[doc_ptr[d]:doc_ptr[d + 1]]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            s = z[i]
            n_dk = np.bincount(zd, minlength=len(n_k)).astype(np.float64)
            wk = n_wk[tokens[i]].astype(np.float64)
            nk = n_k.astype(np.float64)
            n_dk[s] -= 1
            wk[s] -= 1
            nk[s] -= 1
            p = (n_dk + alpha) * (wk + beta) / (nk + n_words * beta)
            stay.append(p[s] / p.sum())
    return 1.0 - float(np.mean(stay))


@pytest.mark.parametrize("start", ["random", "sorted"])
def test_move_share_is_the_mean_chance_that_a_token_leaves_its_topic(start):
    rng = np.random.default_rng(2)
    n_words, n_topics = 25, 13
    tokens, doc_ptr = _random_docs(rng, 40, (3, 30), n_words)
    z = (init_z(len(tokens), n_topics, RandomKey(1, -1)) if start == "random"
         else (tokens % n_topics).astype(np.uint16))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    n_k = n_k + 500  # words of other shards
    alpha = rng.uniform(0.05, 0.5, n_topics)
    args = (tokens, doc_ptr, z, n_wk, n_k, alpha, 0.05, 60.0)
    got = _move_share(*args, 10**6)
    assert got == pytest.approx(_move_share_oracle(*args, range(40)), rel=1e-9)
    # bounded work: every stride-th document, stride = 1 + N K // max_terms
    stride = 1 + (len(tokens) * n_topics) // 2000
    assert stride > 1
    assert _move_share(*args, 2000) == pytest.approx(
        _move_share_oracle(*args, range(0, 40, stride)), rel=1e-9)
    assert (got > 0.8) if start == "random" else (got < 0.5)


def test_a_sweep_moves_about_the_share_the_switch_expects():
    # The switch's estimate is what a sweep from the state then does, after 3 sweeps and
    # after 15 (200 documents of 50 words from 10 topics' vocabularies). (From the random
    # start the estimate is above what a sweep does: the counts sharpen as the sweep goes.)
    n_words, n_topics = 300, 10
    tokens, doc_ptr = _topic_docs(np.random.default_rng(5), 200, 50, n_topics, n_words, 30)
    z = init_z(len(tokens), n_topics, RandomKey(6, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    alpha = np.full(n_topics, 0.1)
    sampler = get_sampler("cgs", variant="dense")
    for it in range(16):
        if it in (3, 15):
            want = _move_share(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.01, float(n_words),
                               10**7)
            before = z.copy()
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.01, n_words, RandomKey(6, it))
        if it in (3, 15):
            assert np.mean(before != z) == pytest.approx(want, abs=0.03)
    assert want < 0.5  # (the state after 15 sweeps has settled)


def _topic_docs(rng, n_docs, length, n_topics, n_words, step, spread=None):
    """``(tokens, doc_ptr)``: documents of ``length`` words, each drawn from its topic's.

    Document d has a topic t_d; its words are ``t_d * step + U[0, spread)`` mod V
    (``spread`` defaults to ``step``).
    """
    doc_topic = rng.integers(0, n_topics, n_docs)
    tokens = np.concatenate([(doc_topic[d] * step + rng.integers(0, spread or step, length))
                             % n_words for d in range(n_docs)]).astype(np.int32)
    return tokens, np.arange(0, length * n_docs + 1, length, dtype=np.int64)


def _random_docs(rng, n_docs, lengths, n_words):
    """``(tokens, doc_ptr)``: ``n_docs`` documents of uniform words, lengths in ``[lo, hi)``."""
    doc_ptr = np.concatenate([[0], np.cumsum(rng.integers(*lengths, n_docs))]).astype(np.int64)
    return rng.integers(0, n_words, int(doc_ptr[-1])).astype(np.int32), doc_ptr


def test_switch_runs_the_kernel_its_rule_names():
    rng = np.random.default_rng(1)
    n_words, n_topics = 30, 20
    tokens, doc_ptr = _random_docs(rng, 60, (5, 40), n_words)
    # a random start: dense rows; each word's tokens in one topic: sparse rows
    dense_z = init_z(len(tokens), n_topics, RandomKey(4, -1))
    sparse_z = (tokens % n_topics).astype(np.uint16)
    default = get_sampler("cgs")
    for z_start, want in ((dense_z, "dense"), (sparse_z, "sparse")):
        n_wk, n_k = count_from_z(tokens, doc_ptr, z_start, n_words, n_topics)
        density = _row_density(tokens, n_wk, 10**6)
        moves = _move_share(tokens, doc_ptr, z_start, n_wk, n_k, np.full(n_topics, 0.1), 0.05,
                            float(n_words), 10**6)
        assert default.kernel_for(density, moves) == want
        runs = {}
        for name, params in (("default", {}), ("dense", {"variant": "dense"}),
                             ("sparse", {"dense_above": 2.0})):
            z, wk, k = z_start.copy(), n_wk.copy(), n_k.copy()
            get_sampler("cgs", **params).sweep(tokens, doc_ptr, z, wk, k, 0.1, 0.05, n_words,
                                              RandomKey(4, 1))
            runs[name] = z
        # the kernels map random numbers to topics differently, so the chains differ
        assert np.mean(runs["dense"] != runs["sparse"]) > 0.1
        np.testing.assert_array_equal(runs["default"], runs[want])


def test_switch_thresholds_are_inclusive():
    s = get_sampler("cgs", dense_above=0.4)
    assert s.kernel_for(0.4) == "dense"
    assert s.kernel_for(np.nextafter(0.4, 0.0)) == "sparse"
    # a given dense_above is the rule on any threads, whatever the moves
    assert s.kernel_for(0.3, 0.0, n_threads=4) == "sparse"
    assert s.kernel_for(0.4, 0.0) == "dense"
    assert get_sampler("cgs", dense_above=0.0).kernel_for(0.0) == "dense"
    assert get_sampler("cgs", dense_above=2.0).kernel_for(1.0) == "sparse"
    # the default: density x moves against SPARSE_BELOW; from DENSE_CAP_FROM_THREADS threads
    # also the density
    default = get_sampler("cgs")
    assert default.kernel_for(SPARSE_BELOW / 0.5, 0.5) == "dense"
    assert default.kernel_for(np.nextafter(SPARSE_BELOW / 0.5, 0.0), 0.5) == "sparse"
    many = DENSE_CAP_FROM_THREADS
    assert default.kernel_for(DENSE_ABOVE_THREADS, 0.01, n_threads=many) == "dense"
    assert default.kernel_for(np.nextafter(DENSE_ABOVE_THREADS, 0.0), 0.01,
                              n_threads=many) == "sparse"
    assert default.kernel_for(DENSE_ABOVE_THREADS, 0.01, n_threads=many - 1) == "sparse"
    assert default.kernel_for(SPARSE_BELOW / 0.5, 0.5, n_threads=many - 1) == "dense"
    assert 0.0 < SPARSE_BELOW < DENSE_ABOVE_THREADS < 1.0 and many > 2


def test_on_many_threads_the_default_switch_stays_dense_longer():
    # A settled state (each document's tokens in its topic, each word in 2 of 20 topics: a
    # density of 0.1, and few tokens would move) runs SparseLDA on one and two threads and
    # the dense kernel on DENSE_CAP_FROM_THREADS; the chains are those of the kernel forced.
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(3)
    n_words, n_topics, n_docs = 40, 20, 80
    doc_topic = rng.integers(0, n_topics, n_docs)
    # the words of topic t: w % 20 in {t, t + 10 mod 20}
    tokens = np.concatenate([
        (doc_topic[d] + 10 * rng.integers(0, 2, 30) + 20 * rng.integers(0, 2, 30)) % n_words
        for d in range(n_docs)]).astype(np.int32)
    doc_ptr = np.arange(0, 30 * n_docs + 1, 30, dtype=np.int64)
    z0 = np.repeat(doc_topic, 30).astype(np.uint16)
    n_wk, n_k = count_from_z(tokens, doc_ptr, z0, n_words, n_topics)
    density = _row_density(tokens, n_wk, 10**6)
    moves = _move_share(tokens, doc_ptr, z0, n_wk, n_k, np.full(n_topics, 0.1), 0.05,
                        float(n_words), 10**6)
    assert density >= DENSE_ABOVE_THREADS and density * moves < SPARSE_BELOW
    with ThreadPoolExecutor(DENSE_CAP_FROM_THREADS - 1) as pool:
        for n_threads, forced in ((1, 2.0), (2, 2.0), (DENSE_CAP_FROM_THREADS, 0.0)):
            runs = []
            for params in ({}, {"dense_above": forced}):
                z, wk, k = z0.copy(), n_wk.copy(), n_k.copy()
                get_sampler("cgs", **params).sweep(tokens, doc_ptr, z, wk, k, 0.1, 0.05,
                                                   n_words, RandomKey(5, 1), pool=pool,
                                                   n_threads=n_threads)
                runs.append(z)
            np.testing.assert_array_equal(runs[0], runs[1])


def test_the_switch_reads_only_the_state_so_a_fresh_sampler_continues_a_chain():
    # A resumed run builds new samplers: the kernel of each sweep, and so the chain, must
    # not depend on the sweeps the sampler ran before. 10 sweeps from a random start cross
    # from the dense kernel to SparseLDA (checked), by one sampler and by a new one a sweep.
    n_words, n_topics = 60, 8
    tokens, doc_ptr = _topic_docs(np.random.default_rng(7), 120, 40, n_topics, n_words, 7,
                                  spread=8)
    alpha = np.full(n_topics, 0.1)
    chains, kernels = [], []
    for fresh in (False, True):
        z = init_z(len(tokens), n_topics, RandomKey(8, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        sampler = get_sampler("cgs")
        picked = []
        for it in range(10):
            if fresh:
                sampler = get_sampler("cgs")
            picked.append(sampler._kernel(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.01,
                                          float(n_words)))
            sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.01, n_words,
                          RandomKey(8, it))
        chains.append(z)
        kernels.append(picked)
    assert kernels[0] == kernels[1]
    assert kernels[0][0] == "dense" and kernels[0][-1] == "sparse"
    np.testing.assert_array_equal(chains[0], chains[1])


@pytest.mark.parametrize("params, n_variants", [
    ({}, 2), ({"dense_above": 0.5}, 2), ({"dense_above": 1.0}, 2), ({"dense_above": 0.0}, 0),
    ({"dense_above": 2.0}, 0), ({"variant": "dense"}, 0), ({"variant": "plain"}, 0)])
def test_the_warm_up_covers_both_kernels_where_the_choice_follows_the_chain(params,
                                                                            n_variants):
    # (biglda.samplers.warm) a sampler that may choose either kernel warms one fixed on each:
    # the first always dense, the second never; one fixed on one kernel warms nothing
    variants = get_sampler("cgs", **params).warm_variants()
    assert len(variants) == n_variants
    if variants:
        assert [v.kernel_for(0.0, 0.0) for v in variants] == ["dense", "sparse"]
        assert [v.kernel_for(1.0, 1.0, n_threads=8) for v in variants] == ["dense", "sparse"]
    assert get_sampler("lightlda").warm_variants() == []


@pytest.mark.parametrize("mode", [{}, {"n_threads": 2}, {"n_threads": 8},
                                  {"n_threads": 1, "windowed": True},
                                  {"n_threads": 8, "windowed": True}],
                         ids=["one", "2-threads", "8-threads", "windows", "8-threads-windows"])
@pytest.mark.parametrize("n_topics", [7, 70_000])
def test_the_warm_up_sweeps_its_own_shard_in_every_mode(mode, n_topics):
    # the process's arrays give only their dtypes: the warm-up's sweeps never write them;
    # tiny ranges (8 threads: 16 ranges over the 16-64 words of a large K) still sweep
    from concurrent.futures import ThreadPoolExecutor

    from biglda.samplers import z_dtype
    from biglda.samplers.warm import warm_kernels

    arrays = [np.arange(5, dtype=np.int32), np.array([0, 5], dtype=np.int64),
              np.zeros(5, dtype=z_dtype(n_topics)), np.ones((5, n_topics), dtype=np.int32),
              np.full(n_topics, 3, dtype=np.int64)]
    before = [a.copy() for a in arrays]
    with ThreadPoolExecutor(7) as pool:
        assert warm_kernels(get_sampler("cgs"), *arrays, pool=pool, **mode) > 0.0
        assert warm_kernels(get_sampler("lightlda"), *arrays, pool=pool, **mode) == 0.0
    for a, b in zip(arrays, before, strict=True):
        np.testing.assert_array_equal(a, b)
