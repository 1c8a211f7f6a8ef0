"""Collapsed Gibbs sampling on the GPU: sparse-aware, word-major, float32, a warp per run.

The full conditional of token i (word w, document d, old topic s), counts without i, splits
as in CuLDA_CGS (Xie, Liang, Li & Tan 2019, sec. 4) and SaberLDA (Li et al. 2017):

    p(k) ∝ (n_dk + alpha_k) pw(k),   pw(k) = (n_wk + beta) / (n_k + V beta)
         =  alpha_k pw(k)            the dense *word part*: one vector per word
         +  n_dk pw(k)               the sparse *doc part*: non-zero only on the doc's topics

Tokens are visited in word-major order, cut into runs of at most ``run_len`` tokens of one
word; a warp takes a run, builds ``pw`` [K] (float32) and the word mass
Q = sum_k alpha_k pw(k) once for it, and keeps both exact through the run's own moves (only
two entries change per move). The doc part sum_k n_dk pw(k) equals the sum of pw(z_j) over
the document's other tokens j, so it is evaluated over the document's tokens — the
multiset of its non-zero topics — by the 32 lanes (each a contiguous block of them, so the
chain does not depend on the warp's width), with a warp scan (``shfl_up_sync``) and the
owning lane found by ``ballot_sync``; no ``n_dk`` is built at all. A draw lands in the
doc part with probability S / (S + Q) (most draws once topics have formed, alpha small);
otherwise the lanes scan alpha_k pw(k) for the word part. ``deterministic=True`` runs one
warp over all runs in order: the exact sequential Gibbs sweep, reproducible bit for bit.

Precision: pw and the sums are float32 (half the bytes of the float64 reference). A float32
sum of K terms carries a relative error of at most ~K * 6e-8 (in practice ~sqrt(K) * 6e-8):
draw probabilities off by < 1e-4 relative at K = 1000, far below Monte-Carlo noise; the
exact-posterior test (chi-square over every state of a tiny corpus) cannot see it. Where a
rounded scan finds no owner the draw falls back to the last non-zero entry of the lane that
owns the end of the interval, never outside the support.

Importing this module is cheap; it registers the ("cgs", "gpu") factory, which checks the
GPU (or the CUDA simulator) when a sampler is built and raises ConfigError otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers._gpu_common import GPUSampler, compile_kernels
from biglda.samplers.registry import register_sampler

if TYPE_CHECKING:  # bound by compile_kernels when the kernels first compile
    from numba import cuda

    from biglda.samplers._gpu_kernels import _move_topic, _rand_unit

_FULL = 0xFFFFFFFF  # every lane of the warp takes part in each shuffle / ballot
#: float32 entries of the per-warp word-part buffers [warps, K] on a device (64 MiB)
_PW_BUDGET = 1 << 24


class CGSGPUSampler(GPUSampler):
    """Exact collapsed Gibbs on one GPU: a sparse doc part, a dense word part per word.

    Parameters
    ----------
    deterministic : bool
        One warp: the exact sequential sweep, identical on every run.
    run_len : int or None
        Word-major tokens per warp run (default 256; a quarter of the shard under the
        simulator). Longer runs share a word's ``pw`` over more tokens.
    block_threads : int or None
        Lanes per warp: 32 on a device (the only value allowed there); under the simulator
        2 by default (it runs a Python thread per lane).
    max_blocks, ndk_budget
        Cap on concurrent warps; ``ndk_budget`` is accepted for a common geometry and unused
        (this kernel builds no ``n_dk``).

    Examples
    --------
    >>> from biglda.samplers import get_sampler  # doctest: +SKIP
    >>> get_sampler("cgs", "gpu", deterministic=True)  # doctest: +SKIP
    CGSGPUSampler(deterministic=True, simulator=True)
    """

    algorithm = "cgs"
    uses_ndk = False

    def __init__(self, deterministic: bool = False, run_len: int | None = None, **geometry):
        super().__init__(deterministic, **geometry)
        if run_len is not None and int(run_len) < 1:
            raise ConfigError(f"run_len must be >= 1, got {run_len}")
        self.run_len = run_len
        lanes = self.block_threads
        if lanes is not None and not 1 <= int(lanes) <= 32:
            raise ConfigError(f"block_threads (lanes of a warp) must be in [1, 32], got {lanes}")
        if lanes is not None and int(lanes) != 32 and not self.simulator:
            raise ConfigError("block_threads must be 32 (one warp) on a GPU")

    def _lanes(self) -> int:
        if self.block_threads is not None:
            return int(self.block_threads)
        return 2 if self.simulator else 32

    def runs(self, xp, tokens, perm, n: int):
        """Return the run starts ``int64 [R + 1]`` over ``perm[0:n]``.

        A new run at each new word and every ``run_len`` positions, so a run is at most
        ``run_len`` tokens of one word.
        """
        run_len = self.run_len or (max(1, -(-n // 4)) if self.simulator else 256)
        words = tokens[perm[:n]]
        j = xp.arange(n, dtype=np.int64)
        start = (j % run_len) == 0
        start[1:] |= words[1:] != words[:-1]
        return xp.concatenate([xp.nonzero(start)[0].astype(np.int64),
                               xp.asarray([n], dtype=np.int64)])

    def _run_chunk(self, xp, d, state, perm, pos_lo, pos_hi, d_lo, n_dk, keys, alpha,
                   beta, v_beta):
        n = pos_hi - pos_lo
        n_topics = int(d["n_k"].shape[0])
        cache = d["cache"]  # kept across sweeps of a loaded shard (GPUSampler.load)
        run_ptr = cache.get(("runs", *d["chunk_key"]))
        if run_ptr is None:
            run_ptr = cache[("runs", *d["chunk_key"])] = self.runs(xp, d["tokens"], perm, n)
        n_runs = int(run_ptr.shape[0]) - 1
        cap = self.max_blocks or (2 if self.simulator else max(1, _PW_BUDGET // n_topics))
        warps = 1 if self.deterministic else max(1, min(cap, n_runs, 65535))
        pw_buf = cache.get("pw_buf")
        if pw_buf is None or pw_buf.shape[0] < warps or pw_buf.shape[1] != n_topics:
            pw_buf = cache["pw_buf"] = xp.empty((warps, n_topics), dtype=np.float32)
        alpha32 = alpha.astype(np.float32)
        self._k._cgs_sparse_kernel[warps, self._lanes()](
            d["tokens"], perm, d["doc_of"], d["doc_ptr"], d["z"], d["n_wk"], d["n_k"], alpha32,
            np.float32(beta), np.float32(v_beta), pw_buf, run_ptr, keys[0], keys[1])

    @property
    def _k(self):
        return kernels()


def kernels():
    """Return the module's compiled kernels, plus ``shared`` (numba.cuda on first use)."""
    return compile_kernels(globals(), ("_cgs_sparse_kernel",),
                           device=("_warp_scan", "_first_lane", "_owner_lane", "_word_weight"))


# --------------------------------------------------------------------------- the kernel
# Plain Python, compiled by numba-cuda on first use (compile_kernels): cuda and the shared
# device functions are bound in this module's globals then.
def _warp_scan(v, lane, n_lanes):
    """Inclusive prefix sum of ``v`` over the lanes (Hillis-Steele with ``shfl_up_sync``)."""
    off = 1
    while off < n_lanes:
        o = cuda.shfl_up_sync(_FULL, v, off)
        if lane >= off:
            v += o
        off *= 2
    return v


def _first_lane(mask):
    """Index of the lowest set bit of a non-zero ballot ``mask``."""
    low = mask & (~mask + 1)
    return cuda.popc(low - 1)


def _owner_lane(scan, acc, u):
    """Return the lane whose block of masses holds ``u``: the first with mass and ``scan > u``.

    ``scan`` is the lanes' inclusive prefix sum of their masses ``acc``. A lane without mass
    (no topics or tokens of its own) is never chosen: its ``scan`` repeats the one below it
    through a different addition tree, and may round above ``u`` when the lane below did
    not, and an empty lane has nothing to pick. Should rounding leave no lane with mass
    above ``u``, the last lane with mass is chosen (its walk then picks its last entry).
    The caller guarantees that some lane has mass.
    """
    has = cuda.ballot_sync(_FULL, acc > 0)
    hit = cuda.ballot_sync(_FULL, scan > u) & has
    if hit != 0:
        return _first_lane(hit)
    return 31 - cuda.clz(has)


def _word_weight(n_wk, n_k, w, k, beta, v_beta, own):
    """pw(k) = (n_wk - own + beta) / (n_k - own + V beta) in float32."""
    return ((np.float32(n_wk[w, k] - own) + beta) / (np.float32(n_k[k] - own) + v_beta))


def _cgs_sparse_kernel(tokens, perm, doc_of, doc_ptr, z, n_wk, n_k, alpha, beta, v_beta,
                       pw_buf, run_ptr, k0, k1):
    """Sparse-aware collapsed Gibbs over word-major runs, one warp (block) per run.

    tokens int32 [N], perm int64 [M] (word-major positions), doc_of int32 [N], doc_ptr
    int64 [D + 1], z uint16/int32 [N], n_wk int32 [V, K], n_k int64 [K], alpha float32 [K],
    pw_buf float32 [warps, K] (scratch), run_ptr int64 [R + 1] (runs of perm).

    Counts move with atomics as soon as a token is resampled (see
    :func:`biglda.samplers._gpu_kernels._move_token` for why that is safe). One warp: every
    token sees every earlier move, the exact sequential sweep. Many warps: a token may read
    counts and topics another warp is changing, and a warp's ``pw`` does not follow other
    warps' moves of ``n_k`` until its next run: AD-LDA-like staleness within one sweep.
    """
    lane = cuda.threadIdx.x
    n_lanes = cuda.blockDim.x
    n_topics = n_k.shape[0]
    pw = pw_buf[cuda.blockIdx.x]
    per_k = (n_topics + n_lanes - 1) // n_lanes
    n_runs = run_ptr.shape[0] - 1
    for r in range(cuda.blockIdx.x, n_runs, cuda.gridDim.x):
        j_lo = run_ptr[r]
        j_hi = run_ptr[r + 1]
        w = tokens[perm[j_lo]]
        # the dense word part, once per run: pw(k) and Q = sum_k alpha_k pw(k)
        acc = np.float32(0.0)
        for k in range(lane, n_topics, n_lanes):
            p = _word_weight(n_wk, n_k, w, k, beta, v_beta, 0)
            pw[k] = p
            acc += alpha[k] * p
        q_mass = cuda.shfl_sync(_FULL, _warp_scan(acc, lane, n_lanes), n_lanes - 1)
        cuda.syncwarp(_FULL)  # pw is written before any lane reads another lane's topics
        for j in range(j_lo, j_hi):
            i = perm[j]
            s = np.int64(z[i])
            dg = doc_of[i]
            # lane l owns a contiguous block of the document's tokens (and of the topics
            # below), so the draw walks them in the same order whatever the warp's width
            doc_lo = doc_ptr[dg]
            doc_hi = doc_ptr[dg + 1]
            per = (doc_hi - doc_lo + n_lanes - 1) // n_lanes
            # pw(s) without token i; lane 0's reading for all, so that every lane computes
            # the same masses (other warps may be moving n_k meanwhile) and branches alike
            pw_s = cuda.shfl_sync(_FULL, _word_weight(n_wk, n_k, w, s, beta, v_beta, 1), 0)
            # the sparse doc part: pw of the topic of each other token of the document
            acc = np.float32(0.0)
            for jj in range(doc_lo + lane * per, min(doc_hi, doc_lo + (lane + 1) * per)):
                if jj != i:
                    t = np.int64(z[jj])
                    acc += pw_s if t == s else pw[t]
            scan = _warp_scan(acc, lane, n_lanes)
            s_mass = cuda.shfl_sync(_FULL, scan, n_lanes - 1)
            q_i = q_mass + alpha[s] * (pw_s - pw[s])
            u = np.float32(_rand_unit(k0, k1, i, 0)) * (s_mass + q_i)
            pick = -1
            if u < s_mass:
                owner = _owner_lane(scan, acc, u)
                if lane == owner:
                    rem = u - (scan - acc)
                    run = np.float32(0.0)
                    for jj in range(doc_lo + lane * per, min(doc_hi, doc_lo + (lane + 1) * per)):
                        if jj != i:
                            t = np.int64(z[jj])
                            run += pw_s if t == s else pw[t]
                            pick = t  # the last one seen, should rounding pass them all
                            if rem < run:
                                break
            else:
                # the word part: rescale into the freshly summed masses (Q is kept
                # incrementally and may differ from them by rounding)
                frac = min((u - s_mass) / q_i, np.float32(0.99999994))
                acc = np.float32(0.0)
                for k in range(lane * per_k, min(n_topics, (lane + 1) * per_k)):
                    acc += alpha[k] * (pw_s if k == s else pw[k])
                scan = _warp_scan(acc, lane, n_lanes)
                u2 = frac * cuda.shfl_sync(_FULL, scan, n_lanes - 1)
                owner = _owner_lane(scan, acc, u2)
                if lane == owner:
                    rem = u2 - (scan - acc)
                    run = np.float32(0.0)
                    for k in range(lane * per_k, min(n_topics, (lane + 1) * per_k)):
                        run += alpha[k] * (pw_s if k == s else pw[k])
                        pick = k
                        if rem < run:
                            break
            t = cuda.shfl_sync(_FULL, pick, owner)
            if t != s:
                new_s = np.float32(0.0)
                new_t = np.float32(0.0)
                if lane == 0:
                    z[i] = t
                    _move_topic(n_wk, n_k, w, s, t)
                    new_s = _word_weight(n_wk, n_k, w, s, beta, v_beta, 0)
                    new_t = _word_weight(n_wk, n_k, w, t, beta, v_beta, 0)
                # keep pw and Q exact for the rest of the run: only entries s and t moved
                new_s = cuda.shfl_sync(_FULL, new_s, 0)
                new_t = cuda.shfl_sync(_FULL, new_t, 0)
                q_mass += alpha[s] * (new_s - pw[s]) + alpha[t] * (new_t - pw[t])
                cuda.syncwarp(_FULL)  # every lane has read the old pw[s], pw[t]
                if lane == 0:
                    pw[s] = new_s
                    pw[t] = new_t
            cuda.syncwarp(_FULL)  # pw is current before the next token reads it
        cuda.syncwarp(_FULL)  # every read of pw is done before the next run overwrites it


def make_sampler(**params) -> CGSGPUSampler:
    """Make the ("cgs", "gpu") sampler: the registry's factory."""
    return CGSGPUSampler(**params)


register_sampler("cgs", "gpu", make_sampler)

__all__ = ["CGSGPUSampler", "make_sampler"]
