"""Minka fixed-point alpha optimisation: slow digamma reference and recovery of a known alpha."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma

from biglda.samplers.hyper import count_histograms, histograms_from_z, optimize_alpha


def _reference_step(n_dk, alpha):
    """One Minka fixed-point step written directly with digamma over documents."""
    lengths = n_dk.sum(axis=1)
    denom = (digamma(lengths + alpha.sum()) - digamma(alpha.sum())).sum()
    num = (digamma(n_dk + alpha) - digamma(alpha)).sum(axis=0)
    return alpha * num / denom


def test_one_step_matches_digamma_reference():
    rng = np.random.default_rng(0)
    n_dk = rng.poisson([5.0, 1.0, 0.3, 2.0], size=(200, 4))
    alpha = np.array([0.5, 0.2, 0.1, 1.0])
    ch, lh = count_histograms(n_dk)
    np.testing.assert_allclose(optimize_alpha(ch, lh, alpha, iterations=1),
                               _reference_step(n_dk, alpha), rtol=1e-10)
    # Several steps = the reference iterated.
    ref = alpha
    for _ in range(5):
        ref = _reference_step(n_dk, ref)
    np.testing.assert_allclose(optimize_alpha(ch, lh, alpha, iterations=5), ref, rtol=1e-10)


def test_recovers_known_asymmetric_alpha():
    rng = np.random.default_rng(3)
    true_alpha = np.array([0.05, 0.1, 0.2, 0.4, 0.8, 1.6])
    theta = rng.dirichlet(true_alpha, size=4000)
    lengths = rng.poisson(80, size=4000) + 1
    n_dk = np.stack([rng.multinomial(n, t / t.sum()) for n, t in zip(lengths, theta, strict=True)])
    ch, lh = count_histograms(n_dk)
    est = optimize_alpha(ch, lh, np.full(6, 1.0), iterations=300)
    np.testing.assert_allclose(est, true_alpha, rtol=0.15)


def test_histograms_from_z_equal_dense_route_and_add_over_shards():
    rng = np.random.default_rng(4)
    lengths = rng.poisson(10, size=50)
    doc_ptr = np.r_[0, np.cumsum(lengths)]
    z = rng.integers(0, 5, doc_ptr[-1]).astype(np.uint16)
    n_dk = np.zeros((50, 5), dtype=np.int64)
    for d in range(50):
        n_dk[d] = np.bincount(z[doc_ptr[d]:doc_ptr[d + 1]], minlength=5)
    ch_dense, lh_dense = count_histograms(n_dk)
    ch, lh = histograms_from_z(doc_ptr, z, 5)
    m = ch_dense.shape[1]
    np.testing.assert_array_equal(ch[:, :m], ch_dense)
    assert ch[:, m:].sum() == 0
    np.testing.assert_array_equal(lh[:len(lh_dense)], lh_dense)
    # Additive: two shards' histograms (padded) sum to the whole.
    a, _la = histograms_from_z(doc_ptr[:26], z[:doc_ptr[25]], 5)
    b, _lb = histograms_from_z(doc_ptr[25:] - doc_ptr[25], z[doc_ptr[25]:], 5)
    width = max(a.shape[1], b.shape[1])
    total = (np.pad(a, ((0, 0), (0, width - a.shape[1])))
             + np.pad(b, ((0, 0), (0, width - b.shape[1]))))
    np.testing.assert_array_equal(total[:, :ch.shape[1]], ch)


def test_no_documents_keeps_alpha():
    alpha = np.array([0.3, 0.7])
    out = optimize_alpha(np.zeros((2, 1), np.int64), np.zeros(1, np.int64), alpha)
    np.testing.assert_array_equal(out, alpha)
