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
shards also ``mh_steps + 1`` float32 factors G. Cost per token: O(mh_steps), independent of
K except through the cache footprint of the K scratch rows.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from numba import njit

from biglda.errors import ConfigError
from biglda.samplers._kernels import _build_alias, _sample_alias
from biglda.samplers.base import Sampler, SweepResult, check_sweep_args
from biglda.samplers.rng import _next_float


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


@njit(nogil=True, cache=True)
def _warp_sweep(doc_ptr, z, n_wk, n_k, alpha, a_sum, symmetric, a_thr, a_alias, beta,
                n_words, state, mh_steps, word_ptr, perm, inv, zw0, zw, wprop, dprop, g_prop,
                g_cur, local_only, out_words, out_topics, out_counts, delta_k):
    """One WarpLDA sweep (word pass, doc pass, word pass); updates ``z``, ``n_wk``, ``n_k``.

    ``z`` uint16/int32 [N]; ``n_wk`` int32 [V_local, K]; ``n_k`` int64 [K]; ``perm``/``inv``
    int64 [N] word order -> doc order and back; ``zw0``/``zw`` [N] and ``wprop``/``dprop``
    [N * mh_steps] scratch of z's dtype (``dprop`` in word order); ``g_prop`` float32
    [N * mh_steps] and ``g_cur`` float32 [N] scratch (length >= 1 when ``local_only``);
    ``out_*`` int32 [>= 2 N] receive the COO delta of ``n_wk``, ``delta_k`` int64 [K] (zero)
    that of ``n_k``. Returns ``(state, n_accepted, n_proposed, n_delta)``.
    """
    n_topics = n_k.shape[0]
    n_rows = n_wk.shape[0]
    v_beta = n_words * beta
    k_beta = n_topics * beta
    m_steps = mh_steps
    hist = np.zeros(n_topics, dtype=np.int32)  # the visited row's counts (word or doc)
    acc = np.zeros(n_topics, dtype=np.int32)  # a word's net change, for the delta
    touched = np.empty(n_topics, dtype=np.int64)
    seen = np.full(n_topics, -1, dtype=np.int64)
    coef = np.empty(n_topics, dtype=np.float64)  # 1 / (n_k + V beta), frozen per pass
    pass_k = np.zeros(n_topics, dtype=np.int64)
    n_accept = 0
    n_propose = 0

    # ---- pass 1, word-major: snapshot z in word order, draw word proposals ----
    # (the only gather of z: passes 2 and 3 then stream; wprop is written in doc order)
    for w in range(n_rows):
        lo = word_ptr[w]
        hi = word_ptr[w + 1]
        if lo == hi:
            continue
        n_w = hi - lo
        for j in range(lo, hi):
            t = z[perm[j]]
            zw0[j] = t
            if not local_only:
                hist[t] += 1
        mass = n_w + k_beta
        for j in range(lo, hi):
            i = perm[j]
            s0 = np.int64(zw0[j])
            if not local_only:
                g_cur[i] = (n_wk[w, s0] - 1 + beta) / (hist[s0] - 1 + beta)
            for m in range(m_steps):
                state, u = _next_float(state)
                u *= mass
                if u < n_w:
                    pos = np.int64(u)
                    if pos >= n_w:
                        pos = n_w - 1
                    t = np.int64(zw0[lo + pos])
                else:
                    t = np.int64((u - n_w) / beta)
                    if t >= n_topics:
                        t = n_topics - 1
                wprop[i * m_steps + m] = t
                if not local_only:
                    sub = 1 if t == s0 else 0
                    g_prop[i * m_steps + m] = (n_wk[w, t] - sub + beta) / (hist[t] - sub + beta)
        if not local_only:
            for j in range(lo, hi):
                hist[zw0[j]] = 0

    # ---- pass 2, document-major: accept word proposals, draw doc proposals ----
    for k in range(n_topics):
        coef[k] = 1.0 / (n_k[k] + v_beta)
    for d in range(doc_ptr.shape[0] - 1):
        lo = doc_ptr[d]
        hi = doc_ptr[d + 1]
        n_d = hi - lo
        for i in range(lo, hi):
            hist[z[i]] += 1
        for i in range(lo, hi):
            s0 = np.int64(z[i])
            s = s0
            hist[s] -= 1
            # n_s without token i: n_k still holds it at s0 (frozen for this pass)
            c_s = 1.0 / (n_k[s] - 1 + v_beta)
            g_s = 1.0 if local_only else g_cur[i]
            p_s = (hist[s] + alpha[s]) * c_s
            for m in range(m_steps):
                t = np.int64(wprop[i * m_steps + m])
                n_propose += 1
                if t == s:
                    n_accept += 1
                    continue
                c_t = 1.0 / (n_k[t] - 1 + v_beta) if t == s0 else coef[t]
                p_t = (hist[t] + alpha[t]) * c_t
                g_t = 1.0 if local_only else g_prop[i * m_steps + m]
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
            zw[j] = z[i]
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
                dprop[j * m_steps + m] = t
        for i in range(lo, hi):
            hist[z[i]] = 0
    for k in range(n_topics):  # the delayed update of the topic totals
        n_k[k] += pass_k[k]
        delta_k[k] += pass_k[k]
        pass_k[k] = 0
        coef[k] = 1.0 / (n_k[k] + v_beta)

    # ---- pass 3, word-major: bring rows up to date, accept doc proposals ----
    n_out = 0
    for w in range(n_rows):
        lo = word_ptr[w]
        hi = word_ptr[w + 1]
        if lo == hi:
            continue
        # zw0 holds the topics of pass 1 (what n_wk counts), zw the current ones
        for j in range(lo, hi):
            t = zw[j]
            if local_only:
                hist[t] += 1
            elif t != zw0[j]:
                n_wk[w, zw0[j]] -= 1
                n_wk[w, t] += 1
        for j in range(lo, hi):
            s1 = np.int64(zw[j])  # what n_k counts now
            s = s1
            if local_only:
                hist[s] -= 1
                p_s = (hist[s] + beta) / (n_k[s] - 1 + v_beta)
            else:
                n_wk[w, s] -= 1
                p_s = (n_wk[w, s] + beta) / (n_k[s] - 1 + v_beta)
            for m in range(m_steps):
                t = np.int64(dprop[j * m_steps + m])
                n_propose += 1
                if t == s:
                    n_accept += 1
                    continue
                c_t = 1.0 / (n_k[t] - 1 + v_beta) if t == s1 else coef[t]
                row_t = hist[t] if local_only else n_wk[w, t]
                p_t = (row_t + beta) * c_t
                state, u = _next_float(state)
                if u * p_s < p_t:
                    s = t
                    p_s = p_t
                    n_accept += 1
            if local_only:
                hist[s] += 1
            else:
                n_wk[w, s] += 1
            if s != s1:
                zw[j] = s
                z[perm[j]] = s
                pass_k[s1] -= 1
                pass_k[s] += 1
        # the word's net change since pass 1: into the row (on one shard) and the delta
        n_touched = 0
        for j in range(lo, hi):
            t = np.int64(zw[j])
            if local_only:
                hist[t] = 0
            t0 = np.int64(zw0[j])
            if t != t0:
                if local_only:
                    n_wk[w, t0] -= 1
                    n_wk[w, t] += 1
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
        else:  # few: insertion sort, topics ascending within the word
            for a in range(1, n_touched):
                t = touched[a]
                b = a
                while b > 0 and touched[b - 1] > t:
                    touched[b] = touched[b - 1]
                    b -= 1
                touched[b] = t
            for a in range(n_touched):
                t = touched[a]
                if acc[t] != 0:
                    out_words[n_out] = w
                    out_topics[n_out] = t
                    out_counts[n_out] = acc[t]
                    n_out += 1
                acc[t] = 0
    for k in range(n_topics):
        n_k[k] += pass_k[k]
        delta_k[k] += pass_k[k]
    return state, n_accept, n_propose, n_out


class WarpLDASampler(Sampler):
    """WarpLDA Metropolis-Hastings on the CPU: O(1) per token, **not exact** (delayed updates).

    Each sweep runs a word pass, a document pass and a word pass over the shard (see the
    module docstring); the topic totals ``n_k`` are frozen within each pass, so the chain
    only approximates collapsed Gibbs. Use ``cgs`` as the exact reference.

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

    def __init__(self, mh_steps: int = 2):
        if int(mh_steps) < 1:
            raise ConfigError(f"mh_steps must be >= 1, got {mh_steps}")
        self.mh_steps = int(mh_steps)
        self._orders: dict = {}
        self._lock = threading.Lock()

    def _word_order(self, tokens, n_rows):
        """``(word_ptr, perm, inv)`` for ``tokens``, cached: a shard's tokens do not change."""
        key = (tokens.ctypes.data, tokens.shape[0], n_rows)
        with self._lock:
            hit = self._orders.get(key)
        if hit is not None and np.array_equal(hit[0], tokens):
            return hit[1:]
        order = _word_order(tokens, np.int64(n_rows))
        with self._lock:
            if len(self._orders) >= 8:
                self._orders.pop(next(iter(self._orders)))
            self._orders[key] = (tokens.copy(), *order)
        return order

    def sweep(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key) -> SweepResult:
        """Resample every token of one shard once (see :meth:`Sampler.sweep`).

        The last word pass knows each word's net change, so the delta comes from the kernel
        instead of a comparison with a copy of ``z``.
        """
        alpha = check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key)
        t0 = time.perf_counter()
        n, n_topics = tokens.shape[0], n_k.shape[0]
        word_ptr, perm, inv = self._word_order(tokens, n_wk.shape[0])
        m = self.mh_steps
        zw0 = np.empty(n, dtype=z.dtype)
        zw = np.empty(n, dtype=z.dtype)
        wprop = np.empty(n * m, dtype=z.dtype)
        dprop = np.empty(n * m, dtype=z.dtype)
        # one shard's own table (n_k sums to its tokens): the word counts are its tokens', G = 1
        local_only = int(n_k.sum()) == n
        g_prop = np.empty(1 if local_only else n * m, dtype=np.float32)
        g_cur = np.empty(1 if local_only else n, dtype=np.float32)
        a_sum = float(alpha.sum())
        symmetric = bool(np.all(alpha == alpha[0]))
        a_thr = np.empty(n_topics, dtype=np.uint32)
        a_alias = np.empty(n_topics, dtype=np.int32)
        if not symmetric:
            _build_alias(alpha, 0, n_topics, a_thr, a_alias, np.empty(n_topics, np.float64),
                         np.empty(n_topics, np.int64), np.empty(n_topics, np.int64))
        # a word's net change has at most 2 entries per token moved
        out_words = np.empty(2 * n, dtype=np.int32)
        out_topics = np.empty(2 * n, dtype=np.int32)
        out_counts = np.empty(2 * n, dtype=np.int32)
        delta_k = np.zeros(n_topics, dtype=np.int64)
        _, n_accept, n_propose, n_out = _warp_sweep(
            doc_ptr, z, n_wk, n_k, alpha, a_sum, symmetric, a_thr, a_alias, float(beta),
            float(n_words), key.state(), m, word_ptr, perm, inv, zw0, zw, wprop, dprop,
            g_prop, g_cur, local_only, out_words, out_topics, out_counts, delta_k)
        return SweepResult(out_words[:n_out].copy(), out_topics[:n_out].copy(),
                           out_counts[:n_out].copy(), delta_k, n,
                           n_accept / n_propose if n_propose else None,
                           time.perf_counter() - t0)

    def __repr__(self) -> str:
        """Show the number of MH steps."""
        return f"WarpLDASampler(mh_steps={self.mh_steps})"
