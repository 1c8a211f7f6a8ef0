"""A shard held on the GPU across sweeps: what a device-resident GPU worker keeps.

:meth:`biglda.samplers._gpu_common.GPUSampler.load` uploads a shard's ``tokens``,
``doc_ptr`` and ``z`` and its cached rows ``n_wk``/``n_k`` once;
:meth:`~biglda.samplers._gpu_common.GPUSampler.sweep_shard` then sweeps it in place and
returns only the delta. What depends on the tokens alone (each position's document, the
word-major order of each document chunk and parity part, cgs's word runs, LightLDA's
per-part word lists) is computed at the first sweep and kept in :attr:`DeviceShard.arrays`
``["cache"]``. Everything else a worker does per clock has a device method here: apply the
other workers' pulled deltas, replace refreshed rows, the doc part of the log-likelihood,
and ``z`` back to the host only for a checkpoint.
"""

from __future__ import annotations

import numpy as np

from biglda.samplers.base import as_alpha


class DeviceShard:
    """One shard and its cached rows on the device (CuPy arrays; NumPy under the simulator).

    Built by :meth:`GPUSampler.load`, which checks the arrays first. ``n_wk``/``n_k`` here
    are the worker's cached rows: they move with this shard's sweeps and with
    :meth:`apply_delta` (other shards' moves pulled from the parameter server).
    """

    def __init__(self, xp, tokens, doc_ptr, z, n_wk, n_k):
        self.xp = xp
        self.arrays = {"tokens": xp.asarray(tokens), "doc_ptr": xp.asarray(doc_ptr),
                       "z": xp.array(z, copy=True), "n_wk": xp.array(n_wk, copy=True),
                       "n_k": xp.array(n_k, copy=True), "cache": {}}
        self.n_tokens = int(tokens.shape[0])

    @property
    def z(self):
        """Topic of each token, on the device."""
        return self.arrays["z"]

    @property
    def n_wk(self):
        """The worker's cached rows of ``n_wk``, int32 [V_local, K], on the device."""
        return self.arrays["n_wk"]

    @property
    def n_k(self):
        """The worker's cached ``n_k``, int64 [K], on the device."""
        return self.arrays["n_k"]

    def z_host(self) -> np.ndarray:
        """``z`` copied to the host (for a checkpoint; not needed per sweep)."""
        return _host(self.xp, self.z).copy()

    def apply_delta(self, words, topics, counts, delta_k) -> None:
        """Add a delta of the rows (unique (word, topic) pairs, local word ids) and ``n_k``."""
        xp = self.xp
        words = xp.asarray(words, dtype=np.int64)
        if words.shape[0]:
            self.n_wk[words, xp.asarray(topics, dtype=np.int64)] += xp.asarray(
                counts, dtype=np.int32)
        self.n_k[...] += xp.asarray(delta_k, dtype=np.int64)

    def set_rows(self, n_wk, n_k) -> None:
        """Replace the cached rows (a refresh from the parameter server), same shape."""
        if tuple(n_wk.shape) != tuple(self.n_wk.shape) or n_k.shape != self.n_k.shape:
            raise ValueError(f"rows of shape {tuple(n_wk.shape)} for a shard holding "
                             f"{tuple(self.n_wk.shape)}")
        self.n_wk[...] = self.xp.asarray(n_wk)
        self.n_k[...] = self.xp.asarray(n_k)

    def doc_loglik(self, alpha) -> float:
        """Compute the doc part of log p(w, z) on the device; see :func:`doc_loglik_xp`."""
        return doc_loglik_xp(self.xp, self.arrays["doc_ptr"], self.z, alpha,
                             int(self.n_k.shape[0]))


def _host(xp, a) -> np.ndarray:
    return a if xp is np else xp.asnumpy(a)


def _gammaln(xp):
    if xp is np:
        from scipy.special import gammaln
    else:
        from cupyx.scipy.special import gammaln
    return gammaln


def doc_loglik_xp(xp, doc_ptr, z, alpha, n_topics: int) -> float:
    """Doc part of log p(w, z) with array ops (CuPy on a device): one float to the host.

    Σ_d [log Γ(A) - log Γ(N_d + A)] + Σ_(d,k: n_dk > 0) [log Γ(n_dk + α_k) - log Γ(α_k)],
    A = Σ α_k; the non-zero ``n_dk`` come from one sort of the (document, topic) keys of
    ``z``, so nothing of size D × K is built. Equals
    :func:`biglda.samplers.counts.doc_loglik` up to float rounding.
    """
    gammaln = _gammaln(xp)
    alpha = xp.asarray(as_alpha(alpha, n_topics))
    a_sum = float(alpha.sum())
    n_docs = int(doc_ptr.shape[0]) - 1
    n_tokens = int(z.shape[0])
    lengths = xp.diff(doc_ptr).astype(np.float64)
    total = n_docs * float(gammaln(xp.asarray(a_sum))) - gammaln(lengths + a_sum).sum()
    if n_tokens:
        doc_of = xp.searchsorted(doc_ptr, xp.arange(n_tokens), side="right") - 1
        keys = xp.sort(doc_of.astype(np.int64) * n_topics + z.astype(np.int64))
        last = xp.nonzero(xp.concatenate([keys[1:] != keys[:-1], xp.ones(1, dtype=bool)]))[0]
        counts = xp.diff(xp.concatenate([xp.full(1, -1, dtype=np.int64), last]))
        topics = keys[last] % n_topics
        total = total + (gammaln(counts + alpha[topics]) - gammaln(alpha[topics])).sum()
    return float(total)
