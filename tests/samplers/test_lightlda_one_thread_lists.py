"""lightlda on one thread keeps each half's tokens by word between sweeps of the same tokens;
the chain is the one that makes them every sweep, and tokens changed in place are seen."""

from __future__ import annotations

import numpy as np

import biglda.samplers.lightlda_cpu as light
from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z


def _corpus(seed: int, n_docs: int = 300, n_words: int = 60):
    rng = np.random.default_rng(seed)
    doc_ptr = np.concatenate([[0], np.cumsum(rng.integers(1, 25, size=n_docs))]).astype(np.int64)
    tokens = (rng.zipf(1.4, size=int(doc_ptr[-1])) % n_words).astype(np.int32)
    return tokens, doc_ptr


def _state(tokens, doc_ptr, n_words, k, seed=1):
    z = init_z(len(tokens), k, RandomKey(seed, -1))
    return (z, *count_from_z(tokens, doc_ptr, z, n_words, k))


def test_kept_lists_give_the_chain_of_lists_made_every_sweep():
    tokens, doc_ptr = _corpus(0)
    k, v = 40, 60
    sampler = get_sampler("lightlda")
    z, n_wk, n_k = _state(tokens, doc_ptr, v, k)
    z2, n_wk2, n_k2 = _state(tokens, doc_ptr, v, k)
    alpha = np.full(k, 0.1)
    for it in range(4):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, v, RandomKey(1, it))
        # the kernel that makes them itself, from the same stream
        light._lightlda_sweep(tokens, doc_ptr, z2, n_wk2, n_k2, alpha, 0.01, float(v),
                              RandomKey(1, it).state(), sampler.mh_steps, True,
                              light._no_doc_counts(doc_ptr))
        np.testing.assert_array_equal(z, z2)
        if it == 0:
            kept = sampler._halves_lists(tokens, doc_ptr, v)
    np.testing.assert_array_equal(n_wk, n_wk2)
    np.testing.assert_array_equal(n_k, n_k2)
    assert sampler._halves_lists(tokens, doc_ptr, v) is kept  # made once, for the first sweep
    assert not np.array_equal(z, init_z(len(tokens), k, RandomKey(1, -1)))  # (it moved)


def test_tokens_changed_in_place_are_listed_anew():
    tokens, doc_ptr = _corpus(2)
    k, v = 30, 60
    sampler = get_sampler("lightlda")
    z, n_wk, n_k = _state(tokens, doc_ptr, v, k)
    sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, v, RandomKey(2, 0))
    old = sampler._halves_lists(tokens, doc_ptr, v)
    # the same array, other words: its kept lists would group the tokens under old words
    tokens[:] = np.roll(tokens, 7)
    z, n_wk, n_k = _state(tokens, doc_ptr, v, k, seed=4)
    fresh = get_sampler("lightlda")
    z2, n_wk2, n_k2 = z.copy(), n_wk.copy(), n_k.copy()
    for it in range(1, 3):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, v, RandomKey(2, it))
        fresh.sweep(tokens, doc_ptr, z2, n_wk2, n_k2, 0.1, 0.01, v, RandomKey(2, it))
    np.testing.assert_array_equal(z, z2)
    want_wk, want_k = count_from_z(tokens, doc_ptr, z, v, k)  # the table is z's recount
    np.testing.assert_array_equal(n_wk, want_wk)
    np.testing.assert_array_equal(n_k, want_k)
    assert sampler._halves_lists(tokens, doc_ptr, v) is not old  # (made anew for the new words)
