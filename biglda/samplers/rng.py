"""Explicit, counter-based random streams for the kernels.

A stream is named by a :class:`RandomKey` ``(seed, iteration, shard, thread)``. The key is
hashed with splitmix64 (Steele, Lea & Flood 2014) into one 64-bit state, so streams of
neighbouring keys are decorrelated (never ``seed + i``). Inside a kernel that state seeds a
xorshift64* generator (Vigna 2016) carried in a local variable: no global RNG, no allocation,
and the same key always gives the same numbers, under the JIT or with ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _splitmix64(x: int) -> int:
    """One splitmix64 output for the state ``x`` (pure Python, 64-bit wrap-around)."""
    x = (x + _GOLDEN) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


@dataclass(frozen=True)
class RandomKey:
    """Names one random stream: ``(seed, iteration, shard, thread)``.

    Examples
    --------
    >>> bool(RandomKey(0, 1, 2).state() != RandomKey(0, 2, 1).state())
    True
    """

    seed: int
    iteration: int
    shard: int = 0
    thread: int = 0

    def state(self) -> np.uint64:
        """Return the stream's 64-bit generator state (never zero: xorshift needs non-zero)."""
        h = 0
        for part in (self.seed, self.iteration, self.shard, self.thread):
            h = _splitmix64(h ^ (int(part) & _MASK64))
        return np.uint64(h or _GOLDEN)

    def child(self, thread: int) -> RandomKey:
        """Return the same stream for another thread."""
        return RandomKey(self.seed, self.iteration, self.shard, thread)


# xorshift64* constants as uint64 so Numba never promotes the arithmetic to float64.
_S12 = np.uint64(12)
_S25 = np.uint64(25)
_S27 = np.uint64(27)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_MULT = np.uint64(0x2545F4914F6CDD1D)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(nogil=True, cache=True)
def _next_u64(state):
    """Advance xorshift64*: ``state uint64 -> (new_state, output uint64)``."""
    state ^= state >> _S12
    state ^= state << _S25
    state ^= state >> _S27
    return state, state * _MULT


@njit(nogil=True, cache=True)
def _next_float(state):
    """``state -> (new_state, u)`` with ``u`` uniform in [0, 1) on a 2**-53 grid."""
    state, x = _next_u64(state)
    return state, float(x >> _S11) * _INV53


@njit(nogil=True, cache=True)
def _next_int(state, n):
    """``state -> (new_state, i)`` with ``i`` uniform in [0, n) (bias below n * 2**-53)."""
    state, u = _next_float(state)
    i = np.int64(u * n)
    if i >= n:  # cannot happen for u < 1, kept so rounding can never index out of range
        i = n - 1
    return state, i


_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S31 = np.uint64(31)


@njit(nogil=True, cache=True)
def _substream(state, tag, index):
    """Return sub-stream ``index`` of a stream: splitmix64 of ``state ^ (tag | index)``.

    For kernels that cut their work into blocks with a stream each (warplda's passes):
    ``tag`` uint64 names the kind of block in the high bits, ``index`` the block. Never zero.
    """
    x = (state ^ (tag | np.uint64(index))) + _GOLD
    x = (x ^ (x >> _S30)) * _MIX1
    x = (x ^ (x >> _S27)) * _MIX2
    x = x ^ (x >> _S31)
    if x == 0:
        x = _GOLD
    return x
