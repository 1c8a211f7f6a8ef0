"""Counts implied by ``z``, random initialisation, and the joint log-likelihood pieces.

log p(w, z) (Griffiths & Steyvers 2004) = :func:`doc_loglik` + :func:`word_loglik_rows`
+ :func:`word_loglik_topics`. The row part is a sum over entries, so a parameter server
holding row ranges of ``n_wk`` adds its ranges' parts.
"""

from __future__ import annotations

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers._kernels import (
    _count_from_z,
    _doc_loglik,
    _doc_topic_counts,
    _init_z,
    _word_loglik_rows,
    _word_loglik_topics,
)
from biglda.samplers.base import as_alpha
from biglda.samplers.rng import RandomKey

#: K up to which a topic id fits ``z``'s uint16 (half the memory of int32).
UINT16_TOPICS = int(np.iinfo(np.uint16).max)
#: the most topics there can be: ``z`` is int32 above :data:`UINT16_TOPICS`.
MAX_TOPICS = int(np.iinfo(np.int32).max)


def z_dtype(n_topics: int) -> np.dtype:
    """uint16 when K <= 65535 (half the memory of int32), int32 otherwise (K <= 2**31 - 1)."""
    return np.dtype(np.uint16) if n_topics <= UINT16_TOPICS else np.dtype(np.int32)


def check_n_topics(n_topics: int) -> str | None:
    """Say what is wrong with ``n_topics`` as a number of topics (None: nothing).

    Examples
    --------
    >>> check_n_topics(1)
    'must be >= 2, got 1'
    >>> check_n_topics(70000) is None  # z is int32 there
    True
    """
    if isinstance(n_topics, bool) or not isinstance(n_topics, int | np.integer):
        return f"must be an integer, got {n_topics!r}"
    if n_topics < 2:
        return f"must be >= 2, got {n_topics}"
    if n_topics > MAX_TOPICS:
        return f"must be <= {MAX_TOPICS} (z is int32), got {n_topics}"
    return None


def init_z(n_tokens: int, n_topics: int, key: RandomKey) -> np.ndarray:
    """Uniform random topics, dtype :func:`z_dtype`.

    Examples
    --------
    >>> init_z(5, 3, RandomKey(0, 0)).dtype
    dtype('uint16')
    """
    if n_topics < 2:
        raise ConfigError(f"need at least 2 topics, got {n_topics}")
    z = np.empty(int(n_tokens), dtype=z_dtype(n_topics))
    _init_z(z, np.int64(n_topics), key.state())
    return z


def count_from_z(tokens, doc_ptr, z, n_words: int, n_topics: int):
    """``(n_wk int32 [n_words, K], n_k int64 [K])`` implied by ``z``.

    Examples
    --------
    >>> tokens = np.array([0, 1, 1], dtype=np.int32)
    >>> n_wk, n_k = count_from_z(tokens, np.array([0, 3]), np.array([0, 1, 1], np.uint16), 2, 2)
    >>> n_wk.tolist(), n_k.tolist()
    ([[1, 0], [0, 2]], [1, 2])
    """
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    z = np.ascontiguousarray(z)
    if tokens.shape != z.shape:
        raise ValueError(f"z has shape {z.shape}, tokens {tokens.shape}")
    n_wk = np.zeros((int(n_words), int(n_topics)), dtype=np.int32)
    n_k = np.zeros(int(n_topics), dtype=np.int64)
    _count_from_z(tokens, z, n_wk, n_k)
    return n_wk, n_k


def doc_topic_counts(doc_ptr, z, n_topics: int) -> np.ndarray:
    """Dense ``n_dk`` int32 [D, K] (for small corpora, tests and inspection).

    Examples
    --------
    >>> doc_topic_counts(np.array([0, 2, 3]), np.array([1, 1, 0], np.uint16), 2).tolist()
    [[0, 2], [1, 0]]
    """
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    n_dk = np.zeros((doc_ptr.shape[0] - 1, int(n_topics)), dtype=np.int32)
    _doc_topic_counts(doc_ptr, np.ascontiguousarray(z), n_dk)
    return n_dk


def doc_loglik(doc_ptr, z, alpha, n_topics: int) -> float:
    """Doc part of log p(w, z): Σ_d log Γ(A) - log Γ(N_d + A) + Σ_k log Γ(n_dk + α_k) - log Γ(α_k).

    Examples
    --------
    >>> round(doc_loglik(np.array([0, 1]), np.array([0], np.uint16), 0.5, 2), 6)  # log(1/2)
    -0.693147
    """
    return float(_doc_loglik(np.ascontiguousarray(doc_ptr, dtype=np.int64),
                             np.ascontiguousarray(z), as_alpha(alpha, n_topics)))


def word_loglik_rows(n_wk_rows, beta: float) -> float:
    """Σ over entries of log Γ(n + β) - log Γ(β) (zero entries add 0, so it splits by rows)."""
    return float(_word_loglik_rows(np.ascontiguousarray(n_wk_rows), float(beta)))


def word_loglik_topics(n_k, beta: float, n_words: int) -> float:
    """K log Γ(Vβ) - Σ_k log Γ(n_k + Vβ)."""
    return float(_word_loglik_topics(np.ascontiguousarray(n_k, dtype=np.int64), float(beta),
                                     float(n_words)))


def joint_loglik(doc_ptr, z, n_wk, n_k, alpha, beta: float, n_words: int) -> float:
    """Log p(w, z) = doc + rows + topics parts (all rows of ``n_wk`` given)."""
    n_topics = n_k.shape[0]
    return (doc_loglik(doc_ptr, z, alpha, n_topics) + word_loglik_rows(n_wk, beta)
            + word_loglik_topics(n_k, beta, n_words))
