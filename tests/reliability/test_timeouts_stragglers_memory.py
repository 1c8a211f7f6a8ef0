"""Slow and paused workers, stragglers, memory settings — on real worker processes.

* A call to an actor on a paused worker (SIGSTOP) times out with one clear ClusterError; the
  push that was sent meanwhile arrives once the worker resumes, and retrying it is ignored:
  the table holds the delta exactly once (oracle: the delta itself).
* A shard slowed down by a fixed sleep per clock makes its worker a reported straggler in the
  metrics records; the fast worker never is.
* The embedded cluster tells Dask never to terminate or pause workers on memory (the table
  shards live outside Dask's data store), and a table that cannot fit the workers' real memory
  limits is refused before anything starts, with the K that would fit.
"""

from __future__ import annotations

import os
import re
import signal
from types import SimpleNamespace

import numpy as np
import pytest

from biglda.errors import ClusterError, ConfigError
from biglda.ps import start_parameter_server
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.placement import plan_cluster
from biglda.trainer.run import run_training


def test_call_to_a_paused_worker_times_out_and_a_retried_push_counts_once(cluster3):
    client = cluster3
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    ps = start_parameter_server(client, 30, 4, 1, 0.1, staleness=0, workers=workers)
    try:
        victim = ps.workers[1]  # table shard 1: rows [10, 20)
        pid = client.run(os.getpid, workers=[victim])[victim]
        delta = (np.array([12, 15], np.int32), np.array([1, 3], np.int32),
                 np.array([2, 5], np.int32))
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(ClusterError, match="no answer within 1 s") as err:
                ps.tables.push_to(1, 0, 0, *delta, timeout=1.0)
            assert "\n" not in str(err.value) and "to table shard 1" in str(err.value)
        finally:
            os.kill(pid, signal.SIGCONT)
        # the timed-out push was delivered after all; the retry of the same (shard, clock) is not
        assert ps.tables.push_to(1, 0, 0, *delta, timeout=30.0) is False
        _start, rows, n_k = ps.tables.parts(timeout=30.0)[1]
        expected = np.zeros((10, 4), np.int32)
        expected[[2, 5], [1, 3]] = [2, 5]
        np.testing.assert_array_equal(rows, expected)
        assert n_k.tolist() == [0, 2, 0, 5]
        info = ps.tables.info(timeout=30.0)[1]
        assert info["pushes"] == 1 and info["ignored"] == 1
    finally:
        ps.close()


def test_a_slow_worker_is_reported_as_a_straggler(cluster3, synth_url, caplog):
    cfg = TrainConfig(n_topics=8, iterations=6, sampler="cgs", n_shards=2, checkpoint_every=0,
                      top_words_every=0, slow_shards={1: 0.3}, staleness=1)
    r = run_training(cluster3, validate(synth_url, None, cfg, False), cfg)
    slow, fast = r.placement[1], r.placement[0]
    flagged = [h["stragglers"] for h in r.history]
    assert all(fast not in f for f in flagged), flagged
    assert sum(f == [slow] for f in flagged) >= len(flagged) - 1, flagged
    assert any("straggler" in m and slow in m for m in caplog.messages)


def test_embedded_cluster_never_kills_or_pauses_workers_on_memory_and_refuses_a_big_table(
        local_cluster):
    # the session's embedded cluster (connect(workers=2), as `biglda train` starts it)
    client = local_cluster
    # the nannies live in processes of their own: asked there
    terminate = client.run(
        lambda dask_worker: dask_worker.memory_manager.memory_terminate_fraction,
        nanny=True)
    assert len(terminate) == 2 and set(terminate.values()) == {False}
    pause = client.run(lambda dask_worker: dask_worker.memory_manager.memory_pause_fraction)
    assert set(pause.values()) == {False}
    # Dask's profiler samples the threads' stacks every second, not 10 ms (cluster.py says why)
    profile_ms = client.run(
        lambda dask_worker: dask_worker.periodic_callbacks["profile"].callback_time)
    assert set(profile_ms.values()) == {1000}
    limits = client.scheduler_info(n_workers=-1)["workers"]
    assert all(w["memory_limit"] > 0 for w in limits.values())
    # a corpus whose table cannot fit in half of the workers' real memory limits
    big = SimpleNamespace(n_words=10**7, plan_shards=lambda n: [
        SimpleNamespace(n_tokens=10**9, index=i) for i in range(n)])
    with pytest.raises(ConfigError, match=r"does not fit.*K <= \d+ fits") as err:
        plan_cluster(client, big, TrainConfig(n_topics=1000, iterations=1))
    k_fits = int(re.search(r"K <= (\d+) fits", str(err.value)).group(1))
    assert 2 <= k_fits < 1000
    plan_cluster(client, big, TrainConfig(n_topics=k_fits, iterations=1))  # it does fit
