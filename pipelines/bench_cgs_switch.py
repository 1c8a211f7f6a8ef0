"""Benchmark: cgs's per-sweep switch between SparseLDA and the dense kernel, one thread.

    .venv/bin/python pipelines/bench_cgs_switch.py \\
        --case runs/bench/debian-descriptions.zarr:100:2,10,20,50,100 \\
        --case runs/synth4m.zarr:1000:2,5,10

Each ``--case CORPUS:K:SWEEPS`` runs the default cgs chain from a random start (alpha 0.1,
beta 0.01) and, before each listed sweep, times both kernels from the same state (each on
a copy, three times, the least CPU time) and measures what the switch reads: the row
density (``_row_density``) and the expected share of tokens the sweep moves
(``_move_share``, printed with the share the dense kernel's sweep then moved). At the end
it scores two rules over all the states: the default (SparseLDA where density x moves <
``SPARSE_BELOW``) and density alone below ``--old-threshold`` (0.2, the rule before):
how often each picks the slower kernel, by how much at worst, and the mean slowdown
against always picking the faster one. With ``--threads T`` (T > 1) both kernels sweep as
the partitioned sweep of T threads (:mod:`biglda.samplers.partition`) and the columns are
wall µs a token (the least of three), the default's pick that of T threads.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _case(text: str) -> tuple[str, int, list[int]]:
    """``CORPUS:K:SWEEPS`` -> (corpus, K, sorted sweeps); a clear error otherwise."""
    try:
        url, k, at = text.rsplit(":", 2)
        sweeps = sorted(int(s) for s in at.split(","))
        if int(k) < 2 or not sweeps or sweeps[0] < 0:
            raise ValueError
        return url, int(k), sweeps
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected CORPUS:K:SWEEPS, e.g. runs/synth4m.zarr:100:2,10,20") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", required=True, metavar="CORPUS:K:SWEEPS",
                    type=_case)
    ap.add_argument("--old-threshold", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=1,
                    help="time the kernels' partitioned sweeps on this many threads")
    args = ap.parse_args(argv)
    if args.threads < 1:
        ap.error(f"--threads must be at least 1, got {args.threads}")
    from concurrent.futures import ThreadPoolExecutor

    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, init_z
    from biglda.samplers import cgs_cpu as m

    states = []  # (density, moves, sparse s/token, dense s/token)
    pool = ThreadPoolExecutor(max(1, args.threads - 1))  # (--threads > 1)
    print("| corpus | K | sweep | density | moves (est., ms) | moved | density x moves | "
          "SparseLDA µs/token | dense µs/token | faster | default picks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for url, n_topics, sweeps in args.case:
        corpus = Corpus.open(url)
        tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
        doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
        n_words, n = int(corpus.n_words), len(tokens)
        z = init_z(n, n_topics, RandomKey(0, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        alpha, beta = np.full(n_topics, 0.1), 0.01
        sampler = m.CGSSampler()
        forced = {"sparse": m.CGSSampler(dense_above=2.0), "dense": m.CGSSampler(dense_above=0.0)}
        for it in range(sweeps[-1] + 1):
            if it in sweeps:
                density = m._row_density(tokens, n_wk, m._DENSITY_ENTRIES)
                t0 = time.perf_counter()
                moves = m._move_share(tokens, doc_ptr, z, n_wk, n_k, alpha, beta,
                                      float(n_words), m._MOVE_TERMS)
                t_moves = time.perf_counter() - t0
                cpu = {"sparse": [], "dense": []}
                for _ in range(3):
                    for name, kernel in (("sparse", m._cgs_sparse_sweep),
                                         ("dense", m._cgs_dense_sweep)):
                        zz, ww, kk = z.copy(), n_wk.copy(), n_k.copy()
                        if args.threads > 1:  # the partitioned sweep's wall time
                            t0 = time.perf_counter()
                            forced[name].sweep(tokens, doc_ptr, zz, ww, kk, alpha, beta,
                                               n_words, RandomKey(1, it), pool=pool,
                                               n_threads=args.threads)
                            cpu[name].append(time.perf_counter() - t0)
                        else:
                            t0 = time.thread_time()
                            kernel(tokens, doc_ptr, zz, ww, kk, alpha, beta, float(n_words),
                                   RandomKey(1, it).state())
                            cpu[name].append(time.thread_time() - t0)
                        if name == "dense":
                            moved = float(np.mean(zz != z))
                sp, de = (1e6 * min(cpu[name]) / n for name in ("sparse", "dense"))
                states.append((density, moves, sp, de))
                faster = "SparseLDA" if sp < de else "dense"
                print(f"| {url} | {n_topics} | {it} | {density:.3f} | {moves:.3f} "
                      f"({1e3 * t_moves:.1f}) | {moved:.3f} | {density * moves:.3f} | "
                      f"{sp:.4f} | {de:.4f} | {faster} ({max(sp, de) / min(sp, de):.2f}x) | "
                      f"{sampler.kernel_for(density, moves, args.threads)} |", flush=True)
            sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
                          RandomKey(0, it))

    pool.shutdown()
    default = m.CGSSampler()
    rules = {f"the default on {args.threads} thread(s)":
             lambda d, mv: default.kernel_for(d, mv, args.threads) == "sparse",
             f"density x moves < {m.SPARSE_BELOW}": lambda d, mv: d * mv < m.SPARSE_BELOW,
             f"density < {args.old_threshold}": lambda d, mv: d < args.old_threshold}
    print(f"\n{len(states)} states\n\n| rule | picks the slower kernel | worst | mean slowdown |"
          "\n|---|---|---|---|")
    for name, sparse in rules.items():
        slow = [(sp if sparse(d, mv) else de) / min(sp, de) for d, mv, sp, de in states]
        wrong = sum(s > 1.0 for s in slow)
        print(f"| {name} | {wrong} | {max(slow):.2f}x | {100 * (np.mean(slow) - 1):.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
