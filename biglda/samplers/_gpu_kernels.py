"""numba-cuda kernels of the GPU samplers (cgs, lightlda): array-only, no Python objects.

Importing this module imports ``numba.cuda``; only :mod:`biglda.samplers.cgs_gpu` and
:mod:`biglda.samplers.lightlda_gpu` do so, after :func:`biglda.samplers.backends.require_gpu`
has checked that a GPU (or the CUDA simulator, ``NUMBA_ENABLE_CUDASIM=1``) is usable.

Layout (CuLDA_CGS, Xie et al. 2019; SaberLDA, Li et al. 2017): tokens are visited in
*word-major* order (``perm`` sorts the shard's positions by word), so neighbouring threads
read the same ``n_wk`` row and the same alias table. Documents are processed in chunks
whose dense doc-topic counts ``n_dk`` [D_chunk, K] fit a memory budget; ``n_dk`` is rebuilt
from ``z`` at the start of each chunk, never stored across sweeps.

Integer arithmetic in the random hash is done in int64 on values < 2**32 times constants
< 2**31, so it never overflows: the same code runs compiled and under the simulator
(where numpy scalars would warn on wrap-around).
"""

from __future__ import annotations

import sys
import threading

import numpy as np
from numba import cuda

MAX_BLOCK = 1024  # shared scratch size of the cgs kernel (the CUDA block-size limit)
_MASK32 = 0xFFFFFFFF
_TWO_M32 = 2.3283064365386963e-10  # 2**-32


def _lock_simulator_shared_arrays() -> None:
    """Make the CUDA simulator hand every thread of a block the *same* shared array.

    The simulator runs a block's threads as Python threads; ``cuda.shared.array`` looks the
    array up by call site and creates it when missing, with no lock (numba-cuda 0.x,
    ``FakeCUDAShared.array``). Two threads that reach the call together can both miss and
    each get a private ``np.empty`` array: a "shared" slot written by one thread is then
    never seen by the other, which reads uninitialised memory (the cgs kernel once moved a
    count to topic 5 with K = 2 this way). A probe kernel hit it in 2 of 3000 launches at
    the test's 1e-4 s GIL switch interval; machine load makes it likelier. No barrier in
    the kernel can prevent it (it happens at the declaration), so the lookup is locked here.
    Compiled kernels are unaffected: this only runs when the simulator is on.
    """
    from numba import config

    if not config.ENABLE_CUDASIM:
        return
    try:
        from numba.cuda.simulator.kernelapi import FakeCUDAShared
    except ImportError:  # pragma: no cover - a simulator without that class
        return
    if getattr(FakeCUDAShared, "_biglda_locked", False):
        return
    original = FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        allocations = getattr(self, "_allocations", None)
        if shape == 0 or alignment is not None or not isinstance(allocations, dict):
            return original(self, shape, dtype, alignment)  # nothing to race on / errors
        from numba.core import types
        from numba.np import numpy_support

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)  # the simulator's own key
        with lock:
            res = allocations.get(key)
            if res is None:
                res = np.empty(shape, dtype)
                allocations[key] = res
        return res

    FakeCUDAShared.array = array
    FakeCUDAShared._biglda_locked = True


_lock_simulator_shared_arrays()


# --------------------------------------------------------------------------- random streams
@cuda.jit(device=True, inline=True)
def _mix32(x):
    """A 32-bit integer hash (xorshift-multiply rounds); ``x`` int64 in [0, 2**32)."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _MASK32
    x ^= x >> 15
    x = (x * 0x31848BAB) & _MASK32
    x ^= x >> 16
    return x


@cuda.jit(device=True)
def _rand_u32(k0, k1, i, c):
    """Draw ``c`` of token ``i`` in the stream ``(k0, k1)``: uniform int64 in [0, 2**32).

    Counter-based: a pure function of (stream, token position, draw number), so the
    numbers a token sees do not depend on which thread or block processes it.
    """
    h = _mix32((i & _MASK32) ^ k0)
    h = _mix32(h ^ ((i >> 32) & _MASK32) ^ k1)
    h = _mix32(h ^ ((c * 0x1E3779B9) & _MASK32))
    return _mix32(h ^ k0)


@cuda.jit(device=True)
def _rand_unit(k0, k1, i, c):
    """Uniform float64 in [0, 1) on a 2**-32 grid."""
    return _rand_u32(k0, k1, i, c) * _TWO_M32


@cuda.jit(device=True)
def _alias_draw(k0, k1, i, c, lo, n, thr, alias):
    """Entry in [0, n) of the alias table at ``lo`` (uses draws ``c`` and ``c + 1``)."""
    j = (_rand_u32(k0, k1, i, c) * n) >> 32  # < 2**32 * 2**31: no overflow
    if _rand_u32(k0, k1, i, c + 1) < np.int64(thr[lo + j]):
        return j
    return np.int64(alias[lo + j])


# --------------------------------------------------------------------------- counts
@cuda.jit
def _count_doc_topics(perm, doc_of, z, pos_lo, pos_hi, d_lo, n_dk):
    """Add the topics of positions ``perm[pos_lo:pos_hi]`` to ``n_dk`` (int32 [D_chunk, K])."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for j in range(pos_lo + start, pos_hi, stride):
        i = perm[j]
        # atomics: tokens of one document are spread over threads
        cuda.atomic.add(n_dk, (doc_of[i] - d_lo, np.int64(z[i])), 1)


@cuda.jit
def _move_counts(pos, tokens, z, n_wk, n_k, sign):
    """Add ``sign`` times the counts of positions ``pos`` (int64 [M]) to ``n_wk``/``n_k``."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for j in range(start, pos.shape[0], stride):
        i = pos[j]
        t = np.int64(z[i])
        cuda.atomic.add(n_wk, (tokens[i], t), sign)  # atomics: words repeat across threads
        cuda.atomic.add(n_k, t, sign)


# --------------------------------------------------------------------------- cgs
@cuda.jit
def _cgs_kernel(tokens, perm, doc_of, z, n_wk, n_k, n_dk, alpha, beta, v_beta,
                pos_lo, pos_hi, run_len, d_lo, k0, k1, fused_count):
    """Collapsed Gibbs over positions ``perm[pos_lo:pos_hi]``, one block per run of tokens.

    tokens int32 [N], perm int64 [N] (word-major), doc_of int32 [N], z uint16/int32 [N],
    n_wk int32 [V, K], n_k int64 [K], n_dk int32 [D_chunk, K], alpha float64 [K].

    A block takes ``run_len`` consecutive word-major positions and samples them one after
    another; its threads share the O(K) work of each token: thread t owns topics
    t, t + B, t + 2B, ... (coalesced reads), a block scan of the per-thread masses picks
    the owning thread, which rescans its topics. Thread 0 then moves the counts.

    Counts are updated immediately with atomics. Why that is safe: every decrement removes
    a contribution that exists (the token's own old topic), so no count goes negative or
    loses an update, and after the kernel n_wk/n_k/n_dk equal the recount of z exactly.
    With one block (``gridDim.x == 1``) every token sees every earlier move: the sweep is
    an exact systematic-scan Gibbs sweep, deterministic for a given block size. With many
    blocks, a token may read counts that another block is changing at that moment: the
    same bounded staleness as AD-LDA across workers, confined to one sweep.
    ``fused_count`` (single block only) builds ``n_dk`` inside the kernel: one launch.
    """
    tid = cuda.threadIdx.x
    n_threads = cuda.blockDim.x
    n_topics = n_k.shape[0]
    part = cuda.shared.array(MAX_BLOCK, dtype=np.float64)  # per-thread masses, then their scan
    pick = cuda.shared.array(1, dtype=np.int64)  # the sampled topic (n_topics: none yet)

    if fused_count:
        for e in range(tid, n_dk.shape[0] * n_topics, n_threads):
            n_dk[e // n_topics, e % n_topics] = 0
        cuda.syncthreads()  # barrier: n_dk is zero everywhere before any thread adds to it
        for j in range(pos_lo + tid, pos_hi, n_threads):
            i = perm[j]
            cuda.atomic.add(n_dk, (doc_of[i] - d_lo, np.int64(z[i])), 1)
        cuda.syncthreads()  # barrier: n_dk is complete before any thread reads it

    n_runs = (pos_hi - pos_lo + run_len - 1) // run_len
    for r in range(cuda.blockIdx.x, n_runs, cuda.gridDim.x):
        j_hi = min(pos_hi, pos_lo + (r + 1) * run_len)
        for j in range(pos_lo + r * run_len, j_hi):
            i = perm[j]
            w = tokens[i]
            d = doc_of[i] - d_lo
            s = np.int64(z[i])
            # p(k) ∝ (n_dk + alpha_k)(n_wk + beta)/(n_k + V beta), counts without token i
            acc = 0.0
            for k in range(tid, n_topics, n_threads):
                own = 1 if k == s else 0
                acc += ((n_dk[d, k] - own + alpha[k]) * (n_wk[w, k] - own + beta)
                        / (n_k[k] - own + v_beta))
            # part[] and pick[0] were last read before the barrier that ended the previous
            # token (and only thread 0 reads pick), so these writes cannot clobber a read.
            part[tid] = acc
            if tid == 0:
                pick[0] = n_topics  # sentinel: no owner has reported a topic yet
            cuda.syncthreads()  # barrier: every part[tid] and the sentinel are written
            off = 1
            while off < n_threads:  # Hillis-Steele inclusive scan of the thread masses
                v = part[tid - off] if tid >= off else 0.0
                cuda.syncthreads()  # barrier: all reads of this step precede its writes
                part[tid] += v
                cuda.syncthreads()  # barrier: all writes of this step precede the next reads
                off *= 2
            u = _rand_unit(k0, k1, i, 0) * part[n_threads - 1]
            below = part[tid - 1] if tid > 0 else 0.0
            if below <= u and u < part[tid]:  # the thread whose interval holds u (see below)
                rem = u - below
                acc = 0.0
                t = -1
                last = -1
                for k in range(tid, n_topics, n_threads):
                    own = 1 if k == s else 0
                    p = ((n_dk[d, k] - own + alpha[k]) * (n_wk[w, k] - own + beta)
                         / (n_k[k] - own + v_beta))
                    acc += p
                    if p > 0.0:
                        last = k
                    if rem < acc:  # the first of its topics whose prefix passes u
                        t = k
                        break
                if t < 0:  # rounding, or another block changed the counts in between
                    t = last
                if t >= 0:
                    # The scan is rounded: in principle two threads may both claim u. The
                    # smaller topic wins, so the choice never depends on thread timing.
                    cuda.atomic.min(pick, 0, t)
            cuda.syncthreads()  # barrier: the owner's pick[0] is written before thread 0 reads
            if tid == 0:
                t = pick[0]
                if t >= n_topics or t < 0:  # no owner (rounding): search all topics here
                    t = _cgs_fallback(n_dk, n_wk, n_k, alpha, beta, v_beta, d, w, s,
                                      _rand_unit(k0, k1, i, 0))
                if t != s:
                    z[i] = t
                    cuda.atomic.sub(n_wk, (w, s), 1)
                    cuda.atomic.add(n_wk, (w, t), 1)
                    cuda.atomic.sub(n_dk, (d, s), 1)
                    cuda.atomic.add(n_dk, (d, t), 1)
                    cuda.atomic.sub(n_k, s, 1)
                    cuda.atomic.add(n_k, t, 1)
            # barrier: the token's count move is visible to every thread before the next
            # token's masses are computed, and every read of part[]/pick[0] above is done
            # before the next token overwrites them
            cuda.syncthreads()


@cuda.jit(device=True)
def _cgs_fallback(n_dk, n_wk, n_k, alpha, beta, v_beta, d, w, s, r):
    """Sequential draw of a topic for token (d, w, old topic s) with the uniform ``r``.

    The first topic whose prefix sum exceeds ``r * total``; if rounding leaves none, the
    last topic with non-zero weight; never outside [0, K). Only used when the block scan
    produced no owner, which exact arithmetic rules out.
    """
    n_topics = n_k.shape[0]
    total = 0.0
    for k in range(n_topics):
        own = 1 if k == s else 0
        total += ((n_dk[d, k] - own + alpha[k]) * (n_wk[w, k] - own + beta)
                  / (n_k[k] - own + v_beta))
    u = r * total
    acc = 0.0
    last = s
    for k in range(n_topics):
        own = 1 if k == s else 0
        p = ((n_dk[d, k] - own + alpha[k]) * (n_wk[w, k] - own + beta)
             / (n_k[k] - own + v_beta))
        acc += p
        if p > 0.0:
            last = k
        if u < acc:
            return k
    return last


# --------------------------------------------------------------------------- alias tables
@cuda.jit
def _build_alias_rows(row_ptr, weights, thr, alias, scaled, small, large):
    """Vose alias tables, one thread per row of a CSR of weights (float64 [M], >= 0).

    Row r covers ``[row_ptr[r], row_ptr[r+1])``; outputs (same positions): ``thr`` uint32
    (slot j keeps itself when a 32-bit draw is below ``thr[j]``) and ``alias`` int32 (an
    index relative to the row start). ``scaled`` float64 [M], ``small``/``large`` int32 [M]
    are scratch. A row whose weights are all zero gets uniform full slots.
    """
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for r in range(start, row_ptr.shape[0] - 1, stride):
        lo = row_ptr[r]
        n = row_ptr[r + 1] - lo
        if n == 0:
            continue
        total = 0.0
        for j in range(n):
            total += weights[lo + j]
        n_small = 0
        n_large = 0
        for j in range(n):
            p = weights[lo + j] * n / total if total > 0.0 else 1.0
            scaled[lo + j] = p
            if p < 1.0:
                small[lo + n_small] = j
                n_small += 1
            else:
                large[lo + n_large] = j
                n_large += 1
        while n_small > 0 and n_large > 0:
            n_small -= 1
            sj = small[lo + n_small]
            g = large[lo + n_large - 1]
            p_s = scaled[lo + sj]
            thr[lo + sj] = np.uint32(min(p_s * 4294967296.0, 4294967295.0))
            alias[lo + sj] = g
            p_g = scaled[lo + g] - (1.0 - p_s)
            scaled[lo + g] = p_g
            if p_g < 1.0:
                n_large -= 1
                small[lo + n_small] = g
                n_small += 1
        for j in range(n_large):  # leftovers are full up to rounding
            g = large[lo + j]
            thr[lo + g] = np.uint32(4294967295)
            alias[lo + g] = g
        for j in range(n_small):
            sj = small[lo + j]
            thr[lo + sj] = np.uint32(4294967295)
            alias[lo + sj] = sj


# --------------------------------------------------------------------------- lightlda
@cuda.jit
def _lightlda_kernel(tokens, perm, doc_of, doc_ptr, z, n_wk, n_k, n_dk, alpha, beta, v_beta,
                     snap_wk, coef0, w_ptr, w_topic, w_mass, thr, alias, b_lo, b_mass,
                     a_lo, a_sum, symmetric, mh_steps, pos_lo, pos_hi, d_lo, k0, k1, stats):
    """LightLDA cycle-proposal MH over positions ``perm[pos_lo:pos_hi]``, a thread per token.

    tokens int32 [N], perm int64 [N] (word-major), doc_of int32 [N], doc_ptr int64 [D+1],
    z uint16/int32 [N], n_wk int32 [V, K], n_k int64 [K], n_dk int32 [D_chunk, K],
    alpha float64 [K]; snap_wk int32 [V, K] / coef0 float64 [K] are ``n_wk`` and
    1/(n_k + V beta) *without the tokens being swept* (see below); w_ptr int64 [V+1], w_topic int32 [M] and
    w_mass float64 [V] describe the sparse word tables; thr uint32 / alias int32 hold all
    alias tables (word rows, then the dense beta row at ``b_lo``, then alpha at ``a_lo``);
    stats int64 [2] receives (accepted, proposed).

    Word proposal q_w(k) ∝ (snap_wk[w, k] + beta) coef0[k]: with probability
    w_mass / (w_mass + b_mass) from the word's alias over its non-zeros, else from the
    shared dense beta table. The tables are built from the counts of every token *except*
    those of the documents being swept (the sampler sweeps even, then odd documents, as
    the CPU kernel does): a proposal may depend on the state only through tokens that are
    not being resampled, else each token's kernel depends on where the sweep started and
    the chain is biased (a tiny-corpus enumeration shows it). With that, q_w is an
    independence proposal and a = min(1, p(t) q_w(s) / (p(s) q_w(t))) is exact. Doc proposal q_d(k) ∝ n_dk + alpha_k (counts with token i): the topic of a
    uniform token of the document, or a draw from alpha; a = min(1, p(t)(n_ds¬i + alpha_s)
    / (p(s)(n_dt¬i + alpha_t))). Table probabilities are taken as the weights: the 32-bit
    thresholds round them by < 2**-32, a bias far below what any test can see.

    Counts stay those of the token's old topic s0 until it is done (the target subtracts
    its own contribution), then one atomic move; safe for the reason given in
    :func:`_cgs_kernel`. One thread in one block gives the exact sequential chain.
    """
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    n_topics = n_k.shape[0]
    n_accept = 0
    n_propose = 0
    for j in range(pos_lo + start, pos_hi, stride):
        i = perm[j]
        w = tokens[i]
        dg = doc_of[i]
        d = dg - d_lo
        doc_lo = doc_ptr[dg]
        n_doc = doc_ptr[dg + 1] - doc_lo
        s0 = np.int64(z[i])
        s = s0
        p_s = ((n_dk[d, s] - 1 + alpha[s]) * (n_wk[w, s] - 1 + beta) / (n_k[s] - 1 + v_beta))
        mass = w_mass[w]
        wl = w_ptr[w]
        wn = w_ptr[w + 1] - wl
        c = 0
        for _ in range(mh_steps):
            # --- word proposal ---
            if _rand_unit(k0, k1, i, c) * (mass + b_mass) < mass:
                t = np.int64(w_topic[wl + _alias_draw(k0, k1, i, c + 1, wl, wn, thr, alias)])
            else:
                t = _alias_draw(k0, k1, i, c + 1, b_lo, n_topics, thr, alias)
            c += 3
            n_propose += 1
            if t != s:
                own = 1 if t == s0 else 0
                p_t = ((n_dk[d, t] - own + alpha[t]) * (n_wk[w, t] - own + beta)
                       / (n_k[t] - own + v_beta))
                q_s = (snap_wk[w, s] + beta) * coef0[s]
                q_t = (snap_wk[w, t] + beta) * coef0[t]
                if _rand_unit(k0, k1, i, c) * p_s * q_t < p_t * q_s:
                    s = t
                    p_s = p_t
                    n_accept += 1
            else:
                n_accept += 1
            c += 1
            # --- doc proposal ---
            u = _rand_unit(k0, k1, i, c) * (n_doc + a_sum)
            if u < n_doc:
                pos = min(np.int64(u), n_doc - 1)
                # token i itself stands for its *current* state s (z[i] still holds s0)
                t = s if doc_lo + pos == i else np.int64(z[doc_lo + pos])
            elif symmetric:
                t = min(np.int64((u - n_doc) / a_sum * n_topics), n_topics - 1)
            else:
                t = _alias_draw(k0, k1, i, c + 1, a_lo, n_topics, thr, alias)
            c += 3
            n_propose += 1
            if t != s:
                own_t = 1 if t == s0 else 0
                own_s = 1 if s == s0 else 0
                p_t = ((n_dk[d, t] - own_t + alpha[t]) * (n_wk[w, t] - own_t + beta)
                       / (n_k[t] - own_t + v_beta))
                num = p_t * (n_dk[d, s] - own_s + alpha[s])
                den = p_s * (n_dk[d, t] - own_t + alpha[t])
                if _rand_unit(k0, k1, i, c) * den < num:
                    s = t
                    p_s = p_t
                    n_accept += 1
            else:
                n_accept += 1
            c += 1
        if s != s0:
            z[i] = s
            cuda.atomic.sub(n_wk, (w, s0), 1)
            cuda.atomic.add(n_wk, (w, s), 1)
            cuda.atomic.sub(n_dk, (d, s0), 1)
            cuda.atomic.add(n_dk, (d, s), 1)
            cuda.atomic.sub(n_k, s0, 1)
            cuda.atomic.add(n_k, s, 1)
    if n_propose > 0:  # one pair of atomics per thread, not per token
        cuda.atomic.add(stats, 0, n_accept)
        cuda.atomic.add(stats, 1, n_propose)
