"""Kernels shared by every CPU sampler.

Counts from ``z``, the sweep delta, log-likelihood pieces, random initialisation and Vose
alias tables.

All kernels are private and array-only: settings are arguments, outputs are allocated
by the caller or returned, nothing is logged.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from biglda.samplers.rng import _next_float, _next_int, _next_u64

_S32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO32 = 4294967296.0


@njit(nogil=True, cache=True)
def _init_z(z, n_topics, state):
    """Fill ``z`` (uint16/int32 [N]) with uniform topics in [0, n_topics)."""
    for i in range(z.shape[0]):
        state, t = _next_int(state, n_topics)
        z[i] = t


@njit(nogil=True, cache=True)
def _sequential_z(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, v_beta, state):
    """Draw ``z`` token by token from the conditional given the counts so far.

    Griffiths & Steyvers' initialisation: token ``i`` of document ``d`` takes topic ``k``
    with probability proportional to ``(n_dk + alpha_k) (n_wk + beta) / (n_k + V beta)``
    over the tokens drawn before it (and the base counts ``n_wk``/``n_k`` came with), then
    is added to the counts. O(K) per token. ``tokens`` index the rows of ``n_wk`` (int32
    [rows, K], updated in place, as ``n_k`` int64 [K]); ``v_beta`` is the *global* V times
    beta. ``z`` (uint16/int32 [N]) is filled.
    """
    n_topics = n_k.shape[0]
    n_dk = np.zeros(n_topics, np.int32)
    cdf = np.empty(n_topics, np.float64)
    inv = np.empty(n_topics, np.float64)
    for k in range(n_topics):
        inv[k] = 1.0 / (n_k[k] + v_beta)
    for d in range(doc_ptr.shape[0] - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            row = n_wk[tokens[i]]
            total = 0.0
            for k in range(n_topics):
                total += (n_dk[k] + alpha[k]) * (row[k] + beta) * inv[k]
                cdf[k] = total
            state, u = _next_float(state)
            u *= total
            lo, hi = 0, n_topics - 1
            while lo < hi:  # the first k with cdf[k] > u
                mid = (lo + hi) >> 1
                if cdf[mid] > u:
                    hi = mid
                else:
                    lo = mid + 1
            z[i] = lo
            n_dk[lo] += 1
            row[lo] += 1
            n_k[lo] += 1
            inv[lo] = 1.0 / (n_k[lo] + v_beta)
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            n_dk[z[i]] = 0


@njit(nogil=True, cache=True)
def _count_from_z(tokens, z, n_wk, n_k):
    """Add the counts implied by ``z`` to ``n_wk`` (int32 [V, K]) and ``n_k`` (int64 [K])."""
    for i in range(tokens.shape[0]):
        t = z[i]
        n_wk[tokens[i], t] += 1
        n_k[t] += 1


@njit(nogil=True, cache=True)
def _doc_topic_counts(doc_ptr, z, n_dk):
    """Fill ``n_dk`` (int32 [D, K], zeroed) from ``z``."""
    for d in range(doc_ptr.shape[0] - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            n_dk[d, z[i]] += 1


@njit(nogil=True, cache=True)
def _check_z(z, n_topics):
    """Index of the first topic outside [0, n_topics), or -1."""
    for i in range(z.shape[0]):
        if z[i] < 0 or z[i] >= n_topics:
            return i
    return -1


@njit(nogil=True, cache=True)
def _scan_ranges(tokens, z, lo, hi, cached):
    """Return the ranges of tokens ``[lo, hi)`` and their topics, and their test against ``cached``.

    Returns ``(smallest word id, largest, smallest topic, largest, same)``, zeros for an
    empty range; ``same``: whether the tokens equal ``cached[lo:hi]`` (False where ``cached``
    has another length). One read, no branch on the data (it vectorizes) and nothing
    allocated: NumPy's reductions and ``array_equal`` made a temporary per part, fresh pages
    every sweep, and 16 threads ran that scan only 1.5x faster than one (pipelines/README.md,
    "Sixteenth session").
    """
    t_lo = t_hi = np.int64(0)
    z_lo = z_hi = np.int64(0)
    if hi > lo:
        t_lo = t_hi = np.int64(tokens[lo])
        z_lo = z_hi = np.int64(z[lo])
    compare = cached.shape[0] == tokens.shape[0]
    ref = cached if compare else tokens  # (nothing to compare: the tokens with themselves)
    diff = np.int64(0)
    for i in range(lo, hi):
        w = np.int64(tokens[i])
        k = np.int64(z[i])
        t_lo = min(t_lo, w)
        t_hi = max(t_hi, w)
        z_lo = min(z_lo, k)
        z_hi = max(z_hi, k)
        diff |= w ^ np.int64(ref[i])
    return t_lo, t_hi, z_lo, z_hi, compare and diff == 0


@njit(nogil=True, cache=True)
def _scan_count(tokens, z, lo, hi, n_rows, n_topics, cached, count):
    """Check tokens ``[lo, hi)``, compare them with ``cached`` and count their words, in one read.

    Returns ``(first word id out of [0, n_rows), first topic out of [0, n_topics), occ,
    same)``: the two indexes -1 where there is none; ``occ`` int32 [n_rows] each word's
    tokens in the range with ``count`` (else empty); ``same`` whether they equal
    ``cached[lo:hi]`` (False where ``cached`` has another length). A part of the O(N)
    checks of :func:`check_sweep_args` and of a partition's word cut, so they run on a
    sweep's threads.
    """
    occ = np.zeros(n_rows if count else 0, dtype=np.int32)
    compare = cached.shape[0] == tokens.shape[0]
    same = compare
    bad_t = -1
    bad_z = -1
    for i in range(lo, hi):
        w = tokens[i]
        if w < 0 or w >= n_rows:
            if bad_t < 0:
                bad_t = i
        elif count:
            occ[w] += 1
        if compare and w != cached[i]:
            same = False
        if bad_z < 0 and (z[i] < 0 or z[i] >= n_topics):
            bad_z = i
    return bad_t, bad_z, occ, same


@njit(nogil=True, cache=True)
def _sweep_delta(tokens, z_old, z_new, n_rows, n_topics):
    """Aggregate the moves ``z_old -> z_new`` into a sparse delta of ``n_wk`` and ``n_k``.

    Returns ``(words int32[M], topics int32[M], counts int32[M], delta_k int64[K])``
    with unique (word, topic) pairs and no zero counts, sorted by (word, topic). Cost
    O(moves + n_rows + K): moves are bucketed by word (counting sort), then summed in
    a dense K scratch row that only touched entries are read from and reset in.
    """
    n_moves = 0
    for i in range(tokens.shape[0]):
        n_moves += z_old[i] != z_new[i]
    moved = np.empty(n_moves, dtype=np.int64)
    m = 0
    for i in range(tokens.shape[0]):
        if z_old[i] != z_new[i]:
            moved[m] = i
            m += 1
    return _moves_delta(moved, tokens, z_old, z_new, 0, n_rows, n_topics)


@njit(nogil=True, cache=True)
def _moves_delta(moved, tokens, z_old, z_new, wlo, whi, n_topics):
    """:func:`_sweep_delta` of the tokens ``moved``, all of the words ``[wlo, whi)``.

    Word ids are as given; ``delta_k`` counts those moves only, so the deltas of ranges that
    cut the vocabulary add up to the whole, and their COOs, concatenated in word order, are
    its COO. Tokens that did not move add nothing; none may be listed twice.
    """
    n_rows = whi - wlo
    n_moves = moved.shape[0]
    per_word = np.zeros(n_rows + 1, dtype=np.int64)
    for j in range(n_moves):
        per_word[tokens[moved[j]] - wlo + 1] += 1
    for w in range(n_rows):
        per_word[w + 1] += per_word[w]
    fill = per_word[:-1].copy()
    by_word = np.empty(n_moves, dtype=np.int64)
    for j in range(n_moves):
        w = tokens[moved[j]] - wlo
        by_word[fill[w]] = moved[j]
        fill[w] += 1

    delta_k = np.zeros(n_topics, dtype=np.int64)
    acc = np.zeros(n_topics, dtype=np.int32)
    seen = np.full(n_topics, -1, dtype=np.int64)
    touched = np.empty(n_topics, dtype=np.int32)
    words = np.empty(2 * n_moves, dtype=np.int32)
    topics = np.empty(2 * n_moves, dtype=np.int32)
    counts = np.empty(2 * n_moves, dtype=np.int32)
    m = 0
    for w in range(n_rows):
        lo = per_word[w]
        hi = per_word[w + 1]
        if lo == hi:
            continue
        n_touched = 0
        for j in range(lo, hi):
            i = by_word[j]
            a = np.int64(z_old[i])
            b = np.int64(z_new[i])
            acc[a] -= 1
            acc[b] += 1
            delta_k[a] -= 1
            delta_k[b] += 1
            if seen[a] != w:
                seen[a] = w
                touched[n_touched] = a
                n_touched += 1
            if seen[b] != w:
                seen[b] = w
                touched[n_touched] = b
                n_touched += 1
        m = _emit_word_delta(w + wlo, touched, n_touched, acc, words, topics, counts, m)
    return words[:m].copy(), topics[:m].copy(), counts[:m].copy(), delta_k


@njit(nogil=True, cache=True)
def _room(moved, n_moved, extra):
    """Return the list ``moved[:n_moved]`` in an array with room for ``extra`` more entries.

    ``moved`` itself where it has the room, else a copy twice as long (or as needed). The
    kernels that list the tokens they move make room once per document or block, before its
    tokens: growing the list inside the token loop (a call that may replace the array) made
    those loops 15-24% slower, even where nothing was listed (pipelines/README.md, "Tenth
    session").
    """
    need = n_moved + extra
    if need <= moved.shape[0]:
        return moved
    grown = np.empty(max(need, 2 * moved.shape[0]), dtype=np.int64)
    grown[:n_moved] = moved[:n_moved]
    return grown


@njit(nogil=True, cache=True)
def _emit_word_delta(w, touched, n_touched, acc, words, topics, counts, m):
    """Append word ``w``'s net changes to a COO delta, topics ascending; return its new length.

    ``touched[:n_touched]`` are the topics whose ``acc`` (int32 [K], the word's net change)
    was touched; they are sorted in place (insertion sort: the lists are short), the non-zero
    ones written at ``words/topics/counts[m:]`` and ``acc`` reset to zero.
    """
    for j in range(1, n_touched):
        t = touched[j]
        jj = j
        while jj > 0 and touched[jj - 1] > t:
            touched[jj] = touched[jj - 1]
            jj -= 1
        touched[jj] = t
    for j in range(n_touched):
        t = touched[j]
        if acc[t] != 0:
            words[m] = w
            topics[m] = t
            counts[m] = acc[t]
            m += 1
        acc[t] = 0
    return m


@njit(nogil=True, cache=True)
def _dense_delta(before, after):
    """Return the change ``after - before`` of two int32 [V, K] tables as ``_sweep_delta`` does.

    Returns ``(words int32[M], topics int32[M], counts int32[M])``: the non-zero entries in
    row-major order, i.e. sorted by (word, topic). Two sequential passes over V x K entries.
    """
    n_rows, n_topics = after.shape
    m = 0
    for w in range(n_rows):
        for k in range(n_topics):
            m += before[w, k] != after[w, k]
    words = np.empty(m, dtype=np.int32)
    topics = np.empty(m, dtype=np.int32)
    counts = np.empty(m, dtype=np.int32)
    j = 0
    for w in range(n_rows):
        for k in range(n_topics):
            c = after[w, k] - before[w, k]
            if c != 0:
                words[j] = w
                topics[j] = k
                counts[j] = c
                j += 1
    return words, topics, counts


@njit(nogil=True, cache=True, inline="always")
def _doc_ll_tables(alpha):
    """Tabulate for :func:`_doc_loglik`: ``(A, lgamma(A), symmetric, small, table, lg_alpha)``.

    ``table[r, c] = lgamma(c + alpha_r) - lgamma(alpha_r)`` for ``c < small`` (one row ``r = 0``
    for a symmetric alpha, else one per topic), ``table[r, 0] = 0.0``. Inlined: called, the
    doc LL of synth20m took 25.5 ms against 23.3 (``pipelines/bench_doc_ll.py``).
    """
    n_topics = alpha.shape[0]
    a_sum = 0.0
    symmetric = True
    for k in range(n_topics):
        a_sum += alpha[k]
        if alpha[k] != alpha[0]:
            symmetric = False
    small = 1024 if symmetric else 16
    rows = 1 if symmetric else n_topics
    table = np.empty((rows, small), dtype=np.float64)
    lg_alpha = np.empty(n_topics, dtype=np.float64)
    for k in range(n_topics):
        lg_alpha[k] = math.lgamma(alpha[k])
    for k in range(rows):
        table[k, 0] = 0.0
        for c in range(1, small):
            table[k, c] = math.lgamma(c + alpha[k]) - lg_alpha[k]
    return a_sum, math.lgamma(a_sum), symmetric, small, table, lg_alpha


@njit(nogil=True, cache=True)
def _doc_loglik(doc_ptr, z, alpha):
    """Doc part of log p(w, z) (Griffiths & Steyvers 2004, eq. 3), from ``z`` alone.

    Per document: lgamma(A) - lgamma(N_d + A) + sum over its topics of
    lgamma(n_dk + alpha_k) - lgamma(alpha_k), with A = sum(alpha). Memory O(K).

    ``lgamma(c + alpha_k) - lgamma(alpha_k)`` is tabulated for the counts most pairs have
    (the same doubles the inline form gives, so the sum is unchanged to the bit): lgamma is
    ~20 ns. Counts c < 16 per topic, or, with a symmetric alpha, c < 1024 in one row: long
    documents of few topics (332 tokens, alpha 0.02: the 100M-token corpus) have most counts
    above 16.

    The second pass adds a term for every token, not only at a topic's first visit:
    a visited topic's count is already cleared to 0, whose entry is 0.0, and adding 0.0
    leaves a double unchanged, so the sum is the same to the bit. A branch on "first
    visit" was taken at random in a trained state (~100 topics in 200 tokens); without it
    the doc LL of synth20m at K = 1,000 takes 23 ms instead of 90 (pipelines/README.md,
    "The doc log-likelihood without its branch").
    """
    n_topics = alpha.shape[0]
    a_sum, lg_a_sum, symmetric, small, table, lg_alpha = _doc_ll_tables(alpha)
    # lgamma(N_d + A) of the lengths up to the longest document's (or 1024): many short
    # documents (Debian: 61,774 of 39 tokens) spent 8% of the time in it
    n_docs = doc_ptr.shape[0] - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, doc_ptr[d + 1] - doc_ptr[d])
    n_len = min(longest + 1, 1024)
    lg_len = np.empty(n_len, dtype=np.float64)
    for n in range(n_len):
        lg_len[n] = math.lgamma(n + a_sum)
    n_dk = np.zeros(n_topics, dtype=np.int32)
    total = 0.0
    for d in range(n_docs):
        lo = doc_ptr[d]
        hi = doc_ptr[d + 1]
        for i in range(lo, hi):
            n_dk[z[i]] += 1
        n_d = hi - lo
        part = lg_a_sum - (lg_len[n_d] if n_d < n_len else math.lgamma(n_d + a_sum))
        # counted once: a topic's later tokens read 0 and add table[., 0] = 0.0
        if symmetric:
            for i in range(lo, hi):
                t = z[i]
                c = n_dk[t]
                n_dk[t] = 0
                part += table[0, c] if c < small else math.lgamma(c + alpha[t]) - lg_alpha[t]
        else:
            for i in range(lo, hi):
                t = z[i]
                c = n_dk[t]
                n_dk[t] = 0
                part += table[t, c] if c < small else math.lgamma(c + alpha[t]) - lg_alpha[t]
        total += part
    return total


@njit(nogil=True, cache=True)
def _word_loglik_rows(n_wk_rows, beta):
    """Sum over entries of lgamma(n + beta) - lgamma(beta) (zeros add nothing)."""
    lg_beta = math.lgamma(beta)
    total = 0.0
    for w in range(n_wk_rows.shape[0]):
        for k in range(n_wk_rows.shape[1]):
            c = n_wk_rows[w, k]
            if c != 0:
                total += math.lgamma(c + beta) - lg_beta
    return total


@njit(nogil=True, cache=True)
def _word_loglik_topics(n_k, beta, n_words):
    """K lgamma(V beta) - sum_k lgamma(n_k + V beta)."""
    v_beta = n_words * beta
    total = n_k.shape[0] * math.lgamma(v_beta)
    for k in range(n_k.shape[0]):
        total -= math.lgamma(n_k[k] + v_beta)
    return total


@njit(nogil=True, cache=True)
def _build_alias(weights, lo, n, thr, alias, prob, small, large):
    """Vose alias table over ``weights[lo:lo+n]`` written into ``thr/alias/prob[lo:lo+n]``.

    ``thr`` uint32: slot ``j`` keeps itself when the low 32 random bits are below
    ``thr[j]``, else yields ``alias[j]`` (an index relative to ``lo``); a full slot is its
    own alias. ``prob`` float64 receives the probability with which :func:`_sample_alias`
    *actually* returns each entry, including the rounding of thresholds to 32 bits and of
    the slot choice, so a Metropolis-Hastings ratio built on ``prob`` is exact.
    ``small``/``large`` are int64 scratch of length >= n. Weights must be >= 0, sum > 0.
    """
    total = 0.0
    for j in range(n):
        total += weights[lo + j]
    scale = n / total
    n_small = 0
    n_large = 0
    for j in range(n):
        p = weights[lo + j] * scale
        prob[lo + j] = p  # scaled weight, a scratch use of prob until the end
        if p < 1.0:
            small[n_small] = j
            n_small += 1
        else:
            large[n_large] = j
            n_large += 1
    while n_small > 0 and n_large > 0:
        n_small -= 1
        s = small[n_small]
        g = large[n_large - 1]
        p_s = prob[lo + s]
        thr[lo + s] = np.uint32(min(p_s * _TWO32, 4294967295.0))
        alias[lo + s] = g
        p_g = prob[lo + g] - (1.0 - p_s)
        prob[lo + g] = p_g
        if p_g < 1.0:
            n_large -= 1
            small[n_small] = g
            n_small += 1
    # Leftovers are full slots up to rounding: they keep themselves.
    for j in range(n_large):
        g = large[j]
        thr[lo + g] = np.uint32(4294967295)
        alias[lo + g] = g
    for j in range(n_small):
        s = small[j]
        thr[lo + s] = np.uint32(4294967295)
        alias[lo + s] = s
    # Realised probabilities: slot j is drawn with probability P_j (the multiply-shift
    # slot choice of _sample_alias is not exactly uniform unless n divides 2**32), keeps
    # itself with thr_j / 2**32, else goes to alias_j.
    for j in range(n):
        prob[lo + j] = 0.0
    for j in range(n):
        # slot j gets the 32-bit values h with floor(h * n / 2**32) == j
        first = (j * 4294967296 + n - 1) // n
        last = ((j + 1) * 4294967296 + n - 1) // n
        p_slot = (last - first) / _TWO32
        keep = np.float64(thr[lo + j]) / _TWO32
        prob[lo + j] += p_slot * keep
        prob[lo + alias[lo + j]] += p_slot * (1.0 - keep)


@njit(nogil=True, cache=True)
def _sample_alias(state, lo, n, thr, alias):
    """Draw an entry index in [0, n) from the table at ``lo``: ``-> (state, j)``."""
    state, x = _next_u64(state)
    j = np.int64(((x >> _S32) * np.uint64(n)) >> _S32)
    if (x & _LOW32) < thr[lo + j]:
        return state, j
    return state, np.int64(alias[lo + j])


@njit(nogil=True, cache=True)
def _range_lists(tokens, doc_ptr, z, half, d_lo, d_hi, range_of, n_ranges, n_topics):
    """Return the tokens of the documents ``[d_lo, d_hi)``, grouped by word range.

    Those of one half (``d % 2 == half``: lightlda's), or of every document with ``half =
    -1``. Returns ``(topic counts int64 [K], ptr int64 [n_ranges + 1], idx int64 [n])``: the
    tokens of word range ``r`` (``range_of[w]``) are ``idx[ptr[r]:ptr[r + 1]]``, ascending;
    a word of range -1 (outside a sweep's window of words) is in none.
    """
    counts = np.zeros(n_topics, dtype=np.int64)
    ptr = np.zeros(n_ranges + 1, dtype=np.int64)
    stride = 1 if half < 0 else 2
    first = d_lo if half < 0 else d_lo + ((d_lo + half) & 1)
    for d in range(first, d_hi, stride):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            counts[z[i]] += 1
            r = range_of[tokens[i]]
            if r >= 0:
                ptr[r + 1] += 1
    for r in range(n_ranges):
        ptr[r + 1] += ptr[r]
    fill = ptr[:-1].copy()
    idx = np.empty(ptr[n_ranges], dtype=np.int64)
    for d in range(first, d_hi, stride):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            r = range_of[tokens[i]]
            if r >= 0:
                idx[fill[r]] = i
                fill[r] += 1
    return counts, ptr, idx
