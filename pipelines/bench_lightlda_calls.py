"""lightlda's per-call set-up: one sweep of a shard against the same sweep cut into N calls.

    .venv/bin/python pipelines/bench_lightlda_calls.py --corpus runs/synth4m.zarr --calls 8

A process of T threads with R rounds sweeps its documents in T x R calls a clock (each
thread's part, round by round; ``biglda/trainer/worker.py``), and every call builds the
word alias tables of the words its documents hold, for each of its two halves. With 2 threads
and 4 rounds that is 8 calls. This times one call over the whole shard against ``--calls``
consecutive calls over as many equal runs of documents, on one thread, from the same random
state (the counts carry on from run to run, as a training run's would), alternating,
``--repeats`` times each; the difference is what the extra table building costs.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import numpy as np


def main() -> None:
    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, init_z
    from biglda.samplers.lightlda_cpu import _lightlda_sweep, _no_doc_counts

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    corpus = Corpus.open(args.corpus)
    tokens, ptr = corpus.read_shard(corpus.plan_shards(1)[0])
    tokens, ptr = np.asarray(tokens), np.asarray(ptr, dtype=np.int64)
    k, v = args.topics, corpus.n_words
    alpha, beta = np.full(k, 50.0 / k), 0.01
    z = init_z(len(tokens), k, RandomKey(0, 0))
    n_wk, n_k = count_from_z(tokens, ptr, z, v, k)
    n_wk, n_k = n_wk.astype(np.int32), n_k.astype(np.int64)

    def sweep(parts: int) -> float:
        cuts = np.linspace(0, len(ptr) - 1, parts + 1).astype(np.int64)
        t = time.perf_counter()
        for a, b in itertools.pairwise(cuts):
            p = ptr[a:b + 1]
            _lightlda_sweep(tokens[p[0]:p[-1]], p - p[0], z[p[0]:p[-1]], n_wk, n_k, alpha,
                            beta, v, np.uint64(12345 + a), 2, True, _no_doc_counts(p))
        return time.perf_counter() - t

    sweep(1)  # compile, and leave the random start
    times: dict[int, list[float]] = {1: [], args.calls: []}
    for _ in range(args.repeats):
        for parts in times:
            times[parts].append(sweep(parts))
    one, many = statistics.median(times[1]), statistics.median(times[args.calls])
    print(f"{args.corpus}: {len(tokens):,} tokens, V = {v:,}, K = {k}")
    print(f"one call: {one:.3f} s (runs {', '.join(f'{x:.3f}' for x in times[1])})")
    print(f"{args.calls} calls: {many:.3f} s (runs "
          f"{', '.join(f'{x:.3f}' for x in times[args.calls])}): {many / one:.2f}x")


if __name__ == "__main__":
    main()
