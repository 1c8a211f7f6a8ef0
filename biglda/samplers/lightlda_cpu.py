"""LightLDA on the CPU: Metropolis-Hastings with the cycle proposal (Yuan et al. 2015).

Per token, ``mh_steps`` rounds of two MH steps that each leave p(z_i | z_¬i) invariant:

* word proposal q_w(k) ∝ (n_wk + beta) / (n_k + V beta), from alias tables built twice
  per sweep (per clock): the documents are split into even and odd halves, and the tables
  for one half come from the counts *without* that half (the other half and the other
  shards' cached counts), which stay fixed while it is swept. The proposal therefore
  depends only on z_¬i; tables that included the swept tokens would make it depend on
  where the sweep started, and that chain is biased (the exact-posterior test sees it).
  The acceptance ratio uses the probabilities the tables actually produce (``prob`` of
  ``_build_alias``, integer thresholds included), not the current counts:
  a = min(1, p(t) q_w(s) / (p(s) q_w(t))).
  Storage is sparse for every K (sec. 4 of the paper): per word an alias table over its
  non-zero entries n_wk / (n_k + V beta) (topics ascending, for binary-search lookup)
  plus one shared dense table over beta / (n_k + V beta), mixed by mass; memory ∝ nnz.
* doc proposal q_d(k) ∝ n_dk + A pa(k) (counts with token i, A = Σ alpha): the topic of
  a uniformly chosen token of the document, or with probability A / (N_d + A) a draw from
  alpha / A (uniform when alpha is symmetric, an alias table otherwise). Its acceptance
  ratio is p(t) (n_ds¬i + A pa(s)) / (p(s) (n_dt¬i + A pa(t))), which for symmetric alpha
  reduces to the usual word-part ratio.

p(k) = (n_dk¬i + alpha_k)(n_wk¬i + beta)/(n_k¬i + V beta) with current counts.

Visiting order (memory, not maths): each half is cut into blocks of documents whose dense
doc-topic counts ``n_dk[block_docs, K]`` fill ``BLOCK_ENTRIES`` (2 MiB, in cache), and a
block's tokens are visited grouped by word: a word's table and its ``n_wk`` row are then
read by all its tokens of the block in a row instead of once per token at random, which is
what dominates at large V x K (the rows are 400 MB at V = 100k, K = 1000). Any visiting order
is exact, since each token's MH kernel leaves p(z_i | z_¬i) invariant with the current counts.
The documents' topic counts are int16 (int32 where a document has more than 32,767 tokens:
:func:`_no_doc_counts`): a token reads them at random, and half the bytes keep more of them in
cache; the chain is the same for either (pipelines/README.md, "Thirty-first session").
Measured on one shard of the synthetic NYTimes corpus (the commit that introduced it has the
figures): 1.3-1.4x the doc-major sweep at K = 1000, 2.5x at K = 100, equal at K = 10,000; on
the Debian corpus (V = 18,811) within noise of it.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Executor

import numpy as np
from numba import njit

from biglda.errors import ConfigError
from biglda.samplers._kernels import _build_alias, _range_lists, _room, _sample_alias
from biglda.samplers._prefetch import prefetch
from biglda.samplers.base import Sampler, SweepResult
from biglda.samplers.partition import Layouts, partitioned_sweep
from biglda.samplers.rng import _next_float, _next_int

# Entries of the dense doc-topic block n_dk[docs, K]: 2 MiB (int16; 4 MiB where a document has
# more than 32,767 tokens and the counts are int32: _no_doc_counts), so a block's counts stay
# in the last-level cache while its tokens are visited word by word.
BLOCK_ENTRIES = 1 << 20

# What a word's n_w tokens cost in a sweep on several threads, for cutting the vocabulary into
# ranges of equal cost: n_w ** 0.8. A frequent word's tokens cost less each (its row and
# tables stay in cache over its run in a block): with ranges of equal tokens, the rare words'
# parts took 1.2-1.3x the others' time on the synthetic corpus (pipelines/bench_partition.py
# --part-times; pipelines/README.md, "lightlda on the process's threads").
WORD_COST_POWER = 0.8
# A sweep on several threads keeps the half's documents' topic counts ([D / 2, K]) through
# its steps where they take at most this many entries a token, and lists each part's tokens:
# a part then visits only its own tokens and counts nothing. Otherwise each part counts the
# topics of its documents from all their tokens and clears them after, 2R passes over the
# half's tokens where this makes 2 (pipelines/README.md, "Eighth session").
DOC_COUNT_ENTRIES_PER_TOKEN = 4
# Where they take more, a sweep on several threads still keeps them while they fit in this many
# entries (int16: 128 MiB; a sweep over a window keeps both halves', twice one half's): the
# 2T ranges and lag of 2 that come with kept counts let a thread take a part while another
# ends a step, where T ranges make every step a barrier. On 2 threads the sweep's threads
# were busy 0.945-0.956 of its time against 0.916-0.926 (synth4m, K = 1,000; 2-4% faster a
# sweep) and 0.965 against 0.796 (Debian, K = 1,000; 8% faster): pipelines/README.md,
# "Twenty-third session" (pipelines/bench_partition.py --kept-entries).
KEPT_DOC_COUNT_ENTRIES = 1 << 26
# ... and while one range's part of them fits in this many entries (a range of R = 2T: the
# entries of a block, BLOCK_ENTRIES, that the counting form keeps in cache). Kept counts of
# larger ranges are read at random out of the cache: on this VM's 2 threads a sweep took
# 0.459 s kept against 0.313 counting (Debian, K = 1,000: 7.7 M entries a range; 0.748
# against 0.675 on synth4m, 5 M), on 4 threads 0.480 against 0.371 (3.9 M); at 16 threads
# (0.6-1.0 M a range) their CPU a token came within 5% (pipelines/README.md, "Twenty-eighth
# session"), where the 2T ranges' schedule is what kept counts buy.
KEPT_RANGE_ENTRIES = BLOCK_ENTRIES
# Ranges a thread (biglda.samplers.partition) and how many steps behind a part's n_k may be,
# with the documents' counts kept and without. Counting them in every part made each range
# cost CPU: 2T ranges cost 7% more CPU a token on the VM's 2 threads and lost 5-7% of
# tokens/s (pipelines/README.md, "Seventh session"), 1.3x the CPU on 16 cores; with one
# range a thread no thread has another part to take while a step ends, so a lag of 2 bought
# nothing there (1.515 against 1.528 s a sweep on 16 cores). Kept, 2T ranges cost no CPU
# (2 threads: 0.489, 0.481, 0.481, 0.498 us a token at 1, 2, 4, 8 ranges a thread) and gave
# 4.71, 4.69 s a sweep with a lag of 2 against 5.19, 5.47 with T ranges (synth20m, K = 1,000);
# on 16 threads the schedule of the recorded parts' times came to 1.01x their CPU / 16 with
# 2T ranges and a lag of 2, 1.37x with T and 1 ("Eighth session").
RANGES_PER_THREAD, RANGES_PER_THREAD_KEPT = 1, 2
N_K_LAG, N_K_LAG_KEPT = 1, 2
# A block's sweep asks the CPU for the lines of the token PREFETCH_AHEAD ahead in its word
# order (biglda.samplers._prefetch): its n_wk and n_dk entries at its topic, and where its
# word is another, that word's tables. A rare word's token (one a block) otherwise waited on
# each of them from memory. The chain is the same; one thread on synth4m at K = 1,000 took
# 0.535 and 0.475 CPU µs a token against 0.690 and 0.537 without (the n_wk entry and the
# tables, 4 ahead; 2 and 8 gained less), and 0.475 and 0.458 against 0.487 and 0.492 with the
# n_dk entry too; Debian K = 1,000 0.364 against 0.414 (pipelines/README.md, "Thirty-third
# session").
PREFETCH_AHEAD = 4
# The tokens arrays whose halves' lists by word a sampler keeps for sweeps on one thread (the
# trainer sweeps one array a process, or one a round: up to 4, as Layouts).
ONE_THREAD_LISTS = 4


def _keeps_doc_counts(n_docs: int, n_topics: int, n_tokens: int, n_threads: int = 1,
                      windowed: bool = False) -> bool:
    """Whether a partitioned sweep keeps the halves' document counts (their size's rule).

    At most :data:`DOC_COUNT_ENTRIES_PER_TOKEN` entries a token; on several threads also
    anything within :data:`KEPT_DOC_COUNT_ENTRIES` (``windowed``: both halves' buffers)
    whose part a range (of ``RANGES_PER_THREAD_KEPT`` x T) is within
    :data:`KEPT_RANGE_ENTRIES`.

    >>> _keeps_doc_counts(40_000, 1000, 4_000_000), _keeps_doc_counts(40_000, 1000, 4_000_000, 2)
    (False, False)
    >>> _keeps_doc_counts(40_000, 1000, 4_000_000, 16)
    True
    """
    half = (n_docs + 1) // 2 * n_topics
    if half <= DOC_COUNT_ENTRIES_PER_TOKEN * n_tokens:
        return True
    return (n_threads > 1 and half * (2 if windowed else 1) <= KEPT_DOC_COUNT_ENTRIES
            and half <= KEPT_RANGE_ENTRIES * RANGES_PER_THREAD_KEPT * n_threads)


@njit(nogil=True, cache=True)
def _word_tables(word_ptr, by_word, z, n_wk, coef):
    """Sparse per-word alias tables over ``(n_wk[w, k] - own[w, k]) * coef[k]`` (non-zeros).

    ``own`` are the counts of the tokens ``by_word[word_ptr[w]:word_ptr[w + 1]]`` (topics
    from ``z``), the swept half's tokens grouped by word: subtracting them here reads the
    dense rows sequentially instead of updating ``n_wk`` at random. Words without tokens
    there get empty tables. Returns ``(start int64[V+1], mass float64[V], topic int32[M],
    thr uint32[M], alias int32[M], prob float64[M])``.

    A word's tokens' topics are gathered into ``seen`` first and counted from there: counting
    straight from ``z[by_word[j]]`` chained each count's update to a load from ``z`` at
    random (a word's tokens share few topics), and reading ``z`` again to clear them did it
    twice; the tables took 2.5x as long (pipelines/README.md, "Thirty-second session").
    """
    n_rows, n_topics = n_wk.shape
    own = np.zeros(n_topics, dtype=np.int32)
    seen = np.empty(1024, dtype=np.int64)  # (the topics of one word's tokens)
    start = np.zeros(n_rows + 1, dtype=np.int64)
    # one pass over the dense rows (they dominate at large K), into growing buffers
    cap = 1024
    topic = np.empty(cap, dtype=np.int32)
    weight = np.empty(cap, dtype=np.float64)
    mass = np.zeros(n_rows, dtype=np.float64)
    p = 0
    for w in range(n_rows):
        start[w] = p
        a, b = word_ptr[w], word_ptr[w + 1]
        if b == a:
            continue
        if b - a > seen.shape[0]:
            seen = np.empty(2 * (b - a), dtype=np.int64)
        for j in range(a, b):  # (independent loads: they overlap)
            seen[j - a] = z[by_word[j]]
        for j in range(b - a):
            own[seen[j]] += 1
        if p + n_topics > cap:
            cap = 2 * cap + n_topics
            t2 = np.empty(cap, dtype=np.int32)
            t2[:p] = topic[:p]
            topic = t2
            w2 = np.empty(cap, dtype=np.float64)
            w2[:p] = weight[:p]
            weight = w2
        total = 0.0
        for k in range(n_topics):
            c = n_wk[w, k] - own[k]
            if c != 0:
                topic[p] = k
                weight[p] = c * coef[k]
                total += weight[p]
                p += 1
        mass[w] = total
        for j in range(b - a):
            own[seen[j]] = 0
    start[n_rows] = p
    m = p
    topic = topic[:m].copy()
    thr = np.empty(m, dtype=np.uint32)
    alias = np.empty(m, dtype=np.int32)
    prob = np.empty(m, dtype=np.float64)
    small = np.empty(n_topics, dtype=np.int64)
    large = np.empty(n_topics, dtype=np.int64)
    for w in range(n_rows):
        lo = start[w]
        n = start[w + 1] - lo
        if n > 0:
            _build_alias(weight, lo, n, thr, alias, prob, small, large)
    return start, mass, topic, thr, alias, prob


@njit(nogil=True, cache=True)
def _sparse_prob(start, topic, prob, w, k, n_topics):
    """Realised probability of topic ``k`` in word ``w``'s sparse table (0 if absent)."""
    lo = start[w]
    hi = start[w + 1]
    if hi - lo == n_topics:  # a full row: entry k is topic k
        return prob[lo + k]
    n = hi - lo
    if n == 0:
        return 0.0
    # branch-free binary search (topics ascending): the comparisons are unpredictable, so
    # conditional moves beat branches
    while n > 1:
        h = n >> 1
        lo = lo + h if topic[lo + h] <= k else lo
        n -= h
    return prob[lo] if topic[lo] == k else 0.0


@njit(nogil=True, cache=True)
def _lightlda_sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, mh_steps,
                    symmetric, no_counts):
    """One LightLDA sweep on one thread; updates ``z``, ``n_wk``, ``n_k`` in place.

    Returns ``(state, n_accepted, n_proposed)``. :func:`_sweep_with_lists`, with the
    halves' tokens by word made here (:func:`_halves_by_word`).
    """
    ptr0, by0, ptr1, by1 = _halves_by_word(tokens, doc_ptr, n_wk.shape[0])
    return _sweep_with_lists(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state,
                             mh_steps, symmetric, no_counts, ptr0, by0, ptr1, by1)


@njit(nogil=True, cache=True)
def _halves_by_word(tokens, doc_ptr, n_rows):
    """Each half's tokens grouped by word: ``(word_ptr0, by_word0, word_ptr1, by_word1)``.

    As :func:`_by_word` gives them (word ``w``'s tokens of half ``h`` are
    ``by_word_h[word_ptr_h[w]:word_ptr_h[w + 1]]``, ascending; int64, 8 bytes a token in
    all). They depend on the tokens alone.
    """
    ptr0, by0 = _by_word(_half_tokens(doc_ptr, 0), tokens, 0, n_rows)
    ptr1, by1 = _by_word(_half_tokens(doc_ptr, 1), tokens, 0, n_rows)
    return ptr0, by0, ptr1, by1


@njit(nogil=True, cache=True)
def _half_tokens(doc_ptr, half):
    """Return the tokens of the documents ``d % 2 == half``, ascending (int64)."""
    n_docs = doc_ptr.shape[0] - 1
    n = 0
    for d in range(half, n_docs, 2):
        n += doc_ptr[d + 1] - doc_ptr[d]
    idx = np.empty(n, dtype=np.int64)
    j = 0
    for d in range(half, n_docs, 2):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            idx[j] = i
            j += 1
    return idx


@njit(nogil=True, cache=True)
def _sweep_with_lists(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, mh_steps,
                      symmetric, no_counts, ptr0, by0, ptr1, by1):
    """One LightLDA sweep on one thread, given each half's tokens by word.

    ``(ptr_h, by_h)``: half ``h``'s tokens grouped by word (:func:`_halves_by_word`).
    Returns ``(state, n_accepted, n_proposed)``.

    Exactness: a proposal may depend on the state only through z_¬i (the tokens *not*
    being resampled) — tables built from counts that include the tokens of the sweep
    itself make each token's kernel depend on where the sweep started, and the chain is
    then biased (visible on tiny corpora). So the documents are split into two halves
    (even / odd); the tables for sweeping one half are built from the counts *without*
    that half (the other half and other shards), which stay fixed while it is swept.
    """
    n_topics = n_k.shape[0]
    n_rows = n_wk.shape[0]
    n_docs = doc_ptr.shape[0] - 1
    v_beta = n_words * beta
    a_sum, a_thr, a_alias, a_prob = _alpha_tables(alpha, symmetric)
    n_accept = 0
    n_propose = 0
    for half in range(2):
        word_ptr, by_word = (ptr0, by0) if half == 0 else (ptr1, by1)
        in_half = _half_counts(doc_ptr, z, half, 0, n_docs, n_topics)
        coef, b_thr, b_alias, b_prob, b_mass = _other_tables(n_k - in_half, beta, v_beta)
        w_start, w_mass, w_topic, w_thr, w_alias, w_prob = _word_tables(
            word_ptr, by_word, z, n_wk, coef)
        state, acc, prop, _ = _half_sweep(
            tokens, doc_ptr, z, n_wk, n_k, alpha, a_sum, beta, n_words, state, mh_steps,
            symmetric, a_thr, a_alias, a_prob, b_thr, b_alias, b_prob, b_mass, w_start,
            w_mass, w_topic, w_thr, w_alias, w_prob, half, 0, n_docs, 0, n_rows, False,
            no_counts, np.zeros(0, dtype=np.int64))
        n_accept += acc
        n_propose += prop
    return state, n_accept, n_propose


@njit(nogil=True, cache=True)
def _alpha_tables(alpha, symmetric):
    """Return ``(A = sum alpha, thr, alias, prob)``: the doc proposal's draw from alpha / A."""
    n_topics = alpha.shape[0]
    a_sum = 0.0
    for k in range(n_topics):
        a_sum += alpha[k]
    a_thr = np.empty(n_topics, dtype=np.uint32)
    a_alias = np.empty(n_topics, dtype=np.int32)
    a_prob = np.empty(n_topics, dtype=np.float64)
    _build_alias(alpha, 0, n_topics, a_thr, a_alias, a_prob,
                 np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.int64))
    if symmetric:  # (drawn uniformly then, without the table)
        for k in range(n_topics):
            a_prob[k] = 1.0 / n_topics
    return a_sum, a_thr, a_alias, a_prob


@njit(nogil=True, cache=True)
def _other_tables(n_k_other, beta, v_beta):
    """Return ``(coef, thr, alias, prob, mass)`` of the totals without the swept half.

    ``coef = 1 / (n_k + V beta)``, and the dense alias table over ``beta * coef``.
    """
    n_topics = n_k_other.shape[0]
    coef = np.empty(n_topics, dtype=np.float64)
    beta_w = np.empty(n_topics, dtype=np.float64)
    b_mass = 0.0
    for k in range(n_topics):
        coef[k] = 1.0 / (n_k_other[k] + v_beta)
        beta_w[k] = beta * coef[k]
        b_mass += beta_w[k]
    b_thr = np.empty(n_topics, dtype=np.uint32)
    b_alias = np.empty(n_topics, dtype=np.int32)
    b_prob = np.empty(n_topics, dtype=np.float64)
    _build_alias(beta_w, 0, n_topics, b_thr, b_alias, b_prob,
                 np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.int64))
    return coef, b_thr, b_alias, b_prob, b_mass


@njit(nogil=True, cache=True)
def _by_word(idx, tokens, wlo, whi):
    """Group the tokens ``idx`` (of words in ``[wlo, whi)``) by word: ``(word_ptr, by_word)``.

    Word ``wlo + r``'s are ``by_word[word_ptr[r]:word_ptr[r + 1]]``, in the order of ``idx``.
    """
    n_range = whi - wlo
    word_ptr = np.zeros(n_range + 1, dtype=np.int64)
    for j in range(idx.shape[0]):
        word_ptr[tokens[idx[j]] - wlo + 1] += 1
    for w in range(n_range):
        word_ptr[w + 1] += word_ptr[w]
    fill = word_ptr[:-1].copy()
    by_word = np.empty(idx.shape[0], dtype=np.int64)
    for j in range(idx.shape[0]):
        w = tokens[idx[j]] - wlo
        by_word[fill[w]] = idx[j]
        fill[w] += 1
    return word_ptr, by_word


@njit(nogil=True, cache=True)
def _half_doc_counts(counts, doc_ptr, z, half, d_lo, d_hi):
    """Count the topics of the half's documents of ``[d_lo, d_hi)`` into ``counts``.

    ``counts`` ([rows, K], zero) gets document ``first + 2 j``'s in row ``j`` (``first``
    the range's first document of the half). Returns the topics' totals (int64 [K]), as
    :func:`_half_counts`.
    """
    totals = np.zeros(counts.shape[1], dtype=np.int64)
    first = d_lo + ((d_lo + half) & 1)
    for d in range(first, d_hi, 2):
        row = (d - first) >> 1
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            counts[row, z[i]] += 1
            totals[z[i]] += 1
    return totals


@njit(nogil=True, cache=True)
def _clear_doc_counts(counts, doc_ptr, z, half, d_lo, d_hi):
    """Zero what :func:`_half_doc_counts` counted (``z`` as the half's sweep left it)."""
    first = d_lo + ((d_lo + half) & 1)
    for d in range(first, d_hi, 2):
        row = (d - first) >> 1
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            counts[row, z[i]] = 0


@njit(nogil=True, cache=True)
def _half_counts(doc_ptr, z, half, d_lo, d_hi, n_topics):
    """Count the topics (int64 [K]) of the documents d in ``[d_lo, d_hi)`` with d % 2 == half."""
    counts = np.zeros(n_topics, dtype=np.int64)
    for d in range(d_lo + ((d_lo + half) & 1), d_hi, 2):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            counts[z[i]] += 1
    return counts


@njit(nogil=True, cache=True)
def _half_sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, a_sum, beta, n_words, state, mh_steps,
                symmetric, a_thr, a_alias, a_prob, b_thr, b_alias, b_prob, b_mass, w_start,
                w_mass, w_topic, w_thr, w_alias, w_prob, half, d_lo, d_hi, wlo, whi, record,
                doc_counts, idx):
    """Resample the half's tokens of the documents ``[d_lo, d_hi)`` with words ``[wlo, whi)``.

    The half: the documents ``d % 2 == half``. The tables: the half's, those of that word
    range (its row ``r`` is word ``wlo + r``).
    Writes ``z`` of those tokens, the rows ``n_wk[wlo:whi]`` and ``n_k``; reads the topics
    of every token of those documents. Returns ``(state, accepted, proposed, moved)``:
    ``moved`` the tokens whose topic changed, with ``record`` (else empty).

    ``doc_counts``: the topic counts of the half's documents of the range (row ``j``
    the document ``d_lo``'s first of the half ``+ 2 j``), kept up to date here, and ``idx``
    those of their tokens in the word range, ascending (:func:`_half_doc_counts`,
    :func:`~biglda.samplers._kernels._range_lists`): each block then visits only its own
    tokens and counts nothing. Or an empty ``doc_counts``: each block counts its documents'
    topics from all their tokens and clears them after. The chain is the same.
    """
    n_topics = n_k.shape[0]
    v_beta = n_words * beta
    coef = np.empty(n_topics, dtype=np.float64)
    for k in range(n_topics):  # current counts
        coef[k] = 1.0 / (n_k[k] + v_beta)
    # blocks of this half's documents whose dense doc-topic counts stay in cache
    first = d_lo + ((d_lo + half) & 1)  # the first document of this half in the range
    # (no more rows than the half has documents: a small shard zeroes no whole block)
    block_docs = max(1, min(BLOCK_ENTRIES // n_topics, (d_hi - first + 1) // 2))
    kept = doc_counts.shape[0] > 0
    n_dk = doc_counts if kept else np.zeros((block_docs, n_topics), dtype=doc_counts.dtype)
    row0 = 0  # the block's first row in n_dk
    j_own = 0  # with kept counts: the block's first token in idx
    q_dense = np.zeros(n_topics, dtype=np.float64)
    n_range = whi - wlo
    bw_ptr = np.zeros(n_range + 1, dtype=np.int64)
    bw_fill = np.zeros(n_range, dtype=np.int64)
    cap = np.int64(1024)
    own_i = np.empty(cap, dtype=np.int64)  # the block's tokens of the range, document order
    own_d = np.empty(cap, dtype=np.int64)  # -> their documents' rows in n_dk
    who_i = np.empty(cap, dtype=np.int64)  # word order -> token index
    who_d = np.empty(cap, dtype=np.int64)  # word order -> the document's row in n_dk
    who_w = np.empty(cap, dtype=np.int32)  # word order -> the word's row in the tables
    n_accept = 0
    n_propose = 0
    moved = np.empty(0, dtype=np.int64)  # (room made a block at a time)
    n_moved = 0
    d0 = first
    while d0 < d_hi:
        d1 = min(d_hi, d0 + 2 * block_docs)  # documents d0, d0 + 2, ... < d1
        if kept:
            row0 = (d0 - first) >> 1
            j_end = j_own
            while j_end < idx.shape[0] and idx[j_end] < doc_ptr[d1]:
                j_end += 1
            nb = j_end - j_own
        else:
            nb = np.int64(0)
            for d in range(d0, d1, 2):
                nb += doc_ptr[d + 1] - doc_ptr[d]
        if nb > cap:
            cap = max(nb, 2 * cap)
            own_i = np.empty(cap, dtype=np.int64)
            own_d = np.empty(cap, dtype=np.int64)
            who_i = np.empty(cap, dtype=np.int64)
            who_d = np.empty(cap, dtype=np.int64)
            who_w = np.empty(cap, dtype=np.int32)
        # the block's tokens of the word range in document order, with their documents' rows
        # in n_dk (and, unless kept, the documents' counts of every token)
        n_own = 0
        if kept:
            d = d0
            for j in range(j_own, j_end):
                i = idx[j]
                while doc_ptr[d + 1] <= i:
                    d += 2
                own_i[n_own] = i
                own_d[n_own] = row0 + ((d - d0) >> 1)
                n_own += 1
            j_own = j_end
        else:
            for d in range(d0, d1, 2):
                dl = (d - d0) >> 1
                for i in range(doc_ptr[d], doc_ptr[d + 1]):
                    if 0 <= tokens[i] - wlo < n_range:
                        own_i[n_own] = i
                        own_d[n_own] = dl
                        n_own += 1
                    n_dk[dl, z[i]] += 1
        if record:
            moved = _room(moved, n_moved, n_own)
        # grouped by word (a stable counting sort)
        bw_ptr[:] = 0
        for j in range(n_own):
            bw_ptr[tokens[own_i[j]] - wlo + 1] += 1
        for w in range(n_range):
            bw_ptr[w + 1] += bw_ptr[w]
            bw_fill[w] = bw_ptr[w]
        for j in range(n_own):
            w = tokens[own_i[j]] - wlo
            who_i[bw_fill[w]] = own_i[j]
            who_d[bw_fill[w]] = own_d[j]
            who_w[bw_fill[w]] = w
            bw_fill[w] += 1
        # word-major within the block: a word's table and count row are reused by all its
        # tokens here; the block's n_dk rows stay in cache. Any visiting order is exact:
        # each token's kernel leaves p(z_i | z_¬i) invariant with the current counts.
        for wr in range(n_range):  # wr: the word's row in the tables, w: in n_wk
            if bw_ptr[wr + 1] == bw_ptr[wr]:
                continue
            w = wr + wlo
            wl = w_start[wr]
            wn = w_start[wr + 1] - wl
            mix_w = w_mass[wr] / (w_mass[wr] + b_mass)  # P(sparse part)
            mix_b = 1.0 - mix_w
            # many tokens of a long row here: scatter the row's realised probabilities into a
            # dense K scratch once instead of a binary search per lookup
            dense = wn < n_topics and (bw_ptr[wr + 1] - bw_ptr[wr]) * 8 > wn
            if dense:
                for e in range(wl, wl + wn):
                    q_dense[w_topic[e]] = w_prob[e]
            for j in range(bw_ptr[wr], bw_ptr[wr + 1]):
                jp = j + PREFETCH_AHEAD  # (a token a few ahead: its row entry and table)
                if jp < n_own:
                    wp = who_w[jp]
                    sp = z[who_i[jp]]
                    prefetch(n_wk[wp + wlo], sp)
                    prefetch(n_dk[who_d[jp]], sp)
                    if wp != who_w[jp - 1]:
                        ep = w_start[wp]
                        prefetch(w_thr, ep)
                        prefetch(w_alias, ep)
                        prefetch(w_topic, ep)
                        prefetch(w_prob, ep)
                i = who_i[j]
                dl = who_d[j]  # the document's row in n_dk
                lo = doc_ptr[d0 + 2 * (dl - row0)]
                n_doc = doc_ptr[d0 + 2 * (dl - row0) + 1] - lo
                s = np.int64(z[i])
                s0 = s
                n_dk[dl, s] -= 1
                n_wk[w, s] -= 1
                n_k[s] -= 1
                coef[s] = 1.0 / (n_k[s] + v_beta)
                # target of the current topic, and its word-proposal probability
                p_s = (n_dk[dl, s] + alpha[s]) * (n_wk[w, s] + beta) * coef[s]
                q_s = -1.0  # unknown until the word step needs it
                for _ in range(mh_steps):
                    # --- word proposal (independence sampler on the fixed tables) ---
                    state, u = _next_float(state)
                    if u < mix_w:
                        state, jj = _sample_alias(state, wl, wn, w_thr, w_alias)
                        t = np.int64(w_topic[wl + jj])
                        q_t = mix_w * w_prob[wl + jj] + mix_b * b_prob[t]
                    else:
                        state, t = _sample_alias(state, 0, n_topics, b_thr, b_alias)
                        q_t = mix_b * b_prob[t] + mix_w * (
                            q_dense[t] if dense else
                            _sparse_prob(w_start, w_topic, w_prob, wr, t, n_topics))
                    n_propose += 1
                    if t != s:
                        if q_s < 0.0:
                            q_s = mix_b * b_prob[s] + mix_w * (
                                q_dense[s] if dense else
                                _sparse_prob(w_start, w_topic, w_prob, wr, s, n_topics))
                        p_t = (n_dk[dl, t] + alpha[t]) * (n_wk[w, t] + beta) * coef[t]
                        state, u = _next_float(state)
                        if u * p_s * q_t < p_t * q_s:
                            s = t
                            p_s = p_t
                            q_s = q_t
                            z[i] = s
                            n_accept += 1
                    else:
                        n_accept += 1
                    # --- doc proposal: a random token's topic, or the alpha prior ---
                    state, u = _next_float(state)
                    u *= n_doc + a_sum
                    if u < n_doc:
                        pos = np.int64(u)
                        if pos >= n_doc:
                            pos = n_doc - 1
                        t = np.int64(z[lo + pos])
                    elif symmetric:
                        state, t = _next_int(state, n_topics)
                    else:
                        state, t = _sample_alias(state, 0, n_topics, a_thr, a_alias)
                    n_propose += 1
                    if t != s:
                        p_t = (n_dk[dl, t] + alpha[t]) * (n_wk[w, t] + beta) * coef[t]
                        num = p_t * (n_dk[dl, s] + a_sum * a_prob[s])
                        den = p_s * (n_dk[dl, t] + a_sum * a_prob[t])
                        state, u = _next_float(state)
                        if u * den < num:
                            s = t
                            p_s = p_t
                            q_s = -1.0
                            z[i] = s
                            n_accept += 1
                    else:
                        n_accept += 1
                z[i] = s
                if record and s != s0:
                    moved[n_moved] = i
                    n_moved += 1
                n_dk[dl, s] += 1
                n_wk[w, s] += 1
                n_k[s] += 1
                coef[s] = 1.0 / (n_k[s] + v_beta)
            if dense:
                for e in range(wl, wl + wn):
                    q_dense[w_topic[e]] = 0.0
        if not kept:
            for d in range(d0, d1, 2):  # reset the touched doc-topic counts
                dl = (d - d0) >> 1
                for i in range(doc_ptr[d], doc_ptr[d + 1]):
                    n_dk[dl, z[i]] = 0
        d0 = d1
    return state, n_accept, n_propose, moved[:n_moved]


class LightLDASampler(Sampler):
    """LightLDA Metropolis-Hastings (cycle proposal) on the CPU.

    On one thread the chain is exact (module docstring). A sweep can use several threads
    (``sweep(..., pool=, n_threads=)``, T of them), tomotopy's ``PARTITION`` scheme
    (:mod:`biglda.samplers.partition`): the documents are cut into R ranges and the
    vocabulary into R ranges of about equal cost, R = 2T where the halves' document counts
    are kept (:func:`_keeps_doc_counts`), else T; each half's word tables are built
    once, on the threads in pieces of about equal cost (joined per range); then the half is
    swept in R steps, in step ``s`` part ``i`` the tokens of document range ``i`` whose
    words are in range ``(i + s) % R``.
    No two parts of a step share a row of ``n_wk``, a document or a token, so the counts
    stay exact but for ``n_k``: each part moves its own copy, which starts with the moves of
    every step up to ``s - L`` (L = 2 with 2T ranges, 1 with T: ``N_K_LAG_KEPT``,
    ``N_K_LAG``). The chain is then that of tomotopy's partitioned sampler, not an exact one;
    it is the same on every run with the same T, whichever thread takes which part (each
    part has its own stream), but not the same for another T.

    Parameters
    ----------
    mh_steps : int
        Rounds of (word proposal, doc proposal) per token; default 2.

    Examples
    --------
    >>> LightLDASampler(mh_steps=4).mh_steps
    4
    """

    algorithm = "lightlda"
    backend = "cpu"
    threads_per_sweep = True  # one sweep takes several threads (the trainer gives it its pool)
    word_windows = True  # a sweep can take a window of words (partitioned, also on one thread)
    word_cost_power = WORD_COST_POWER  # (its threads' ranges, and the processes' windows)

    def __init__(self, mh_steps: int = 2):
        if int(mh_steps) < 1:
            raise ConfigError(f"mh_steps must be >= 1, got {mh_steps}")
        self.mh_steps = int(mh_steps)
        self._layouts = Layouts()  # each tokens array's cut for several threads
        # each tokens array's halves by word for one thread: (tokens, doc_ptr, lists)
        self._one_thread: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def sweep(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key, *,
              pool: Executor | None = None, n_threads: int = 1,
              window: tuple[int, int] | None = None, follows: bool = False) -> SweepResult:
        """Resample every token of one shard once (see :meth:`Sampler.sweep`).

        ``n_threads`` > 1 threads share the sweep: this one and ``n_threads - 1`` of
        ``pool`` (which must have that many free), in the partitioned scheme of the class
        docstring. ``window`` ``(lo, hi)``: only the tokens of rows ``[lo, hi)``,
        partitioned also on one thread (then ``pool`` is still needed). ``follows``: a later
        step of the clock whose step before was this sampler's last sweep
        (:func:`~biglda.samplers.partition.partitioned_sweep`).
        """
        n_threads = max(1, int(n_threads))
        if n_threads == 1 and window is None:
            self._layouts.drop_carried()  # (this sweep writes z and keeps no document state)
            return super().sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key)
        kept = _keeps_doc_counts(doc_ptr.shape[0] - 1, n_k.shape[0], tokens.shape[0],
                                 n_threads, window is not None)
        return partitioned_sweep(
            lambda part, a, state: _sweep_partitioned(part, tokens, doc_ptr, z, n_wk, n_k, a,
                                                      float(beta), float(n_words), state,
                                                      self.mh_steps, kept,
                                                      _no_doc_counts(doc_ptr)),
            tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key, pool, n_threads,
            self.word_cost_power, RANGES_PER_THREAD_KEPT if kept else RANGES_PER_THREAD,
            self._layouts, N_K_LAG_KEPT if kept else N_K_LAG, window, follows)

    def _run(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state):
        symmetric = bool(np.all(alpha == alpha[0]))
        _, n_accept, n_propose = _sweep_with_lists(
            tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, self.mh_steps,
            symmetric, _no_doc_counts(doc_ptr), *self._halves_lists(tokens, doc_ptr, n_wk.shape[0]))
        return n_accept / n_propose if n_propose else None

    def _halves_lists(self, tokens: np.ndarray, doc_ptr: np.ndarray, n_rows: int) -> tuple:
        """Return the halves' tokens by word for a sweep on one thread (:func:`_halves_by_word`).

        Kept for the next sweep of the same tokens (12 bytes a token with the copy of the
        tokens they are checked against): making them took 8% of a sweep (synth4m,
        K = 1,000; pipelines/README.md, "Thirty-second session"). The last
        :data:`ONE_THREAD_LISTS` arrays' are kept (a clock swept in rounds sweeps one
        array a round).
        """
        key = (tokens.ctypes.data, tokens.shape[0], doc_ptr.shape[0], n_rows)
        with self._lock:
            hit = self._one_thread.get(key)
        if hit is not None and np.array_equal(hit[0], tokens) and np.array_equal(hit[1], doc_ptr):
            return hit[2]
        lists = _halves_by_word(tokens, doc_ptr, n_rows)
        with self._lock:
            self._one_thread.pop(key, None)
            while len(self._one_thread) >= ONE_THREAD_LISTS:
                self._one_thread.pop(next(iter(self._one_thread)))
            self._one_thread[key] = (tokens.copy(), doc_ptr.copy(), lists)
        return lists

    def __repr__(self) -> str:
        """Show the number of MH steps."""
        return f"LightLDASampler(mh_steps={self.mh_steps})"


def _half_words(part, tokens, doc_ptr, z, half, n_topics,
                keep_docs: bool) -> tuple[list, list | None]:
    """Return the half's tokens by range, ``(words, docs)``.

    ``words[r]``: ``(word_ptr, by_word)``, the half's tokens of word range ``r``'s words, by
    word; ``docs[i]`` (with ``keep_docs``, else None): ``(ptr, idx)``, those of document
    range ``i``, by word range (:func:`~biglda.samplers._kernels._range_lists`). They depend
    on the tokens and the cut only (``z`` is read for counts left unused).
    """
    t, dcut, wcut = part.n_ranges, part.dcut, part.wcut
    lists = part.on_threads(_range_lists, [
        (tokens, doc_ptr, z, half, dcut[i], dcut[i + 1], part.range_of, t, n_topics)
        for i in range(t)])
    words = part.on_threads(_by_word, [
        (np.concatenate([idx[ptr[r]:ptr[r + 1]] for _, ptr, idx in lists]), tokens, wcut[r],
         wcut[r + 1]) for r in range(t)])
    return words, [(ptr, idx) for _, ptr, idx in lists] if keep_docs else None


# The cost of a word's table in "tokens", for cutting the tables' build into pieces: its
# dense row is read whole and its table built (K / 8 tokens' worth), its tokens each update
# a count. With 1/32 the pieces of rare words took up to 1.8x the others' (3.4-6.2 ms),
# with 1/8 they came out within 3.0-4.6 ms (synth4m, K = 1,000, 2 threads).
TABLE_ROW_TOKENS_PER_TOPIC = 1 / 8


def _table_pieces(words: list, n_topics: int, n_pieces: int) -> list[tuple[int, int, int]]:
    """Cut each word range's rows into pieces of about equal table cost: ``(r, a, b)``.

    Rows ``[a, b)`` of range ``r`` (relative to its first word). The ranges are cut by
    their tokens, and the range of rare words holds most rows: built whole, its tables took
    1.4x the other range's on 2 threads and 2x the mean of 16 (synth4m, K = 1,000;
    pipelines/README.md, "Eleventh session"). About ``n_pieces`` in all.
    """
    per_row = n_topics * TABLE_ROW_TOKENS_PER_TOPIC
    costs = [per_row * np.arange(1, len(ptr)) + (ptr[1:] - ptr[0]) for ptr, _ in words]
    total = sum(float(c[-1]) for c in costs if len(c))
    target = max(total / max(1, n_pieces), 1.0)
    pieces = []
    for r, cost in enumerate(costs):
        n_rows = len(cost)
        k = max(1, round(float(cost[-1]) / target)) if n_rows else 1
        cuts = np.searchsorted(cost, np.linspace(0, cost[-1], k + 1)[1:-1]) if n_rows else []
        bounds = [0, *sorted(set(int(c) for c in cuts if 0 < c < n_rows)), n_rows]
        pieces += [(r, a, b) for a, b in itertools.pairwise(bounds)]
    return pieces


def _range_tables(part, words: list, z: np.ndarray, n_wk: np.ndarray, coef: np.ndarray
                  ) -> list[tuple]:
    """Each word range's :func:`_word_tables`, built in pieces on the threads of ``part``.

    The same tables as one call a range makes: a range of several pieces gets them placed
    one after another (:func:`_place_piece`, on the threads too); ``words[r]`` is range
    ``r``'s ``(word_ptr, by_word)``.
    """
    wcut = part.wcut
    pieces = _table_pieces(words, n_wk.shape[1], 4 * part.threads)
    built = part.on_threads(_word_tables, [
        (words[r][0][a:b + 1], words[r][1], z, n_wk[wcut[r] + a:wcut[r] + b], coef)
        for r, a, b in pieces])
    tables: list = [None] * len(words)
    places = []
    for r in range(len(words)):
        mine = [(a, t) for (rr, a, _), t in zip(pieces, built, strict=True) if rr == r]
        if len(mine) == 1:
            tables[r] = mine[0][1]
            continue
        n_rows = int(wcut[r + 1] - wcut[r])
        sizes = [int(t[0][-1]) for _, t in mine]
        start = np.empty(n_rows + 1, dtype=np.int64)
        start[n_rows] = sum(sizes)
        tables[r] = (start, np.empty(n_rows, np.float64),
                     *(np.empty(sum(sizes), dtype=x.dtype) for x in mine[0][1][2:]))
        off = 0
        for (a, t), size in zip(mine, sizes, strict=True):
            places.append((*tables[r], a, off, *t))
            off += size
    if places:
        part.on_threads(_place_piece, places)
    return tables


@njit(nogil=True, cache=True)
def _place_piece(start, mass, topic, thr, alias, prob, row0, off, p_start, p_mass, p_topic,
                 p_thr, p_alias, p_prob):
    """Copy one piece's tables (rows from ``row0``, entries from ``off``) into its range's."""
    for w in range(p_mass.shape[0]):
        start[row0 + w] = p_start[w] + off
        mass[row0 + w] = p_mass[w]
    for e in range(p_topic.shape[0]):
        topic[off + e] = p_topic[e]
        thr[off + e] = p_thr[e]
        alias[off + e] = p_alias[e]
        prob[off + e] = p_prob[e]


def _sweep_partitioned(part, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state,
                       mh_steps, keep, no_counts):
    """Sweep both halves on the threads of ``part`` (a :class:`Partition`); the accept rate.

    ``keep``: whether the halves' document counts are kept through the steps
    (:func:`_keeps_doc_counts`, which also chose the partition's ranges and lag);
    ``no_counts``: the empty counts of :func:`_no_doc_counts` (their dtype).
    """
    t, dcut, wcut, n_topics = part.n_ranges, part.dcut, part.wcut, n_k.shape[0]
    symmetric = bool(np.all(alpha == alpha[0]))
    a_sum, *a_tables = _alpha_tables(alpha, symmetric)
    n_accept, n_propose = 0, 0
    # the half's documents' topic counts, kept through its steps where they are few enough
    rows = [(int(dcut[i + 1] - dcut[i]) + 1) // 2 for i in range(t)]
    counts_of, totals = _halves_state(part, keep, rows, n_topics, no_counts.dtype)
    for half in range(2):
        # the half's tokens of each word range, by word, and of each document range, by
        # word range (kept with the layout); the half's topics
        words, docs = part.layout.list_of(
            f"lightlda-half{half}" + ("-docs" if keep else ""),
            lambda h=half: _half_words(part, tokens, doc_ptr, z, h, n_topics, keep))
        counts = counts_of[half]
        if totals[half] is not None:  # (the clock's step before left them: counted)
            in_half = totals[half]
        elif counts is not None:
            in_half = np.sum(part.on_threads(_half_doc_counts, [
                (counts[i], doc_ptr, z, half, dcut[i], dcut[i + 1]) for i in range(t)]), axis=0)
        else:
            in_half = np.sum(part.on_threads(_half_counts, [
                (doc_ptr, z, half, dcut[i], dcut[i + 1], n_topics) for i in range(t)]), axis=0)
        coef, *dense = _other_tables(n_k - in_half, beta, n_words * beta)
        k_before = n_k.copy()
        # the tables from the counts without the half, in pieces of about equal cost on the
        # threads, joined a word range at a time
        tables = _range_tables(part, words, z, n_wk, coef)

        def own(i, r, cs=counts, ds=docs):  # (the part's kept counts and tokens, or none)
            if cs is None:
                return no_counts, _NO_TOKENS
            ptr, idx = ds[i]
            return cs[i], idx[ptr[r]:ptr[r + 1]]

        for _, acc, prop, _ in part.run_steps(
                _half_sweep, lambda i, r, own_k, sub, h=half, tab=tables, den=dense: (
                    tokens, doc_ptr, z, n_wk, own_k, alpha, a_sum, beta, n_words, sub,
                    mh_steps, symmetric, *a_tables, *den, *tab[r], h, dcut[i], dcut[i + 1],
                    wcut[r], wcut[r + 1], part.record, *own(i, r)),
                n_k, state, (0x4C << 56) | (half << 48)):
            n_accept += acc
            n_propose += prop
        if part.windowed:  # (only the half's tokens moved: n_k's change is theirs)
            totals[half] = in_half + (n_k - k_before)
        elif counts is not None:
            part.on_threads(_clear_doc_counts, [(counts[i], doc_ptr, z, half, dcut[i],
                                                 dcut[i + 1]) for i in range(t)])
    if part.windowed:  # for the clock's next step, as this one left them
        part.keep["lightlda-halves"] = (counts_of, totals)
    elif counts_of[0] is not None:  # (all zero again: the next sweep's, unless it failed)
        part.layout.give("lightlda-doc-counts", counts_of[0])
    return n_accept / n_propose if n_propose else None


def _halves_state(part, keep: bool, rows: list[int], n_topics: int, dtype: np.dtype
                  ) -> tuple[list[list[np.ndarray] | None], list[np.ndarray | None]]:
    """Each half's documents' counts (a buffer a document range, or None) and its topics.

    A whole sweep counts a half into one set of zeroed buffers and clears them after; its
    topics (None) are counted from ``z``. A sweep over a window keeps both halves' counts
    (twice the buffers) and topics for the clock's next step, which takes them as they are
    where it ``follows`` (:class:`~biglda.samplers.partition.Partition`): the counting and
    clearing were passes over the whole shard in every step, not over the window's tokens.
    """
    shape = [(r, n_topics) for r in rows]

    def fits(cs: list[np.ndarray] | None) -> bool:
        return cs is not None and all(c.shape == sh and c.dtype == dtype
                                      for c, sh in zip(cs, shape, strict=True))

    def zeroed(cs: list[np.ndarray] | None, clear: bool) -> list[np.ndarray]:
        if not fits(cs):
            return [np.zeros(sh, dtype=dtype) for sh in shape]
        for c in cs if clear else ():
            c.fill(0)
        return cs

    if not part.windowed:  # (given back all zero by the sweep before, or new)
        one = zeroed(part.layout.take("lightlda-doc-counts"), False) if keep else None
        return [one, one], [None, None]
    got = part.carried.get("lightlda-halves")
    usable = got is not None and all(fits(cs) if keep else cs is None for cs in got[0])
    if usable and part.current:
        return list(got[0]), list(got[1])
    if not keep:
        return [None, None], [None, None]
    return [zeroed(got[0][h] if usable else None, True) for h in range(2)], [None, None]


# ``idx`` of a part that counts its documents' topics block by block (with empty counts).
_NO_TOKENS = np.zeros(0, dtype=np.int64)
# Empty document counts of each dtype: a document's count of a topic is at most its length
_NO_DOC_COUNTS = {np.dtype(t): np.zeros((0, 1), dtype=t) for t in (np.int16, np.int32)}


def _no_doc_counts(doc_ptr: np.ndarray) -> np.ndarray:
    """Empty document counts of the dtype the documents' topic counts take (int16 or int32).

    int16 where every document has at most 32,767 tokens: half the bytes of int32.
    """
    longest = int(np.max(np.diff(doc_ptr))) if doc_ptr.shape[0] > 1 else 0
    return _NO_DOC_COUNTS[np.dtype(np.int16 if longest <= np.iinfo(np.int16).max
                                   else np.int32)]
