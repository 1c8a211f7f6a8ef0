"""numba-cuda code shared by the GPU samplers: random streams, count moves, alias tables.

Each sampler's own kernel sits beside its wrapper (``cgs_gpu.py``, ``lightlda_gpu.py``) and
calls the device functions named in :data:`DEVICE_FUNCTIONS`. Importing this module imports
``numba.cuda``; :func:`biglda.samplers._gpu_common.compile_kernels` does so, after
:func:`biglda.samplers.backends.require_gpu` has checked that a GPU (or the CUDA simulator,
``NUMBA_ENABLE_CUDASIM=1``) is usable.

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

#: the device functions the samplers' kernels call; compile_kernels puts them in each
#: sampler module's namespace before its kernels compile
DEVICE_FUNCTIONS = ("_rand_u32", "_rand_unit", "_alias_draw", "_move_topic", "_move_token")
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


def _share_simulator_atomic_lock() -> None:
    """Make every simulated atomic take one lock, so an add and a sub never interleave.

    numba-cuda's simulator (0.30, ``kernelapi``) guards each atomic kind with its own lock:
    ``atomic.add`` holds ``addlock`` and ``atomic.sub`` holds ``sublock``. A count move is a
    sub on the old topic and an add on the new one, so two threads moving tokens of the same
    word can run a read-modify-write of one ``n_wk`` cell at the same time under different
    locks, and one of the two updates is lost (CI saw ``n_wk[7, 0]`` one above the recount
    of ``z``). On a GPU every atomic on a cell is serialised, whatever its kind; one lock
    for all kinds is that. The ``with ...lock`` statements read the module globals at call
    time, so rebinding them is enough. Compiled kernels are unaffected.
    """
    from numba import config

    if not config.ENABLE_CUDASIM:
        return
    try:
        from numba.cuda.simulator import kernelapi
    except ImportError:  # pragma: no cover - a simulator laid out otherwise
        return
    names = [n for n in vars(kernelapi) if n.endswith("lock") and n != "_locks_register_lock"
             and isinstance(getattr(kernelapi, n), type(threading.Lock()))]
    one = kernelapi.addlock
    for name in names:
        setattr(kernelapi, name, one)


_share_simulator_atomic_lock()


def _add_simulator_warp_intrinsics() -> None:
    """Give the CUDA simulator the warp intrinsics the kernels use, for one-warp blocks.

    numba-cuda's simulator (0.30) has no ``shfl_*_sync``, ``ballot_sync`` or ``syncwarp``.
    The cgs kernel runs one warp per block with every lane converged at each call, so in
    the simulator a block's threads are that warp's lanes, and an exchange of lane values
    between two block barriers is exactly a shuffle: lane ``l`` writes its value, the
    barrier, every lane reads the value of the lane it asked for. The next exchange's first
    barrier keeps its writes after every read of this one. Blocks of more than 32 threads
    are refused (they would be several warps). Compiled kernels are unaffected.
    """
    from numba import config

    if not config.ENABLE_CUDASIM:
        return
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    if getattr(FakeCUDAModule, "_biglda_warps", False):
        return

    def exchange(value):
        me = threading.current_thread()
        if me._manager._block_dim == (1, 1, 1):  # a one-lane warp: nothing to exchange
            return 0, {0: value}
        if me._manager._block_dim[0] > 32 or me.threadIdx.y or me.threadIdx.z:
            raise RuntimeError("simulated warp intrinsics need a block of at most 32 threads")
        me.syncthreads()  # every lane has read the previous exchange
        lanes = me._manager.__dict__.setdefault("_biglda_lanes", {})
        lanes[me.thread_id] = value
        me.syncthreads()  # every lane has written this one
        return me.thread_id, lanes

    def shfl_sync(self, mask, value, src_lane):
        _, lanes = exchange(value)
        return lanes[int(src_lane)]

    def shfl_up_sync(self, mask, value, delta):
        lane, lanes = exchange(value)
        return lanes[lane - delta] if lane >= delta else value

    def shfl_down_sync(self, mask, value, delta):
        lane, lanes = exchange(value)
        return lanes.get(lane + delta, value)

    def ballot_sync(self, mask, predicate):
        _, lanes = exchange(bool(predicate))
        return sum(1 << lane for lane, v in lanes.items() if v)

    def syncwarp(self, mask=0xFFFFFFFF):
        me = threading.current_thread()
        if me._manager._block_dim != (1, 1, 1):
            me.syncthreads()

    for fn in (shfl_sync, shfl_up_sync, shfl_down_sync, ballot_sync, syncwarp):
        setattr(FakeCUDAModule, fn.__name__, fn)
    FakeCUDAModule._biglda_warps = True


_add_simulator_warp_intrinsics()


# --------------------------------------------------------------------------- random streams
@cuda.jit(device=True, inline=True)
def _mix32(x):
    """Hash 32-bit integers (xorshift-multiply rounds); ``x`` int64 in [0, 2**32)."""
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
@cuda.jit(device=True)
def _move_topic(n_wk, n_k, w, s, t):
    """Move one token of word ``w`` from topic ``s`` to ``t`` in ``n_wk``/``n_k`` (atomics)."""
    cuda.atomic.sub(n_wk, (w, s), 1)
    cuda.atomic.add(n_wk, (w, t), 1)
    cuda.atomic.sub(n_k, s, 1)
    cuda.atomic.add(n_k, t, 1)


@cuda.jit(device=True)
def _move_token(n_wk, n_dk, n_k, w, d, s, t):
    """Move one token (word ``w``, chunk document ``d``) from topic ``s`` to ``t``.

    The six atomic count moves every GPU kernel makes. Why atomics are safe: each
    decrement removes a contribution that exists (the token's own old topic), so no count
    goes negative or loses an update, and after a kernel the counts equal the recount of
    ``z`` exactly, however the threads interleave.
    """
    _move_topic(n_wk, n_k, w, s, t)
    cuda.atomic.sub(n_dk, (d, s), 1)
    cuda.atomic.add(n_dk, (d, t), 1)


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

