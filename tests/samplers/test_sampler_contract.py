"""The sweep contract, checked for every registered sampler: conservation laws after every
sweep, the returned delta, determinism of the random streams, argument validation."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.samplers import (
    RandomKey,
    count_from_z,
    doc_topic_counts,
    fit_local,
    init_z,
)


def _small_corpus(seed=3, n_docs=40, n_words=30, max_len=25):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, size=n_docs)
    lengths[5] = 0  # an empty document must be harmless
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, n_words, size=int(doc_ptr[-1])).astype(np.int32)
    return tokens, doc_ptr, n_words


def _corpus_for(case, seed=3):
    # the simulator runs a Python thread per CUDA thread: ~40 tokens rather than ~500
    return _small_corpus(seed, n_docs=10, max_len=8) if case.small else _small_corpus(seed)


@pytest.mark.parametrize("alpha_kind", ["symmetric", "asymmetric"])
@pytest.mark.parametrize("z_type", [np.uint16, np.int32])
def test_invariants_after_every_sweep(sampler_case, sampler, alpha_kind, z_type):
    tokens, doc_ptr, n_words = _corpus_for(sampler_case)
    n_topics = 7
    alpha = 0.3 if alpha_kind == "symmetric" else np.linspace(0.05, 1.0, n_topics)
    z = init_z(len(tokens), n_topics, RandomKey(1, -1)).astype(z_type)
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    for it in range(1, 6):
        before = n_wk.copy()
        before_k = n_k.copy()
        res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.05, n_words,
                            RandomKey(1, it))
        assert z.dtype == z_type and np.all(z < n_topics)
        # n_wk / n_k in place equal the recount from z
        want_wk, want_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        np.testing.assert_array_equal(n_wk, want_wk)
        np.testing.assert_array_equal(n_k, want_k)
        assert n_k.sum() == len(tokens)
        # the delta is the change, as COO with unique pairs sorted by (word, topic) and no
        # zeros (the process cache merges its threads' deltas by that order)
        pairs = res.delta_words.astype(np.int64) * n_topics + res.delta_topics
        assert np.all(np.diff(pairs) > 0)
        assert np.all(res.delta_counts != 0)
        applied = before.copy()
        np.add.at(applied, (res.delta_words, res.delta_topics), res.delta_counts)
        np.testing.assert_array_equal(applied, n_wk)
        np.testing.assert_array_equal(before_k + res.delta_k, n_k)
        assert res.delta_k.sum() == 0
        # doc-topic counts rebuilt from z sum to the document lengths
        n_dk = doc_topic_counts(doc_ptr, z, n_topics)
        np.testing.assert_array_equal(n_dk.sum(axis=1), np.diff(doc_ptr))
        assert res.n_tokens == len(tokens) and res.seconds >= 0
        if sampler.algorithm in ("lightlda", "warplda"):  # Metropolis-Hastings
            assert 0.0 < res.accept_rate <= 1.0
        else:
            assert res.accept_rate is None


def test_cached_rows_may_be_a_superset(sampler_case, sampler):
    # A worker's cached rows also hold other shards' counts: the sweep must leave those
    # alone and only move its own tokens' counts.
    tokens, doc_ptr, n_words = _corpus_for(sampler_case, seed=5)
    n_topics = 5
    z = init_z(len(tokens), n_topics, RandomKey(2, -1))
    own_wk, own_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    rng = np.random.default_rng(0)
    other_wk = rng.integers(0, 4, size=own_wk.shape).astype(np.int32)
    n_wk = own_wk + other_wk
    n_k = own_k + other_wk.sum(axis=0)
    global_v = n_words + 50
    for it in range(1, 4):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, global_v, RandomKey(2, it))
        want_wk, want_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        np.testing.assert_array_equal(n_wk - other_wk, want_wk)
        np.testing.assert_array_equal(n_k - other_wk.sum(axis=0), want_k)


def test_delta_from_snapshot_equals_delta_from_moves(sampler_case, sampler, monkeypatch):
    # Sampler.sweep diffs a snapshot of n_wk when the rows are small next to the shard and
    # buckets the moves by word otherwise: the same sweep must give the same delta both ways.
    if sampler_case.kind != "cpu":
        pytest.skip("the GPU samplers build their delta on the device")
    import biglda.samplers.base as base

    tokens, doc_ptr, n_words = _corpus_for(sampler_case, seed=7)
    n_topics = 6
    z0 = init_z(len(tokens), n_topics, RandomKey(5, -1))
    wk0, k0 = count_from_z(tokens, doc_ptr, z0, n_words, n_topics)
    results = []
    for per_token in (0, 10**6):  # never / always the snapshot
        monkeypatch.setattr(base, "SNAPSHOT_ENTRIES_PER_TOKEN", per_token)
        z, n_wk, n_k = z0.copy(), wk0.copy(), k0.copy()
        res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.2, 0.05, n_words,
                            RandomKey(5, 1))
        applied = wk0.copy()
        np.add.at(applied, (res.delta_words, res.delta_topics), res.delta_counts)
        np.testing.assert_array_equal(applied, n_wk)
        results.append(res)
    a, b = results
    assert len(a.delta_counts) > 0
    for name in ("delta_words", "delta_topics", "delta_counts", "delta_k"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_one_sampler_snapshot_delta_over_sweeps_and_shapes(sampler_case, sampler, monkeypatch):
    # A sampler keeps its snapshot buffer from one sweep to the next: every sweep's delta
    # must still be that sweep's own change, also after a table of another shape.
    if sampler_case.kind != "cpu":
        pytest.skip("the GPU samplers build their delta on the device")
    import biglda.samplers.base as base

    monkeypatch.setattr(base, "SNAPSHOT_ENTRIES_PER_TOKEN", 10**6)  # always the snapshot
    for seed, n_topics in ((7, 6), (8, 6), (9, 4), (10, 6)):
        tokens, doc_ptr, n_words = _corpus_for(sampler_case, seed=seed)
        z = init_z(len(tokens), n_topics, RandomKey(seed, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        for it in range(2):
            before = n_wk.copy()
            res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.2, 0.05, n_words,
                                RandomKey(seed, it))
            assert len(res.delta_counts) > 0
            np.add.at(before, (res.delta_words, res.delta_topics), res.delta_counts)
            np.testing.assert_array_equal(before, n_wk)
            np.testing.assert_array_equal(n_wk, count_from_z(tokens, doc_ptr, z, n_words,
                                                             n_topics)[0])


def test_same_seed_same_z_and_different_seeds_differ(sampler_case, synthetic):
    # On a GPU only the single-block mode is reproducible (many blocks race on the counts)
    case = sampler_case
    tokens, doc_ptr, phi, _ = synthetic
    # the simulator: 2 documents (~250 tokens) rather than 8 (~1,000), ~2 ms a token-sweep
    n_docs = 2 if case.small else 100
    tokens, doc_ptr = tokens[: doc_ptr[n_docs]], doc_ptr[: n_docs + 1]
    n_words = phi.shape[1]
    params = {**case.params, **case.exact_params}
    runs = [fit_local(tokens, doc_ptr, n_words, 8, case.algorithm, iterations=3, seed=s,
                      backend=case.backend, loglik_every=0, **params) for s in (11, 11, 12)]
    np.testing.assert_array_equal(runs[0].z, runs[1].z)
    np.testing.assert_array_equal(runs[0].n_wk, runs[1].n_wk)
    assert np.mean(runs[0].z != runs[2].z) > 0.3


def test_init_z_streams():
    a = init_z(1000, 10, RandomKey(0, -1))
    np.testing.assert_array_equal(a, init_z(1000, 10, RandomKey(0, -1)))
    assert np.mean(a != init_z(1000, 10, RandomKey(0, -1, 1))) > 0.8
    assert set(np.unique(a)) == set(range(10))
    assert init_z(3, 70_000, RandomKey(0, 0)).dtype == np.int32


@pytest.mark.parametrize("mutate, err", [
    (lambda a: a.update(tokens=a["tokens"].astype(np.int64)), TypeError),
    (lambda a: a.update(z=a["z"][:-1]), ValueError),
    (lambda a: a.update(n_wk=np.asfortranarray(a["n_wk"])), ValueError),
    (lambda a: a.update(n_k=a["n_k"][:-1]), ValueError),
    (lambda a: a.update(doc_ptr=a["doc_ptr"][:-1]), ValueError),
    (lambda a: a["z"].__setitem__(0, 9), ValueError),
    (lambda a: a.update(alpha=-1.0), "ConfigError"),
    (lambda a: a.update(beta=0.0), "ConfigError"),
    (lambda a: a.update(key=7), TypeError),
])
def test_bad_arguments_are_refused(sampler, mutate, err):
    from biglda.errors import ConfigError

    tokens = np.array([0, 1, 1, 0], dtype=np.int32)
    doc_ptr = np.array([0, 2, 4], dtype=np.int64)
    z = np.array([0, 1, 0, 1], dtype=np.uint16)
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, 2, 2)
    args = dict(tokens=tokens, doc_ptr=doc_ptr, z=z, n_wk=n_wk, n_k=n_k, alpha=0.1, beta=0.1,
                n_words=2, key=RandomKey(0, 1))
    mutate(args)
    with pytest.raises(ConfigError if err == "ConfigError" else err):
        sampler.sweep(**args)


def test_fit_local_history_and_callback(tiny_docs):
    tokens, doc_ptr, n_words, n_topics = tiny_docs
    seen = []
    fit = fit_local(tokens, doc_ptr, n_words, n_topics, "lightlda", iterations=4, alpha=0.5,
                    beta=0.1, seed=1, callback=seen.append, loglik_every=2)
    assert [r["iteration"] for r in seen] == [1, 2, 3, 4]
    assert seen == fit.history
    assert ["ll_per_token" in r for r in seen] == [False, True, False, True]
    assert all(0 < r["accept_rate"] <= 1 for r in seen)
    want_wk, want_k = count_from_z(tokens, doc_ptr, fit.z, n_words, n_topics)
    np.testing.assert_array_equal(fit.n_wk, want_wk)
    np.testing.assert_array_equal(fit.n_k, want_k)


@pytest.mark.parametrize("z_dtype", [np.uint16, np.int32])
def test_scan_part_agrees_with_a_numpy_reading_of_every_range(z_dtype):
    # The O(N) argument checks a threaded sweep runs in parts (warplda's, a partition's kept
    # layout): the first bad word id and topic of each part and whether it equals the kept
    # tokens, against NumPy on random parts with faults at the ends, in the middle and none
    from biglda.samplers.base import scan_part

    rng = np.random.default_rng(11)
    n_rows, n_topics, n = 40, 7, 1000
    for trial in range(60):
        tokens = rng.integers(0, n_rows, n).astype(np.int32)
        z = rng.integers(0, n_topics, n).astype(z_dtype)
        cached = tokens.copy()
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo, n + 1))
        at = [lo, hi - 1, (lo + hi) // 2][trial % 3] if hi > lo else lo
        kind = trial % 5
        if hi > lo and kind == 0:
            tokens[at] = rng.choice([-3, n_rows, n_rows + 9])
        elif hi > lo and kind == 1:
            z[at] = n_topics + int(rng.integers(0, 3))
        elif hi > lo and kind == 2:
            cached[at] = (cached[at] + 1) % n_rows
        elif kind == 3:  # outside the part: nothing it reads
            tokens[:lo] = -1
            z[hi:] = n_topics
        t, zz = tokens[lo:hi].astype(np.int64), z[lo:hi].astype(np.int64)
        bad_t = np.flatnonzero((t < 0) | (t >= n_rows))
        bad_z = np.flatnonzero((zz < 0) | (zz >= n_topics))
        want = (lo + int(bad_t[0]) if len(bad_t) else -1, lo + int(bad_z[0]) if len(bad_z) else -1,
                bool(np.array_equal(tokens[lo:hi], cached[lo:hi])))
        assert scan_part(tokens, z, lo, hi, n_rows, n_topics, cached) == want, (trial, lo, hi)
        # kept tokens of another length: nothing to compare with
        assert scan_part(tokens, z, lo, hi, n_rows, n_topics, cached[:-1])[2] is False
