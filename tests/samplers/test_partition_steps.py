"""The order of a partitioned sweep's parts (:meth:`Partition.run_steps`) on real threads.

A part ``(i, s)`` (document range ``i``, step ``s``, word range ``(i + s) mod R``) may start
once its document range's part of step ``s - 1`` and its word range's (``(i + 1, s - 1)``)
are done, and every part of step ``s - lag``; it starts from ``n_k`` with the moves of
every step up to ``s - lag`` and its own document range's since. The tests run a Python
kernel that sleeps a random while (so the threads interleave), records when it ran and
what ``n_k`` it got, and moves ``n_k`` by a known amount; then check the order against the
ranges, the ``n_k`` each part got against that rule, and (lag 1) the chain against the
barrier after every step that the sweep had before.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from biglda.samplers.partition import Layout, Partition
from biglda.samplers.rng import _substream

N_TOPICS = 5


def _partition(pool, n_threads, n_ranges, lag):
    tokens = np.arange(4 * n_ranges, dtype=np.int32) % (2 * n_ranges)
    doc_ptr = np.arange(0, len(tokens) + 1, 2, dtype=np.int64)
    layout = Layout(tokens, doc_ptr, 2 * n_ranges, n_ranges, 1.0,
                    np.bincount(tokens, minlength=2 * n_ranges))
    return Partition(layout, pool, n_threads, lag=lag)


def _moves(i, s, n_ranges):
    """Part (i, s)'s known move of n_k (one token from a topic to another)."""
    m = np.zeros(N_TOPICS, dtype=np.int64)
    m[(i + 2 * s) % N_TOPICS] += 1 + i
    m[(3 * i + s + 1) % N_TOPICS] -= 1 + i
    return m


def _run(n_threads, n_ranges, lag, seed=0):
    log = []  # (i, s, start, end, n_k it got)
    lock = threading.Lock()
    rng = np.random.default_rng(seed)
    naps = rng.uniform(0, 0.004, size=(n_ranges, n_ranges))

    def kernel(i, r, own_k, state):
        s = (r - i) % n_ranges
        got = own_k.copy()
        t0 = time.perf_counter()
        time.sleep(naps[s, i])
        own_k += _moves(i, s, n_ranges)
        with lock:
            log.append((i, s, t0, time.perf_counter(), got))
        return (int(state), np.array([i, s], dtype=np.int64))

    n_k = np.full(N_TOPICS, 1000, dtype=np.int64)
    start = n_k.copy()
    with ThreadPoolExecutor(max(1, n_threads - 1)) as pool:
        part = _partition(pool, n_threads, n_ranges, lag)
        out = part.run_steps(kernel, lambda i, r, own_k, sub: (i, r, own_k, sub), n_k,
                             np.uint64(7), 3)
    return start, n_k, log, out, part


@pytest.mark.parametrize("lag", [1, 2, 3])
@pytest.mark.parametrize("n_threads,n_ranges", [(2, 4), (3, 6), (4, 4)])
def test_parts_wait_for_their_ranges_and_the_lagged_step(n_threads, n_ranges, lag):
    start, n_k, log, out, part = _run(n_threads, n_ranges, lag)
    assert len(log) == n_ranges * n_ranges
    when = {(i, s): (t0, t1) for i, s, t0, t1, _ in log}
    for (i, s), (t0, _) in when.items():
        if s == 0:
            continue
        assert t0 >= when[(i, s - 1)][1]  # its documents' part before
        assert t0 >= when[((i + 1) % n_ranges, s - 1)][1]  # its words' part before
        if s - lag >= 0:
            assert t0 >= max(when[(j, s - lag)][1] for j in range(n_ranges))
    # no two parts that share a document range or a word range overlap in time
    for (i, s), (a0, a1) in when.items():
        for (j, u), (b0, b1) in when.items():
            shares = i == j or (i + s) % n_ranges == (j + u) % n_ranges
            if (i, s) != (j, u) and shares:
                assert a1 <= b0 or b1 <= a0, f"parts {(i, s)} and {(j, u)} overlapped"
    # each part's n_k: the start, every step up to s - lag, its own range's moves since
    for i, s, _, _, got in log:
        want = start.copy()
        for u in range(s):
            for j in range(n_ranges):
                if u <= s - lag or j == i:
                    want += _moves(j, u, n_ranges)
        np.testing.assert_array_equal(got, want, err_msg=f"part {(i, s)}")
    total = start + sum(_moves(i, s, n_ranges) for i in range(n_ranges)
                        for s in range(n_ranges))
    np.testing.assert_array_equal(n_k, total)
    # the results in step order, each from its own sub-stream; the moved tokens by word range
    for s in range(n_ranges):
        for i in range(n_ranges):
            state, ids = out[s * n_ranges + i]
            assert state == int(_substream(np.uint64(7), np.uint64(3 | (s << 32)), i))
            assert list(ids) == [i, s]
    for r in range(n_ranges):
        assert [tuple(m) for m in part.moved[r]] == [((r - s) % n_ranges, s)
                                                     for s in range(n_ranges)]


def test_lag_one_is_the_barrier_after_every_step():
    # the sweep as it was before parts ran as they became ready: all parts of a step
    # start from the n_k the step before left
    n_ranges = 4
    _, _, log, _, _ = _run(3, n_ranges, 1, seed=1)
    got = {(i, s): k for i, s, _, _, k in log}
    n_k = np.full(N_TOPICS, 1000, dtype=np.int64)
    for s in range(n_ranges):
        for i in range(n_ranges):
            np.testing.assert_array_equal(got[(i, s)], n_k)
        n_k = n_k + sum(_moves(i, s, n_ranges) for i in range(n_ranges))


def test_a_failing_part_stops_the_sweep_and_is_raised():
    ran = []

    def kernel(i, r, own_k, state):
        s = (r - i) % 4
        ran.append((i, s))
        if (i, s) == (1, 1):
            raise RuntimeError("part (1, 1) failed")
        return (0, np.empty(0, dtype=np.int64))

    with ThreadPoolExecutor(2) as pool:
        part = _partition(pool, 3, 4, 2)
        with pytest.raises(RuntimeError, match=r"part \(1, 1\)"):
            part.run_steps(kernel, lambda i, r, own_k, sub: (i, r, own_k, sub),
                           np.zeros(N_TOPICS, dtype=np.int64), np.uint64(1), 0)
    # what needs it never ran: its ranges' next parts, and (lag 2) every step from 3 on
    assert (1, 2) not in ran and (0, 2) not in ran
    assert all(s <= 2 for _, s in ran)
