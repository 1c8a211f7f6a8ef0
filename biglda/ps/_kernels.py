"""Array-only kernels of the parameter server and the worker cache (numba, no Python objects)."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _apply_delta_ll(table, rows, topics, counts, beta, lg, dk):  # pragma: no cover - jit
    """Add a COO delta to ``table`` [R, K] int32 and ``dk`` [K] int64 in place; return the
    change of Σ lgamma(n + β).

    rows int64 [M] (local row ids), topics int64 [M], counts int32 [M]; ``lg`` float64 [L]
    holds lgamma(n + β) for n < L (counts are mostly small: a table lookup instead of two
    lgamma calls per entry). Entries may repeat: they are applied one after the other, so the
    log-likelihood change is exact either way.
    """
    n_lg = lg.shape[0]
    ll = 0.0
    for i in range(rows.shape[0]):
        r = rows[i]
        k = topics[i]
        old = table[r, k]
        new = old + counts[i]
        table[r, k] = new
        dk[k] += counts[i]
        a = lg[new] if new < n_lg else math.lgamma(new + beta)
        b = lg[old] if old < n_lg else math.lgamma(old + beta)
        ll += a - b
    return ll


@numba.njit(nogil=True, cache=True)
def _add_coo(table, rows, topics, counts):  # pragma: no cover - jit
    """table[rows[i], topics[i]] += counts[i] for every i (repeats allowed); table [R, K] int32."""
    for i in range(rows.shape[0]):
        table[rows[i], topics[i]] += counts[i]


def lgamma_table(beta: float, size: int = 1 << 16) -> np.ndarray:
    """lgamma(n + β) for n = 0..size-1 (float64), for :func:`apply_delta_ll`."""
    from scipy.special import gammaln

    return gammaln(np.arange(size, dtype=np.float64) + beta)


def apply_delta_ll(table: np.ndarray, rows: np.ndarray, topics: np.ndarray,
                   counts: np.ndarray, beta: float, lg: np.ndarray | None = None,
                   dk: np.ndarray | None = None) -> float:
    """Checked wrapper of :func:`_apply_delta_ll` (rows local to ``table``).

    ``dk`` (int64 [K]) receives the column sums of the delta when given.
    """
    if not (len(rows) == len(topics) == len(counts)):
        raise ValueError("rows, topics and counts must have the same length")
    if len(rows) == 0:
        return 0.0
    if lg is None:
        lg = lgamma_table(beta, 1)
    if dk is None:
        dk = np.zeros(table.shape[1], dtype=np.int64)
    return float(_apply_delta_ll(table, np.asarray(rows, dtype=np.int64),
                                 np.asarray(topics, dtype=np.int64),
                                 np.asarray(counts, dtype=np.int32), float(beta), lg, dk))


def add_coo(table: np.ndarray, rows: np.ndarray, topics: np.ndarray, counts: np.ndarray) -> None:
    """Checked wrapper of :func:`_add_coo`."""
    if not (len(rows) == len(topics) == len(counts)):
        raise ValueError("rows, topics and counts must have the same length")
    if len(rows):
        _add_coo(table, np.asarray(rows, dtype=np.int64), np.asarray(topics, dtype=np.int64),
                 np.asarray(counts, dtype=np.int32))


def merge_coo(rows: np.ndarray, topics: np.ndarray, counts: np.ndarray, n_topics: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum repeated (row, topic) entries and drop zeros: the merged delta that goes on the wire."""
    if len(rows) == 0:
        return (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))
    flat = rows.astype(np.int64) * n_topics + topics.astype(np.int64)
    uniq, inv = np.unique(flat, return_inverse=True)
    summed = np.bincount(inv, weights=counts, minlength=len(uniq)).astype(np.int32)
    keep = summed != 0
    uniq = uniq[keep]
    return ((uniq // n_topics).astype(np.int32), (uniq % n_topics).astype(np.int32),
            summed[keep])
