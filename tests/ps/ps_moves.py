"""Token moves on a count table, aggregated as a sweep's delta, and process caches that start
from random counts (the PS tests' workload)."""

from __future__ import annotations

import numpy as np


def moves(rng, n_wk: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """Up to ``n`` valid moves on ``n_wk`` (one count from a non-zero cell to a random topic).

    Each row at most once, so no count goes below zero. Returns ``(words, topics, counts,
    dk)``, merged and sorted by (word, topic) as a sweep's delta is.
    """
    n_rows, k = n_wk.shape
    w = rng.choice(n_rows, min(n, n_rows), replace=False)
    t_from = n_wk[w].argmax(1)
    ok = n_wk[w, t_from] > 0
    w, t_from = w[ok], t_from[ok]
    t_to = rng.integers(0, k, len(w))
    flat = np.concatenate([w * k + t_from, w * k + t_to])
    cnt = np.concatenate([-np.ones(len(w)), np.ones(len(w))])
    uniq, inv = np.unique(flat, return_inverse=True)
    summed = np.bincount(inv, weights=cnt).astype(np.int32)
    keep = summed != 0
    words = (uniq[keep] // k).astype(np.int32)
    topics = (uniq[keep] % k).astype(np.int32)
    dk = np.zeros(k, dtype=np.int64)
    np.add.at(dk, topics, summed[keep])
    return words, topics, summed[keep], dk


def start_process_cache(rng, members, n_words: int, n_tokens: int, bounds, tables, k: int):
    """A process cache of random tokens and topics whose counts are pushed at clock -1.

    ``members``: the process's shards, the first one the lead. Returns ``(cache, counts)``,
    the counts int32 [V_local, K] in the cache's local ids.
    """
    from biglda.ps import ProcessCache

    tokens = rng.integers(0, n_words, n_tokens).astype(np.int32)
    cache = ProcessCache(members[0], members, tokens, bounds, k)
    init = np.zeros((cache.n_local, k), dtype=np.int32)
    np.add.at(init, (cache.tokens, rng.integers(0, k, len(tokens))), 1)
    cache.push_counts(tables, -1, init, 5.0)
    cache.push_members(tables, -1, 5.0, log=False)
    return cache, init
