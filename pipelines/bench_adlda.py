"""What data parallelism costs per iteration: one chain against AD-LDA's halves, no Dask.

Two worker processes under BSP sweep their halves of the documents each against the table
of the clock before plus their own moves, and add each other's moves at the clock's end
(AD-LDA, Newman et al. 2009): that is what ``--workers 2`` trains. This replays it with
the same sampler on one thread, so only the schedule differs:

* ``serial``: one sweep of all documents on one table (one thread, ``--workers 1``);
* ``adlda``: the two halves swept from the same table, their moves added after;
* ``roundsR``: the same in R rounds a sweep (each half's documents in R runs, the moves
  exchanged after each run): what early updates between rounds could at best reach.

Prints the joint LL/token every ``--every`` sweeps for each schedule, side by side.

Usage (from the repository root; about a minute a schedule on synth4m)::

    .venv/bin/python pipelines/bench_adlda.py --corpus runs/synth4m.zarr --topics 100 \\
        --sweeps 40 --schedules serial adlda rounds2 rounds8
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from biglda.corpus.store import Corpus
from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z, joint_loglik


def halves(doc_ptr: np.ndarray, n_rounds: int) -> list[list[tuple[int, int]]]:
    """Each half's document ranges, one a round: ``[[(d_lo, d_hi), ...] for each half]``.

    >>> halves(np.arange(9), 2)
    [[(0, 2), (2, 4)], [(4, 6), (6, 8)]]
    """
    n_docs = len(doc_ptr) - 1
    cut = [0, n_docs // 2, n_docs]
    return [[(cut[h] + (cut[h + 1] - cut[h]) * r // n_rounds,
              cut[h] + (cut[h + 1] - cut[h]) * (r + 1) // n_rounds) for r in range(n_rounds)]
            for h in range(2)]


def run(schedule: str, tokens, doc_ptr, n_words: int, k: int, sweeps: int, every: int,
        sampler: str) -> list[float]:
    """LL/token after every ``every``-th sweep (and the first) of ``schedule``."""
    alpha, beta = 0.1, 0.01
    s = get_sampler(sampler)
    z = init_z(len(tokens), k, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
    n_rounds = 0 if schedule == "serial" else (
        1 if schedule == "adlda" else int(schedule.removeprefix("rounds")))
    out = []
    for it in range(1, sweeps + 1):
        if n_rounds == 0:
            s.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, RandomKey(0, it))
        else:
            parts = halves(doc_ptr, n_rounds)
            for r in range(n_rounds):
                moves = []
                for h, ranges in enumerate(parts):
                    d_lo, d_hi = ranges[r]
                    t_lo, t_hi = int(doc_ptr[d_lo]), int(doc_ptr[d_hi])
                    wk, nk, zz = n_wk.copy(), n_k.copy(), z[t_lo:t_hi].copy()
                    s.sweep(tokens[t_lo:t_hi], doc_ptr[d_lo:d_hi + 1] - t_lo, zz, wk, nk,
                            alpha, beta, n_words, RandomKey(h * 1000 + r, it))
                    moves.append((wk - n_wk, nk - n_k, zz, t_lo, t_hi))
                for d_wk, d_k, zz, t_lo, t_hi in moves:
                    n_wk += d_wk
                    n_k += d_k
                    z[t_lo:t_hi] = zz
        if it == 1 or it % every == 0:
            out.append(joint_loglik(doc_ptr, z, n_wk, n_k, alpha, beta, n_words) / len(tokens))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=40)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--sampler", default="cgs")
    ap.add_argument("--schedules", nargs="+", default=["serial", "adlda", "rounds2", "rounds8"])
    args = ap.parse_args(argv)
    corpus = Corpus.open(args.corpus)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), dtype=np.int32)
    doc_ptr = np.ascontiguousarray(corpus.doc_ptr, dtype=np.int64)
    n_words = int(corpus.n_words)
    its = [1] + [i for i in range(args.every, args.sweeps + 1, args.every) if i > 1]
    cols = {}
    for sched in args.schedules:
        cols[sched] = run(sched, tokens, doc_ptr, n_words, args.topics, args.sweeps,
                          args.every, args.sampler)
        print(f"{sched}: LL/token {cols[sched][-1]:.4f} after {args.sweeps}", file=sys.stderr,
              flush=True)
    print("| sweep | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for i, it in enumerate(its):
        print(f"| {it} | " + " | ".join(f"{c[i]:.4f}" for c in cols.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
