"""``prefetch(a, i)``: ask the CPU to start loading row ``i`` of array ``a`` into the cache.

``prefetch_write(a, i)`` does the same for a row the kernel is about to write.
Numba intrinsics (LLVM's ``llvm.prefetch``, keep in all levels): a kernel that visits
rows of a large array in an order the hardware prefetcher cannot guess (a permutation)
calls it a few iterations ahead, so the row's cache misses overlap with the work in between
instead of stalling it. It changes no value, only timing. With ``NUMBA_DISABLE_JIT=1``
(the plain-Python run of the kernels) it is a Python function that does nothing.
"""

from __future__ import annotations

from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

if getattr(config, "DISABLE_JIT", False):

    def prefetch(a, i):
        """Do nothing: without the JIT there is no cache to warm."""

    prefetch_write = prefetch

else:
    from llvmlite import ir

    def _prefetcher(write: int):
        """Make the intrinsic that prefetches row ``i`` of ``a`` to read (0) or write (1)."""

        @intrinsic
        def prefetch(typingctx, a, i):
            """Prefetch the first byte of row ``i`` of the array ``a``.

            No bounds check: a prefetch of an address outside the array never faults.
            """
            if not isinstance(a, types.Array) or not isinstance(i, types.Integer):
                return None

            def codegen(context, builder, signature, args):
                aryty, idxty = signature.args
                ary = context.make_array(aryty)(context, builder, args[0])
                idx = context.cast(builder, args[1], idxty, types.intp)
                stride = cgutils.unpack_tuple(builder, ary.strides, aryty.ndim)[0]
                data = builder.bitcast(ary.data, ir.IntType(8).as_pointer())
                ptr = builder.gep(data, [builder.mul(idx, stride)])
                i32 = ir.IntType(32)
                fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
                fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
                builder.call(fn, [ptr, i32(write), i32(3), i32(1)])  # rw, keep, data
                return context.get_dummy_value()

            return types.void(a, i), codegen

        return prefetch

    prefetch = _prefetcher(0)
    prefetch_write = _prefetcher(1)
