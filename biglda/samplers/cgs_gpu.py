"""Collapsed Gibbs sampling on the GPU (numba-cuda kernels on CuPy arrays).

The recipe of CuLDA_CGS (Xie, Liang, Li & Tan 2019) and SaberLDA (Li et al. 2017):
tokens in word-major order, a thread block per run of consecutive word-major tokens, the
O(K) full conditional of each token shared by the block's threads, count updates with
atomics (see :func:`biglda.samplers._gpu_kernels._cgs_kernel` for why they are safe).
``deterministic=True`` runs one block: the exact sequential Gibbs sweep, reproducible
bit for bit, which is what the exact-posterior and determinism tests use.

Importing this module is cheap; it registers the ("cgs", "gpu") factory, which checks
the GPU (or the CUDA simulator) when a sampler is built and raises ConfigError otherwise.
"""

from __future__ import annotations

from biglda.errors import ConfigError
from biglda.samplers._gpu_common import GPUSampler
from biglda.samplers.registry import register_sampler


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


class CGSGPUSampler(GPUSampler):
    """Exact O(K) collapsed Gibbs on one GPU.

    Parameters
    ----------
    deterministic : bool
        One thread block: the exact sequential sweep, identical on every run.
    run_len : int or None
        Word-major tokens per block run (default 64; a quarter of the shard per block
        under the simulator).
    block_threads, max_blocks, ndk_budget
        Launch geometry and the entry budget of the dense doc-topic chunk; see
        :class:`~biglda.samplers._gpu_common.GPUSampler`.

    Examples
    --------
    >>> from biglda.samplers import get_sampler  # doctest: +SKIP
    >>> get_sampler("cgs", "gpu", deterministic=True)  # doctest: +SKIP
    CGSGPUSampler(deterministic=True, simulator=True)
    """

    algorithm = "cgs"

    def __init__(self, deterministic: bool = False, run_len: int | None = None, **geometry):
        super().__init__(deterministic, **geometry)
        if run_len is not None and int(run_len) < 1:
            raise ConfigError(f"run_len must be >= 1, got {run_len}")
        self.run_len = run_len

    def _threads(self, n_topics: int) -> int:
        if self.block_threads is not None:
            return int(self.block_threads)
        if self.simulator:  # the simulator pays per thread: keep blocks tiny
            return 2 if n_topics <= 2 else 4
        return min(256, max(32, _pow2_at_least(-(-n_topics // 4))))

    def _run_chunk(self, xp, d, state, perm, pos_lo, pos_hi, d_lo, n_dk, keys, alpha,
                   beta, v_beta):
        k = self._k
        n = pos_hi - pos_lo
        threads = self._threads(n_dk.shape[1])
        if self.deterministic:
            run_len, blocks = n, 1
        else:
            run_len = self.run_len or (max(1, -(-n // 4)) if self.simulator else 64)
            blocks = self._grid(-(-n // run_len), 1, sim_blocks=4)
            n_dk[...] = 0
            k._count_doc_topics[self._grid(n, 128), 1 if self.simulator else 128](
                perm, d["doc_of"], d["z"], pos_lo, pos_hi, d_lo, n_dk)
        k._cgs_kernel[blocks, threads](
            d["tokens"], perm, d["doc_of"], d["z"], d["n_wk"], d["n_k"], n_dk, alpha, beta,
            v_beta, pos_lo, pos_hi, run_len, d_lo, keys[0], keys[1], self.deterministic)


def make_sampler(**params) -> CGSGPUSampler:
    """The registry's factory for ("cgs", "gpu")."""
    return CGSGPUSampler(**params)


register_sampler("cgs", "gpu", make_sampler)

__all__ = ["CGSGPUSampler", "make_sampler"]
