"""Array-only kernels of the parameter server and the worker cache (numba, no Python objects)."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _apply_delta_ll(table, rows, topics, counts, beta):  # pragma: no cover - jit
    """Add a COO delta to ``table`` [R, K] int32 in place; return the change of Σ lgamma(n+β).

    rows int64/int32 [M] (local row ids), topics [M], counts int32 [M]. Entries may repeat:
    the loop applies them one after the other, so the returned log-likelihood change is exact
    either way (lgamma of the value before and after each addition).
    """
    ll = 0.0
    for i in range(rows.shape[0]):
        r = rows[i]
        k = topics[i]
        old = table[r, k]
        new = old + counts[i]
        table[r, k] = new
        ll += math.lgamma(new + beta) - math.lgamma(old + beta)
    return ll


@numba.njit(nogil=True, cache=True)
def _add_coo(table, rows, topics, counts):  # pragma: no cover - jit
    """table[rows[i], topics[i]] += counts[i] for every i (repeats allowed); table [R, K] int32."""
    for i in range(rows.shape[0]):
        table[rows[i], topics[i]] += counts[i]


def apply_delta_ll(table: np.ndarray, rows: np.ndarray, topics: np.ndarray,
                   counts: np.ndarray, beta: float) -> float:
    """Checked wrapper of :func:`_apply_delta_ll` (shapes and dtypes; rows local to ``table``)."""
    if not (len(rows) == len(topics) == len(counts)):
        raise ValueError("rows, topics and counts must have the same length")
    if len(rows) == 0:
        return 0.0
    return float(_apply_delta_ll(table, np.asarray(rows, dtype=np.int64),
                                 np.asarray(topics, dtype=np.int64),
                                 np.asarray(counts, dtype=np.int32), float(beta)))


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
