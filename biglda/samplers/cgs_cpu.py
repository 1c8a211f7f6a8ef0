"""Collapsed Gibbs sampling on the CPU (Griffiths & Steyvers 2004).

Three exact kernels over the same full conditional

    p(z_i = k | rest) ∝ (n_dk + alpha_k) (n_wk + beta) / (n_k + V beta)   (counts without i)

* ``_cgs_plain_sweep`` evaluates it for every k: O(K) per token, the reference.
* ``_cgs_sparse_sweep`` is SparseLDA (Yao, Mimno & McCallum 2009, sec. 3; Mallet's
  ``WorkerRunnable``): the mass splits into a smoothing bucket
  s = Σ_k alpha_k beta / (n_k + V beta), a document bucket r = Σ_k n_dk beta / (n_k + V beta)
  over the doc's non-zero topics, and a word bucket q = Σ_k (alpha_k + n_dk) n_wk / (n_k + V beta)
  over the word's non-zero topics. Per-word non-zero lists are kept sorted by count
  (descending, packed ``count << bits | topic`` as in Mallet) so the q scan usually stops
  after one or two entries; they stay exact as counts change. Only the counts are kept in
  order (ties in any order): a topic whose count drops to 0 had count 1, so the list's last
  entry (count 1 too) takes its place in O(1). After a random start most entries have count
  1 and nearly every token moves, so shifting the tail on each removal cost O(nnz) per move.
* ``_cgs_dense_sweep`` evaluates every p_k too, but laid out for SIMD, as tomotopy does:
  p_k = qc_k (n_wk + beta) in float32 from a per-topic qc_k = (alpha_k + n_dk) / (n_k + V beta)
  kept up to date as counts change, in one loop without a carried dependency; topic k
  belongs to lane k mod 16, and a second loop turns p into per-lane running sums (its
  dependence distance is 16, so it vectorizes too). The draw u (float64) picks a lane by
  the lane totals, then the first topic of the lane whose running sum passes u. This is an
  exact draw from the same conditional: only the order in which the topics' intervals tile
  [0, total) differs from the other kernels (so the same random numbers give other topics),
  and p_k carries float32 rounding (a relative 6e-8, as tomotopy's) where the others carry
  float64's. No fastmath: every sum has a fixed order, so the interpreter (JIT off)
  reproduces the compiled chain bit for bit.

:class:`CGSSampler`'s default ("sparse") picks a kernel per sweep: the dense one while the
word rows are dense or most tokens still move, SparseLDA once rows are sparse and tokens
settle. Its measures are the share of non-zero topics in the rows of the shard's tokens,
token-weighted (``_row_density``, reading at most ``_DENSITY_ENTRIES`` entries), and the
expected share of tokens the sweep moves (``_move_share``: one minus the mean probability
of a token's own topic under its full conditional, over a deterministic sample of
documents); SparseLDA runs where their product is below ``SPARSE_BELOW`` (and, on several
threads, the density below ``DENSE_ABOVE_THREADS``). Both measures are functions of the
state, so the choice, and the chain, do not depend on timing or on what ran before (a
resumed run picks what the run it continues picked). Both kernels cost ~O(K) per token
right after a random start, when ~87% of a row's topics are non-zero at K = 100; the dense
one does that work in vector instructions, SparseLDA pays for gathers and list upkeep, and
wins once a row holds a few topics and few tokens move.

On one thread all rebuild the doc-topic counts of one document at a time from ``z`` in a K
scratch row, so memory is O(N + V_local K); a dense sweep on several threads keeps D x K
counts where they take at most ``DOC_COUNT_ENTRIES_PER_TOKEN`` entries a token, a SparseLDA
sweep each document's list of non-zero topics and their counts (8 bytes a token).
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor

import numpy as np
from numba import njit

from biglda.errors import ConfigError
from biglda.samplers._kernels import _range_lists, _room
from biglda.samplers.base import Sampler, SweepResult
from biglda.samplers.partition import Layouts, partitioned_sweep
from biglda.samplers.rng import _next_float

logger = logging.getLogger(__name__)

VARIANTS = ("sparse", "dense", "plain")
# The "sparse" variant's switch. SparseLDA's cost a token grows with the word's non-zero
# topics and, above all, with the tokens that move (each move re-sorts two entries of the
# word's list and scans further for its draw); the dense kernel's is the same in every state.
# So a sweep runs SparseLDA where the row density (token-weighted share of non-zero topics)
# times the expected share of tokens that move is below SPARSE_BELOW. Measured from the same
# 25 states of Debian and synth4m at K = 100, 300 and 1000 (pipelines/bench_cgs_switch.py;
# pipelines/README.md, "Ninth session"), this picks the slower kernel in 4, by 1-29% (1.7%
# slower than the faster kernel on average); density alone (below 0.2, the rule before)
# picked the slower one in 10, by up to 1.95x (synth4m, whose tokens keep moving at
# densities Debian reaches near its steady state), 10.2% slower on average.
SPARSE_BELOW = 0.05
# A sweep on several threads also needs the density below this for SparseLDA: there each part
# sets up each of its documents again, for SparseLDA a list of its topics, for the dense kernel
# one vector pass, so the dense one stays ahead longer. On 2 threads it was faster at every
# state measured at K = 100 (Debian down to a density of 0.145, its steady state: 5-8%;
# synth4m down to 0.109: 20%); at K = 1000 (Debian) it led at 0.194 and trailed at 0.086
# (pipelines/README.md, "Seventh session"). With SparseLDA's parts loading kept topic lists
# instead of counting each document (tenth session) the dense kernel still took no more CPU
# at Debian's K = 100 steady state (density 0.144) on 2, 4 and 8 threads. Since each document
# range's first part lists its documents' topics (twelfth session) SparseLDA on 2 threads
# follows the one-thread rule: from the same states (Debian and synth4m, K = 100 and 1000),
# the faster kernel changed where density x moves crossed 0.04-0.06, as on one thread, and
# the cap cost up to 12% (Debian K = 1000, density 0.116: sparse 0.221 s, dense 0.248 s).
# From 4 threads (parts of fewer tokens) the cap holds: at Debian's K = 100 steady state
# SparseLDA took 0.91x the dense kernel's CPU on 2 threads, 0.97x on 4 and 1.05x on 8
# (pipelines/README.md, "Twelfth session").
DENSE_ABOVE_THREADS = 0.1
# ... on this many threads and more.
DENSE_CAP_FROM_THREADS = 3
# At most this many n_wk entries are read to measure the density (2-3 ms a sweep on Debian).
_DENSITY_ENTRIES = 1 << 22
# About this many terms of the conditional are evaluated to estimate the moves: ~1 ms, within
# 0.03 of the estimate from 4x as many (3-4 ms; Debian and synth4m, K = 100 and 1000).
_MOVE_TERMS = 1 << 20
# A sweep on several threads cuts the vocabulary into ranges of equal n_w ** this (equal
# tokens; n_w ** 0.8, lightlda's weight, was slower for cgs: pipelines/bench_partition.py).
WORD_COST_POWER = 1.0
# A sweep on T threads cuts the documents and words into 2T ranges (biglda.samplers.
# partition): the threads take 2T parts a step, so one held back takes fewer, and a part's
# rows and word lists are a smaller set to keep in cache. Against T ranges on the VM's 2
# threads (synth4m, K = 100; pipelines/README.md, "Seventh session"): SparseLDA 440 -> 335 ms
# a sweep (K = 1,000: 738 -> 621), at the CPU a token of one thread; dense 207 -> 201 ms;
# in training 1 x 2 +7% tokens/s. 4T was slower than 2T (sparse 342 against 313 ms).
RANGES_PER_THREAD = 2
# A part's n_k may be this many steps behind (biglda.samplers.partition): 2, so a step starts
# while the one before ends. Against 1 (a barrier after every step) on the device's 16 cores
# (synth20m, K = 100): 0.381 -> 0.310 s a sweep; on the VM's 2 threads 1.22-1.29 -> 1.08 s
# (pipelines/README.md, "Eighth session").
N_K_LAG = 2
# The sub-streams of a sweep on several threads (biglda.samplers.partition), by kernel.
_TAG_DENSE, _TAG_SPARSE = 0x43 << 56, 0x53 << 56


@njit(nogil=True, cache=True)
def _cgs_plain_sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state):
    """One O(K) Gibbs sweep; updates ``z``, ``n_wk`` (int32 [V_local, K]), ``n_k`` in place."""
    n_topics = n_k.shape[0]
    v_beta = n_words * beta
    n_dk = np.zeros(n_topics, dtype=np.int64)
    cdf = np.empty(n_topics, dtype=np.float64)
    for d in range(doc_ptr.shape[0] - 1):
        lo = doc_ptr[d]
        hi = doc_ptr[d + 1]
        for i in range(lo, hi):
            n_dk[z[i]] += 1
        for i in range(lo, hi):
            w = tokens[i]
            s = np.int64(z[i])
            n_dk[s] -= 1
            n_wk[w, s] -= 1
            n_k[s] -= 1
            total = 0.0
            for k in range(n_topics):
                total += (n_dk[k] + alpha[k]) * (n_wk[w, k] + beta) / (n_k[k] + v_beta)
                cdf[k] = total
            state, u = _next_float(state)
            u *= total
            t = n_topics - 1
            for k in range(n_topics):
                if u < cdf[k]:
                    t = k
                    break
            z[i] = t
            n_dk[t] += 1
            n_wk[w, t] += 1
            n_k[t] += 1
        for i in range(lo, hi):
            n_dk[z[i]] = 0
    return state


# The dense kernel's lanes: topic k belongs to lane k % _LANES, and the draw first picks a
# lane, then a topic in it, so no serial prefix sum over K is needed. 16 float32 lanes are
# one AVX-512 register (two AVX2). Every float operation has a fixed order the interpreter
# reproduces (no fastmath: LLVM vectorizes these loops without reassociating). The
# running-sum loop indexes with unsigned integers: with signed ones, Numba's negative-index
# wraparound made LLVM compile such a loop to gathers (1.2x slower, measured).
_LANES = 16
_LANES_U = np.uint64(_LANES)


@njit(nogil=True, cache=True)
def _cgs_dense_sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state):
    """One O(K) sweep built to vectorize; same arguments and effects as the others.

    :func:`_dense_part` of every document and word.
    """
    return _dense_part(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, 0,
                       doc_ptr.shape[0] - 1, 0, n_wk.shape[0],
                       np.zeros((0, 1), dtype=np.int32), np.zeros(0, dtype=np.int64),
                       False, False)[0]  # (every token, each document counted)


@njit(nogil=True, cache=True)
def _dense_part(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, d_lo, d_hi, wlo,
                whi, doc_counts, idx, record, build):
    """Sweep the tokens of the documents ``[d_lo, d_hi)`` with words in ``[wlo, whi)``.

    ``doc_counts``: the documents' topic counts (int32 [d_hi - d_lo, K]) kept up to date
    here, and ``idx`` those tokens, ascending; with ``build`` (a document range's first
    part) the counts are made here from ``z``, every document's (also where none of its
    tokens is in the range). Or an empty ``doc_counts`` to visit every token of the
    documents and count each document anew (``build`` unused).
    Returns ``(state, moved)``: the tokens it moved, with ``record`` (else empty).

    Per token: p_k = qc_k (n_wk + beta) in float32 with qc_k = (alpha_k + n_dk) / (n_k +
    V beta) kept per topic (one SIMD loop), then per-lane running sums in place (a second
    one: its dependence distance is _LANES). u (float64) picks a lane by the lane totals,
    then the first topic of the lane whose running sum passes it.
    """
    n_topics = n_k.shape[0]
    v_beta = n_words * beta
    beta32 = np.float32(beta)
    n_blocks = (n_topics + _LANES - 1) // _LANES
    width = n_blocks * _LANES
    width_u = np.uint64(width)
    last = width - _LANES  # the last block: the lane totals once the sums have run
    n_lanes = min(_LANES, n_topics)  # lanes holding a topic
    coef = np.empty(n_topics, dtype=np.float64)  # 1 / (n_k + V beta)
    qc = np.empty(n_topics, dtype=np.float32)  # (alpha_k + n_dk) / (n_k + V beta)
    for k in range(n_topics):
        coef[k] = 1.0 / (n_k[k] + v_beta)
        qc[k] = alpha[k] * coef[k]
    p = np.zeros(width, dtype=np.float32)
    tree = np.empty(_LANES // 2, dtype=np.float64)
    kept = doc_counts.shape[0] > 0
    n_dk = np.zeros(n_topics, dtype=np.int32)
    moved = np.empty(0, dtype=np.int64)  # (room made a document at a time)
    n_moved = 0
    j_doc = 0  # with kept counts: the document's first token in idx
    for d in range(d_lo, d_hi):
        lo = doc_ptr[d]
        hi = doc_ptr[d + 1]
        if kept:
            n_dk = doc_counts[d - d_lo]  # the document's row
            if build:
                n_dk[:] = 0
                for i in range(lo, hi):
                    n_dk[z[i]] += 1
            if j_doc == idx.shape[0] or idx[j_doc] >= hi:
                continue  # none of its tokens here
            # all K coefficients anew (the values counting gives)
            for k in range(n_topics):
                qc[k] = (alpha[k] + n_dk[k]) * coef[k]
            run_lo = j_doc
            while j_doc < idx.shape[0] and idx[j_doc] < hi:
                j_doc += 1
            run_hi = j_doc
        else:
            for i in range(lo, hi):
                n_dk[z[i]] += 1
            for i in range(lo, hi):
                t = z[i]
                qc[t] = (alpha[t] + n_dk[t]) * coef[t]
            run_lo = lo
            run_hi = hi
        if record:
            moved = _room(moved, n_moved, run_hi - run_lo)
        for jj in range(run_lo, run_hi):
            i = idx[jj] if kept else jj
            w = tokens[i]
            if w < wlo or w >= whi:
                continue
            s = z[i]
            n_dk[s] -= 1
            n_k[s] -= 1
            n_wk[w, s] -= 1
            coef[s] = 1.0 / (n_k[s] + v_beta)
            qc[s] = (alpha[s] + n_dk[s]) * coef[s]
            row = n_wk[w]
            for k in range(n_topics):
                p[k] = qc[k] * (np.float32(row[k]) + beta32)
            for k in range(n_topics, width):  # the padding (the sums below overwrite it)
                p[k] = 0.0
            # p[k] becomes its lane's running sum: p_k + p[k - _LANES]
            for k in range(_LANES_U, width_u):
                p[k] += p[k - _LANES_U]
            # the total as a tree over the lane totals (a short dependency chain)
            h = _LANES // 2
            for j in range(h):
                tree[j] = p[last + j] + p[last + h + j]
            h //= 2
            while h > 0:
                for j in range(h):
                    tree[j] = tree[j] + tree[j + h]
                h //= 2
            state, u = _next_float(state)
            u *= tree[0]
            # the lane holding u, then the topic; rounding past the end stays on the last
            # lane / the lane's last topic (every real p_k > 0)
            t = n_lanes - 1
            for j in range(n_lanes):
                c = p[last + j]
                if u < c:
                    t = j
                    break
                u -= c
            while t + _LANES < n_topics and u >= p[t]:
                t += _LANES
            z[i] = t
            if record and t != s:
                moved[n_moved] = i
                n_moved += 1
            n_dk[t] += 1
            n_k[t] += 1
            n_wk[w, t] += 1
            coef[t] = 1.0 / (n_k[t] + v_beta)
            qc[t] = (alpha[t] + n_dk[t]) * coef[t]
        if not kept:
            for i in range(lo, hi):  # back to alpha-only coefficients for the next document
                t = z[i]
                n_dk[t] = 0
                qc[t] = alpha[t] * coef[t]
    return state, moved[:n_moved]


# ``doc_counts`` and ``idx`` of a dense part that visits every token of its documents.
_NO_DOC_COUNTS = np.zeros((0, 1), dtype=np.int32)
_NO_TOKENS = np.zeros(0, dtype=np.int64)

# A partitioned dense sweep keeps every document's topic counts (int32 [D, K]) for its T
# steps where they take at most this many entries a token, and lists each part's tokens: a
# part then visits only its own tokens, and sets a document up with one vectorized pass over
# K instead of three passes over all its tokens, in each of the T steps (pipelines/README.md,
# "Sixth session"). Above it (large K against short documents) the passes stay.
DOC_COUNT_ENTRIES_PER_TOKEN = 4


@njit(nogil=True, cache=True)
def _row_density(tokens, n_wk, max_entries):
    """Token-weighted mean of nnz(row) / K over the rows of ``tokens`` (float64 in [0, 1]).

    Reads at most ~``max_entries`` entries of ``n_wk`` (int32 [V_local, K]): every
    ``stride``-th occurring row, weighted by its occurrences, so the cost stays small at
    large V K. Deterministic.
    """
    occ = np.zeros(n_wk.shape[0], dtype=np.int64)
    for i in range(tokens.shape[0]):
        occ[tokens[i]] += 1
    return _row_density_of(occ, n_wk, max_entries)


@njit(nogil=True, cache=True)
def _row_density_of(occ, n_wk, max_entries):
    """:func:`_row_density` of rows with ``occ`` occurrences each (counted already)."""
    n_rows, n_topics = n_wk.shape
    stride = 1 + (n_rows * n_topics) // max(1, max_entries)
    seen = 0
    nnz = 0
    for w in range(0, n_rows, stride):
        if occ[w] == 0:
            continue
        c = 0
        for k in range(n_topics):
            c += n_wk[w, k] != 0
        seen += occ[w]
        nnz += occ[w] * c
    if seen == 0:
        return 0.0
    return nnz / (seen * n_topics)


@njit(nogil=True, cache=True)
def _move_share(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, max_terms):
    """Return the expected share of tokens a sweep from this state moves (in [0, 1]).

    One minus the mean, over the tokens of every ``stride``-th document, of the probability
    of a token's own topic under its full conditional (its counts without it); ``stride``
    keeps the terms evaluated (K a token) to ~``max_terms``. Deterministic. A sweep's
    realized share follows it closely (Debian, K = 100, sweep 10: 0.508 moved, estimated
    0.508 from 4 M terms, 0.498 from 1 M).
    """
    n_docs = doc_ptr.shape[0] - 1
    n_topics = n_k.shape[0]
    if n_docs <= 0 or tokens.shape[0] == 0:
        return 0.0
    stride = 1 + (tokens.shape[0] * n_topics) // max(1, max_terms)
    v_beta = n_words * beta
    coef = np.empty(n_topics, dtype=np.float64)
    for k in range(n_topics):
        coef[k] = 1.0 / (n_k[k] + v_beta)
    n_dk = np.zeros(n_topics, dtype=np.int64)
    stay = 0.0
    seen = 0
    for d in range(0, n_docs, stride):
        d_lo = doc_ptr[d]
        d_hi = doc_ptr[d + 1]
        for i in range(d_lo, d_hi):
            n_dk[z[i]] += 1
        for i in range(d_lo, d_hi):
            w = tokens[i]
            s = np.int64(z[i])
            total = 0.0
            for k in range(n_topics):
                total += (n_dk[k] + alpha[k]) * (n_wk[w, k] + beta) * coef[k]
            # without the token itself: its own topic's term with one count less each
            own = ((n_dk[s] - 1 + alpha[s]) * (n_wk[w, s] - 1 + beta)
                   / (n_k[s] - 1 + v_beta))
            total += own - (n_dk[s] + alpha[s]) * (n_wk[w, s] + beta) * coef[s]
            stay += own / total
            seen += 1
        for i in range(d_lo, d_hi):
            n_dk[z[i]] = 0
    if seen == 0:
        return 0.0
    return 1.0 - stay / seen


@njit(nogil=True, cache=True)
def _word_lists(tokens, n_wk, bits):
    """Per-word non-zero topic lists, packed ``count << bits | topic``, sorted descending.

    Returns ``(start int64[V+1], length int64[V], packed int64[...])``. The capacity of a
    word's list is min(K, nnz(row) + local occurrences): a sweep can create at most one
    new non-zero per occurrence, so the lists never overflow.
    """
    occ = np.zeros(n_wk.shape[0], dtype=np.int64)
    for i in range(tokens.shape[0]):
        occ[tokens[i]] += 1
    return _word_lists_of(occ, n_wk, bits, tokens.shape[0])


@njit(nogil=True, cache=True)
def _word_lists_of(occ, n_wk, bits, n_tokens):
    """:func:`_word_lists` of the rows ``n_wk`` with ``occ`` local occurrences each.

    ``n_tokens`` only sizes the first buffer (it grows as needed).
    """
    n_rows, n_topics = n_wk.shape
    start = np.zeros(n_rows + 1, dtype=np.int64)
    length = np.zeros(n_rows, dtype=np.int64)
    # one pass over the dense rows (they dominate at large K), into a growing buffer
    n_used = 0
    for w in range(n_rows):
        if occ[w] > 0:
            n_used += 1
    packed = np.empty(max(16, min(n_used * n_topics, 2 * n_tokens)), dtype=np.int64)
    p = 0
    for w in range(n_rows):
        start[w] = p
        if occ[w] == 0:
            continue
        if p + n_topics > packed.shape[0]:
            bigger = np.empty(2 * packed.shape[0] + n_topics, dtype=np.int64)
            bigger[:p] = packed[:p]
            packed = bigger
        for k in range(n_topics):
            c = n_wk[w, k]
            if c != 0:
                packed[p] = (np.int64(c) << bits) | k
                p += 1
        n = p - start[w]
        length[w] = n
        _sort_descending(packed, start[w], n)
        p = start[w] + min(n_topics, n + occ[w])  # room for this sweep's new non-zeros
        if p > packed.shape[0]:
            bigger = np.empty(2 * packed.shape[0] + n_topics, dtype=np.int64)
            bigger[:start[w] + n] = packed[:start[w] + n]
            packed = bigger
    start[n_rows] = p
    return start, length, packed[:p].copy()


@njit(nogil=True, cache=True)
def _sort_descending(a, lo, n):
    """Sort ``a[lo:lo + n]`` descending, in place.

    Short runs (most rows of rare words hold a few topics) by insertion: ``np.sort`` returns
    a new array, and that allocation a row was most of the lists' time on Debian (17,148 rows
    of 2.7 topics on average: 4.8 ms a sweep; pipelines/README.md, "Eleventh session").
    """
    if n > 32:
        row = np.sort(a[lo:lo + n])
        for j in range(n):
            a[lo + j] = row[n - 1 - j]
        return
    for j in range(lo + 1, lo + n):
        v = a[j]
        i = j
        while i > lo and a[i - 1] < v:
            a[i] = a[i - 1]
            i -= 1
        a[i] = v


@njit(nogil=True, cache=True)
def _cgs_sparse_sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state):
    """One SparseLDA sweep (exact); same arguments and effects as ``_cgs_plain_sweep``.

    :func:`_sparse_part` of every document and word.
    """
    bits = _topic_bits(n_k.shape[0])
    w_start, w_len, packed = _word_lists(tokens, n_wk, bits)
    return _sparse_part(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, w_start,
                        w_len, packed, bits, 0, doc_ptr.shape[0] - 1, 0, n_wk.shape[0],
                        False, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32),
                        np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), False)[0]


@njit(nogil=True, cache=True)
def _topic_bits(n_topics):
    """Return the bits a topic takes in a word list's packed entry."""
    bits = 1
    while (1 << bits) < n_topics:
        bits += 1
    return bits


@njit(nogil=True, cache=True)
def _sparse_part(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, w_start, w_len,
                 packed, bits, d_lo, d_hi, wlo, whi, record, d_top, d_cnt, d_len, idx, build):
    """SparseLDA on the tokens of the documents ``[d_lo, d_hi)`` with words in ``[wlo, whi)``.

    With the word lists of those words (row ``r``: word ``wlo + r``). Returns ``(state,
    moved)``: the tokens it moved, with ``record`` (else empty).

    ``d_top``, ``d_cnt``, ``d_len``: each document's non-zero topics and their counts
    (document ``d``'s ``d_len[d]`` of them at ``doc_ptr[d]``), kept up to date here, and
    ``idx`` the documents' tokens with words in the range, ascending: a part then loads a
    document's counts from its list and visits only its own tokens. With ``build`` (a
    document range's first part) the lists are made here instead: each document is counted
    from ``z`` (its topics in the order of their first tokens) and its list written, also
    where none of its tokens is in the range. Or an empty ``d_len``: every token of the
    documents is visited and each document counted from ``z`` (``d_top``, ``d_cnt``,
    ``idx``, ``build`` unused). Either draw is exact; the order of a document's topics in
    the list (which the document bucket's draw walks) differs, so the chains do.
    """
    n_topics = n_k.shape[0]
    v_beta = n_words * beta
    mask = (np.int64(1) << bits) - 1
    moved = np.empty(0, dtype=np.int64)  # (room made a document at a time)
    n_moved = 0

    coef = np.empty(n_topics, dtype=np.float64)  # 1 / (n_k + V beta)
    qc = np.empty(n_topics, dtype=np.float64)  # (alpha_k + n_dk) / (n_k + V beta)
    for k in range(n_topics):
        coef[k] = 1.0 / (n_k[k] + v_beta)
        qc[k] = alpha[k] * coef[k]
    n_dk = np.zeros(n_topics, dtype=np.int64)
    d_topics = np.empty(n_topics, dtype=np.int64)  # the doc's non-zero topics
    d_pos = np.full(n_topics, -1, dtype=np.int64)  # position in d_topics, -1 if absent
    max_len = 1
    for w in range(w_len.shape[0]):
        cap = w_start[w + 1] - w_start[w]
        if cap > max_len:
            max_len = cap
    q_score = np.empty(max_len, dtype=np.float64)

    kept = d_len.shape[0] > 0
    j_doc = 0  # with kept lists: the document's first token in idx
    s_mass = 0.0
    for d in range(d_lo, d_hi):
        if d % 256 == 0:  # refresh the incrementally kept smoothing mass against drift
            s_mass = 0.0
            for k in range(n_topics):
                s_mass += alpha[k] * beta * coef[k]
        lo = doc_ptr[d]
        hi = doc_ptr[d + 1]
        if kept and not build:
            if j_doc == idx.shape[0] or idx[j_doc] >= hi:
                continue  # none of its tokens here
            n_d = np.int64(d_len[d])
            for j in range(n_d):
                t = np.int64(d_top[lo + j])
                n_dk[t] = d_cnt[lo + j]
                d_pos[t] = j
                d_topics[j] = t
        else:
            n_d = 0
            for i in range(lo, hi):
                t = np.int64(z[i])
                if n_dk[t] == 0:
                    d_pos[t] = n_d
                    d_topics[n_d] = t
                    n_d += 1
                n_dk[t] += 1
        if kept:
            run_lo = j_doc
            while j_doc < idx.shape[0] and idx[j_doc] < hi:
                j_doc += 1
            run_hi = j_doc
        else:
            run_lo = lo
            run_hi = hi
        r_mass = 0.0
        for j in range(n_d):
            t = d_topics[j]
            r_mass += beta * n_dk[t] * coef[t]
            qc[t] = (alpha[t] + n_dk[t]) * coef[t]
        if record:
            moved = _room(moved, n_moved, run_hi - run_lo)

        for jj in range(run_lo, run_hi):
            i = idx[jj] if kept else jj
            w = tokens[i]
            if w < wlo or w >= whi:
                continue
            wr = w - wlo  # its word list
            s = np.int64(z[i])
            # --- remove token i from every count and bucket ---
            s_mass -= alpha[s] * beta * coef[s]
            r_mass -= beta * n_dk[s] * coef[s]
            n_dk[s] -= 1
            n_k[s] -= 1
            n_wk[w, s] -= 1
            coef[s] = 1.0 / (n_k[s] + v_beta)
            s_mass += alpha[s] * beta * coef[s]
            r_mass += beta * n_dk[s] * coef[s]
            qc[s] = (alpha[s] + n_dk[s]) * coef[s]
            if n_dk[s] == 0:
                p = d_pos[s]
                n_d -= 1
                last = d_topics[n_d]
                d_topics[p] = last
                d_pos[last] = p
                d_pos[s] = -1
            # --- word bucket over the word's non-zero topics, with s counted once less ---
            base = w_start[wr]
            n_w = w_len[wr]
            # Four accumulators: one serial chain of float adds would bound this loop by
            # the add latency (it is the hot loop at small K and in early sweeps).
            pos_s = 0
            q0 = 0.0
            q1 = 0.0
            q2 = 0.0
            q3 = 0.0
            j = 0
            while j + 4 <= n_w:
                e0 = packed[base + j]
                e1 = packed[base + j + 1]
                e2 = packed[base + j + 2]
                e3 = packed[base + j + 3]
                v0 = (e0 >> bits) * qc[e0 & mask]
                v1 = (e1 >> bits) * qc[e1 & mask]
                v2 = (e2 >> bits) * qc[e2 & mask]
                v3 = (e3 >> bits) * qc[e3 & mask]
                q_score[j] = v0
                q_score[j + 1] = v1
                q_score[j + 2] = v2
                q_score[j + 3] = v3
                q0 += v0
                q1 += v1
                q2 += v2
                q3 += v3
                pos_s = j if (e0 & mask) == s else pos_s
                pos_s = j + 1 if (e1 & mask) == s else pos_s
                pos_s = j + 2 if (e2 & mask) == s else pos_s
                pos_s = j + 3 if (e3 & mask) == s else pos_s
                j += 4
            while j < n_w:
                e0 = packed[base + j]
                v0 = (e0 >> bits) * qc[e0 & mask]
                q_score[j] = v0
                q0 += v0
                pos_s = j if (e0 & mask) == s else pos_s
                j += 1
            q_mass = (q0 + q1) + (q2 + q3)
            # token i itself: s counts once less (exactly 0 when it was its only count)
            c_s = (packed[base + pos_s] >> bits) - 1
            q_mass += c_s * qc[s] - q_score[pos_s]
            q_score[pos_s] = c_s * qc[s]

            state, u = _next_float(state)
            u *= s_mass + r_mass + q_mass
            t = -1
            pos_t = -1  # t's place in the word list when it came from the word bucket
            if u < q_mass:
                for j in range(n_w):
                    u -= q_score[j]
                    if u <= 0.0 and q_score[j] > 0.0:
                        pos_t = j
                        break
                if pos_t < 0:  # rounding: the last entry with mass
                    for j in range(n_w - 1, -1, -1):
                        if q_score[j] > 0.0:
                            pos_t = j
                            break
                t = packed[base + pos_t] & mask
            elif u < q_mass + r_mass:
                u -= q_mass
                for j in range(n_d):
                    tt = d_topics[j]
                    u -= beta * n_dk[tt] * coef[tt]
                    if u <= 0.0:
                        t = tt
                        break
                if t < 0:
                    t = d_topics[n_d - 1]
            else:
                u -= q_mass + r_mass
                for k in range(n_topics):
                    u -= alpha[k] * beta * coef[k]
                    if u <= 0.0:
                        t = k
                        break
                if t < 0:
                    t = n_topics - 1

            # --- the word's sorted list: only a move s -> t changes it ---
            if t != s:
                # decrement s; it moves towards the end (and out when it reaches 0)
                j = pos_s
                val = packed[base + j] - (np.int64(1) << bits)
                if val >> bits == 0:
                    # s had count 1, so every entry after it has count 1 too: the last one
                    # takes its place (O(1); the order among equal counts is free)
                    n_w -= 1
                    packed[base + j] = packed[base + n_w]
                    if pos_t == n_w:
                        pos_t = pos_s
                else:
                    c = val >> bits
                    while j + 1 < n_w and (packed[base + j + 1] >> bits) > c:
                        packed[base + j] = packed[base + j + 1]
                        j += 1
                    packed[base + j] = val
                    if pos_s < pos_t <= j:  # the entries s passed moved up by one
                        pos_t -= 1
                # increment t (append if new); it moves towards the front
                if pos_t >= 0:
                    j = pos_t
                else:
                    j = 0
                    while j < n_w and (packed[base + j] & mask) != t:
                        j += 1
                if j == n_w:
                    val = (np.int64(1) << bits) | t
                    n_w += 1
                else:
                    val = packed[base + j] + (np.int64(1) << bits)
                c = val >> bits
                while j > 0 and (packed[base + j - 1] >> bits) < c:
                    packed[base + j] = packed[base + j - 1]
                    j -= 1
                packed[base + j] = val
                w_len[wr] = n_w

            # --- add token i back with topic t ---
            s_mass -= alpha[t] * beta * coef[t]
            r_mass -= beta * n_dk[t] * coef[t]
            if n_dk[t] == 0:
                d_pos[t] = n_d
                d_topics[n_d] = t
                n_d += 1
            n_dk[t] += 1
            n_k[t] += 1
            n_wk[w, t] += 1
            coef[t] = 1.0 / (n_k[t] + v_beta)
            s_mass += alpha[t] * beta * coef[t]
            r_mass += beta * n_dk[t] * coef[t]
            qc[t] = (alpha[t] + n_dk[t]) * coef[t]
            z[i] = t
            if record and t != s:
                moved[n_moved] = i
                n_moved += 1

        if kept:  # the document's list, for its next part
            d_len[d] = n_d
            for j in range(n_d):
                t = d_topics[j]
                d_top[lo + j] = t
                d_cnt[lo + j] = n_dk[t]
        # leave the scratch rows as they were: zero counts, alpha-only coefficients
        for j in range(n_d):
            t = d_topics[j]
            n_dk[t] = 0
            d_pos[t] = -1
            qc[t] = alpha[t] * coef[t]
    return state, moved[:n_moved]


class CGSSampler(Sampler):
    """Exact collapsed Gibbs on the CPU.

    Parameters
    ----------
    variant : {"sparse", "dense", "plain"}
        "sparse" (default): SparseLDA, with the dense kernel for the sweeps whose word rows
        are dense or whose tokens mostly still move (:meth:`kernel_for`); "dense" the dense
        kernel every sweep; "plain" the O(K) reference.
    dense_above : float or None
        For "sparse": a sweep runs the dense kernel when the token-weighted fraction of
        non-zero topics in the word rows is at least this (0 always, above 1 never), on any
        number of threads. None (default): the measured rule, SparseLDA where the density
        times the expected share of moving tokens is below :data:`SPARSE_BELOW` (and, on
        :data:`DENSE_CAP_FROM_THREADS` threads or more, the density below
        :data:`DENSE_ABOVE_THREADS`).

    Examples
    --------
    >>> CGSSampler(variant="plain").variant
    'plain'
    >>> CGSSampler().kernel_for(0.9, 0.5), CGSSampler().kernel_for(0.15, 0.3)
    ('dense', 'sparse')
    >>> CGSSampler().kernel_for(0.15, 0.6), CGSSampler().kernel_for(0.15, 0.3, n_threads=4)
    ('dense', 'dense')
    >>> CGSSampler().kernel_for(0.15, 0.3, n_threads=2)
    'sparse'
    >>> CGSSampler(dense_above=0.2).kernel_for(0.15, 0.6)
    'sparse'
    """

    algorithm = "cgs"
    backend = "cpu"
    word_cost_power = WORD_COST_POWER  # (its threads' ranges, and the processes' windows)

    @property
    def threads_per_sweep(self) -> bool:
        """Say whether a sweep takes several threads: not with the "plain" kernel.

        ``sweep(..., pool=, n_threads=)``: :mod:`biglda.samplers.partition`.
        """
        return self.variant != "plain"

    def __init__(self, variant: str = "sparse", dense_above: float | None = None):
        if variant not in VARIANTS:
            raise ConfigError(f"unknown cgs variant {variant!r}; expected one of "
                              f"{', '.join(map(repr, VARIANTS))}")
        if dense_above is not None and not dense_above >= 0.0:  # also refuses NaN
            raise ConfigError(f"dense_above must be >= 0, got {dense_above}")
        self.variant = variant
        # None: the measured switch (SPARSE_BELOW, DENSE_ABOVE_THREADS)
        self.dense_above = None if dense_above is None else float(dense_above)
        self._layouts = Layouts()  # each tokens array's cut for several threads

    def warm_variants(self) -> list[Sampler]:
        """Return one sampler on the dense and one on the SparseLDA kernel, where it chooses.

        The choice follows the chain (dense while most tokens still move), so the second
        kernel was first called, and compiled, mid-run (:mod:`biglda.samplers.warm`).
        """
        fixed = self.dense_above is not None and not 0.0 < self.dense_above <= 1.0
        if self.variant != "sparse" or fixed:
            return []  # (one kernel every sweep: the density is in [0, 1])
        return [CGSSampler(dense_above=0.0), CGSSampler(dense_above=2.0)]

    def kernel_for(self, density: float, moves: float = 1.0, n_threads: int = 1) -> str:
        """Return the kernel ("dense" or "sparse") the "sparse" variant runs in this state.

        ``density``: the rows' (:func:`_row_density`); ``moves``: the expected share of
        tokens the sweep moves (:func:`_move_share`); ``n_threads``: the sweep's threads.
        """
        if self.dense_above is not None:
            return "dense" if density >= self.dense_above else "sparse"
        if n_threads >= DENSE_CAP_FROM_THREADS and density >= DENSE_ABOVE_THREADS:
            return "dense"
        return "dense" if density * moves >= SPARSE_BELOW else "sparse"

    @property
    def word_windows(self) -> bool:
        """Say whether a sweep can take a ``window`` of words: as ``threads_per_sweep``."""
        return self.threads_per_sweep

    def sweep(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key, *,
              pool: Executor | None = None, n_threads: int = 1,
              window: tuple[int, int] | None = None, follows: bool = False) -> SweepResult:
        """Resample every token of one shard once (see :meth:`Sampler.sweep`).

        ``n_threads`` > 1 threads share the sweep ("sparse" and "dense"): this one and
        ``n_threads - 1`` of ``pool``, by tomotopy's PARTITION
        (:mod:`biglda.samplers.partition`: exact but for ``n_k``). ``window`` ``(lo, hi)``:
        only the tokens of rows ``[lo, hi)``, partitioned also on one thread (then ``pool``
        is still needed). ``follows``: a later step of the clock whose step before was this
        sampler's last sweep (:func:`~biglda.samplers.partition.partitioned_sweep`).
        """
        n_threads = max(1, int(n_threads))
        if n_threads == 1 and window is None:
            self._layouts.drop_carried()  # (this sweep writes z and keeps no document state)
            return super().sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key)
        if not self.threads_per_sweep:
            raise ValueError(f"the {self.variant!r} cgs kernel sweeps on one thread, "
                             f"all its words")
        return partitioned_sweep(
            lambda part, a, state: self._run_partitioned(part, tokens, doc_ptr, z, n_wk, n_k,
                                                         a, float(beta), float(n_words),
                                                         state),
            tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key, pool, n_threads,
            self.word_cost_power, RANGES_PER_THREAD, self._layouts, N_K_LAG, window, follows)

    def _kernel(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, occ=None,
                n_threads: int = 1) -> str:
        """Return the kernel of this sweep: "plain", "dense" or "sparse".

        ``occ``: each row's tokens, where the caller counted them already. The moves are
        estimated only where the density alone does not decide.
        """
        if self.variant != "sparse":
            return self.variant
        density = (_row_density(tokens, n_wk, _DENSITY_ENTRIES) if occ is None
                   else _row_density_of(occ, n_wk, _DENSITY_ENTRIES))
        moves = 1.0  # (logged as such where the density decides alone)
        choice = self.kernel_for(density, moves, n_threads)
        if choice != self.kernel_for(density, 0.0, n_threads):  # the moves decide
            moves = _move_share(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
                                _MOVE_TERMS)
            choice = self.kernel_for(density, moves, n_threads)
        logger.debug("cgs sweep: row density %.3f, moves %.3f, %s kernel", density, moves,
                     choice)
        return choice

    def _run(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state):
        kernel = {"plain": _cgs_plain_sweep, "dense": _cgs_dense_sweep,
                  "sparse": _cgs_sparse_sweep}[self._kernel(tokens, doc_ptr, z, n_wk, n_k,
                                                            alpha, beta, n_words)]
        kernel(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state)
        return None

    def _run_partitioned(self, part, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
                         state):
        """Sweep on the threads of ``part`` (a :class:`Partition`) with this sweep's kernel."""
        dcut, wcut = part.dcut, part.wcut
        kernel = self._step_kernel(part, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words)
        part.keep["cgs-kernel"] = kernel
        if kernel == "dense":
            n_topics = n_k.shape[0]
            if (doc_ptr.shape[0] - 1) * n_topics <= DOC_COUNT_ENTRIES_PER_TOKEN * len(tokens):
                # each document range's tokens by word range (kept with the layout) and its
                # documents' counts (into the buffers of the last sweep; each range's part
                # of step 0 counts them)
                lists = self._doc_range_lists(part, tokens, doc_ptr, z, n_topics)
                shape = [(dcut[i + 1] - dcut[i], n_topics) for i in range(part.n_ranges)]
                # the counts as the clock's step before left them (a later step: then not
                # counted again), else buffers to count into
                counts, current = part.doc_state("cgs-doc-counts", shape)
                build = not current
            else:
                lists = [(np.zeros(part.n_ranges + 1, np.int64), _NO_TOKENS)] * part.n_ranges
                counts, build = [_NO_DOC_COUNTS] * part.n_ranges, True

            def args(i, r, own_k, sub):
                ptr, idx = lists[i]
                return (tokens, doc_ptr, z, n_wk, own_k, alpha, beta, n_words, sub, dcut[i],
                        dcut[i + 1], wcut[r], wcut[r + 1], counts[i], idx[ptr[r]:ptr[r + 1]],
                        part.record, build and r == i)  # (range i's step 0: r = i)

            part.run_steps(_dense_part, args, n_k, state, _TAG_DENSE)
            if counts[0] is not _NO_DOC_COUNTS:
                part.keep["cgs-doc-counts"] = counts  # (kept up to date by every part)
            return None
        # the word lists of each word range, on the threads; a step's part of range r moves
        # them (one part of a step per range)
        bits = _topic_bits(n_k.shape[0])
        occ = part.n_w
        lists = part.on_threads(_word_lists_of, [
            (occ[wcut[r]:wcut[r + 1]], n_wk[wcut[r]:wcut[r + 1]], bits,
             int(occ[wcut[r]:wcut[r + 1]].sum())) for r in range(part.n_ranges)])
        # each document's topic list (kept through the steps, made by each document range's
        # part of step 0) and each document range's tokens by word range (kept with the
        # layout)
        docs = self._doc_range_lists(part, tokens, doc_ptr, z, n_k.shape[0])
        # the lists as the clock's step before left them (a later step: then not made again;
        # the chain differs from one that makes them, in the order of a list's topics), else
        # buffers to make them in
        (d_top, d_cnt, d_len), current = part.doc_state(
            "cgs-doc-lists", [(len(tokens),), (len(tokens),), (doc_ptr.shape[0] - 1,)])
        build = not current

        def args(i, r, own_k, sub):
            ptr, idx = docs[i]
            return (tokens, doc_ptr, z, n_wk, own_k, alpha, beta, n_words, sub, *lists[r], bits,
                    dcut[i], dcut[i + 1], wcut[r], wcut[r + 1], part.record, d_top, d_cnt,
                    d_len, idx[ptr[r]:ptr[r + 1]], build and r == i)  # (step 0: r = i)

        part.run_steps(_sparse_part, args, n_k, state, _TAG_SPARSE)
        part.keep["cgs-doc-lists"] = [d_top, d_cnt, d_len]
        return None

    def _step_kernel(self, part, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words) -> str:
        """Return the kernel of a partitioned sweep: a clock's steps all run its first's.

        A later step of a clock (``part.current``: the step before was this sampler's, on
        these arrays) runs the kernel the step before ran; any other sweep chooses from the
        whole shard's rows and tokens (a window's first step too), as a sweep on one thread
        does. Chosen per window, the windows of frequent words (dense rows) ran the dense
        kernel and the others SparseLDA, and a step that changed kernel rebuilt its
        documents' state from ``z`` (the other kernel's counts or lists were no use;
        pipelines/README.md, "Twenty-fourth session"). The choice is still a function of
        the state at the clock's start, so BSP stays deterministic. The kernel travels with
        the documents' state it left (``part.keep``): the dense kernel keeps none where
        D x K is too large, so the state's name would not say which ran.
        """
        if part.windowed and part.current:
            kept = part.carried.get("cgs-kernel")
            if kept is not None:
                return str(kept)
        return self._kernel(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, part.n_w,
                            part.threads)

    @staticmethod
    def _doc_range_lists(part, tokens, doc_ptr, z, n_topics):
        """Each document range's tokens by word range, ``[(ptr, idx)]``, kept with the layout."""
        return part.layout.list_of("cgs-docs", lambda: [
            (ptr, idx) for _, ptr, idx in part.on_threads(_range_lists, [
                (tokens, doc_ptr, z, -1, part.dcut[i], part.dcut[i + 1], part.range_of,
                 part.n_ranges, n_topics) for i in range(part.n_ranges)])])

    def __repr__(self) -> str:
        """Show the variant and the switch."""
        return f"CGSSampler(variant={self.variant!r}, dense_above={self.dense_above!r})"
