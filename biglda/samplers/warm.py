"""Compile, before a worker's first clock, the kernels its sampler may first call mid-run.

numba compiles a kernel for each set of argument types on its first call in a process, or
loads it from its on-disk cache (``cache=True``; after a fresh install there is none). A
sampler whose choice of kernel depends on the chain's state first calls its later kernel
mid-run: cgs sweeps with its dense kernel while most tokens still move and switches to
SparseLDA once they settle (:meth:`biglda.samplers.cgs_cpu.CGSSampler.kernel_for`). On a
fresh install that clock stalled for seconds while the worker processes compiled the
SparseLDA path, and the driver took the stall for a straggler (pipelines/README.md,
"Twenty-ninth session", has the profile). The other kernels of a run are first called in
clock 0, which the throughput balance and the clock statistics already treat as the clock
that compiles (the table shard calls its own two when it is made: ``biglda.ps.table``).

:func:`warm_kernels` sweeps a small synthetic shard with each of the sampler's
:meth:`~biglda.samplers.base.Sampler.warm_variants` (fresh samplers, each fixed on one of
the kernels it may choose; none for a sampler that never switches), with the dtypes of the
process's own arrays and in the mode its clocks sweep (one thread, several threads on one
sweep, or windows of words with the steps after the first ``follows``), two clocks of it
(the second finds what the first kept), so the compiled signatures are the ones the clocks
call. The chain never sees the shard: the variants are fresh samplers, and the arrays are
the warm-up's own.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor

import numpy as np

from biglda.samplers.base import Sampler
from biglda.samplers.counts import count_from_z
from biglda.samplers.rng import RandomKey

log = logging.getLogger(__name__)

# The synthetic shard: documents x tokens a document over a vocabulary of WARM_WORDS words
# (each word's rows dense at the start: every one is drawn often), enough for every range of
# a partitioned sweep on up to 64 threads to hold documents and words; fewer words where
# K is so large that the rows would pass WARM_ENTRIES (16 MB of int32: 64 words at K = 65,536).
WARM_DOCS, WARM_DOC_LENGTH, WARM_WORDS = 256, 16, 256
WARM_ENTRIES = 1 << 22


def warm_kernels(sampler: Sampler, tokens: np.ndarray, doc_ptr: np.ndarray, z: np.ndarray,
                 n_wk: np.ndarray, n_k: np.ndarray, *, pool: Executor | None = None,
                 n_threads: int = 1, windowed: bool = False) -> float:
    """Sweep a synthetic shard with each of ``sampler.warm_variants()``; return the seconds.

    ``tokens`` ... ``n_k``: arrays of the dtypes the clocks will pass (only their dtypes and
    ``n_wk``'s number of topics are read). ``pool`` and ``n_threads``: the threads of one
    sweep, as the clocks give them; ``windowed``: the clocks sweep windows of words (the
    processes take turns), so the warm-up sweeps two, the second ``follows`` the first.
    Where the variants' sweeps compile nothing new (the kernels are loaded already) it is a
    few milliseconds.
    """
    variants = sampler.warm_variants()
    if not variants:
        return 0.0
    t0 = time.perf_counter()
    n_topics = int(n_wk.shape[1])
    n_words = max(16, min(WARM_WORDS, WARM_ENTRIES // max(1, n_topics)))
    rng = np.random.default_rng(0)
    n_tokens = WARM_DOCS * WARM_DOC_LENGTH
    w_tokens = rng.integers(0, n_words, n_tokens).astype(tokens.dtype)
    w_doc_ptr = (np.arange(WARM_DOCS + 1) * WARM_DOC_LENGTH).astype(doc_ptr.dtype)
    alpha = np.full(n_topics, 0.1)
    for variant in variants:
        w_z = rng.integers(0, n_topics, n_tokens).astype(z.dtype)
        counted = count_from_z(w_tokens, w_doc_ptr, w_z, n_words, n_topics)
        w_n_wk, w_n_k = (c.astype(like.dtype, copy=False) for c, like in
                         zip(counted, (n_wk, n_k), strict=True))
        args = (w_tokens, w_doc_ptr, w_z, w_n_wk, w_n_k, alpha, 0.01, float(n_words))
        for clock in range(2):  # (a second clock: what a sweep does with what it kept)
            if windowed:
                half = n_words // 2
                for i, window in enumerate([(0, half), (half, n_words)]):
                    variant.sweep(*args, RandomKey(0, clock, 0, i), pool=pool,
                                  n_threads=n_threads, window=window, follows=i > 0)
            elif n_threads > 1:
                variant.sweep(*args, RandomKey(0, clock), pool=pool, n_threads=n_threads)
            else:
                variant.sweep(*args, RandomKey(0, clock))
    seconds = time.perf_counter() - t0
    log.info("kernels of %s ready in %.2f s (%d variants, %d threads%s)", variants[0],
             seconds, len(variants), n_threads, ", windows" if windowed else "")
    return seconds
