"""Counting (co-)occurrences of a few words in documents or sliding windows (for coherence).

Kept next to its only user rather than in ``biglda/samplers``: it is an evaluation
helper, not a sampler. Array-only numba kernel, a validating wrapper.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _count_kernel(tokens, doc_ptr, slot_of_word, mate_ptr, mate, pair_index, window,
                  single, pair):
    """Count windows containing each slot word and each listed slot pair; returns #windows.

    tokens int32[N] (corpus ids), doc_ptr int64[D+1], slot_of_word int64[V] (-1: not
    counted), mate_ptr int64[M+1] / mate int64[P] / pair_index int64[P]: for slot a, the
    slots b > a paired with it and the pair's output index; window 0 means the whole
    document is one window. single int64[M], pair int64[n_pairs] are incremented.
    """
    n_slots = mate_ptr.shape[0] - 1
    cnt = np.zeros(n_slots, dtype=np.int64)
    present = np.empty(n_slots, dtype=np.int64)
    where = np.full(n_slots, -1, dtype=np.int64)
    n_present = 0
    n_windows = 0
    for d in range(doc_ptr.shape[0] - 1):
        start = doc_ptr[d]
        n = doc_ptr[d + 1] - start
        if n == 0:
            continue
        w = n if (window <= 0 or window > n) else window
        # Invariant at the top of each window: cnt/present describe tokens[s : s + w].
        for i in range(start, start + w):
            s = slot_of_word[tokens[i]]
            if s >= 0:
                cnt[s] += 1
                if cnt[s] == 1:
                    where[s] = n_present
                    present[n_present] = s
                    n_present += 1
        for first in range(start, start + n - w + 1):
            if first > start:
                # slide by one: drop tokens[first - 1], add tokens[first + w - 1]
                s = slot_of_word[tokens[first - 1]]
                if s >= 0:
                    cnt[s] -= 1
                    if cnt[s] == 0:
                        j = where[s]
                        last = present[n_present - 1]
                        present[j] = last
                        where[last] = j
                        where[s] = -1
                        n_present -= 1
                s = slot_of_word[tokens[first + w - 1]]
                if s >= 0:
                    cnt[s] += 1
                    if cnt[s] == 1:
                        where[s] = n_present
                        present[n_present] = s
                        n_present += 1
            n_windows += 1
            for j in range(n_present):
                a = present[j]
                single[a] += 1
                for m in range(mate_ptr[a], mate_ptr[a + 1]):
                    if cnt[mate[m]] > 0:
                        pair[pair_index[m]] += 1
        # reset for the next document
        for j in range(n_present):
            cnt[present[j]] = 0
            where[present[j]] = -1
        n_present = 0
    return n_windows


def count_cooccurrence(
    tokens: np.ndarray,
    doc_ptr: np.ndarray,
    n_words: int,
    pairs: np.ndarray,
    window: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Window counts of words and word pairs.

    Parameters
    ----------
    tokens, doc_ptr : int[N], int64[D+1]
        The reference corpus in its own word ids.
    n_words : int
        Its vocabulary size.
    pairs : int64[P, 2]
        Word-id pairs to count (``a != b``).
    window : int or None
        None: each non-empty document is one window (document co-occurrence). An int
        ``w``: boolean sliding windows of ``w`` tokens moved one token at a time; a
        document shorter than ``w`` is one window.

    Returns
    -------
    words : int64[U]
        The distinct words of ``pairs``, sorted.
    word_counts : int64[U]
        Number of windows containing ``words[i]``.
    pair_counts : int64[P]
        Number of windows containing both words of ``pairs[p]``.
    n_windows : int
        Number of windows (the denominator of the probabilities).

    Examples
    --------
    >>> w, wc, pc, n = count_cooccurrence(np.array([0, 1, 2, 0]), np.array([0, 2, 4]), 3,
    ...                                   np.array([[0, 1], [0, 2]]))
    >>> w.tolist(), wc.tolist(), pc.tolist(), n
    ([0, 1, 2], [2, 1, 1], [1, 1], 2)
    """
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    words = np.unique(pairs)
    slot_of_word = np.full(n_words, -1, dtype=np.int64)
    slot_of_word[words] = np.arange(len(words))
    a = slot_of_word[pairs.min(axis=1)]
    b = slot_of_word[pairs.max(axis=1)]
    order = np.argsort(a, kind="stable")
    mate = np.ascontiguousarray(b[order])
    pair_index = np.ascontiguousarray(order.astype(np.int64))
    mate_ptr = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=len(words)), out=mate_ptr[1:])
    single = np.zeros(len(words), dtype=np.int64)
    pair = np.zeros(len(pairs), dtype=np.int64)
    n_windows = _count_kernel(tokens, doc_ptr, slot_of_word, mate_ptr, mate, pair_index,
                              int(window or 0), single, pair)
    return words, single, pair, int(n_windows)
