"""A push sent without waiting (processes taking turns): its answers are taken before the
shard's next call, the driver's snapshot of the clock waits for it, and a push that never
comes is a clear error naming its clock."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest
from ps_moves import moves, start_process_cache

from biglda.errors import ClusterError
from biglda.ps import TableShard
from biglda.ps.calls import InProcess
from biglda.ps.client import TableClient
from biglda.ps.sizing import row_bounds

K = 4


class HeldPushes:
    """A table shard whose ``push_advance`` answers (and applies) only when released."""

    def __init__(self, shard: TableShard) -> None:
        self.shard, self.direct, self.held = shard, InProcess(shard), []

    def __getattr__(self, name):
        if name != "push_advance":
            return getattr(self.direct, name)

        def held(*args):
            fut: Future = Future()
            self.held.append((fut, args))
            return fut
        return held

    def release(self, after: float = 0.0) -> None:
        time.sleep(after)
        held, self.held = self.held, []
        for fut, args in held:
            fut.set_result(self.shard.push_advance(*args))


def test_a_deferred_push_is_settled_in_order_and_the_snapshot_waits_for_it():
    rng = np.random.default_rng(5)
    n_words = 20
    bounds = row_bounds(n_words, 1)
    shard = TableShard(0, 0, n_words, K, 1, 0.1)
    late = HeldPushes(shard)
    tables = TableClient((late,), bounds)
    cache, init = start_process_cache(rng, [0], n_words, 60, bounds, tables, K)
    cache.attach(tables, -1, 5.0)
    truth = np.zeros((n_words, K), dtype=np.int64)
    truth[cache.vocab] += init

    def push(clock):
        words, topics, counts, dk = moves(rng, cache.n_wk, 5)
        np.add.at(cache.n_wk, (words, topics), counts)
        np.add.at(truth, (cache.vocab[words], topics), counts)
        cache.push_all(tables, clock, [(words, topics, counts, dk)], 5.0, advance=clock - 2,
                       wait=False)

    push(0)
    # sent, not applied: no snapshot of clock 0 yet, and the table has only the recount
    assert len(late.held) == 1 and shard.info()["applied"] == [-1]
    threading.Thread(target=late.release, args=(0.1,)).start()
    t0 = time.monotonic()
    snap = tables.snapshots(0, 5.0)
    assert snap[0] is not None and time.monotonic() - t0 >= 0.09
    assert shard.info()["applied"] == [0]
    push(1)  # (clock 0's answers were taken first: its future is done)
    assert len(late.held) == 1 and shard.info()["applied"] == [0]
    threading.Thread(target=late.release, args=(0.05,)).start()
    cache.settle(5.0)
    assert shard.info()["applied"] == [1]
    _, rows, n_k = shard.table()
    np.testing.assert_array_equal(rows, truth)
    np.testing.assert_array_equal(n_k, truth.sum(axis=0))
    assert cache.received[0] is not None and int(cache.received[0][0]) == -1  # advanced to -1

    push(2)
    with pytest.raises(ClusterError, match="push of clock 2"):
        cache.settle(0.05)
    # a snapshot that never comes: None after the timeout (the driver then stops the attempt)
    assert tables.snapshots(2, 0.05) == [None]
