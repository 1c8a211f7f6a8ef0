"""Fold-in Gibbs kernel: exact enumeration oracle, determinism, batching invariance."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln

from biglda.samplers.foldin import (
    foldin_theta,
    left_to_right_loglik,
    prepare_phi,
    score_tokens,
)


def _exact_posterior_mean(tokens, phi, alpha):
    """E[theta | w, phi, alpha] by enumerating every topic assignment (slow oracle)."""
    n_topics = phi.shape[0]
    num = np.zeros(n_topics)
    total = 0.0
    for z in itertools.product(range(n_topics), repeat=len(tokens)):
        n = np.bincount(z, minlength=n_topics)
        p = np.prod(phi[list(z), tokens]) * np.exp(gammaln(n + alpha).sum() - gammaln(alpha).sum())
        total += p
        num += p * (n + alpha) / (len(tokens) + alpha.sum())
    return num / total


def test_foldin_matches_exact_posterior_mean():
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.ones(4), size=3)
    alpha = np.array([0.2, 0.5, 0.3])
    tokens = np.array([0, 1, 3, 3, 2], dtype=np.int32)
    phi_wk, cdf = prepare_phi(phi, alpha)
    theta = foldin_theta(tokens, np.array([0, 5]), phi_wk, cdf, alpha, burn_in=5, samples=40_000)
    exact = _exact_posterior_mean(tokens, phi, alpha)
    # 40k correlated sweeps: Monte Carlo error is well under 0.01 here.
    np.testing.assert_allclose(theta[0], exact, atol=0.01)


def test_foldin_deterministic_and_independent_of_batching():
    rng = np.random.default_rng(1)
    n_topics, n_words = 20, 300
    phi = rng.dirichlet(np.full(n_words, 0.1), size=n_topics)
    alpha = np.full(n_topics, 0.1)
    phi_wk, cdf = prepare_phi(phi, alpha)
    lengths = rng.poisson(30, size=40)
    lengths[3] = 0
    doc_ptr = np.r_[0, np.cumsum(lengths)]
    tokens = rng.integers(0, n_words, doc_ptr[-1]).astype(np.int32)
    full = foldin_theta(tokens, doc_ptr, phi_wk, cdf, alpha, seed=5)
    again = foldin_theta(tokens, doc_ptr, phi_wk, cdf, alpha, seed=5)
    other = foldin_theta(tokens, doc_ptr, phi_wk, cdf, alpha, seed=6)
    np.testing.assert_array_equal(full, again)
    assert not np.array_equal(full, other)
    # The second half on its own, keyed by its global indices, gives the same rows.
    half = 20
    sub_ptr = doc_ptr[half:] - doc_ptr[half]
    part = foldin_theta(tokens[doc_ptr[half]:], sub_ptr, phi_wk, cdf, alpha, seed=5,
                        doc_index=np.arange(half, 40))
    np.testing.assert_array_equal(part, full[half:])
    np.testing.assert_allclose(full.sum(axis=1), 1.0)
    # Empty document: the prior mean.
    np.testing.assert_allclose(full[3], alpha / alpha.sum())


def test_score_tokens_matches_numpy():
    rng = np.random.default_rng(2)
    phi = rng.dirichlet(np.ones(30), size=5)
    theta = rng.dirichlet(np.ones(5), size=3)
    doc_ptr = np.array([0, 4, 4, 9])
    tokens = rng.integers(0, 30, 9).astype(np.int32)
    got = score_tokens(tokens, doc_ptr, theta, phi.T)
    want = [np.log(theta[d] @ phi[:, tokens[doc_ptr[d]:doc_ptr[d + 1]]]).sum() for d in range(3)]
    np.testing.assert_allclose(got, want)


def test_left_to_right_exact_for_one_topic_and_two_tokens():
    # K = 1: p(w) = prod phi exactly, whatever the particles.
    phi = np.array([[0.1, 0.2, 0.7]])
    ll = left_to_right_loglik(np.array([2, 0, 2]), np.array([0, 3]), phi.T, np.array([0.5]))
    np.testing.assert_allclose(ll, np.log(0.7 * 0.1 * 0.7))
    # K = 2, two tokens: compare with the exact marginal by enumeration.
    phi = np.array([[0.8, 0.2], [0.3, 0.7]])
    alpha = np.array([0.4, 0.9])
    tokens = np.array([0, 1])
    exact = 0.0
    for z in itertools.product(range(2), repeat=2):
        n = np.bincount(z, minlength=2)
        prior = np.exp(gammaln(alpha.sum()) - gammaln(2 + alpha.sum())
                       + gammaln(n + alpha).sum() - gammaln(alpha).sum())
        exact += prior * phi[z[0], 0] * phi[z[1], 1]
    ll = left_to_right_loglik(tokens, np.array([0, 2]), phi.T, alpha, particles=20_000)
    np.testing.assert_allclose(ll[0], np.log(exact), atol=0.01)
