"""The doc log-likelihood of a clock on one thread: the branchy form against the current kernel.

    .venv/bin/python pipelines/bench_doc_ll.py --corpus runs/synth20m.zarr \\
        --checkpoint /tmp/llz.checkpoint.zarr --topics 1000

``--checkpoint`` is a training checkpoint of that corpus (``biglda train CORPUS -k K
--checkpoint-every N --out M`` keeps ``M.checkpoint.zarr``): its ``z`` is a trained state.
Without it, ``z`` is drawn with ``--per-doc`` topics per document (uniform among them).
Each form runs on the whole corpus, best of ``--repeats``, with a symmetric alpha (0.05)
and an asymmetric one; the script says whether the two sums are equal to the bit.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit

from biglda.samplers._kernels import _doc_ll_tables


@njit(nogil=True, cache=False)
def doc_loglik_branchy(doc_ptr, z, alpha):
    """The kernel before 2026-11-26's fourth session: a term only at a topic's first visit."""
    n_topics = alpha.shape[0]
    a_sum, lg_a_sum, symmetric, small, table, lg_alpha = _doc_ll_tables(alpha)
    n_dk = np.zeros(n_topics, dtype=np.int64)
    total = 0.0
    for d in range(doc_ptr.shape[0] - 1):
        lo = doc_ptr[d]
        hi = doc_ptr[d + 1]
        for i in range(lo, hi):
            n_dk[z[i]] += 1
        part = lg_a_sum - math.lgamma((hi - lo) + a_sum)
        for i in range(lo, hi):
            t = z[i]
            c = n_dk[t]
            if c > 0:
                if c < small:
                    part += table[0 if symmetric else t, c]
                else:
                    part += math.lgamma(c + alpha[t]) - lg_alpha[t]
                n_dk[t] = 0
        total += part
    return total


def main() -> None:
    from biglda.corpus import Corpus
    from biglda.samplers import z_dtype
    from biglda.samplers._kernels import _doc_loglik
    from biglda.samplers.counts import as_alpha
    from biglda.trainer import checkpoint as ckpt

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--checkpoint")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--per-doc", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    corpus = Corpus.open(args.corpus)
    ptr = np.asarray(corpus.doc_ptr, dtype=np.int64)
    n = int(ptr[-1])
    if args.checkpoint:
        z = ckpt.read_z(args.checkpoint, ckpt.open_checkpoint(args.checkpoint, args.topics, n),
                        0, n)
        source = f"z of {args.checkpoint}"
    else:
        rng = np.random.default_rng(0)
        doc_of = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
        sets = rng.integers(0, args.topics, size=(len(ptr) - 1, args.per_doc))
        z = sets[doc_of, rng.integers(0, args.per_doc, size=n)].astype(z_dtype(args.topics))
        source = f"z drawn, {args.per_doc} topics per document"
    doc_of = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    distinct = len(np.unique(doc_of * args.topics + z)) / max(1, len(ptr) - 1)
    print(f"{args.corpus}: {n:,} tokens, {len(ptr) - 1:,} documents, K = {args.topics}; "
          f"{source}: {distinct:.1f} distinct topics per document")
    for name, alpha in (("symmetric", as_alpha(0.05, args.topics)),
                        ("asymmetric", as_alpha(np.linspace(0.01, 0.1, args.topics),
                                                args.topics))):
        out = {}
        for form, f in (("branchy", doc_loglik_branchy), ("current", _doc_loglik)):
            f(ptr[:2], z[:ptr[1]], alpha)  # compile
            best, value = math.inf, 0.0
            for _ in range(args.repeats):
                t = time.perf_counter()
                value = f(ptr, z, alpha)
                best = min(best, time.perf_counter() - t)
            out[form] = (best, value)
        same = out["branchy"][1] == out["current"][1]
        print(f"{name} alpha: branchy {1e3 * out['branchy'][0]:.1f} ms, current "
              f"{1e3 * out['current'][0]:.1f} ms; the same sum to the bit: {same}")


if __name__ == "__main__":
    main()
