"""A sweep in windows of words against the whole sweep, one thread, no Dask.

What a process taking turns on the vocabulary (``--process-partition``) pays in its
kernels: the same tokens swept as one exact sweep, as one sweep over a window holding every
word, as P sweeps over P windows of about equal tokens each rebuilding the documents' state
("windows"), and as the trainer's P steps, each after the first ``follows`` the one before
("follows": the documents' state kept through the clock). Prints the CPU µs a token of each,
the median over sweeps after ``--skip``, and of each window of "follows" over its own tokens
(windows of equal tokens are not of equal cost: what a step of one process waits for in
another's). Each mode sweeps its own copy of the same start, the modes taking turns sweep by
sweep (this VM's speed drifts within minutes)::

    .venv/bin/python pipelines/bench_windows.py --corpus runs/deb/corpus.zarr --topics 100 \\
        --variants dense sparse

Takes the first ``--share`` of the corpus's documents (a process's part of a 2-process run;
``--windows 16 --share 0.0625``: one process's clock at 16 processes).
``--burn N`` first runs N unmeasured exact sweeps (the default cgs) from the random topics,
so the modes are measured where a training is after N iterations, not at its start.
``--table corpus`` counts the table from the whole corpus (burnt in whole) and sweeps the
share against it, as a process of a P-process training does; the default (``share``)
counts it from the share alone, as an independent run on the share (``2x1:i``) does.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from biglda.corpus import Corpus
from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z
from biglda.samplers.partition import word_windows

# cgs's kernels, and lightlda
KERNELS = {"dense": ("cgs", {"dense_above": 0.0}), "sparse": ("cgs", {"dense_above": 2.0}),
           "auto": ("cgs", {}), "lightlda": ("lightlda", {})}


MODES = ("exact", "whole", "windows", "follows")


def run(tokens, doc_ptr, n_words, n_topics, variant, windows, sweeps, skip, burn=0,
        n_docs=None, modes=MODES) -> dict[str, tuple[float, list[float]]]:
    """CPU µs a token of each of ``modes`` ("exact", "whole", "windows" or "follows"),
    median after ``skip``, and each window's (its sweep's CPU over its tokens; empty for
    "exact"); every mode from the state ``burn`` exact sweeps of the default cgs make from
    random topics, on its own copy of it.

    The modes take turns sweep by sweep, each sweep in another order: this VM's CPU a token
    drifts by 10-30% within minutes. Until the thirtieth session they ran one after another,
    and the last ("follows") read 26-70% slower than "windows" where alternating sweeps
    found the two level (pipelines/README.md, "Thirtieth session").

    ``n_docs``: sweep only the first ``n_docs`` documents of ``tokens`` / ``doc_ptr``
    (the burn sweeps them all); the others' counts stay in the table, as another process's
    do in a training. None: sweep them all.
    """
    name, params = KERNELS[variant]
    z = init_z(len(tokens), n_topics, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    start = get_sampler("cgs")
    for it in range(burn):
        start.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words, RandomKey(0, -2, it))
    if n_docs is not None:
        doc_ptr = doc_ptr[:n_docs + 1]
    n = int(doc_ptr[-1])
    tokens = tokens[:n]
    # each mode's own chain from the same state (views: the sweeps write the share's topics)
    state = {m: (z.copy(), n_wk.copy(), n_k.copy(), get_sampler(name, **params)) for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    per: dict[str, list[list[float]]] = {m: [] for m in modes}
    with ThreadPoolExecutor(1) as pool:
        for it in range(sweeps):
            for mode in modes[it % len(modes):] + modes[:it % len(modes)]:
                zz, nw, nk, sampler = state[mode]
                zs = zz[:n]
                c0 = time.process_time()
                if mode == "exact":
                    sampler.sweep(tokens, doc_ptr, zs, nw, nk, 0.1, 0.01, n_words,
                                  RandomKey(0, it))
                else:
                    per[mode].append([])
                    for j, w in enumerate([(0, n_words)] if mode == "whole" else windows):
                        c1 = time.process_time()
                        res = sampler.sweep(tokens, doc_ptr, zs, nw, nk, 0.1, 0.01, n_words,
                                            RandomKey(0, it, 0, j), pool=pool, window=w,
                                            follows=mode == "follows" and j > 0)
                        per[mode][-1].append(1e6 * (time.process_time() - c1)
                                             / max(1, res.n_tokens))
                cpu[mode].append(time.process_time() - c0)
    return {m: (1e6 * statistics.median(cpu[m][skip:]) / n,
                [statistics.median(col) for col in zip(*per[m][skip:], strict=True)])
            for m in modes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--sweeps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=4)
    ap.add_argument("--burn", type=int, default=0,
                    help="exact sweeps (default cgs) before the measured ones, unmeasured")
    ap.add_argument("--table", choices=("share", "corpus"), default="share",
                    help="count the table from the share's documents alone, or from the "
                         "whole corpus (a process's share of a P-process training's table)")
    ap.add_argument("--variants", nargs="+", default=["dense", "sparse"], choices=list(KERNELS))
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES,
                    help="which sweeps to measure (default all four)")
    args = ap.parse_args(argv)
    corpus = Corpus.open(args.corpus)
    n_docs = max(1, int(corpus.n_docs * args.share))
    whole = args.table == "corpus"
    doc_ptr = np.asarray(corpus.doc_ptr[:(corpus.n_docs if whole else n_docs) + 1],
                         dtype=np.int64)
    tokens = np.asarray(corpus.read_tokens(0, int(doc_ptr[-1]))).astype(np.int32)
    share = tokens[:int(doc_ptr[n_docs])]
    windows = word_windows(np.bincount(tokens, minlength=corpus.n_words), args.windows)
    print(f"{len(share):,} tokens swept of {len(tokens):,} in the table, K = {args.topics}, "
          f"windows {windows}")
    for variant in args.variants:
        got = run(tokens, doc_ptr, corpus.n_words, args.topics, variant, windows,
                  args.sweeps, args.skip, args.burn, n_docs if whole else None,
                  tuple(args.modes))
        print(f"{variant}: " + ", ".join(f"{m} {v[0]:.3f}" for m, v in got.items())
              + " µs/token (CPU, one thread)"
              + ("; follows by window: " + ", ".join(f"{x:.3f}" for x in got["follows"][1])
                 if "follows" in got else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
