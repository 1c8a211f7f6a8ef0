"""Benchmark: a sweep's delta from a snapshot of the rows against recording the moves.

    .venv/bin/python pipelines/bench_snapshot.py --corpus runs/synth4m.zarr \\
        --sampler lightlda --topics 1000 --threads 2

``biglda.samplers.base.SNAPSHOT_ENTRIES_PER_TOKEN`` decides how a sweep (of lightlda or cgs,
on one or several threads) gathers its delta: a snapshot of ``n_wk`` and a diff where the
rows hold at most that many entries a token, else the moved tokens (recorded by the kernels
on several threads, ``z`` compared with a copy on one). This sweeps the corpus ``--warm``
times, then, from that one state, sweeps it again ``--repeats`` times each way, alternating
(the machine's drift hits both), and prints the median and least wall seconds of each.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--sampler", default="lightlda", choices=["lightlda", "cgs"])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args(argv)

    import biglda.samplers.base as base
    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z

    corpus = Corpus.open(args.corpus)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
    n_words, k = int(corpus.n_words), args.topics
    z = init_z(len(tokens), k, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
    sampler = get_sampler(args.sampler)
    for it in range(args.warm):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words, RandomKey(0, it))
    print(f"{args.corpus}: {len(tokens):,} tokens, {args.sampler}, K = {k}, "
          f"{args.threads} thread(s), {n_wk.size / len(tokens):.1f} row entries a token")
    secs: dict[str, list[float]] = {"record": [], "snapshot": []}
    rule = base.SNAPSHOT_ENTRIES_PER_TOKEN
    try:
        with ThreadPoolExecutor(max(1, args.threads - 1)) as pool:
            for rep in range(args.repeats + 1):  # (the first round compiles)
                for mode, entries in (("record", 0), ("snapshot", float("inf"))):
                    base.SNAPSHOT_ENTRIES_PER_TOKEN = entries
                    zz, wk, nk = z.copy(), n_wk.copy(), n_k.copy()
                    t0 = time.perf_counter()
                    sampler.sweep(tokens, doc_ptr, zz, wk, nk, 0.1, 0.01, n_words,
                                  RandomKey(0, args.warm), pool=pool, n_threads=args.threads)
                    if rep:
                        secs[mode].append(time.perf_counter() - t0)
    finally:
        base.SNAPSHOT_ENTRIES_PER_TOKEN = rule
    for mode, s in secs.items():
        print(f"{mode}: median {statistics.median(s):.3f} s, least {min(s):.3f} s a sweep")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
