"""Fold-in Gibbs sampling with the topic-word distributions held fixed (inference, evaluation).

Array in, array out: no Dask, no I/O, no logging. ``biglda.model`` prepares the arrays
(maps words to ids, batches documents, distributes batches) and calls these functions.

The kernel samples ``z_i`` of each token of a new document from

    p(z_i = k | z_-i, w) ∝ (n_dk^-i + alpha_k) * phi[k, w_i]

with ``phi`` fixed. The sum splits into a *document bucket* ``n_dk * phi[k, w]`` that
is non-zero only for the topics present in the document (kept as a sparse list, so its
cost is the number of distinct topics in the document, not K) and a *prior bucket*
``alpha_k * phi[k, w]`` that depends on the word only, so its cumulative sums are
precomputed once per word and sampled by binary search (O(log K)). This is the
SparseLDA decomposition (Yao, Mimno & McCallum 2009) specialised to a fixed phi; it is
exact, not an approximation.

Random numbers come from a counter-based stream keyed by (seed, global document index):
a document gets the same draws whatever batch, worker or thread it is processed in, so
results are identical for any batching and any number of workers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "foldin_theta",
    "left_to_right_loglik",
    "prepare_phi",
    "score_tokens",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@njit(nogil=True, cache=True)
def _mix64(x):
    """splitmix64 finalizer: uint64 -> uint64, a bijection with good avalanche."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@njit(nogil=True, cache=True)
def _doc_state(seed, doc):
    """Return the initial stream state for (seed, global document index)."""
    return _mix64(_mix64(np.uint64(seed) ^ _GOLDEN) ^ _mix64(np.uint64(doc) + _GOLDEN))


@njit(nogil=True, cache=True)
def _uniform(state):
    """Next uniform in [0, 1) of a splitmix64 stream held in ``state`` (uint64[1])."""
    state[0] += _GOLDEN
    return np.float64(_mix64(state[0]) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(nogil=True, cache=True)
def _sample_token(w, n_dk, nz, n_nz, cum, phi_wk, prior_cdf, state):
    """Draw a topic for word ``w`` given the document's counts (token removed); returns k."""
    n_topics = phi_wk.shape[1]
    s_doc = 0.0
    for j in range(n_nz):
        k = nz[j]
        s_doc += n_dk[k] * phi_wk[w, k]
        cum[j] = s_doc
    s_prior = prior_cdf[w, n_topics - 1]
    total = s_doc + s_prior
    if total <= 0.0:
        # phi has no mass on this word in any topic (a peer's matrix): uniform.
        return min(int(_uniform(state) * n_topics), n_topics - 1)
    u = _uniform(state) * total
    if u < s_doc:
        for j in range(n_nz):
            if u < cum[j]:
                return nz[j]
        return nz[n_nz - 1]
    u -= s_doc
    lo = 0
    hi = n_topics - 1
    while lo < hi:  # first k with prior_cdf[w, k] > u
        mid = (lo + hi) // 2
        if prior_cdf[w, mid] > u:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(nogil=True, cache=True)
def _foldin_kernel(tokens, doc_ptr, doc_index, phi_wk, prior_cdf, alpha, seed,
                   n_burn, n_samples, theta):
    """Fold-in Gibbs for every document; writes the averaged posterior mean of theta.

    tokens int32[N] (ids into phi_wk rows), doc_ptr int64[D+1], doc_index int64[D]
    (global index keying each document's random stream), phi_wk float64[V, K],
    prior_cdf float64[V, K] (cumsum over k of alpha_k * phi[k, w]), alpha float64[K],
    theta float64[D, K] (output).
    """
    n_docs = doc_ptr.shape[0] - 1
    n_topics = phi_wk.shape[1]
    alpha_sum = 0.0
    for k in range(n_topics):
        alpha_sum += alpha[k]
    n_dk = np.zeros(n_topics, dtype=np.int64)
    acc = np.zeros(n_topics, dtype=np.float64)
    nz = np.empty(n_topics, dtype=np.int64)      # topics with n_dk > 0 ...
    pos = np.full(n_topics, -1, dtype=np.int64)  # ... and each one's index in nz (-1: absent)
    cum = np.empty(n_topics, dtype=np.float64)
    state = np.zeros(1, dtype=np.uint64)
    max_len = 0
    for d in range(n_docs):
        max_len = max(max_len, doc_ptr[d + 1] - doc_ptr[d])
    z = np.empty(max_len, dtype=np.int64)
    for d in range(n_docs):
        start = doc_ptr[d]
        n = doc_ptr[d + 1] - start
        if n == 0:
            for k in range(n_topics):
                theta[d, k] = alpha[k] / alpha_sum
            continue
        state[0] = _doc_state(seed, doc_index[d])
        n_nz = 0
        for i in range(n):
            z[i] = -1  # unassigned: the first sweep adds tokens one by one
        for sweep in range(n_burn + n_samples):
            for i in range(n):
                w = tokens[start + i]
                old = z[i]
                if old >= 0:
                    n_dk[old] -= 1
                    if n_dk[old] == 0:  # drop from the sparse list (swap with the last)
                        j = pos[old]
                        last = nz[n_nz - 1]
                        nz[j] = last
                        pos[last] = j
                        pos[old] = -1
                        n_nz -= 1
                k = _sample_token(w, n_dk, nz, n_nz, cum, phi_wk, prior_cdf, state)
                z[i] = k
                n_dk[k] += 1
                if n_dk[k] == 1:
                    nz[n_nz] = k
                    pos[k] = n_nz
                    n_nz += 1
            if sweep >= n_burn:
                for j in range(n_nz):
                    acc[nz[j]] += n_dk[nz[j]]
        denom = n_samples * (n + alpha_sum)
        for k in range(n_topics):
            theta[d, k] = (acc[k] + n_samples * alpha[k]) / denom
            acc[k] = 0.0
        # Invariant for the next document: n_dk == 0, pos == -1.
        for j in range(n_nz):
            n_dk[nz[j]] = 0
            pos[nz[j]] = -1


@njit(nogil=True, cache=True)
def _score_kernel(tokens, doc_ptr, theta, phi_wk, out):
    """out[d] = sum over the doc's tokens of log sum_k theta[d, k] phi[k, w] (float64[D])."""
    n_docs = doc_ptr.shape[0] - 1
    n_topics = phi_wk.shape[1]
    for d in range(n_docs):
        s = 0.0
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = tokens[i]
            p = 0.0
            for k in range(n_topics):
                p += theta[d, k] * phi_wk[w, k]
            s += np.log(p)
        out[d] = s


@njit(nogil=True, cache=True)
def _left_to_right_kernel(tokens, doc_ptr, doc_index, phi_wk, alpha, seed, n_particles, out):
    """Left-to-right log p(w_d) per document (Wallach et al. 2009, Algorithm 3); float64[D].

    For each particle and position n: resample z_<n once, add
    p(w_n | z_<n) = sum_k (n_dk^<n + alpha_k) / (n + alpha_sum) * phi[k, w_n],
    then sample z_n. The estimate is sum_n log(mean over particles). O(N_d^2 K).
    """
    n_docs = doc_ptr.shape[0] - 1
    n_topics = phi_wk.shape[1]
    alpha_sum = 0.0
    for k in range(n_topics):
        alpha_sum += alpha[k]
    max_len = 0
    for d in range(n_docs):
        max_len = max(max_len, doc_ptr[d + 1] - doc_ptr[d])
    z = np.empty(max_len, dtype=np.int64)
    p_n = np.zeros(max_len, dtype=np.float64)
    n_dk = np.zeros(n_topics, dtype=np.int64)
    prob = np.empty(n_topics, dtype=np.float64)
    state = np.zeros(1, dtype=np.uint64)
    for d in range(n_docs):
        start = doc_ptr[d]
        n = doc_ptr[d + 1] - start
        state[0] = _doc_state(seed, doc_index[d])
        for i in range(n):
            p_n[i] = 0.0
        for _r in range(n_particles):
            for k in range(n_topics):
                n_dk[k] = 0
            for pos in range(n):
                for i in range(pos):  # resample the prefix given the rest of the prefix
                    w = tokens[start + i]
                    n_dk[z[i]] -= 1
                    s = 0.0
                    for k in range(n_topics):
                        s += (n_dk[k] + alpha[k]) * phi_wk[w, k]
                        prob[k] = s
                    u = _uniform(state) * s
                    k = 0
                    while k < n_topics - 1 and prob[k] <= u:
                        k += 1
                    z[i] = k
                    n_dk[k] += 1
                w = tokens[start + pos]
                s = 0.0
                for k in range(n_topics):
                    s += (n_dk[k] + alpha[k]) * phi_wk[w, k]
                    prob[k] = s
                p_n[pos] += s / (pos + alpha_sum)
                u = _uniform(state) * s
                k = 0
                while k < n_topics - 1 and prob[k] <= u:
                    k += 1
                z[pos] = k
                n_dk[k] += 1
        total = 0.0
        for i in range(n):
            total += np.log(p_n[i] / n_particles)
        out[d] = total


def _check_docs(tokens: np.ndarray, doc_ptr: np.ndarray, n_words: int):
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    if doc_ptr.ndim != 1 or len(doc_ptr) < 1 or doc_ptr[0] != 0 or doc_ptr[-1] != len(tokens):
        raise ValueError("doc_ptr must start at 0 and end at len(tokens)")
    if np.any(np.diff(doc_ptr) < 0):
        raise ValueError("doc_ptr must be non-decreasing")
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= n_words):
        raise ValueError(f"token ids must lie in [0, {n_words})")
    return tokens, doc_ptr


def prepare_phi(phi: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Word-major arrays for the kernels: ``(phi_wk [V, K], prior_cdf [V, K])``, float64.

    ``phi`` is the topic-word matrix [K, V] (rows need not be normalised: a peer's
    matrix is used as given). ``prior_cdf[w]`` is the cumulative sum over topics of
    ``alpha_k * phi[k, w]``. Build once per model and reuse for every batch.

    Examples
    --------
    >>> phi_wk, cdf = prepare_phi(np.full((2, 3), 1 / 3), np.array([0.1, 0.3]))
    >>> phi_wk.shape, float(round(cdf[0, -1], 6))
    ((3, 2), 0.133333)
    """
    phi = np.asarray(phi, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    if phi.ndim != 2 or alpha.shape != (phi.shape[0],):
        raise ValueError(f"phi must be [K, V] and alpha [K]; got {phi.shape} and {alpha.shape}")
    if np.any(phi < 0) or np.any(alpha <= 0):
        raise ValueError("phi must be non-negative and alpha positive")
    phi_wk = np.ascontiguousarray(phi.T)
    prior_cdf = np.cumsum(phi_wk * alpha[None, :], axis=1)
    return phi_wk, prior_cdf


def foldin_theta(
    tokens: np.ndarray,
    doc_ptr: np.ndarray,
    phi_wk: np.ndarray,
    prior_cdf: np.ndarray,
    alpha: np.ndarray,
    *,
    burn_in: int = 20,
    samples: int = 30,
    seed: int = 0,
    doc_index: np.ndarray | None = None,
) -> np.ndarray:
    """Doc-topic mixtures of new documents by fold-in Gibbs with phi fixed.

    Runs ``burn_in + samples`` sweeps per document (the first sweep adds tokens one at a
    time to an empty document) and returns the posterior mean of theta averaged over the
    last ``samples`` sweeps: ``(mean n_dk + alpha) / (N_d + sum(alpha))``. A document
    with no tokens gets the prior mean ``alpha / sum(alpha)``.

    Parameters
    ----------
    tokens, doc_ptr : int32[N], int64[D+1]
        Word ids (rows of ``phi_wk``) in document order and document offsets.
    phi_wk, prior_cdf : float64[V, K]
        From :func:`prepare_phi`.
    alpha : float64[K]
    burn_in, samples : int
        Sweeps discarded, then sweeps averaged (``samples >= 1``).
    seed : int
        Stream key; with ``doc_index`` it fixes every draw.
    doc_index : int64[D], optional
        Global index of each document (keys its random stream); default ``arange(D)``.
        Pass the global indices when a large input is split into batches, so the result
        does not depend on the batching.

    Returns
    -------
    float64[D, K], rows summing to 1.

    Examples
    --------
    >>> phi = np.array([[0.9, 0.1], [0.1, 0.9]])
    >>> phi_wk, cdf = prepare_phi(phi, np.array([0.1, 0.1]))
    >>> th = foldin_theta(np.zeros(50, np.int32), np.array([0, 50]), phi_wk, cdf,
    ...                   np.array([0.1, 0.1]))
    >>> bool(th[0, 0] > 0.9)
    True
    """
    phi_wk = np.ascontiguousarray(phi_wk, dtype=np.float64)
    prior_cdf = np.ascontiguousarray(prior_cdf, dtype=np.float64)
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    tokens, doc_ptr = _check_docs(tokens, doc_ptr, phi_wk.shape[0])
    if samples < 1 or burn_in < 0:
        raise ValueError("samples must be >= 1 and burn_in >= 0")
    n_docs = len(doc_ptr) - 1
    if doc_index is None:
        doc_index = np.arange(n_docs, dtype=np.int64)
    doc_index = np.ascontiguousarray(doc_index, dtype=np.int64)
    if doc_index.shape != (n_docs,):
        raise ValueError("doc_index must have one entry per document")
    theta = np.empty((n_docs, phi_wk.shape[1]), dtype=np.float64)
    _foldin_kernel(tokens, doc_ptr, doc_index, phi_wk, prior_cdf, alpha,
                   np.uint64(seed & 0xFFFFFFFFFFFFFFFF), int(burn_in), int(samples), theta)
    return theta


def score_tokens(tokens: np.ndarray, doc_ptr: np.ndarray, theta: np.ndarray,
                 phi_wk: np.ndarray) -> np.ndarray:
    """Per-document ``sum_i log sum_k theta[d, k] phi[k, w_i]`` (float64[D]).

    Examples
    --------
    >>> phi_wk = np.array([[0.5, 0.5], [0.5, 0.5]])
    >>> float(score_tokens(np.array([0, 1]), np.array([0, 2]), np.array([[0.3, 0.7]]), phi_wk)[0])
    -1.3862943611198906
    """
    phi_wk = np.ascontiguousarray(phi_wk, dtype=np.float64)
    tokens, doc_ptr = _check_docs(tokens, doc_ptr, phi_wk.shape[0])
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.shape != (len(doc_ptr) - 1, phi_wk.shape[1]):
        raise ValueError(f"theta must be [D, K]; got {theta.shape}")
    out = np.empty(len(doc_ptr) - 1, dtype=np.float64)
    _score_kernel(tokens, doc_ptr, theta, phi_wk, out)
    return out


def left_to_right_loglik(tokens: np.ndarray, doc_ptr: np.ndarray, phi_wk: np.ndarray,
                         alpha: np.ndarray, *, particles: int = 10, seed: int = 0,
                         doc_index: np.ndarray | None = None) -> np.ndarray:
    """Left-to-right estimate of ``log p(w_d | phi, alpha)`` per document (float64[D]).

    Wallach et al. (2009), "Evaluation methods for topic models", Algorithm 3, with
    ``particles`` particles; cost O(N_d^2 K) per document and particle, so use it on
    short documents or a sample.

    Examples
    --------
    >>> phi_wk = np.full((4, 2), 0.25)
    >>> ll = left_to_right_loglik(np.array([0, 1, 2]), np.array([0, 3]), phi_wk, np.ones(2))
    >>> bool(np.isclose(ll[0], 3 * np.log(0.25)))
    True
    """
    phi_wk = np.ascontiguousarray(phi_wk, dtype=np.float64)
    tokens, doc_ptr = _check_docs(tokens, doc_ptr, phi_wk.shape[0])
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    n_docs = len(doc_ptr) - 1
    if doc_index is None:
        doc_index = np.arange(n_docs, dtype=np.int64)
    out = np.empty(n_docs, dtype=np.float64)
    _left_to_right_kernel(tokens, doc_ptr, np.ascontiguousarray(doc_index, dtype=np.int64),
                          phi_wk, alpha, np.uint64(seed & 0xFFFFFFFFFFFFFFFF),
                          int(particles), out)
    return out
