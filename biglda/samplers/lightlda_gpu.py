"""LightLDA on the GPU: cycle-proposal Metropolis-Hastings, alias tables built on the device.

Per sweep, for the even and then the odd documents: the word tables are built from the
cached rows minus that half's own tokens (a thread per word runs
Vose's method over the row's non-zeros: sparse tables for every K, plus one shared dense
table over beta / (n_k + V beta) and, for asymmetric alpha, one over alpha), as in
LightLDA (Yuan et al. 2015, sec. 4) and SaberLDA's GPU construction. Then a thread per
token in word-major order runs ``mh_steps`` rounds of word proposal + doc proposal; see
:func:`biglda.samplers._gpu_kernels._lightlda_kernel` for the acceptance ratios, which
stay exact although the tables go stale during the sweep. ``deterministic=True`` runs a
single thread: the exact sequential chain, reproducible bit for bit.

Importing this module is cheap; it registers the ("lightlda", "gpu") factory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers._gpu_common import GPUSampler, compile_kernels
from biglda.samplers.registry import register_sampler

#: entries of the scratch block of rows LightLDA's table build works through at a time
_ROWS_BUDGET = 1 << 24

if TYPE_CHECKING:  # bound by compile_kernels when the kernel first compiles
    from numba import cuda

    from biglda.samplers._gpu_kernels import _alias_draw, _move_token, _rand_unit


class LightLDAGPUSampler(GPUSampler):
    """O(1)-per-token Metropolis-Hastings LDA on one GPU.

    Parameters
    ----------
    mh_steps : int
        Rounds of (word proposal, doc proposal) per token (default 2).
    deterministic : bool
        One thread: the exact sequential chain, identical on every run.
    block_threads, max_blocks, ndk_budget
        Launch geometry and the entry budget of the dense doc-topic chunk; see
        :class:`~biglda.samplers._gpu_common.GPUSampler`.

    Examples
    --------
    >>> from biglda.samplers import get_sampler  # doctest: +SKIP
    >>> get_sampler("lightlda", "gpu", mh_steps=2)  # doctest: +SKIP
    LightLDAGPUSampler(deterministic=False, simulator=True)
    """

    algorithm = "lightlda"
    n_parts = 2  # even, then odd documents: tables never depend on the tokens being swept

    def __init__(self, mh_steps: int = 2, deterministic: bool = False, **geometry):
        super().__init__(deterministic, **geometry)
        if int(mh_steps) < 1:
            raise ConfigError(f"mh_steps must be >= 1, got {mh_steps}")
        self.mh_steps = int(mh_steps)

    def _threads(self) -> int:
        if self.deterministic:
            return 1
        if self.block_threads is not None:
            return int(self.block_threads)
        return 4 if self.simulator else 128

    def _prepare(self, xp, d, alpha, beta, v_beta, part_pos, part):
        n_wk, n_k = d["n_wk"], d["n_k"]
        n_topics = n_wk.shape[1]
        cache = d["cache"]  # kept across sweeps of a loaded shard (GPUSampler.load)
        if ("rows", part) not in cache:
            # the word tables this part needs: one per distinct word of its tokens (never
            # a table or a copy for the other cached rows); table_row maps a position to
            # its word's table (positions of the other part map to 0 and are never read)
            rows = xp.unique(d["tokens"][part_pos]).astype(np.int64)
            table_row = xp.zeros(d["tokens"].shape[0], dtype=np.int32)
            table_row[part_pos] = xp.searchsorted(rows, d["tokens"][part_pos]).astype(np.int32)
            cache[("rows", part)] = rows
            cache[("table_row", part)] = table_row
        rows = cache[("rows", part)]
        table_row = cache[("table_row", part)]
        n_rows = int(rows.shape[0])
        # Proposal tables from the counts without the tokens about to be swept (part_pos):
        # they then depend only on tokens this part does not resample, and stay fixed.
        # The part's own counts, as unique (table row, topic) keys:
        z_part = d["z"][part_pos].astype(np.int64)
        own_keys, own_counts = _unique_counts(xp, table_row[part_pos].astype(np.int64)
                                              * n_topics + z_part)
        n_k_rest = n_k - xp.bincount(z_part, minlength=n_topics)
        coef0 = 1.0 / (n_k_rest.astype(np.float64) + v_beta)
        # The non-zeros of the part's rows minus its own counts, as a CSR sorted by topic
        # within each row, built a block of rows at a time: never a copy of the cached
        # rows, never more than _ROWS_BUDGET entries of scratch.
        nz_rows, cols, w_count = [], [], []
        block = max(1, _ROWS_BUDGET // n_topics)
        for lo in range(0, n_rows, block):
            hi = min(n_rows, lo + block)
            sub = n_wk[rows[lo:hi]]
            mine = (own_keys >= lo * n_topics) & (own_keys < hi * n_topics)
            sub.reshape(-1)[own_keys[mine] - lo * n_topics] -= own_counts[mine].astype(
                np.int32)  # unique keys: no lost subtraction
            r, c = xp.nonzero(sub)
            nz_rows.append(r + lo)
            cols.append(c)
            w_count.append(sub[r, c])
        nz_rows = xp.concatenate(nz_rows) if nz_rows else xp.zeros(0, dtype=np.int64)
        cols = xp.concatenate(cols) if cols else xp.zeros(0, dtype=np.int64)
        w_count = (xp.concatenate(w_count) if w_count else xp.zeros(0)).astype(np.int32)
        n_nz = int(nz_rows.shape[0])
        w_ptr = xp.searchsorted(nz_rows, xp.arange(n_rows + 1), side="left").astype(np.int64)
        w_weight = w_count.astype(np.float64) * coef0[cols]
        w_mass = xp.bincount(nz_rows, weights=w_weight, minlength=n_rows).astype(np.float64)
        b_weight = beta * coef0
        a_sum = float(alpha.sum())
        symmetric = bool(np.all(alpha == alpha[0]))
        weights = xp.concatenate([w_weight, b_weight, xp.asarray(alpha)])
        row_ptr = xp.concatenate([w_ptr, xp.asarray([n_nz + n_topics, n_nz + 2 * n_topics],
                                                    dtype=np.int64)])
        m = int(weights.shape[0])
        thr = xp.empty(m, dtype=np.uint32)
        alias = xp.empty(m, dtype=np.int32)
        threads = 1 if self.simulator else 128
        self._k.shared._build_alias_rows[self._grid(n_rows + 2, threads), threads](
            row_ptr, weights, thr, alias, xp.empty(m, dtype=np.float64),
            xp.empty(m, dtype=np.int32), xp.empty(m, dtype=np.int32))
        return {"w_count": w_count, "table_row": table_row, "coef0": coef0, "w_ptr": w_ptr,
                "w_topic": cols.astype(np.int32), "w_mass": w_mass, "thr": thr,
                "alias": alias, "b_lo": n_nz, "b_mass": float(b_weight.sum()),
                "a_lo": n_nz + n_topics, "a_sum": a_sum, "symmetric": symmetric,
                "stats": xp.zeros(2, dtype=np.int64)}

    def _run_chunk(self, xp, d, st, perm, pos_lo, pos_hi, d_lo, n_dk, keys, alpha, beta,
                   v_beta):
        k = self._k
        n = pos_hi - pos_lo
        n_dk[...] = 0
        threads = 1 if self.simulator else 128
        k.shared._count_doc_topics[self._grid(n, threads), threads](
            perm, d["doc_of"], d["z"], pos_lo, pos_hi, d_lo, n_dk)
        threads = self._threads()
        k._lightlda_kernel[self._grid(n, threads), threads](
            d["tokens"], perm, d["doc_of"], d["doc_ptr"], d["z"], d["n_wk"], d["n_k"], n_dk,
            alpha, beta, v_beta, st["table_row"], st["w_count"], st["coef0"], st["w_ptr"],
            st["w_topic"], st["w_mass"], st["thr"], st["alias"], st["b_lo"], st["b_mass"],
            st["a_lo"], st["a_sum"], st["symmetric"], self.mh_steps, pos_lo, pos_hi, d_lo,
            keys[0], keys[1], st["stats"])

    def _accept_rate(self, xp, states) -> float | None:
        accepted = sum(int(st["stats"][0]) for st in states)
        proposed = sum(int(st["stats"][1]) for st in states)
        return accepted / proposed if proposed else None

    def __repr__(self) -> str:
        """Show the number of MH steps and the launch modes."""
        return (f"LightLDAGPUSampler(mh_steps={self.mh_steps}, "
                f"deterministic={self.deterministic}, simulator={self.simulator})")


    @property
    def _k(self):
        return kernels()


def kernels():
    """Return the module's compiled kernels, plus ``shared`` (numba.cuda on first use)."""
    return compile_kernels(globals(), ("_lightlda_kernel",), device=("_row_count",))


def _unique_counts(xp, keys):
    """Count the unique keys of an int64 array with array ops (CuPy on a device)."""
    if keys.shape[0] == 0:
        return keys, xp.zeros(0, dtype=np.int64)
    keys = xp.sort(keys)
    last = xp.nonzero(xp.concatenate([keys[1:] != keys[:-1], xp.ones(1, dtype=bool)]))[0]
    return keys[last], xp.diff(xp.concatenate([xp.full(1, -1, dtype=np.int64), last]))


# --------------------------------------------------------------------------- the kernel
# Plain Python, compiled by numba-cuda on first use (compile_kernels): cuda and the shared
# device functions are bound in this module's globals then.
def _row_count(w_topic, w_count, lo, n, k):
    """Return the count of topic ``k`` in the sparse table row ``[lo, lo + n)`` (0 if absent).

    ``w_topic`` is sorted within each row: a binary search, O(log nnz).
    """
    a = lo
    b = lo + n
    while a < b:
        m = (a + b) // 2
        if w_topic[m] < k:
            a = m + 1
        else:
            b = m
    if a < lo + n and w_topic[a] == k:
        return w_count[a]
    return 0


def _lightlda_kernel(tokens, perm, doc_of, doc_ptr, z, n_wk, n_k, n_dk, alpha, beta, v_beta,
                     table_row, w_count, coef0, w_ptr, w_topic, w_mass, thr, alias, b_lo, b_mass,
                     a_lo, a_sum, symmetric, mh_steps, pos_lo, pos_hi, d_lo, k0, k1, stats):
    """LightLDA cycle-proposal MH over positions ``perm[pos_lo:pos_hi]``, a thread per token.

    tokens int32 [N], perm int64 [N] (word-major), doc_of int32 [N], doc_ptr int64 [D+1],
    z uint16/int32 [N], n_wk int32 [V, K], n_k int64 [K], n_dk int32 [D_chunk, K],
    alpha float64 [K]; table_row int32 [N] maps a position to its word's table (a row of
    the part's U distinct words); w_ptr int64 [U+1], w_topic int32 [M] (sorted
    within a row), w_count int32 [M] and w_mass float64 [U] are those rows of ``n_wk``
    *without the tokens being swept* (see below) as a CSR of their non-zeros, coef0
    float64 [K] is 1/(n_k + V beta) without them; thr uint32 / alias int32 hold all
    alias tables (word rows, then the dense beta row at ``b_lo``, then alpha at ``a_lo``);
    stats int64 [2] receives (accepted, proposed).

    Word proposal q_w(k) ∝ (count of k in the word's row + beta) coef0[k]: with probability
    w_mass / (w_mass + b_mass) from the word's alias over its non-zeros, else from the
    shared dense beta table. The tables are built from the counts of every token *except*
    those of the documents being swept (the sampler sweeps even, then odd documents, as
    the CPU kernel does): a proposal may depend on the state only through tokens that are
    not being resampled, else each token's kernel depends on where the sweep started and
    the chain is biased (a tiny-corpus enumeration shows it). With that, q_w is an
    independence proposal and a = min(1, p(t) q_w(s) / (p(s) q_w(t))) is exact. Doc
    proposal q_d(k) ∝ n_dk + alpha_k (counts with token i): the topic of a uniform token of
    the document, or a draw from alpha; a = min(1, p(t)(n_ds¬i + alpha_s) / (p(s)(n_dt¬i +
    alpha_t))). Table probabilities are taken as the weights: the 32-bit thresholds round
    them by < 2**-32, a bias far below what any test can see.

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
        wt = table_row[i]  # the row of the word's table
        mass = w_mass[wt]
        wl = w_ptr[wt]
        wn = w_ptr[wt + 1] - wl
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
                q_s = (_row_count(w_topic, w_count, wl, wn, s) + beta) * coef0[s]
                q_t = (_row_count(w_topic, w_count, wl, wn, t) + beta) * coef0[t]
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
            _move_token(n_wk, n_dk, n_k, w, d, s0, s)
    if n_propose > 0:  # one pair of atomics per thread, not per token
        cuda.atomic.add(stats, 0, n_accept)
        cuda.atomic.add(stats, 1, n_propose)


def make_sampler(**params) -> LightLDAGPUSampler:
    """Make the ("lightlda", "gpu") sampler: the registry's factory."""
    return LightLDAGPUSampler(**params)


register_sampler("lightlda", "gpu", make_sampler)

__all__ = ["LightLDAGPUSampler", "make_sampler"]
