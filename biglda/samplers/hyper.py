"""Hyperparameter optimisation: asymmetric alpha by Minka's fixed-point iteration.

Array in, array out (no Dask, no I/O, no logging). The update is Minka (2000),
"Estimating a Dirichlet distribution", eq. (55), computed from histograms as in
Wallach (2008), "Structured topic models for language", sec. 2.3 ("digamma recurrence"),
which is also Mallet's ``Dirichlet.learnParameters``:

    alpha_k <- alpha_k * sum_n C_k(n) [psi(n + alpha_k) - psi(alpha_k)]
                       / sum_n L(n) [psi(n + alpha_0) - psi(alpha_0)]

where ``C_k(n)`` is the number of documents in which topic k has exactly n tokens,
``L(n)`` the number of documents of length n and ``alpha_0 = sum(alpha)``. The
digamma differences are running sums ``sum_{i<n} 1/(a + i)``, so one iteration costs
O(K * max_count + max_length), independent of the number of documents.

Histograms are additive over documents, so a distributed trainer sums per-shard
histograms (padding to the longest) and calls :func:`optimize_alpha` once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["count_histograms", "histograms_from_z", "optimize_alpha"]


@njit(nogil=True, cache=True)
def _optimize_alpha_kernel(count_hist, length_hist, alpha, iterations, shape, inv_scale, floor):
    """Fixed-point iterations in place on alpha float64[K].

    count_hist int64[K, M+1], length_hist int64[L+1].
    """
    n_topics = alpha.shape[0]
    for _ in range(iterations):
        alpha_sum = 0.0
        for k in range(n_topics):
            alpha_sum += alpha[k]
        denom = 0.0
        dig = 0.0
        for n in range(1, length_hist.shape[0]):
            dig += 1.0 / (alpha_sum + n - 1)  # psi(alpha_0 + n) - psi(alpha_0)
            denom += length_hist[n] * dig
        for k in range(n_topics):
            old = alpha[k]
            num = 0.0
            dig = 0.0
            for n in range(1, count_hist.shape[1]):
                dig += 1.0 / (old + n - 1)  # psi(alpha_k + n) - psi(alpha_k)
                num += count_hist[k, n] * dig
            # Gamma(shape, scale) prior on each alpha_k (Mallet's form); shape=1 and
            # inv_scale=0 is plain maximum likelihood.
            new = (old * num + (shape - 1.0)) / (denom + inv_scale)
            alpha[k] = max(new, floor)


def optimize_alpha(
    count_hist: np.ndarray,
    length_hist: np.ndarray,
    alpha: np.ndarray,
    iterations: int = 50,
    *,
    shape: float = 1.0,
    scale: float = np.inf,
    floor: float = 1e-8,
) -> np.ndarray:
    """Maximise the Dirichlet-multinomial likelihood of doc-topic counts over alpha.

    Parameters
    ----------
    count_hist : int[K, M+1]
        ``count_hist[k, n]`` = number of documents where topic k has exactly ``n``
        tokens (column 0 is ignored).
    length_hist : int[L+1]
        ``length_hist[n]`` = number of documents of length ``n`` (column 0 ignored).
    alpha : float[K]
        Starting point (the current alpha); not modified.
    iterations : int
        Fixed-point iterations (Mallet uses a few per call; 50 converges from far away).
    shape, scale : float
        Optional Gamma(shape, scale) prior on each alpha_k (MAP instead of ML);
        defaults give maximum likelihood.
    floor : float
        Lower bound on each alpha_k, so a topic with no tokens cannot reach 0.

    Returns
    -------
    float64[K], the new alpha.

    Examples
    --------
    >>> n_dk = np.array([[3, 0], [2, 1], [4, 0]])
    >>> ch, lh = count_histograms(n_dk)
    >>> a = optimize_alpha(ch, lh, np.array([1.0, 1.0]), iterations=200)
    >>> bool(a[0] > a[1])
    True
    """
    count_hist = np.ascontiguousarray(count_hist, dtype=np.int64)
    length_hist = np.ascontiguousarray(length_hist, dtype=np.int64)
    alpha = np.array(alpha, dtype=np.float64, copy=True)
    if count_hist.ndim != 2 or count_hist.shape[0] != alpha.shape[0]:
        raise ValueError(f"count_hist must be [K, M+1] with K={alpha.shape[0]}; "
                         f"got {count_hist.shape}")
    if length_hist.ndim != 1:
        raise ValueError("length_hist must be 1-D")
    if np.any(alpha <= 0):
        raise ValueError("alpha must be positive")
    if length_hist[1:].sum() == 0:
        return alpha  # no non-empty documents: nothing to learn from
    inv_scale = 0.0 if not np.isfinite(scale) else 1.0 / float(scale)
    _optimize_alpha_kernel(count_hist, length_hist, alpha, int(iterations),
                           float(shape), inv_scale, float(floor))
    return alpha


def count_histograms(n_dk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(count_hist int64[K, M+1], length_hist int64[L+1])`` from doc-topic counts [D, K].

    Examples
    --------
    >>> ch, lh = count_histograms(np.array([[2, 0], [1, 1]]))
    >>> ch.tolist(), lh.tolist()
    ([[0, 1, 1], [1, 1, 0]], [0, 0, 2])
    """
    n_dk = np.asarray(n_dk, dtype=np.int64)
    n_topics = n_dk.shape[1]
    max_count = int(n_dk.max()) if n_dk.size else 0
    count_hist = np.zeros((n_topics, max_count + 1), dtype=np.int64)
    for k in range(n_topics):
        count_hist[k] = np.bincount(n_dk[:, k], minlength=max_count + 1)
    lengths = n_dk.sum(axis=1)
    length_hist = np.bincount(lengths, minlength=1).astype(np.int64)
    return count_hist, length_hist


@njit(nogil=True, cache=True)
def _hist_from_z_kernel(doc_ptr, z, n_topics, count_hist, length_hist):
    """Accumulate histograms of per-document topic counts from z (no D x K table)."""
    n_dk = np.zeros(n_topics, dtype=np.int64)
    for d in range(doc_ptr.shape[0] - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            n_dk[z[i]] += 1
        length_hist[doc_ptr[d + 1] - doc_ptr[d]] += 1
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            k = z[i]
            if n_dk[k] > 0:
                count_hist[k, n_dk[k]] += 1
                n_dk[k] = 0


def histograms_from_z(doc_ptr: np.ndarray, z: np.ndarray,
                      n_topics: int) -> tuple[np.ndarray, np.ndarray]:
    """Histograms of one shard straight from its topic assignments (memory O(K * max_len)).

    Same result as ``count_histograms(doc_topic_counts(doc_ptr, z, n_topics))``; the
    arrays are sized by the longest document of the shard, so pad before summing shards.

    Examples
    --------
    >>> ch, lh = histograms_from_z(np.array([0, 2, 4]), np.array([0, 0, 0, 1]), 2)
    >>> ch.tolist(), lh.tolist()
    ([[0, 1, 1], [1, 1, 0]], [0, 0, 2])
    """
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    z = np.ascontiguousarray(z)
    lengths = np.diff(doc_ptr)
    max_len = int(lengths.max()) if len(lengths) else 0
    count_hist = np.zeros((n_topics, max_len + 1), dtype=np.int64)
    length_hist = np.zeros(max_len + 1, dtype=np.int64)
    _hist_from_z_kernel(doc_ptr, z, int(n_topics), count_hist, length_hist)
    count_hist[:, 0] = len(lengths) - count_hist[:, 1:].sum(axis=1)  # docs without topic k
    return count_hist, length_hist
