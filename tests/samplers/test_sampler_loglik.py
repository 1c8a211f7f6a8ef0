"""Joint log-likelihood pieces against a slow dense SciPy oracle, and the counts helpers."""

from __future__ import annotations

import numpy as np
import pytest
from sampler_oracle import joint_loglik_slow

from biglda.samplers import (
    RandomKey,
    count_from_z,
    doc_loglik,
    doc_topic_counts,
    init_z,
    joint_loglik,
    word_loglik_rows,
    word_loglik_topics,
)


@pytest.mark.parametrize("alpha", [0.1, np.array([0.05, 0.5, 1.0, 2.0])])
def test_joint_loglik_matches_dense_oracle(alpha):
    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 30, size=25)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_words, n_topics, beta = 40, 4, 0.07
    tokens = rng.integers(0, n_words, size=int(doc_ptr[-1])).astype(np.int32)
    z = init_z(len(tokens), n_topics, RandomKey(3, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    want = joint_loglik_slow(tokens, doc_ptr, z, n_words, n_topics, alpha, beta)
    got = joint_loglik(doc_ptr, z, n_wk, n_k, alpha, beta, n_words)
    assert got == pytest.approx(want, rel=1e-10)
    # the row part splits over any row ranges (how the parameter server adds it up)
    parts = sum(word_loglik_rows(n_wk[a:b], beta) for a, b in [(0, 7), (7, 30), (30, 40)])
    assert parts == pytest.approx(word_loglik_rows(n_wk, beta), rel=1e-12)
    assert (doc_loglik(doc_ptr, z, alpha, n_topics) + parts
            + word_loglik_topics(n_k, beta, n_words)) == pytest.approx(want, rel=1e-10)


def test_counts_helpers_agree_with_numpy():
    rng = np.random.default_rng(1)
    doc_ptr = np.array([0, 3, 3, 10], dtype=np.int64)
    tokens = rng.integers(0, 5, size=10).astype(np.int32)
    z = rng.integers(0, 3, size=10).astype(np.uint16)
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, 5, 3)
    want = np.zeros((5, 3), dtype=np.int64)
    np.add.at(want, (tokens, z), 1)
    np.testing.assert_array_equal(n_wk, want)
    np.testing.assert_array_equal(n_k, want.sum(0))
    n_dk = doc_topic_counts(doc_ptr, z, 3)
    assert n_dk.tolist()[1] == [0, 0, 0]
    np.testing.assert_array_equal(n_dk.sum(0), n_k)


@pytest.mark.parametrize("alpha", [0.02, np.array([0.01, 0.3, 2.0])])
def test_doc_loglik_matches_gammaln_for_tabulated_and_large_counts(alpha):
    # counts below and above the kernel's table (16 per topic, 1024 with a symmetric alpha),
    # document lengths below and above its table of lgamma(N_d + A) (the longest's, at most
    # 1024), topics revisited in random order, an empty document
    from scipy.special import gammaln

    rng = np.random.default_rng(7)
    lengths = np.array([0, 5, 40, 1500, 4000])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    z = rng.integers(0, 3, size=int(doc_ptr[-1])).astype(np.uint16)
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (3,))
    want = 0.0
    for d in range(len(lengths)):
        n_dk = np.bincount(z[doc_ptr[d]:doc_ptr[d + 1]], minlength=3)
        want += (gammaln(a.sum()) - gammaln(n_dk.sum() + a.sum())
                 + (gammaln(n_dk + a) - gammaln(a)).sum())
    assert doc_loglik(doc_ptr, z, alpha, 3) == pytest.approx(want, rel=1e-12)
