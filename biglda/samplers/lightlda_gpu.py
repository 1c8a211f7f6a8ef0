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

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers._gpu_common import GPUSampler
from biglda.samplers.registry import register_sampler


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

    def _prepare(self, xp, d, alpha, beta, v_beta, part_pos):
        n_wk, n_k = d["n_wk"], d["n_k"]
        n_rows, n_topics = n_wk.shape
        # Proposal tables from the counts without the tokens about to be swept (part_pos):
        # they then depend only on tokens this part does not resample, and stay fixed.
        snap = n_wk.copy()
        n_k_rest = n_k.copy()
        if part_pos.shape[0]:
            threads = 1 if self.simulator else 128
            self._k._move_counts[self._grid(int(part_pos.shape[0]), threads), threads](
                part_pos, d["tokens"], d["z"], snap, n_k_rest, -1)
        coef0 = 1.0 / (n_k_rest.astype(np.float64) + v_beta)
        rows, cols = xp.nonzero(snap)
        n_nz = int(rows.shape[0])
        w_ptr = xp.searchsorted(rows, xp.arange(n_rows + 1), side="left").astype(np.int64)
        w_weight = snap[rows, cols].astype(np.float64) * coef0[cols]
        w_mass = xp.bincount(rows, weights=w_weight, minlength=n_rows).astype(np.float64)
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
        self._k._build_alias_rows[self._grid(n_rows + 2, threads), threads](
            row_ptr, weights, thr, alias, xp.empty(m, dtype=np.float64),
            xp.empty(m, dtype=np.int32), xp.empty(m, dtype=np.int32))
        return {"snap": snap, "coef0": coef0, "w_ptr": w_ptr, "w_topic": cols.astype(np.int32),
                "w_mass": w_mass, "thr": thr, "alias": alias, "b_lo": n_nz,
                "b_mass": float(b_weight.sum()), "a_lo": n_nz + n_topics, "a_sum": a_sum,
                "symmetric": symmetric, "stats": xp.zeros(2, dtype=np.int64)}

    def _run_chunk(self, xp, d, st, perm, pos_lo, pos_hi, d_lo, n_dk, keys, alpha, beta,
                   v_beta):
        k = self._k
        n = pos_hi - pos_lo
        n_dk[...] = 0
        threads = 1 if self.simulator else 128
        k._count_doc_topics[self._grid(n, threads), threads](
            perm, d["doc_of"], d["z"], pos_lo, pos_hi, d_lo, n_dk)
        threads = self._threads()
        k._lightlda_kernel[self._grid(n, threads), threads](
            d["tokens"], perm, d["doc_of"], d["doc_ptr"], d["z"], d["n_wk"], d["n_k"], n_dk,
            alpha, beta, v_beta, st["snap"], st["coef0"], st["w_ptr"], st["w_topic"],
            st["w_mass"], st["thr"], st["alias"], st["b_lo"], st["b_mass"], st["a_lo"],
            st["a_sum"], st["symmetric"], self.mh_steps, pos_lo, pos_hi, d_lo, keys[0],
            keys[1], st["stats"])

    def _accept_rate(self, xp, states) -> float | None:
        accepted = sum(int(st["stats"][0]) for st in states)
        proposed = sum(int(st["stats"][1]) for st in states)
        return accepted / proposed if proposed else None

    def __repr__(self) -> str:
        return (f"LightLDAGPUSampler(mh_steps={self.mh_steps}, "
                f"deterministic={self.deterministic}, simulator={self.simulator})")


def make_sampler(**params) -> LightLDAGPUSampler:
    """The registry's factory for ("lightlda", "gpu")."""
    return LightLDAGPUSampler(**params)


register_sampler("lightlda", "gpu", make_sampler)

__all__ = ["LightLDAGPUSampler", "make_sampler"]
