"""Parts that threads claim inside numba, without the GIL (an atomic counter).

A sweep cut into many parts balances threads of unequal speed, but when each part is a
Python call, a thread takes the GIL at every part's end. Then any thread that holds the GIL
for a while (Dask's profiler walking the stacks, the worker's event loop) stalls every
sampling thread that ends a part meanwhile: warplda on 16 threads lost 21% to a Python thread
holding the GIL 1 ms in 7 (pipelines/README.md, "Sixth session"). Here each thread enters
one numba call per pass and takes the parts from a shared counter by atomic fetch-and-add.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import config, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

if config.DISABLE_JIT:  # the kernels run as Python (the interpreter's tests): a lock
    _LOCK = threading.Lock()

    def _fetch_add(counter, value):
        """``old = counter[0]; counter[0] += value; return old``, atomically (int64 [1])."""
        with _LOCK:
            old = int(counter[0])
            counter[0] += value
            return old
else:
    @intrinsic
    def _fetch_add(typingctx, counter, value):
        """``old = counter[0]; counter[0] += value; return old``, atomically (int64 [1])."""
        if not (isinstance(counter, types.Array) and counter.dtype == types.int64
                and counter.ndim == 1 and isinstance(value, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            arr, inc = args
            ary = context.make_array(sig.args[0])(context, builder, arr)
            ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary,
                                           [context.get_constant(types.intp, 0)])
            inc = context.cast(builder, inc, sig.args[1], types.int64)
            return builder.atomic_rmw("add", ptr, inc, "monotonic")

        return types.int64(counter, value), codegen


@njit(nogil=True, cache=True)
def claim(counter, n_parts):
    """Return the next unclaimed part of ``n_parts``, or -1 when none is left."""
    i = _fetch_add(counter, 1)
    return i if i < n_parts else -1


def new_counter() -> np.ndarray:
    """Return a fresh counter for one pass: int64 [1], at 0."""
    return np.zeros(1, dtype=np.int64)
