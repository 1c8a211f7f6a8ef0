"""The steps of a clock that used to run on one thread, timed on one thread (issue 15).

On 16 cores a 1 x 16 clock spent a large share outside the sampling passes (pipelines/
README.md, "16 cores"). This times, on one thread and a real sweep's data (``--corpus``, one
shard, K = ``--topics``, random start, then ``--sweeps`` warplda sweeps), each such step in
its old form and in its current one:

* the sweep's argument scans: NumPy's ``min``/``max`` of the tokens, ``_check_z`` and
  ``np.array_equal`` with the cached tokens (old), against ``base.scan_part`` over
  the whole range (now: one part of it per thread);
* the push's range check at the table: every id read (old, ``first_outside``) against a
  large sorted delta's ends (now: its order is checked anyway, on the threads, while it is
  cut into chunks for the apply, whose time below includes that);
* the push's preparation: local ids copied to int64 and mapped with a NumPy gather (old)
  against ``ShardCache._by_table_shard`` on the int32 ids (now: no gather at all where the
  cache holds every word of the table, as one process of this corpus does);
* the table's apply of that delta: one ``apply_delta_ll`` (old) against
  ``TableShard._apply`` in chunks of whole rows on a pool of ``--apply-threads`` threads.

(The gather of the sweep's delta from its blocks, once a step of its own, runs inside the
sweep's claimed parts since warplda's threads claim their runs in numba; not timed here.)
Best of ``--repeats`` in milliseconds. Usage (from the repository root, about a minute)::

    .venv/bin/python pipelines/bench_serial_steps.py --corpus runs/synth20m.zarr
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def best_ms(f, repeats: int) -> float:
    """Best wall time of ``f()`` over ``repeats`` calls, in milliseconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--apply-threads", type=int, default=2)
    args = ap.parse_args()

    import biglda.ps.table as table_mod
    from biglda.corpus import Corpus
    from biglda.ps._kernels import apply_delta_ll, first_outside, lgamma_table
    from biglda.ps.cache import ShardCache
    from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z
    from biglda.samplers._kernels import _check_z
    from biglda.samplers.base import scan_part

    corpus = Corpus.open(args.corpus)
    k = args.topics
    cache = ShardCache(0, np.asarray(corpus.read_tokens(0, corpus.n_tokens)),
                       np.array([0, corpus.n_words]), k)
    tokens, doc_ptr = cache.tokens, np.ascontiguousarray(corpus.doc_ptr, dtype=np.int64)
    n_rows = len(cache.vocab)
    z = init_z(len(tokens), k, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_rows, k)
    sampler = get_sampler("warplda")
    for it in range(1, args.sweeps + 1):
        res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, corpus.n_words,
                            RandomKey(0, it))
    print(f"{args.corpus}: {len(tokens):,} tokens, K = {k}, the delta of sweep {args.sweeps}: "
          f"{len(res.delta_words):,} entries; one thread, best of {args.repeats}, ms\n")
    print("| step | old | now |\n|---|---|---|")

    cached = tokens.copy()
    old = best_ms(lambda: (tokens.min(), tokens.max(), _check_z(z, k),
                           np.array_equal(tokens, cached)), args.repeats)
    new = best_ms(lambda: scan_part(tokens, z, 0, len(tokens), n_rows, k, cached),
                  args.repeats)
    print(f"| argument scans and the cached-order test | {old:.1f} | {new:.1f} |")

    words, topics, counts = res.delta_words, res.delta_topics, res.delta_counts
    old = best_ms(lambda: cache.vocab[np.asarray(words, dtype=np.int64)], args.repeats)
    new = best_ms(lambda: cache._by_table_shard(words, topics, counts), args.repeats)
    print(f"| the push's id mapping | {old:.1f} | {new:.1f} |")
    old = best_ms(lambda: first_outside(words, 0, corpus.n_words), args.repeats)
    new = best_ms(lambda: words[0] >= 0 and words[-1] < corpus.n_words, args.repeats)
    print(f"| the table's range check (now: a sorted delta's ends) | {old:.1f} | {new:.1f} |")
    shard = table_mod.TableShard(0, 0, corpus.n_words, k, 1, 0.01)
    rows = cache._by_table_shard(words, topics, counts)[0][0]
    after = np.zeros_like(shard.n_wk)
    after[cache.vocab] = n_wk  # the table after the last sweep
    lg = lgamma_table(0.01)
    dk = np.zeros(k, dtype=np.int64)

    def apply_ms(apply) -> float:
        """Best time of ``apply()`` on the table as it was before the last sweep."""
        best = float("inf")
        for _ in range(args.repeats):
            shard.n_wk[:] = after
            apply_delta_ll(shard.n_wk, rows, topics, -counts, 0.01, lg, dk)
            t0 = time.perf_counter()
            apply()
            best = min(best, time.perf_counter() - t0)
        return 1e3 * best

    old = apply_ms(lambda: apply_delta_ll(shard.n_wk, rows, topics, counts, 0.01, lg, dk))
    with ThreadPoolExecutor(args.apply_threads) as pool:
        table_mod._apply_pool = lambda n: pool  # as in a worker of that many threads
        new = apply_ms(lambda: shard._apply(rows, topics, counts, dk, shard._chunks(rows)))
    print(f"| the table's apply (now on {args.apply_threads} threads) | {old:.1f} | "
          f"{new:.1f} |")

if __name__ == "__main__":
    main()
