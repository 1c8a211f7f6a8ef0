"""Applying a pulled delta to a cache: mapping word ids to rows, and the add kernels' id types.

A pull brings ``(word, topic, count)`` entries with global word ids; the cache maps them to
its rows and adds them (``ShardCache.refresh``). This times, on a synthetic delta of
``--entries`` entries sorted by word (as pulls are) against a ``--words`` x ``--topics``
table, each step in its old and its current form, best of ``--repeats``:

* word ids to rows: ``np.searchsorted(vocab, words)`` against ``ShardCache.local_ids``;
* ``add_coo`` and ``apply_delta_ll`` given int32 ids (what callers have) against int64 ids,
  which they now cast, as they used to cast int32 ids to int64: the cost of that cast.

Usage (from the repository root, a few seconds)::

    .venv/bin/python pipelines/bench_cache_apply.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from biglda.ps._kernels import add_coo, apply_delta_ll, lgamma_table
from biglda.ps.cache import ShardCache


def best_ms(fn, repeats: int) -> float:
    """Milliseconds of the fastest of ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=50_000)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=4_600_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cache = ShardCache(0, np.arange(args.words, dtype=np.int32), np.array([0, args.words]),
                       args.topics)
    words = np.sort(rng.integers(0, args.words, args.entries)).astype(np.int32)
    topics = rng.integers(0, args.topics, args.entries).astype(np.int32)
    counts = rng.choice(np.array([-1, 1], dtype=np.int32), args.entries)
    table = rng.integers(1, 50, size=(args.words, args.topics)).astype(np.int32)
    lg = lgamma_table(0.01)
    rows = cache.local_ids(words)
    rows64, topics64 = rows.astype(np.int64), topics.astype(np.int64)
    steps = [
        ("word ids to rows", lambda: np.searchsorted(cache.vocab, words),
         lambda: cache.local_ids(words)),
        ("add_coo", lambda: add_coo(table, rows64, topics64, counts),
         lambda: add_coo(table, rows, topics, counts)),
        ("apply_delta_ll", lambda: apply_delta_ll(table, rows64, topics64, counts, 0.01, lg),
         lambda: apply_delta_ll(table, rows, topics, counts, 0.01, lg)),
    ]
    print(f"{args.entries:,} entries, table {args.words:,} x {args.topics:,}, "
          f"best of {args.repeats}\n")
    print("| step | before ms | now ms |\n|---|---|---|")
    for name, before, now in steps:
        t_before, t_now = best_ms(before, args.repeats), best_ms(now, args.repeats)
        print(f"| {name} | {t_before:.1f} | {t_now:.1f} |")


if __name__ == "__main__":
    main()
