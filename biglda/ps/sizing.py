"""Sizing of the word-topic table: row ranges of the table shards and the memory check."""

from __future__ import annotations

import numpy as np

from biglda.errors import ConfigError


def row_bounds(n_words: int, n_parts: int) -> np.ndarray:
    """Boundaries of ``n_parts`` contiguous row ranges of about equal size.

    Parameters
    ----------
    n_words : int
        V, the number of rows.
    n_parts : int
        Wanted number of ranges (at most ``n_words`` are made, at least one).

    Returns
    -------
    numpy.ndarray
        int64 [n + 1] boundaries: range ``a`` is ``[b[a], b[a + 1])``.

    Examples
    --------
    >>> row_bounds(10, 3).tolist()
    [0, 3, 7, 10]
    """
    n_parts = max(1, min(int(n_parts), int(n_words)))
    return np.linspace(0, n_words, n_parts + 1).round().astype(np.int64)


def table_bytes_per_worker(n_words: int, n_topics: int, n_table_shards: int) -> int:
    """Bytes of the largest table shard (int32 rows).

    Examples
    --------
    >>> table_bytes_per_worker(10, 4, 3)
    64
    """
    rows = -(-int(n_words) // max(1, int(n_table_shards)))
    return rows * int(n_topics) * 4


def check_table_fits(n_words: int, n_topics: int, memory_limits: dict[str, int],
                     cache_rows_per_worker: int = 0, fraction: float = 0.5) -> None:
    """Raise :class:`ConfigError` if a table shard plus the worker caches cannot fit.

    Each worker holds one table shard (``ceil(V / W)`` rows of K int32) and the cached rows of
    its document shards (``cache_rows_per_worker`` rows). They must fit in ``fraction`` of the
    smallest worker memory limit (the rest is for tokens, ``z``, Dask and deltas in flight).

    Parameters
    ----------
    n_words, n_topics : int
        V and K.
    memory_limits : dict of str to int
        Memory limit in bytes of each worker; workers without one (0 or None) are not checked.
    cache_rows_per_worker : int
        Cached rows a worker holds for its document shards.
    fraction : float
        Share of the smallest limit the table shard and the caches may use.

    Raises
    ------
    ConfigError
        Saying what is needed, what is available and the K that would fit.

    Examples
    --------
    >>> check_table_fits(1000, 100, {"a": 2**30, "b": 2**30})  # fits: nothing happens
    """
    limits = [int(v) for v in memory_limits.values() if v]
    if not limits:
        return
    n_workers = len(memory_limits)
    limit = min(limits)
    rows = -(-int(n_words) // n_workers) + int(cache_rows_per_worker)
    need = rows * int(n_topics) * 4
    budget = fraction * limit
    if need <= budget:
        return
    k_max = int(budget // (rows * 4))
    gib = 2.0**30
    raise ConfigError(
        f"the word-topic table does not fit: V={n_words} x K={n_topics} needs "
        f"{need / gib:.2f} GiB per worker on {n_workers} workers (table shard + row cache) but "
        f"only {budget / gib:.2f} GiB ({fraction:.0%} of the {limit / gib:.2f} GiB memory limit) "
        f"is available; K <= {k_max} fits, or add workers/memory"
    )
