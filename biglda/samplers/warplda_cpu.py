"""WarpLDA on the CPU. **Not an exact Gibbs sampler**: count updates are delayed.

Chen et al., "WarpLDA: a Cache Efficient O(1) Algorithm for Latent Dirichlet Allocation",
VLDB 2016.

Metropolis-Hastings with the two proposals of the paper (sec. 4), each drawn by picking a
random token and taking its topic, so no alias table and no O(K) work per token:

* word proposal q_w(k) ∝ c_wk + beta: a random token of the same word (this shard's
  tokens of it), or with probability K beta / (L_w + K beta) a uniform topic;
* doc proposal q_d(k) ∝ n_dk + alpha_k: a random token of the same document, or with
  probability A / (L_d + A) a draw from alpha / A (A = Σ alpha).

One sweep is three streaming passes (sec. 4.2-4.3: each proposal is *accepted* in the pass
that holds the counts its ratio needs, so every pass touches one row at a time):

1. word pass: draw ``mh_steps`` word proposals per token;
2. document pass: accept the word proposals against the document's counts (a K scratch
   histogram rebuilt from ``z``), then draw ``mh_steps`` doc proposals per token;
3. word pass: accept the doc proposals against the word's counts; ``n_wk`` rows are
   brought up to date here, one row at a time.

For q_d the document part of the target cancels and the ratio is
(n_wt + beta)(n_s + V beta) / ((n_ws + beta)(n_t + V beta)); for q_w the word part cancels
when c_w is the whole row, leaving (n_dt + alpha_t)(n_s + V beta) / ((n_ds + alpha_s)
(n_t + V beta)). ``n_k`` is frozen during each pass and updated at its end; within a pass the
word (doc) counts of the row being visited are kept current. That freezing is what makes the
chain approximate (as in the paper); the tests check it by topic recovery and by reaching the
exact sampler's log-likelihood, not by the exact-posterior chi-square.

Sharded, cached setting: the word proposal can only pick among *this shard's* tokens of the
word (c_wk), while the target uses the cached global row n_wk = c_wk + (other shards'
counts). The ratio then keeps the factor G(k) = (n_wk + beta) / (c_wk + beta), computed in
the first word pass from the cached row and carried to the document pass, so the chain still
targets the global conditional. On one shard (n_k sums to this shard's tokens) G = 1 and the
cached row is never read in the passes: the word's counts come from a K scratch histogram
of its tokens, and ``n_wk`` is written only where a token's topic changed.

Memory per token: the word-order permutation (int64, cached per ``tokens`` array), a
word-order copy of ``z`` and ``2 * mh_steps`` proposals (the dtype of ``z``); on several
shards also ``mh_steps + 1`` float32 factors G; these stay allocated between sweeps (one set
per thread, sized to its largest shard). Cost per token: O(mh_steps), independent of K
except through the cache footprint of the K scratch rows.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Executor

import numpy as np
from numba import njit

from biglda.errors import ConfigError
from biglda.samplers._claim import claim, new_counter
from biglda.samplers._kernels import _build_alias, _emit_word_delta, _sample_alias
from biglda.samplers._prefetch import prefetch, prefetch_write
from biglda.samplers.base import (
    Sampler,
    SweepResult,
    check_sweep_args,
    scan_part,
    token_errors,
)
from biglda.samplers.parts import run_parts
from biglda.samplers.rng import _next_float, _substream


@njit(nogil=True, cache=True)
def _word_order(tokens, n_rows):
    """Stable counting sort of token positions by word.

    Returns ``(word_ptr int64[V+1], perm int64[N], inv int64[N])``:
    ``perm[word_ptr[w]:word_ptr[w+1]]`` are the positions of word ``w``'s tokens, ascending,
    and ``inv`` is the inverse permutation (doc order -> word order).
    """
    n = tokens.shape[0]
    word_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n):
        word_ptr[tokens[i] + 1] += 1
    for w in range(n_rows):
        word_ptr[w + 1] += word_ptr[w]
    fill = word_ptr[:-1].copy()
    perm = np.empty(n, dtype=np.int64)
    inv = np.empty(n, dtype=np.int64)
    for i in range(n):
        w = tokens[i]
        perm[fill[w]] = i
        inv[i] = fill[w]
        fill[w] += 1
    return word_ptr, perm, inv


AHEAD = 16  # how many tokens ahead the kernel prefetches what it will gather

#: Tokens per block of a pass. A block (a run of whole words, or of whole documents) is the
#: unit of the random streams and of the work the threads of a sweep share: each block draws
#: from its own stream, so the chain does not depend on how many threads sweep it. At ~16 k
#: tokens a block costs a stream seed (ns) and gives 16 threads ~9 blocks each on 2.4 M tokens.
BLOCK_TOKENS = 1 << 14
#: Runs of blocks per thread in a sweep on several threads (claimed one at a time, inside
#: numba: biglda.samplers._claim). A pass ends when its last run does, so the other threads
#: wait ~half a run. 32 against 4: pipelines/README.md, "Prefetching the entries a word's
#: tokens read".
PARTS_PER_THREAD = 32

# stream tags of the three passes (the high bits; the block number is the low bits)
_PASS1 = np.uint64(1 << 40)
_PASS2 = np.uint64(2 << 40)
_PASS3 = np.uint64(3 << 40)
@njit(nogil=True, cache=True)
def _blocks(ptr, size):
    """Cut the rows of a CSR pointer into runs of whole rows of about ``size`` tokens.

    ``ptr`` int64 [R + 1]; returns int64 [B + 1] row boundaries (B >= 1).
    """
    n_rows = ptr.shape[0] - 1
    out = np.empty(n_rows + 2, dtype=np.int64)
    out[0] = 0
    nb = 1
    start = ptr[0]
    for r in range(n_rows - 1):
        if ptr[r + 1] - start >= size:
            out[nb] = r + 1
            nb += 1
            start = ptr[r + 1]
    out[nb] = n_rows
    return out[:nb + 1].copy()


@njit(nogil=True, cache=True)
def _prefetch_row(n_wk, word_ptr, w, m_steps, tw, c_lo, c_hi):
    """Start loading what the tokens of word ``w`` will read of row ``w`` of ``n_wk``.

    On a shared table the passes read ``n_wk[w, t]`` at (1 + mh_steps) random topics per
    token; a row of K int32 is K / 16 cache lines, which come from DRAM one miss at a time
    unless asked for ahead. A word whose tokens read most of the row's lines gets the whole
    row; a rarer one only the entries its tokens will read, where the pass knows them
    already: columns ``[c_lo, c_hi)`` and 0-1 of its rows of ``tw`` (pass 3: the doc
    proposals, the topics before and after pass 2), none for an empty range (pass 1, which
    requests each word's entries itself once it has gathered its topics).
    """
    if w >= n_wk.shape[0]:
        return
    lo = word_ptr[w]
    hi = word_ptr[w + 1]
    row = n_wk[w]
    n_lines = (n_wk.shape[1] + 15) // 16
    if (hi - lo) * (1 + m_steps) * 2 < n_lines:
        for j in range(lo, hi):
            for c in range(c_lo, c_hi):
                prefetch(row, tw[j, c])
            if c_hi > c_lo:  # and pass 3's topics before and after pass 2
                prefetch(row, tw[j, 0])
                prefetch(row, tw[j, 1])
        return
    for c in range(0, n_wk.shape[1], 16):
        prefetch(row, c)


@njit(nogil=True, cache=True)
def _pass_word_proposals(b_lo, b_hi, wblocks, word_ptr, perm, z, n_wk, tw, gw, beta,
                         n_topics, m_steps, local_only, key_state):
    """Pass 1 over word blocks ``[b_lo, b_hi)``: snapshot ``z`` in word order, draw word proposals.

    ``tw`` [N, 2 + 2 mh_steps] (z's dtype) and ``gw`` float32 [N or 1, 1 + mh_steps] as in
    :meth:`WarpLDASampler.sweep`; reads ``z`` and ``n_wk``, writes the blocks' rows of ``tw``
    and ``gw`` only.
    """
    n_tokens = z.shape[0]
    k_beta = n_topics * beta
    c_wp = 2
    hist = np.zeros(n_topics, dtype=np.int32)  # the word's counts among these tokens
    for b in range(b_lo, b_hi):
        state = _substream(key_state, _PASS1, b)
        for w in range(wblocks[b], wblocks[b + 1]):
            lo = word_ptr[w]
            hi = word_ptr[w + 1]
            if lo == hi:
                continue
            if not local_only:
                _prefetch_row(n_wk, word_ptr, w + 1, m_steps, tw, 0, 0)
            n_w = hi - lo
            row = n_wk[w]
            # (the only gather of z: passes 2 and 3 then stream, or touch one row of tw)
            for j in range(lo, hi):
                if j + AHEAD < n_tokens:
                    prefetch(z, perm[j + AHEAD])
                t = z[perm[j]]
                tw[j, 0] = t
                if not local_only:
                    hist[t] += 1
                    prefetch(row, t)
            mass = n_w + k_beta
            for j in range(lo, hi):
                for m in range(m_steps):
                    state, u = _next_float(state)
                    u *= mass
                    if u < n_w:
                        pos = np.int64(u)
                        if pos >= n_w:
                            pos = n_w - 1
                        t = np.int64(tw[lo + pos, 0])
                    else:
                        t = np.int64((u - n_w) / beta)
                        if t >= n_topics:
                            t = n_topics - 1
                    tw[j, c_wp + m] = t
                    if not local_only:  # the entries G reads below, all requested at once
                        prefetch(row, t)
            if not local_only:
                for j in range(lo, hi):
                    s0 = np.int64(tw[j, 0])
                    gw[j, 0] = (row[s0] - 1 + beta) / (hist[s0] - 1 + beta)
                    for m in range(m_steps):
                        t = np.int64(tw[j, c_wp + m])
                        sub = 1 if t == s0 else 0
                        gw[j, 1 + m] = (row[t] - sub + beta) / (hist[t] - sub + beta)
            if not local_only:
                for j in range(lo, hi):
                    hist[tw[j, 0]] = 0


@njit(nogil=True, cache=True)
def _pass_documents(b_lo, b_hi, dblocks, doc_ptr, z, inv, tw, gw, n_k, coef, alpha, a_sum,
                    symmetric, a_thr, a_alias, v_beta, m_steps, local_only, key_state, pass_k):
    """Pass 2 over document blocks ``[b_lo, b_hi)``: accept the word proposals, draw doc ones.

    ``n_k`` and ``coef`` (1 / (n_k + V beta)) are frozen for the pass; the blocks' moves are
    added to ``pass_k`` int64 [K]. Writes the blocks' tokens of ``z`` and their rows of ``tw``.
    Returns ``(n_accepted, n_proposed)``.
    """
    n_topics = n_k.shape[0]
    n_tokens = z.shape[0]
    c_wp = 2
    c_dp = 2 + m_steps
    hist = np.zeros(n_topics, dtype=np.int32)  # the document's counts
    n_accept = 0
    n_propose = 0
    for b in range(b_lo, b_hi):
        state = _substream(key_state, _PASS2, b)
        for d in range(dblocks[b], dblocks[b + 1]):
            lo = doc_ptr[d]
            hi = doc_ptr[d + 1]
            n_d = hi - lo
            for i in range(lo, hi):
                hist[z[i]] += 1
            for i in range(lo, hi):
                j = inv[i]
                if i + AHEAD < n_tokens:  # the rows of tokens a few ahead, in doc order
                    ja = inv[i + AHEAD]
                    prefetch(tw, ja)
                    if not local_only:
                        prefetch(gw, ja)
                s0 = np.int64(z[i])
                s = s0
                hist[s] -= 1
                # n_s without token i: n_k still holds it at s0 (frozen for this pass)
                c_s = 1.0 / (n_k[s] - 1 + v_beta)
                g_s = 1.0 if local_only else gw[j, 0]
                p_s = (hist[s] + alpha[s]) * c_s
                for m in range(m_steps):
                    t = np.int64(tw[j, c_wp + m])
                    n_propose += 1
                    if t == s:
                        n_accept += 1
                        continue
                    c_t = 1.0 / (n_k[t] - 1 + v_beta) if t == s0 else coef[t]
                    p_t = (hist[t] + alpha[t]) * c_t
                    g_t = 1.0 if local_only else gw[j, 1 + m]
                    state, u = _next_float(state)
                    if u * p_s * g_s < p_t * g_t:
                        s = t
                        p_s = p_t
                        g_s = g_t
                        n_accept += 1
                hist[s] += 1
                if s != s0:
                    z[i] = s
                    pass_k[s0] -= 1
                    pass_k[s] += 1
            # doc proposals from the document's counts after its update (q_d ∝ n_dk + alpha),
            # written in word order together with the current topic, so pass 3 streams
            mass = n_d + a_sum
            for i in range(lo, hi):
                j = inv[i]
                tw[j, 1] = z[i]
                for m in range(m_steps):
                    state, u = _next_float(state)
                    u *= mass
                    if u < n_d:
                        pos = np.int64(u)
                        if pos >= n_d:
                            pos = n_d - 1
                        t = np.int64(z[lo + pos])
                    elif symmetric:
                        t = np.int64((u - n_d) / a_sum * n_topics)
                        if t >= n_topics:
                            t = n_topics - 1
                    else:
                        state, t = _sample_alias(state, 0, n_topics, a_thr, a_alias)
                    tw[j, c_dp + m] = t
            for i in range(lo, hi):
                hist[z[i]] = 0
    return n_accept, n_propose


@njit(nogil=True, cache=True)
def _pass_word_accept(b_lo, b_hi, wblocks, word_ptr, perm, z, tw, n_wk, n_k, coef, beta,
                      v_beta, m_steps, local_only, key_state, pass_k, out_words, out_topics,
                      out_counts, out_n):
    """Pass 3 over word blocks ``[b_lo, b_hi)``: bring rows up to date, accept doc proposals.

    ``n_k`` / ``coef`` frozen, moves into ``pass_k`` as in pass 2. Writes the blocks' rows of
    ``n_wk``, their tokens of ``z`` and the COO delta of their words: block ``b``'s entries
    start at ``out_*[2 * word_ptr[wblocks[b]]]`` (a word's net change has at most 2 entries
    per token), ``out_n[b]`` says how many. Returns ``(n_accepted, n_proposed)``.
    """
    n_topics = n_k.shape[0]
    n_tokens = z.shape[0]
    c_dp = 2 + m_steps
    hist = np.zeros(n_topics, dtype=np.int32)  # the word's counts (one shard's own table)
    acc = np.zeros(n_topics, dtype=np.int32)  # a word's net change, for the delta
    touched = np.empty(n_topics, dtype=np.int64)
    seen = np.full(n_topics, -1, dtype=np.int64)
    n_accept = 0
    n_propose = 0
    for b in range(b_lo, b_hi):
        state = _substream(key_state, _PASS3, b)
        n_out = 2 * word_ptr[wblocks[b]]
        first = n_out
        for w in range(wblocks[b], wblocks[b + 1]):
            lo = word_ptr[w]
            hi = word_ptr[w + 1]
            if lo == hi:
                continue
            if not local_only:
                _prefetch_row(n_wk, word_ptr, w + 1, m_steps, tw, c_dp, c_dp + m_steps)
            # column 0 holds the topics of pass 1 (what n_wk counts), column 1 the current
            row = n_wk[w]
            for j in range(lo, hi):
                t = tw[j, 1]
                if local_only:
                    hist[t] += 1
                elif t != tw[j, 0]:
                    row[tw[j, 0]] -= 1
                    row[t] += 1
            for j in range(lo, hi):
                if j + AHEAD < n_tokens:  # where a move a few tokens ahead would write z
                    prefetch_write(z, perm[j + AHEAD])
                s1 = np.int64(tw[j, 1])  # what n_k counts now
                s = s1
                if local_only:
                    hist[s] -= 1
                    p_s = (hist[s] + beta) / (n_k[s] - 1 + v_beta)
                else:
                    row[s] -= 1
                    p_s = (row[s] + beta) / (n_k[s] - 1 + v_beta)
                for m in range(m_steps):
                    t = np.int64(tw[j, c_dp + m])
                    n_propose += 1
                    if t == s:
                        n_accept += 1
                        continue
                    c_t = 1.0 / (n_k[t] - 1 + v_beta) if t == s1 else coef[t]
                    row_t = hist[t] if local_only else row[t]
                    p_t = (row_t + beta) * c_t
                    state, u = _next_float(state)
                    if u * p_s < p_t:
                        s = t
                        p_s = p_t
                        n_accept += 1
                if local_only:
                    hist[s] += 1
                else:
                    row[s] += 1
                if s != s1:
                    tw[j, 1] = s
                    z[perm[j]] = s
                    pass_k[s1] -= 1
                    pass_k[s] += 1
            # the word's net change since pass 1: into the row (on one shard) and the delta
            n_touched = 0
            for j in range(lo, hi):
                t = np.int64(tw[j, 1])
                if local_only:
                    hist[t] = 0
                t0 = np.int64(tw[j, 0])
                if t != t0:
                    if local_only:
                        row[t0] -= 1
                        row[t] += 1
                    acc[t0] -= 1
                    acc[t] += 1
                    if seen[t0] != w:
                        seen[t0] = w
                        touched[n_touched] = t0
                        n_touched += 1
                    if seen[t] != w:
                        seen[t] = w
                        touched[n_touched] = t
                        n_touched += 1
            if n_touched * 8 > n_topics:  # many topics: read them in order off the dense row
                for k in range(n_topics):
                    if seen[k] == w and acc[k] != 0:
                        out_words[n_out] = w
                        out_topics[n_out] = k
                        out_counts[n_out] = acc[k]
                        n_out += 1
                    acc[k] = 0
            else:  # few: sort them (topics ascending within the word)
                n_out = _emit_word_delta(w, touched, n_touched, acc, out_words, out_topics,
                                         out_counts, n_out)
        out_n[b] = n_out - first
    return n_accept, n_propose


@njit(nogil=True, cache=True)
def _gather_part(b_lo, b_hi, wblocks, word_ptr, out_n, at, out_words, out_topics, out_counts,
                 words, topics, counts):
    """Copy blocks ``[b_lo, b_hi)``'s COO deltas to ``at[b]`` on in the sweep's delta.

    One part of the gather (the parts run on the sweep's threads: the output arrays are
    fresh pages, 12 bytes per entry to fault in, too many for one thread on 16; pipelines/
    README.md, "16 cores"); the blocks' deltas end up one after another, sorted by word as
    the blocks are.
    """
    for b in range(b_lo, b_hi):
        first = 2 * word_ptr[wblocks[b]]
        n = at[b]
        for e in range(first, first + out_n[b]):
            words[n] = out_words[e]
            topics[n] = out_topics[e]
            counts[n] = out_counts[e]
            n += 1


@njit(nogil=True, cache=True)
def _claim_word_proposals(counter, split, wblocks, word_ptr, perm, z, n_wk, tw, gw, beta,
                          n_topics, m_steps, local_only, key_state):
    """:func:`_pass_word_proposals` on the parts ``split`` this thread claims."""
    while True:
        i = claim(counter, split.shape[0] - 1)
        if i < 0:
            return
        _pass_word_proposals(split[i], split[i + 1], wblocks, word_ptr, perm, z, n_wk, tw, gw,
                             beta, n_topics, m_steps, local_only, key_state)


@njit(nogil=True, cache=True)
def _claim_documents(counter, split, dblocks, doc_ptr, z, inv, tw, gw, n_k, coef, alpha,
                     a_sum, symmetric, a_thr, a_alias, v_beta, m_steps, local_only, key_state,
                     pass_k, tallies):
    """:func:`_pass_documents` on the parts this thread claims.

    Part ``i``'s moves go to ``pass_k[i]``, its (accepted, proposed) to ``tallies[i]``.
    """
    while True:
        i = claim(counter, split.shape[0] - 1)
        if i < 0:
            return
        tallies[i, 0], tallies[i, 1] = _pass_documents(
            split[i], split[i + 1], dblocks, doc_ptr, z, inv, tw, gw, n_k, coef, alpha, a_sum,
            symmetric, a_thr, a_alias, v_beta, m_steps, local_only, key_state, pass_k[i])


@njit(nogil=True, cache=True)
def _claim_word_accept(counter, split, wblocks, word_ptr, perm, z, tw, n_wk, n_k, coef, beta,
                       v_beta, m_steps, local_only, key_state, pass_k, out_words, out_topics,
                       out_counts, out_n, tallies):
    """:func:`_pass_word_accept` on the parts this thread claims (as :func:`_claim_documents`)."""
    while True:
        i = claim(counter, split.shape[0] - 1)
        if i < 0:
            return
        tallies[i, 0], tallies[i, 1] = _pass_word_accept(
            split[i], split[i + 1], wblocks, word_ptr, perm, z, tw, n_wk, n_k, coef, beta,
            v_beta, m_steps, local_only, key_state, pass_k[i], out_words, out_topics,
            out_counts, out_n)


@njit(nogil=True, cache=True)
def _claim_gather(counter, split, wblocks, word_ptr, out_n, at, out_words, out_topics,
                  out_counts, words, topics, counts):
    """:func:`_gather_part` on the parts this thread claims."""
    while True:
        i = claim(counter, split.shape[0] - 1)
        if i < 0:
            return
        _gather_part(split[i], split[i + 1], wblocks, word_ptr, out_n, at, out_words,
                     out_topics, out_counts, words, topics, counts)


class _Scratch:
    """The per-token scratch arrays of a sweep, for up to ``capacity`` tokens.

    See :meth:`WarpLDASampler._take_scratch`.
    """

    def __init__(self, n: int, m: int, dtype, local_only: bool):
        self.capacity, self.m, self.dtype = n, m, np.dtype(dtype)
        if local_only:
            self.tw = np.empty((n, 2 + 2 * m), dtype=dtype)
            self.gw = np.empty((1, 1 + m), dtype=np.float32)
        else:  # a token's topics and factors side by side: the document pass reads both at
            # random, one cache line instead of two (pipelines/README.md, "Seventh session")
            self.tw, self.gw = _interleaved(n, 2 + 2 * m, self.dtype, 1 + m)
        # a word's net change has at most 2 entries per token moved
        self.out = [np.empty(2 * n, dtype=np.int32) for _ in range(3)]

    def fits(self, n: int, m: int, dtype, local_only: bool) -> bool:
        """Whether a sweep of ``n`` tokens can use these arrays."""
        return (n <= self.capacity and m == self.m and np.dtype(dtype) == self.dtype
                and (local_only or self.gw.shape[0] == self.capacity))

    def views(self, n: int, local_only: bool) -> tuple:
        """``(tw, gw, out_words, out_topics, out_counts)`` for ``n`` tokens."""
        gw = self.gw[:1] if local_only else self.gw[:n]
        return (self.tw[:n], gw, *(a[:2 * n] for a in self.out))


_NO_TOKENS = np.empty(0, dtype=np.int32)  # no cached order to compare the tokens with


def _interleaved(n: int, n_topics_cols: int, dtype: np.dtype, n_factors: int) -> tuple:
    """``(tw [n, n_topics_cols] of dtype, gw [n, n_factors] float32)`` in one buffer, row by row.

    Each token's record holds its topics, then (4-byte aligned) its float32 factors.
    """
    head = n_topics_cols * dtype.itemsize
    head += -head % 4
    rec = head + 4 * n_factors
    buf = np.empty(n * rec + 4, dtype=np.uint8)  # (+4: the views' last byte in range)
    base = -buf.ctypes.data % 4  # the factors 4-byte aligned
    tw = np.ndarray((n, n_topics_cols), dtype=dtype, buffer=buf, offset=base,
                    strides=(rec, dtype.itemsize))
    gw = np.ndarray((n, n_factors), dtype=np.float32, buffer=buf, offset=base + head,
                    strides=(rec, 4))
    return tw, gw


def _order_key(tokens: np.ndarray, doc_ptr: np.ndarray, n_rows: int) -> tuple:
    """Return the cache key of a tokens array's :class:`_Order`: its address and shapes."""
    return (tokens.ctypes.data, tokens.shape[0], doc_ptr.shape[0], n_rows)


class _Order:
    """What a sweep of one tokens array needs besides the counts (cached per array).

    The word order ``(word_ptr, perm, inv)`` and the word and document blocks of the passes.
    """

    def __init__(self, tokens: np.ndarray, doc_ptr: np.ndarray, n_rows: int) -> None:
        self.tokens = tokens.copy()
        self.doc_ptr = doc_ptr.copy()
        self.word_ptr, self.perm, self.inv = _word_order(tokens, np.int64(n_rows))
        self.wblocks = _blocks(self.word_ptr, BLOCK_TOKENS)
        self.dblocks = _blocks(doc_ptr, BLOCK_TOKENS)

    @staticmethod
    def split(blocks: np.ndarray, ptr: np.ndarray, n_parts: int) -> np.ndarray:
        """``n_parts`` runs of consecutive blocks with about equal tokens: int64 [n_parts + 1]."""
        at = ptr[blocks]  # token offset of each block boundary
        cuts = np.searchsorted(at, np.linspace(0, at[-1], n_parts + 1)[1:-1])
        return np.concatenate([[0], cuts, [len(blocks) - 1]]).astype(np.int64)


class WarpLDASampler(Sampler):
    """WarpLDA Metropolis-Hastings on the CPU: O(1) per token, **not exact** (delayed updates).

    Each sweep runs a word pass, a document pass and a word pass over the shard (see the
    module docstring); the topic totals ``n_k`` are frozen within each pass, so the chain
    only approximates collapsed Gibbs. Use ``cgs`` as the exact reference.

    A sweep can use several threads (``sweep(..., pool=, n_threads=)``): each pass is cut
    into blocks of whole words or whole documents (:data:`BLOCK_TOKENS`), no two blocks share
    a row of ``n_wk``, a token or a document, and ``n_k`` is frozen within a pass anyway, so
    the threads need no locks and only meet at the two pass boundaries. Every block draws
    from its own stream, so **the chain is the same on any number of threads**, bit for bit.

    Parameters
    ----------
    mh_steps : int
        Proposals of each kind per token and sweep; default 2.

    Examples
    --------
    >>> WarpLDASampler(mh_steps=4).mh_steps
    4
    """

    algorithm = "warplda"
    backend = "cpu"
    exact = False  # the exact-posterior tests skip it; see tests/samplers/test_warplda.py
    threads_per_sweep = True  # one sweep takes several threads (the trainer gives it its pool)

    def __init__(self, mh_steps: int = 2):
        if int(mh_steps) < 1:
            raise ConfigError(f"mh_steps must be >= 1, got {mh_steps}")
        self.mh_steps = int(mh_steps)
        self._orders: dict = {}
        self._lock = threading.Lock()
        self._spare: list[_Scratch] = []  # scratch of finished sweeps, for the next ones

    def _cached_order(self, tokens, doc_ptr, n_rows) -> _Order | None:
        """Return the :class:`_Order` made for an array at ``tokens``' address, if any.

        Only its ``doc_ptr`` is compared here; that its tokens are still these is part of
        the sweep's scan (:func:`~biglda.samplers.base.scan_part`), on the sweep's threads.
        """
        with self._lock:
            hit = self._orders.get(_order_key(tokens, doc_ptr, n_rows))
        return hit if hit is not None and np.array_equal(hit.doc_ptr, doc_ptr) else None

    def _new_order(self, tokens, doc_ptr, n_rows) -> _Order:
        """Make and cache the :class:`_Order` of ``tokens`` (a shard's tokens do not change)."""
        order = _Order(tokens, doc_ptr, n_rows)
        with self._lock:
            if len(self._orders) >= 8:
                self._orders.pop(next(iter(self._orders)))
            self._orders[_order_key(tokens, doc_ptr, n_rows)] = order
        return order

    def sweep(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key, *,
              pool: Executor | None = None, n_threads: int = 1) -> SweepResult:
        """Resample every token of one shard once (see :meth:`Sampler.sweep`).

        ``n_threads`` threads share the sweep: this one and ``n_threads - 1`` of ``pool``
        (which must have that many free). The result does not depend on ``n_threads``.
        The last word pass knows each word's net change, so the delta comes from the kernel
        instead of a comparison with a copy of ``z``.
        """
        alpha = check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key,
                                 scan=False)
        t0 = time.perf_counter()
        n, n_topics, n_rows = tokens.shape[0], n_k.shape[0], n_wk.shape[0]
        n_threads = max(1, int(n_threads))
        # the token and topic range checks, and whether the cached word order still holds,
        # in one read on the threads, before anything changes
        hit = self._cached_order(tokens, doc_ptr, n_rows)
        n_scan = 4 * n_threads if n_threads > 1 else 1
        cuts = np.linspace(0, n, n_scan + 1).astype(np.int64)
        scans, cpu0 = run_parts(pool, n_threads, n_scan, lambda i: scan_part(
            tokens, z, cuts[i], cuts[i + 1], n_rows, n_topics,
            hit.tokens if hit is not None else _NO_TOKENS))
        bad_t = min((int(b) for b, _, _ in scans if b >= 0), default=-1)
        bad_z = min((int(b) for _, b, _ in scans if b >= 0), default=-1)
        if bad_t >= 0 or bad_z >= 0:
            raise token_errors(z, n_rows, n_topics, bad_t, bad_z)
        order = (hit if hit is not None and all(same for _, _, same in scans)
                 else self._new_order(tokens, doc_ptr, n_rows))
        word_ptr, perm, inv = order.word_ptr, order.perm, order.inv
        wblocks, dblocks = order.wblocks, order.dblocks
        # runs of blocks the threads take one at a time: a few per thread
        n_parts = max(1, min(PARTS_PER_THREAD * n_threads if n_threads > 1 else 1,
                             len(wblocks) - 1, len(dblocks) - 1))
        wsplit = order.split(wblocks, word_ptr, n_parts)
        dsplit = order.split(dblocks, doc_ptr, n_parts)
        m = self.mh_steps
        beta, v_beta = float(beta), float(n_words) * float(beta)
        # one shard's own table (n_k sums to its tokens): the word counts are its tokens', G = 1
        local_only = int(n_k.sum()) == n
        scratch = self._take_scratch(n, m, z.dtype, local_only)
        tw, gw, out_words, out_topics, out_counts = scratch.views(n, local_only)
        a_sum = float(alpha.sum())
        symmetric = bool(np.all(alpha == alpha[0]))
        a_thr = np.empty(n_topics, dtype=np.uint32)
        a_alias = np.empty(n_topics, dtype=np.int32)
        if not symmetric:
            _build_alias(alpha, 0, n_topics, a_thr, a_alias, np.empty(n_topics, np.float64),
                         np.empty(n_topics, np.int64), np.empty(n_topics, np.int64))
        state = key.state()
        pass_k = np.zeros((n_parts, n_topics), dtype=np.int64)
        delta_k = np.zeros(n_topics, dtype=np.int64)
        out_n = np.zeros(len(wblocks) - 1, dtype=np.int64)

        def end_pass() -> np.ndarray:
            # the delayed update of the topic totals, then 1 / (n_k + V beta) for the next pass
            moved = pass_k.sum(axis=0)
            n_k[:] += moved
            delta_k[:] += moved
            pass_k[:] = 0
            return 1.0 / (n_k + v_beta)

        tallies = np.zeros((2, n_parts, 2), dtype=np.int64)  # passes 2, 3: per part

        def on_threads(kernel, *args) -> float:
            # every thread enters the kernel once and claims parts there, without the GIL
            # (biglda.samplers._claim); returns the threads' CPU seconds
            counter = new_counter()
            return run_parts(pool, n_threads, n_threads, lambda _: kernel(counter, *args))[1]

        try:
            cpu1 = on_threads(_claim_word_proposals, wsplit, wblocks, word_ptr, perm, z, n_wk,
                              tw, gw, beta, n_topics, m, local_only, state)
            coef = 1.0 / (n_k + v_beta)
            cpu2 = on_threads(_claim_documents, dsplit, dblocks, doc_ptr, z, inv, tw, gw, n_k,
                              coef, alpha, a_sum, symmetric, a_thr, a_alias, v_beta, m,
                              local_only, state, pass_k, tallies[0])
            coef = end_pass()
            cpu3 = on_threads(_claim_word_accept, wsplit, wblocks, word_ptr, perm, z, tw, n_wk,
                              n_k, coef, beta, v_beta, m, local_only, state, pass_k, out_words,
                              out_topics, out_counts, out_n, tallies[1])
            end_pass()
            at = np.zeros(len(out_n) + 1, dtype=np.int64)
            np.cumsum(out_n, out=at[1:])
            words, topics, counts = (np.empty(int(at[-1]), dtype=np.int32) for _ in range(3))
            cpu4 = on_threads(_claim_gather, wsplit, wblocks, word_ptr, out_n, at, out_words,
                              out_topics, out_counts, words, topics, counts)
        finally:
            with self._lock:
                self._spare.append(scratch)
        n_accept, n_propose = (int(x) for x in tallies.sum(axis=(0, 1)))
        return SweepResult(words, topics, counts, delta_k, n,
                           n_accept / n_propose if n_propose else None,
                           time.perf_counter() - t0,
                           cpu_seconds=cpu0 + cpu1 + cpu2 + cpu3 + cpu4)

    def _take_scratch(self, n: int, m: int, dtype, local_only: bool) -> _Scratch:
        """Return a spare :class:`_Scratch` that fits ``n`` tokens, or a new one.

        Reused across sweeps because fresh arrays are fresh pages: at 50 M tokens a sweep
        allocated ~2 GB of scratch, and faulting it in cost ~3 s of kernel (system) time
        a sweep, a quarter of the sweep. One spare per concurrent sweep with this sampler
        (the trainer gives each sampling thread its own sampler, or one sampler the
        process's threads); a smaller one is dropped for a larger.
        """
        with self._lock:
            for i, spare in enumerate(self._spare):
                if spare.fits(n, m, dtype, local_only):
                    return self._spare.pop(i)
            if self._spare:  # too small or of another dtype: let it go, do not hoard
                self._spare.pop()
        return _Scratch(n, m, dtype, local_only)

    def __repr__(self) -> str:
        """Show the number of MH steps."""
        return f"WarpLDASampler(mh_steps={self.mh_steps})"
