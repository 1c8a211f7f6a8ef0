"""Slow, obvious NumPy/SciPy implementations: the oracles of the fast kernels."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln


def joint_loglik_slow(tokens, doc_ptr, z, n_words, n_topics, alpha, beta):
    """log p(w, z) from dense n_dk / n_wk (Griffiths & Steyvers 2004, eqs. 2-3)."""
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_topics,))
    n_docs = len(doc_ptr) - 1
    n_dk = np.zeros((n_docs, n_topics))
    n_wk = np.zeros((n_words, n_topics))
    doc_of = np.repeat(np.arange(n_docs), np.diff(doc_ptr))
    np.add.at(n_dk, (doc_of, z), 1)
    np.add.at(n_wk, (tokens, z), 1)
    doc = (gammaln(alpha.sum()) - gammaln(alpha).sum()) * n_docs \
        + gammaln(n_dk + alpha).sum() - gammaln(n_dk.sum(1) + alpha.sum()).sum()
    word = (gammaln(n_words * beta) - n_words * gammaln(beta)) * n_topics \
        + gammaln(n_wk + beta).sum() - gammaln(n_wk.sum(0) + n_words * beta).sum()
    return doc + word


def exact_posterior(tokens, doc_ptr, n_words, n_topics, alpha, beta):
    """p(z | w) for every z in K^N, indexed by sum_i z_i K^i."""
    n = len(tokens)
    logp = np.empty(n_topics ** n)
    for idx, zs in enumerate(itertools.product(range(n_topics), repeat=n)):
        z = np.array(zs[::-1])  # itertools varies the last entry fastest: z_0 is the low digit
        logp[idx] = joint_loglik_slow(tokens, doc_ptr, z, n_words, n_topics, alpha, beta)
    p = np.exp(logp - logp.max())
    return p / p.sum()


def state_index(z, n_topics):
    return int(np.dot(z.astype(np.int64), n_topics ** np.arange(len(z), dtype=np.int64)))
