"""What a sweep costs a token when a process holds a share of the documents, one thread, no Dask.

An AD-LDA process (``--process-partition off``) sweeps its documents against a cache that
holds every count of the vocabulary's rows. Whatever a sweep does per word rather than per
token (lightlda's word tables, cgs's word lists) is then paid whole by every process: its
cost a token grows as the share shrinks. This sweeps all the corpus's documents and the
first ``--share`` of them, alternating, on one table of all the counts, and prints the CPU
µs a token of each (medians after ``--skip``)::

    .venv/bin/python pipelines/bench_share.py --corpus runs/synth4m.zarr --sampler lightlda \\
        --topics 1000 --share 0.5

``--set-up`` (lightlda) also times the pieces of one half-sweep's set-up after the sweeps:
the half's token lists, the words' grouping and the dense table, the word tables, and the
word tables' scan of the dense rows alone.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from numba import njit

from biglda.corpus import Corpus
from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z


@njit(nogil=True, cache=True)
def _scan_rows(word_ptr, by_word, z, n_wk):
    """The scan of lightlda's ``_word_tables`` alone: each row less its half's own, non-zeros."""
    n_rows, n_topics = n_wk.shape
    own = np.zeros(n_topics, dtype=np.int32)
    nonzero = 0
    for w in range(n_rows):
        if word_ptr[w + 1] == word_ptr[w]:
            continue
        for j in range(word_ptr[w], word_ptr[w + 1]):
            own[z[by_word[j]]] += 1
        for k in range(n_topics):
            nonzero += n_wk[w, k] != own[k]
        for j in range(word_ptr[w], word_ptr[w + 1]):
            own[z[by_word[j]]] = 0
    return nonzero


def set_up_times(tokens, doc_ptr, z, n_wk, n_k, n_words: int, beta: float = 0.01) -> str:
    """One lightlda half-sweep's set-up, piece by piece (seconds; the first half)."""
    from biglda.samplers import lightlda_cpu as light
    from biglda.samplers._kernels import _range_lists

    n_docs, n_topics = doc_ptr.shape[0] - 1, n_k.shape[0]
    t0 = time.perf_counter()
    in_half, _, idx = _range_lists(tokens, doc_ptr, z, 0, 0, n_docs,
                                   np.zeros(n_words, np.int32), 1, n_topics)
    t1 = time.perf_counter()
    coef, *_ = light._other_tables(n_k - in_half, beta, n_words * beta)
    word_ptr, by_word = light._by_word(idx, tokens, 0, n_words)
    t2 = time.perf_counter()
    light._word_tables(word_ptr, by_word, z, n_wk, coef)
    t3 = time.perf_counter()
    nonzero = _scan_rows(word_ptr, by_word, z, n_wk)
    t4 = time.perf_counter()
    return (f"set-up of a half: token lists {t1 - t0:.3f} s, grouping and dense table "
            f"{t2 - t1:.3f} s, word tables {t3 - t2:.3f} s, of which the scan of the dense "
            f"rows {t4 - t3:.3f} s ({100 * nonzero / n_wk.size:.1f}% of V x K non-zero)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--sampler", default="lightlda")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--sweeps", type=int, default=8)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--set-up", action="store_true")
    args = ap.parse_args(argv)
    corpus = Corpus.open(args.corpus)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
    n_words, k = int(corpus.n_words), args.topics
    z = init_z(len(tokens), k, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
    sampler = get_sampler(args.sampler)
    part_ptr = doc_ptr[:max(1, int(args.share * (len(doc_ptr) - 1))) + 1]
    n_part = int(part_ptr[-1])
    arms = {"all": (tokens, doc_ptr, z), f"share {args.share:g}": (
        tokens[:n_part], part_ptr, z[:n_part])}  # (z's first tokens: a view, swept in place)
    cpu: dict[str, list[float]] = {name: [] for name in arms}
    for it in range(args.sweeps):
        for name, (t, ptr, zz) in arms.items():
            c0 = time.thread_time()
            res = sampler.sweep(t, ptr, zz, n_wk, n_k, 0.1, 0.01, n_words, RandomKey(0, it))
            spent = res.cpu_seconds if res.cpu_seconds is not None else time.thread_time() - c0
            if it >= args.skip:
                cpu[name].append(1e6 * spent / len(t))
    print(f"{args.corpus}: {len(tokens):,} tokens, V = {n_words}, K = {k}, {args.sampler}")
    for name, xs in cpu.items():
        print(f"{name}: CPU µs a token {statistics.median(xs):.3f} "
              f"({' '.join(f'{x:.3f}' for x in xs)})")
    if args.set_up:  # (twice: the first loads the kernels from numba's cache)
        set_up_times(tokens, doc_ptr, z, n_wk, n_k, n_words)
        print(set_up_times(tokens, doc_ptr, z, n_wk, n_k, n_words))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
