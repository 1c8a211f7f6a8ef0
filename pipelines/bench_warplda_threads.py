"""warplda alone (no Dask): a sweep on 1 and on several threads, and the time of each pass.

Two measurements on the Debian corpus (ingested once into ``runs/bench``, as
``bench_samplers.py`` does) or on ``--corpus`` (a corpus.zarr), from random topics,
``--topics`` K:

* **threads**: the whole corpus as one shard, swept ``--sweeps`` times on 1, 2, ... threads
  (``sweep(..., pool=, n_threads=)``), thread counts alternating, ``--rounds`` times; wall
  M tokens/s, median of the sweeps after the first two (the first builds the word order).
* **passes**: half the documents swept on their own table (one shard: ``local_only``) and
  against the whole corpus's counts (a shared table: the factors G, the global row read per
  token); milliseconds per sweep in each of the three passes, mean of sweeps 4-8.

Usage (from the repository root, about a minute)::

    .venv/bin/python pipelines/bench_warplda_threads.py --topics 1000 --threads 1 2
    .venv/bin/python pipelines/bench_warplda_threads.py --corpus runs/synth20m.zarr --skip-threads
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from bench_samplers import CORPUS_SRC, load_corpus

from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z


def threads(tokens, doc_ptr, n_words, k, counts, sweeps, rounds) -> dict[int, list[float]]:
    """Wall M tokens/s per thread count: the median of each run's sweeps 3.., per round."""
    out: dict[int, list[float]] = {t: [] for t in counts}
    with ThreadPoolExecutor(max(counts)) as pool:
        for _ in range(rounds):
            for t in counts:
                sampler = get_sampler("warplda")
                z = init_z(len(tokens), k, RandomKey(0, -1))
                n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
                rates = []
                for it in range(1, sweeps + 1):
                    t0 = time.perf_counter()
                    sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words,
                                  RandomKey(0, it), pool=pool, n_threads=t)
                    rates.append(len(tokens) / (time.perf_counter() - t0) / 1e6)
                out[t].append(statistics.median(rates[2:]))
    return out


def passes(tokens, doc_ptr, n_words, k) -> dict[str, dict[str, float]]:
    """Milliseconds per sweep in each pass, half the corpus on its own and on a shared table."""
    import biglda.samplers.warplda_cpu as warp

    cut = (len(doc_ptr) - 1) // 2
    half, half_ptr = tokens[:doc_ptr[cut]], doc_ptr[:cut + 1]
    other = tokens[doc_ptr[cut]:]
    names = ("_pass_word_proposals", "_pass_documents", "_pass_word_accept")
    timing: dict[str, float] = {}
    kept = {name: getattr(warp, name) for name in names}

    def timed(name):
        def run(*args):
            t0 = time.perf_counter()
            out = kept[name](*args)
            timing[name] = timing.get(name, 0.0) + time.perf_counter() - t0
            return out
        return run

    res = {}
    try:
        for name in names:
            setattr(warp, name, timed(name))
        for mode in ("one shard", "shared table"):
            sampler = get_sampler("warplda")
            z = init_z(len(half), k, RandomKey(0, -1, 0))
            n_wk, n_k = count_from_z(half, half_ptr, z, n_words, k)
            if mode == "shared table":
                z_other = init_z(len(other), k, RandomKey(0, -1, 1))
                o_wk, o_k = count_from_z(other, np.array([0, len(other)]), z_other, n_words, k)
                n_wk += o_wk
                n_k += o_k
            t_all = 0.0
            for it in range(1, 9):
                if it == 4:
                    timing.clear()
                t0 = time.perf_counter()
                sampler.sweep(half, half_ptr, z, n_wk, n_k, 0.1, 0.01, n_words, RandomKey(0, it))
                if it >= 4:
                    t_all += time.perf_counter() - t0
            res[mode] = {"Mtok/s": len(half) * 5 / t_all / 1e6,
                         **{f"pass {i + 1} ms": 1e3 * timing[n] / 5 for i, n in enumerate(names)}}
    finally:
        for name, fn in kept.items():
            setattr(warp, name, fn)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", default="runs/bench")
    ap.add_argument("--corpus", default=None,
                    help="a corpus.zarr to sweep instead of Debian (e.g. a synth corpus)")
    ap.add_argument("--skip-threads", action="store_true",
                    help="only the passes (one shard against a shared table)")
    ap.add_argument("--skip-passes", action="store_true",
                    help="only the threads table")
    args = ap.parse_args()
    if args.corpus:
        from biglda.corpus.store import Corpus

        corpus = Corpus.open(args.corpus)
        tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), dtype=np.int32)
        doc_ptr = np.ascontiguousarray(corpus.doc_ptr, dtype=np.int64)
        name = Path(args.corpus).name
    else:
        tokens, doc_ptr, _ = load_corpus(CORPUS_SRC, Path(args.cache))
        name = "Debian"
    n_words = int(tokens.max()) + 1
    if not args.skip_threads:
        thread_table(tokens, doc_ptr, n_words, name, args)
    if args.skip_passes:
        return
    print(f"\nHalf the documents ({doc_ptr[(len(doc_ptr) - 1) // 2]:,} tokens), ms per sweep "
          "(mean of sweeps 4-8):\n")
    print("| table | M tokens/s | pass 1 ms | pass 2 ms | pass 3 ms |\n|---|---|---|---|---|")
    for mode, r in passes(tokens, doc_ptr, n_words, args.topics).items():
        print(f"| {mode} | {r['Mtok/s']:.2f} | {r['pass 1 ms']:.1f} | {r['pass 2 ms']:.1f} | "
              f"{r['pass 3 ms']:.1f} |")


def thread_table(tokens, doc_ptr, n_words, name, args) -> None:
    """Print the threads table: M tokens/s per thread count and round."""
    got = threads(tokens, doc_ptr, n_words, args.topics, args.threads, args.sweeps, args.rounds)
    print(f"{name}, {len(tokens):,} tokens, one shard, K = {args.topics}: wall M tokens/s "
          f"(median of sweeps 3-{args.sweeps}), per round\n")
    print("| threads | M tokens/s | vs 1 thread |\n|---|---|---|")
    base = statistics.median(got[args.threads[0]])
    for t, rates in got.items():
        print(f"| {t} | {', '.join(f'{r:.2f}' for r in rates)} | "
              f"{statistics.median(rates) / base:.2f}x |")


if __name__ == "__main__":
    main()
