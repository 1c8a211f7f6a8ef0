"""Parts claimed inside numba by an atomic counter (biglda.samplers._claim)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from biglda.samplers._claim import claim, new_counter


@njit(nogil=True)
def _take_all(counter, n_parts, taken, claims):
    """Claim parts until none is left; count each in ``taken``; return how many it took."""
    mine = 0
    while True:
        i = claim(counter, n_parts)
        if i < 0:
            return mine
        taken[i] += 1
        claims[i] = mine  # (some work between claims, so the threads interleave)
        x = 0.0
        for k in range(200):
            x += k * 0.5
        if x < 0.0:
            return -1
        mine += 1


def test_threads_claim_every_part_exactly_once():
    n_parts, n_threads = 200_000, 4
    taken = np.zeros(n_parts, dtype=np.int64)
    claims = np.zeros(n_parts, dtype=np.int64)
    counter = new_counter()
    with ThreadPoolExecutor(n_threads) as pool:
        per_thread = list(pool.map(lambda _: _take_all(counter, n_parts, taken, claims),
                                   range(n_threads)))
    # a lost update of the counter would hand one part to two threads (taken 2, another 0)
    assert taken.min() == 1 and taken.max() == 1
    assert sum(per_thread) == n_parts
    # every thread's last claim found none left, and moved the counter past the end
    assert counter[0] == n_parts + n_threads


def test_claim_after_the_last_part_says_none_left():
    counter = new_counter()
    assert [claim(counter, 3) for _ in range(5)] == [0, 1, 2, -1, -1]
    assert claim(new_counter(), 0) == -1
