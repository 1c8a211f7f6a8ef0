"""warplda alone (no Dask): a sweep on 1 and on several threads, and the time of each pass.

Two measurements on the Debian corpus (ingested once into ``runs/bench``, as
``bench_samplers.py`` does) or on ``--corpus`` (a corpus.zarr), from random topics,
``--topics`` K:

* **threads**: the whole corpus as one shard, swept ``--sweeps`` times on 1, 2, ... threads
  (``sweep(..., pool=, n_threads=)``), thread counts alternating, ``--rounds`` times; wall
  M tokens/s, median of the sweeps after the first two (the first builds the word order).
* **passes**: half the documents swept on their own table (one shard: ``local_only``) and
  against the whole corpus's counts (a shared table: the factors G, the global row read per
  token), or with ``--whole`` the whole corpus on its own table, on ``--pass-threads``
  threads; milliseconds per sweep in each phase (the scan of tokens and topics, the three
  passes, the gather of the delta, the rest), mean of sweeps 4-8. A phase's time is the
  wall time from its first thread's start to its last thread's end.

Usage (from the repository root, about a minute)::

    .venv/bin/python pipelines/bench_warplda_threads.py --topics 1000 --threads 1 2
    .venv/bin/python pipelines/bench_warplda_threads.py --corpus runs/synth20m.zarr --skip-threads
    .venv/bin/python pipelines/bench_warplda_threads.py --corpus runs/synth20m.zarr \\
        --skip-threads --whole --pass-threads 16
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


#: the sweep's phases and the kernels that run them (each called once per thread or part)
PHASES = (("scan", "scan_part"), ("pass 1", "_claim_word_proposals"),
          ("pass 2", "_claim_documents"), ("pass 3", "_claim_word_accept"),
          ("gather", "_claim_gather"))


def passes(tokens, doc_ptr, n_words, k, n_threads=1, whole=False) -> dict[str, dict]:
    """Milliseconds per sweep in each phase, half the corpus on its own and on a shared table.

    A phase's wall time in a sweep runs from the first of its calls' start to the last's end
    (its threads' calls; the scan's parts); "other" is the rest of the sweep. ``whole``: the
    whole corpus on its own table instead (one shard: what one process of it sweeps).
    """
    import biglda.samplers.warplda_cpu as warp

    if whole:
        part, part_ptr, other, modes = tokens, doc_ptr, tokens[:0], ("one shard, whole",)
    else:
        cut = (len(doc_ptr) - 1) // 2
        part, part_ptr = tokens[:doc_ptr[cut]], doc_ptr[:cut + 1]
        other, modes = tokens[doc_ptr[cut]:], ("one shard", "shared table")
    # (a baseline before the sixteenth session has the scan as ``_scan_part``)
    names = {name: name if hasattr(warp, name) else "_" + name for _, name in PHASES}
    kept = {names[name]: getattr(warp, names[name]) for _, name in PHASES}
    spans: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in PHASES}

    def timed(label, fn):
        def run(*args):
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spans[label].append((t0, time.perf_counter()))
        return run

    res = {}
    pool = ThreadPoolExecutor(n_threads - 1) if n_threads > 1 else None
    try:
        for label, name in PHASES:
            setattr(warp, names[name], timed(label, kept[names[name]]))
        for mode in modes:
            sampler = get_sampler("warplda")
            z = init_z(len(part), k, RandomKey(0, -1, 0))
            n_wk, n_k = count_from_z(part, part_ptr, z, n_words, k)
            if mode == "shared table":
                z_other = init_z(len(other), k, RandomKey(0, -1, 1))
                o_wk, o_k = count_from_z(other, np.array([0, len(other)]), z_other, n_words, k)
                n_wk += o_wk
                n_k += o_k
            walls: list[float] = []
            phase_ms: dict[str, list[float]] = {label: [] for label, _ in PHASES}
            for it in range(1, 9):
                for got in spans.values():
                    got.clear()
                t0 = time.perf_counter()
                sampler.sweep(part, part_ptr, z, n_wk, n_k, 0.1, 0.01, n_words,
                              RandomKey(0, it), pool=pool, n_threads=n_threads)
                if it >= 4:
                    walls.append(time.perf_counter() - t0)
                    for label, got in spans.items():
                        phase_ms[label].append(
                            1e3 * (max(e for _, e in got) - min(b for b, _ in got)))
            ms = {label: statistics.mean(v) for label, v in phase_ms.items()}
            ms["other"] = 1e3 * statistics.mean(walls) - sum(ms.values())
            res[mode] = {"Mtok/s": len(part) * len(walls) / sum(walls) / 1e6, "ms": ms}
    finally:
        for name, fn in kept.items():
            setattr(warp, name, fn)
        if pool is not None:
            pool.shutdown()
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
    ap.add_argument("--pass-threads", type=int, default=1,
                    help="threads of the phases' sweeps (default 1)")
    ap.add_argument("--whole", action="store_true",
                    help="phases of the whole corpus on its own table (not half of it)")
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
    swept = len(tokens) if args.whole else int(doc_ptr[(len(doc_ptr) - 1) // 2])
    print(f"\n{'All' if args.whole else 'Half'} the documents ({swept:,} tokens) on "
          f"{args.pass_threads} thread(s), ms per sweep (mean of sweeps 4-8):\n")
    labels = [label for label, _ in PHASES] + ["other"]
    print(f"| table | M tokens/s | {' | '.join(labels)} |\n|---|---|{'---|' * len(labels)}")
    for mode, r in passes(tokens, doc_ptr, n_words, args.topics, args.pass_threads,
                          args.whole).items():
        cells = " | ".join(f"{r['ms'][label]:.1f}" for label in labels)
        print(f"| {mode} | {r['Mtok/s']:.2f} | {cells} |")

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
