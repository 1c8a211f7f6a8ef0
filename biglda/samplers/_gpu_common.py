"""Host side shared by the GPU samplers: device arrays, word-major order, doc chunks, the delta.

One sweep on the GPU (:class:`GPUSampler.sweep`):

1. inputs to the device: CuPy arrays are used in place; NumPy arrays are copied up (on a
   real GPU) or used in place (under the CUDA simulator, where "device arrays" are NumPy);
2. the subclass prepares per-sweep state (LightLDA builds its alias tables here);
3. documents are cut into chunks whose dense ``n_dk`` [D_chunk, K] fits ``ndk_budget``
   entries; per chunk: word-major order, ``n_dk`` rebuilt from ``z``, the sampling kernel;
4. the delta of ``n_wk``/``n_k`` from ``z`` before/after, as the contract's COO, computed on
   the device (:func:`sweep_delta_xp`).

:meth:`GPUSampler.load` / :meth:`GPUSampler.sweep_shard` keep a shard on the device across
sweeps (:class:`biglda.samplers.gpu_shard.DeviceShard`): step 1 happens once, and what
depends only on the tokens (document of each position, word-major orders) is cached.

CuPy does allocation, transfers, sorting and reductions; numba-cuda runs the kernels.
Nothing here is imported before :func:`biglda.samplers.backends.require_gpu` succeeded.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from types import SimpleNamespace

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers.backends import require_gpu
from biglda.samplers.base import (
    Sampler,
    SweepResult,
    check_sweep_args,
    check_sweep_settings,
)
from biglda.samplers.rng import RandomKey

_MASK32 = 0xFFFFFFFF

#: numba-cuda's low-occupancy warning, whatever wraps it: where colorama is installed numba
#: highlights the text with ANSI codes (``\x1b[1mGrid size 49 ...``), so the pattern may not
#: assume the text starts the message or that nothing sits between its words.
LOW_OCCUPANCY_MESSAGE = r"(?s).*Grid size.*will likely result.*under.utili[sz]ation"


@contextlib.contextmanager
def quiet_launches():
    """Launch kernels without numba-cuda's low-occupancy warning (grids under 128 blocks).

    Small shards, the single-block deterministic mode and the probe kernel are
    under-occupied on purpose. Turns numba's own setting (``CUDA_LOW_OCCUPANCY_WARNINGS``,
    the ``NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS`` variable) off for the block, and filters the
    warning by a pattern that survives text decoration, in case a numba version reads the
    setting elsewhere. Under the simulator numba never warns.
    """
    config = _numba_cuda_config()
    old = getattr(config, "CUDA_LOW_OCCUPANCY_WARNINGS", None)
    if old is not None:
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_MESSAGE)
            yield
    finally:
        if old is not None:
            config.CUDA_LOW_OCCUPANCY_WARNINGS = old


def _numba_cuda_config():
    """Return the config module numba-cuda's launcher reads (``numba.cuda.core`` from 0.2x on)."""
    try:
        from numba.cuda.core import config
    except ImportError:  # pragma: no cover - older numba-cuda reads numba's own config
        from numba.core import config
    return config


def compile_kernels(namespace: dict, kernels: tuple[str, ...], device: tuple[str, ...] = ()):
    """Compile a sampler module's kernels with numba-cuda, once; returns them by name.

    A GPU sampler module (``cgs_gpu.py``) keeps its kernels beside its wrapper as plain
    Python functions, so that importing it never imports CUDA. On first use this imports
    ``numba.cuda`` and the shared device code (:mod:`biglda.samplers._gpu_kernels`), puts
    ``cuda`` and the shared device functions into ``namespace`` (the module's globals, where
    numba-cuda resolves the names a kernel calls), compiles ``device`` as device functions
    and ``kernels`` as kernels, and replaces them in ``namespace`` by their compiled form.
    The result also carries ``shared``: the shared module (its counting/alias kernels).
    """
    done = namespace.get("_compiled_kernels")
    if done is None:
        from numba import cuda

        from biglda.samplers import _gpu_kernels as shared

        namespace["cuda"] = cuda
        for name in shared.DEVICE_FUNCTIONS:
            namespace[name] = getattr(shared, name)
        for name in device:
            namespace[name] = cuda.jit(device=True)(namespace[name])
        compiled = {name: cuda.jit(namespace[name]) for name in kernels}
        namespace.update(compiled)
        done = SimpleNamespace(shared=shared, **compiled)
        namespace["_compiled_kernels"] = done
    return done


def stream_keys(key: RandomKey) -> tuple[int, int]:
    """Split the key's state into the two 32-bit stream keys of the kernels' hash."""
    state = int(key.state())
    return state & _MASK32, (state >> 32) & _MASK32


def is_device_array(a) -> bool:
    """Tell a CUDA device array (CuPy, numba: True) from a NumPy one (False)."""
    return hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray)


def word_major(xp, tokens, lo: int, hi: int, parity=None, part: int = 0):
    """Positions ``lo..hi-1`` sorted by (word, position): int64 [M].

    With ``parity`` (int [N], the document parity of each position) only the positions
    whose parity is ``part``. The key is unique per position, so any sort (CuPy's radix
    sort too) gives this order.
    """
    pos = xp.arange(lo, hi, dtype=np.int64)
    if parity is not None:
        pos = pos[parity[lo:hi] == part]
    n = int(pos.shape[0])
    keys = tokens[pos].astype(np.int64) * max(n, 1) + xp.arange(n, dtype=np.int64)
    return pos[xp.argsort(keys)]


def doc_chunks(doc_ptr: np.ndarray, n_topics: int, ndk_budget: int) -> list[tuple[int, int]]:
    """Document ranges ``[(d_lo, d_hi), ...]`` of at most ``ndk_budget // K`` documents."""
    n_docs = len(doc_ptr) - 1
    per = max(1, int(ndk_budget) // n_topics)
    return [(lo, min(n_docs, lo + per)) for lo in range(0, n_docs, per)]


def sweep_delta_xp(xp, tokens, z_old, z_new, n_topics: int):
    """``_sweep_delta`` with array ops (runs on CuPy arrays): the moves as unique COO.

    Returns ``(words int32[M], topics int32[M], counts int32[M], delta_k int64[K])``
    sorted by (word, topic), no zero counts.
    """
    moved = xp.nonzero(z_old != z_new)[0]
    w = tokens[moved].astype(np.int64)
    a = z_old[moved].astype(np.int64)
    b = z_new[moved].astype(np.int64)
    keys = xp.concatenate([w * n_topics + a, w * n_topics + b])
    vals = xp.concatenate([xp.full(len(moved), -1, dtype=np.int64),
                           xp.ones(len(moved), dtype=np.int64)])
    order = xp.argsort(keys)
    keys = keys[order]
    csum = xp.cumsum(vals[order])
    if len(keys):
        last = xp.nonzero(xp.concatenate([keys[1:] != keys[:-1], xp.ones(1, dtype=bool)]))[0]
        sums = xp.diff(xp.concatenate([xp.zeros(1, dtype=np.int64), csum[last]]))
        keys = keys[last]
        keep = sums != 0
        keys, sums = keys[keep], sums[keep]
    else:
        sums = keys
    delta_k = (xp.bincount(b, minlength=n_topics) - xp.bincount(a, minlength=n_topics))
    return ((keys // n_topics).astype(np.int32), (keys % n_topics).astype(np.int32),
            sums.astype(np.int32), delta_k.astype(np.int64))


def _to_host(xp, a) -> np.ndarray:
    return a if xp is np else xp.asnumpy(a)


def check_device_args(xp, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key):
    """Run the checks of ``check_sweep_args`` on device arrays; return alpha float64 [K]."""
    want = {"tokens": (tokens, ("int32",), 1), "doc_ptr": (doc_ptr, ("int64",), 1),
            "z": (z, ("uint16", "int32"), 1), "n_wk": (n_wk, ("int32",), 2),
            "n_k": (n_k, ("int64",), 1)}
    for name, (arr, dtypes, ndim) in want.items():
        if not is_device_array(arr):
            raise TypeError(f"{name} must be a device array like the others, got "
                            f"{type(arr).__name__}")
        if str(arr.dtype) not in dtypes:
            raise TypeError(f"{name} has dtype {arr.dtype}, expected one of {', '.join(dtypes)}")
        if arr.ndim != ndim or not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous {ndim}-D array")
    n_rows, n_topics = n_wk.shape
    if n_topics < 2:
        raise ConfigError(f"need at least 2 topics, got {n_topics}")
    if n_k.shape[0] != n_topics or z.shape[0] != tokens.shape[0]:
        raise ValueError("shapes of z/tokens or n_k/n_wk disagree")
    if doc_ptr.shape[0] < 1 or int(doc_ptr[0]) != 0 or int(doc_ptr[-1]) != tokens.shape[0]:
        raise ValueError("doc_ptr must start at 0 and end at len(tokens)")
    if tokens.shape[0] and (int(tokens.min()) < 0 or int(tokens.max()) >= n_rows):
        raise ValueError(f"tokens must be local word ids in [0, {n_rows})")
    if tokens.shape[0] and int(z.max()) >= n_topics:
        raise ValueError(f"z holds topics outside [0, {n_topics})")
    return check_sweep_settings(alpha, beta, n_words, key, n_rows, n_topics)


class GPUSampler(Sampler):
    """Base of the GPU samplers: the per-sweep driver; subclasses supply the kernels.

    Accepts NumPy arrays (the contract; on a real GPU they are copied to the device and
    ``z``/``n_wk``/``n_k`` updated back in place) or CuPy arrays (worked on in place on the
    device, no transfers: what a GPU worker holding its shard on the device should pass).
    """

    backend = "gpu"
    #: documents are swept in this many parts (by document parity), each with its own
    #: ``_prepare``: LightLDA's tables must not depend on the tokens being resampled.
    n_parts = 1
    #: the kernel reads a dense doc-topic chunk ``n_dk`` [D_chunk, K] (rebuilt from ``z``)
    uses_ndk = True

    def __init__(self, deterministic: bool = False, ndk_budget: int = 1 << 28,
                 block_threads: int | None = None, max_blocks: int | None = None):
        self.deterministic = bool(deterministic)
        self.ndk_budget = int(ndk_budget)
        self.block_threads = block_threads
        self.max_blocks = max_blocks
        if self.ndk_budget < 1:
            raise ConfigError(f"ndk_budget must be >= 1, got {ndk_budget}")
        if block_threads is not None and not 1 <= int(block_threads) <= 1024:
            raise ConfigError(f"block_threads must be in [1, 1024], got {block_threads}")
        if max_blocks is not None and int(max_blocks) < 1:
            raise ConfigError(f"max_blocks must be >= 1, got {max_blocks}")
        self.simulator = require_gpu().simulator

    @property
    def _k(self):
        """Return the sampler's compiled kernels, plus ``shared`` (numba.cuda on first use)."""
        raise NotImplementedError

    # subclass hooks -------------------------------------------------------------------
    def _prepare(self, xp, d, alpha, beta, v_beta, part_pos, part):
        """State for sweeping the positions ``part_pos`` (alias tables...); ``d``: arrays."""
        return None

    def _run_chunk(self, xp, d, state, perm, pos_lo, pos_hi, d_lo, n_dk, keys, alpha,
                   beta, v_beta):
        raise NotImplementedError

    def _accept_rate(self, xp, states) -> float | None:
        return None

    # the sweep ------------------------------------------------------------------------
    def sweep(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key) -> SweepResult:
        """Resample every token of one shard once on the GPU; see :meth:`Sampler.sweep`.

        For repeated sweeps of one shard, :meth:`load` it once and call
        :meth:`sweep_shard`: the shard, its word-major order and the rows then stay on
        the device, and only the delta comes back.

        Examples
        --------
        >>> from biglda.samplers import get_sampler  # doctest: +SKIP
        >>> get_sampler("cgs", "gpu", deterministic=True).sweep(...)  # doctest: +SKIP
        """
        on_device = is_device_array(z)
        xp = self._xp(on_device)
        if on_device:
            alpha = check_device_args(xp, tokens, doc_ptr, z, n_wk, n_k, alpha, beta,
                                      n_words, key)
        else:
            alpha = check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key)
        t0 = time.perf_counter()
        upload = not on_device and xp is not np
        d = {name: (xp.asarray(a) if upload else a) for name, a in
             (("tokens", tokens), ("doc_ptr", doc_ptr), ("z", z), ("n_wk", n_wk),
              ("n_k", n_k))}
        words, topics, counts, delta_k, accept_rate = self._sweep_arrays(
            xp, d, alpha, beta, n_words, key)
        if upload:  # the kernels moved the device copies; move the caller's arrays
            z[...] = xp.asnumpy(d["z"])
            n_wk[words, topics] += counts  # unique (word, topic) pairs: no lost additions
            n_k += delta_k
        return SweepResult(words, topics, counts, delta_k, int(tokens.shape[0]), accept_rate,
                           time.perf_counter() - t0)

    def load(self, tokens, doc_ptr, z, n_wk, n_k):
        """Put one shard and its cached rows on the device for :meth:`sweep_shard`.

        NumPy arrays (checked here, once, as :meth:`sweep` checks them) are copied up;
        returns the :class:`~biglda.samplers.gpu_shard.DeviceShard` that holds them.
        """
        from biglda.samplers.gpu_shard import DeviceShard

        check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, 1.0, 1.0, n_wk.shape[0],
                         RandomKey(0, 0))
        return DeviceShard(self._xp(False), tokens, doc_ptr, z, n_wk, n_k)

    def sweep_shard(self, shard, alpha, beta, n_words, key) -> SweepResult:
        """One sweep of a :meth:`load`-ed shard, on the device; only the delta comes back.

        No host validation of the device arrays (they were checked at :meth:`load`, and the
        kernels keep them valid), no copy of ``z`` or the rows: the delta is computed on the
        device (:func:`sweep_delta_xp`) and its four arrays are the only transfer.
        """
        n_rows, n_topics = shard.n_wk.shape
        alpha = check_sweep_settings(alpha, beta, n_words, key, n_rows, n_topics)
        t0 = time.perf_counter()
        words, topics, counts, delta_k, accept_rate = self._sweep_arrays(
            shard.xp, shard.arrays, alpha, beta, n_words, key)
        return SweepResult(words, topics, counts, delta_k, shard.n_tokens, accept_rate,
                           time.perf_counter() - t0)

    def _xp(self, on_device: bool):
        if on_device or not self.simulator:
            import cupy

            return cupy
        return np  # the simulator's "device arrays" are NumPy arrays

    def _sweep_arrays(self, xp, d, alpha, beta, n_words, key):
        """Sweep the arrays of ``d`` in place; the delta (host arrays) and the accept rate."""
        beta = float(beta)
        v_beta = float(n_words) * beta
        n_tokens = int(d["tokens"].shape[0])
        n_topics = int(d["n_wk"].shape[1])
        cache = d.setdefault("cache", {})
        if "doc_of" not in cache:
            cache["doc_of"] = (xp.searchsorted(d["doc_ptr"], xp.arange(n_tokens), side="right")
                               - 1).astype(np.int32)
        d["doc_of"] = cache["doc_of"]
        z_old = d["z"].copy()
        with quiet_launches():
            accept_rate = self._sweep_parts(xp, d, alpha, beta, v_beta, key, n_tokens,
                                            n_topics)
        delta = sweep_delta_xp(xp, d["tokens"], z_old, d["z"], n_topics)
        words, topics, counts, delta_k = (_to_host(xp, a) for a in delta)
        return words, topics, counts, delta_k, accept_rate

    def _sweep_parts(self, xp, d, alpha, beta, v_beta, key, n_tokens, n_topics):
        """Sweep every part (then every document chunk) with the kernels; the accept rate.

        What depends only on the shard's tokens and documents (the chunks, the parity
        parts, each chunk's word-major order) is kept in ``d["cache"]``, so a loaded shard
        computes it once.
        """
        alpha_d = xp.asarray(alpha)
        keys = stream_keys(key)
        cache = d["cache"]
        if "chunks" not in cache:
            doc_ptr_h = _to_host(xp, d["doc_ptr"])
            if self.uses_ndk:
                chunks = doc_chunks(doc_ptr_h, n_topics, self.ndk_budget)
            else:
                chunks = [(0, len(doc_ptr_h) - 1)] if len(doc_ptr_h) > 1 else []
            cache["chunks"] = [(lo, hi, int(doc_ptr_h[lo]), int(doc_ptr_h[hi]))
                               for lo, hi in chunks]
            rows = max((hi - lo for lo, hi in chunks), default=0) if self.uses_ndk else 0
            cache["ndk_buf"] = xp.zeros((rows, n_topics), dtype=np.int32)
            parity = (d["doc_of"] & 1) if self.n_parts == 2 else None
            cache["parity"] = parity
            for part in range(self.n_parts):
                cache[("part_pos", part)] = (
                    xp.arange(n_tokens, dtype=np.int64) if parity is None
                    else xp.nonzero(parity == part)[0].astype(np.int64))
        states = []
        for part in range(self.n_parts):
            part_pos = cache[("part_pos", part)]
            state = self._prepare(xp, d, alpha, beta, v_beta, part_pos, part)
            states.append(state)
            for c, (d_lo, d_hi, pos_lo, pos_hi) in enumerate(cache["chunks"]):
                perm = cache.get(("perm", part, c))
                if perm is None:
                    perm = word_major(xp, d["tokens"], pos_lo, pos_hi, cache["parity"], part)
                    cache[("perm", part, c)] = perm
                if perm.shape[0] == 0:
                    continue
                d["chunk_key"] = (part, c)
                # perm lists the positions to sweep (word-major): the kernels walk perm[0:M]
                self._run_chunk(xp, d, state, perm, 0, int(perm.shape[0]), d_lo,
                                cache["ndk_buf"][: d_hi - d_lo], keys, alpha_d, beta, v_beta)
        return self._accept_rate(xp, states)

    # launch geometry ------------------------------------------------------------------
    def _grid(self, n_items: int, threads: int, sim_blocks: int = 2) -> int:
        """Blocks for ``n_items`` items (grid-stride loops cover the rest)."""
        if self.deterministic:
            return 1
        cap = self.max_blocks or (sim_blocks if self.simulator else 65535)
        return max(1, min(cap, -(-n_items // threads)))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(deterministic={self.deterministic}, "
                f"simulator={self.simulator})")
