"""Heterogeneous jobs: GPU and CPU workers in one run, shards placed by measured throughput.

Real worker processes, no mocks:

* a mixed job — one worker process runs with ``NUMBA_ENABLE_CUDASIM=1`` in its environment
  (set by its nanny before numba is imported there), so an explicit "gpu" on it runs the GPU
  sampler's kernels on the CUDA simulator; the other runs the CPU sampler. Oracles: the table
  equals the recount of the final ``z`` (nothing lost or counted twice between backends and
  across the balance's restart), the stats name both backends, and the balance (on by itself:
  the backends differ) moves tokens off the simulator worker, which is far slower;
* the throughput balance against an artificially slow worker (``slow_workers``): the balanced
  run gives it fewer tokens and its clock spread (:func:`biglda.trainer.metrics.clock_spread_s`)
  is far smaller than the same run's without balancing.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from biglda.trainer.cluster import start_local_cluster
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.metrics import clock_spread_s
from biglda.trainer.run import run_training


@pytest.fixture(scope="module")
def sim_cluster():
    """A CPU worker and a single-thread worker on the CUDA simulator (``(client, cpu, sim)``)."""
    from distributed import Client

    cluster = start_local_cluster(1, 1, [{"NUMBA_ENABLE_CUDASIM": "1"}])
    client = Client(cluster, direct_to_workers=True)
    try:
        env = client.run(lambda: os.environ.get("NUMBA_ENABLE_CUDASIM", ""))
        sim = [w for w, v in env.items() if v == "1"]
        cpu = [w for w, v in env.items() if v != "1"]
        assert len(sim) == 1 and len(cpu) == 1, env
        # The simulator's threads meet at barriers its launcher polls: at Python's default
        # 5 ms GIL switch interval each barrier costs milliseconds (the simulator run of
        # tests/samplers sets the same). Its speed only: the kernels' semantics are the same.
        client.run(sys.setswitchinterval, 1e-4, workers=sim)
        yield client, cpu[0], sim[0]
    finally:
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def tiny_url(tmp_path_factory):
    """A corpus small enough for the simulator (~1,200 tokens, V <= 40), in small chunks."""
    from biglda.corpus import write_corpus
    from biglda.corpus.synth import SynthSpec, generate

    tokens, doc_ptr, phi, _ = generate(SynthSpec(n_docs=60, n_words=40, n_topics=4,
                                                 mean_doc_length=20, alpha=0.1, beta=0.05,
                                                 seed=3))
    url = str(tmp_path_factory.mktemp("hetero") / "tiny.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(phi.shape[1])], chunk_tokens=128)
    return url


def _tokens_of(result, worker: str) -> int:
    return sum(s.n_tokens for s in result.shards if result.placement[s.index] == worker)


SIM_SLOW_S = 0.05  # extra seconds per shard per clock on the simulator worker


def test_mixed_job_runs_gpu_and_cpu_samplers_and_balances(sim_cluster, tiny_url, tmp_path,
                                                         recount):
    client, cpu, sim = sim_cluster
    # the balance measures clocks 1 and 2 (balance_after=3): one clock of the CPU worker is a
    # few ms on these 600 tokens (4-12x the simulator's rate), and in full-suite runs (three
    # so far, the last on 2026-11-27) the measured clocks came out within 10% of the
    # simulator's (no balance): a pause of a few hundred ms in them is enough, such as a
    # kernel first called there, or the suite's other work on 2 cores. A short CPU job first
    # calls every CPU kernel in both processes, and the simulator worker also sleeps
    # SIM_SLOW_S per shard it sweeps (``slow_workers``), so which worker is slower does not
    # hang on that noise; the balance still acts on the rates it measures.
    warm = TrainConfig(n_topics=4, iterations=3, sampler="lightlda", seed=1, checkpoint_every=0,
                       top_words_every=0, backend="cpu", call_timeout=120.0)
    run_training(client, validate(tiny_url, None, warm, False), warm)
    cfg = TrainConfig(n_topics=4, iterations=5, sampler="lightlda", seed=2, checkpoint_every=5,
                      top_words_every=0, backend="auto", worker_backends={sim: "gpu"},
                      call_timeout=120.0, rebalance_after=0, balance_after=3,
                      slow_workers={sim: SIM_SLOW_S})
    records = []
    r = run_training(client, validate(tiny_url, None, cfg, False), cfg,
                     out=str(tmp_path / "model.zarr"), on_record=[records.append])

    # both backends ran, each where it was asked to
    its = [x for x in records if x["type"] == "iteration"]
    assert [x["iteration"] for x in its] == [1, 2, 3, 4, 5]
    assert its[0]["backends"] == {cpu: "cpu", sim: "gpu"}
    # the backends differ, so the job was balanced by itself: 4 shards per worker ...
    assert len(r.shards) == 8
    # ... and after 3 clocks the far slower simulator worker lost tokens to the CPU one
    assert [e.reason for e in r.rebalances] == ["throughput"]
    ev = r.rebalances[0]
    assert ev.clock == 3 and ev.rates[sim] < ev.rates[cpu]
    assert len(ev.after.get(sim, [])) < len(ev.before[sim])
    assert its[-1]["tokens_per_worker"].get(sim, 0) < its[0]["tokens_per_worker"][sim]
    assert _tokens_of(r, sim) < its[0]["tokens_per_worker"][sim]
    # the table is the recount of the final z, whichever backend swept a shard
    n_wk, n_k, z = recount(tiny_url, r)
    np.testing.assert_array_equal(r.n_wk, n_wk)
    np.testing.assert_array_equal(r.n_k, n_k)
    assert int(r.n_k.sum()) == len(z)
    assert all(x["clock_spread_s"] >= 0 for x in its)


SLOW_S = 0.3  # extra seconds per shard per clock on the slow worker


def test_throughput_balance_moves_tokens_off_a_slow_worker(local_cluster, synth_corpus,
                                                          tmp_path):
    client = local_cluster
    url, _ = synth_corpus
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    slow = workers[1]
    runs = {}
    for balance in ("none", "throughput"):
        cfg = TrainConfig(n_topics=8, iterations=7, sampler="cgs", seed=4, checkpoint_every=10,
                          top_words_every=0, balance=balance, rebalance_after=0,
                          slow_workers={slow: SLOW_S}, call_timeout=60.0)
        records = []
        r = run_training(client, validate(url, None, cfg, False), cfg,
                         out=str(tmp_path / balance / "model.zarr"), on_record=[records.append])
        runs[balance] = (r, [x for x in records if x["type"] == "iteration"])

    plain, plain_its = runs["none"]
    bal, bal_its = runs["throughput"]
    # "none" keeps one shard per worker thread and never moves it; "throughput" plans 4 per
    # thread and moves them once, after measuring clock 1, at the checkpoint of clock 2
    assert len(plain.shards) == 2 and not plain.rebalances
    assert len(bal.shards) == 8 and [e.reason for e in bal.rebalances] == ["throughput"]
    assert bal.rebalances[0].clock == 2
    half = sum(s.n_tokens for s in bal.shards) / 2
    assert _tokens_of(plain, slow) == pytest.approx(half, rel=0.1)
    assert _tokens_of(bal, slow) < 0.5 * half                  # the assignment
    assert bal_its[-1]["tokens_per_worker"].get(slow, 0) < 0.5 * half
    # the clock spread: the slow worker sleeps SLOW_S per shard it sweeps, so in the plain run
    # (one shard each) its sleep holds every clock ...
    after = slice(3, 7)  # iterations 4..7, after the balance's move
    spread_plain = float(np.median([x["clock_spread_s"] for x in plain_its[after]]))
    assert spread_plain > 0.8 * SLOW_S
    # ... and in the balanced run the spread of clocks 1..2 (4 shards each: 4 sleeps on the slow
    # worker) falls once the move leaves it fewer shards. (Against the plain run's spread the
    # gain would be only the fast worker's extra sweep work, which is timing noise on a loaded
    # machine: CI failed on that comparison.)
    spread_before = float(np.median([x["clock_spread_s"] for x in bal_its[0:2]]))
    spread_after = float(np.median([x["clock_spread_s"] for x in bal_its[after]]))
    kept = sum(1 for s in bal.shards if bal.placement[s.index] == slow)
    assert spread_before > 0.8 * 4 * SLOW_S, spread_before
    assert spread_after < 0.8 * spread_before, (spread_after, spread_before)
    assert spread_after < (kept + 0.8) * SLOW_S, (spread_after, kept)


def test_clock_spread_is_longest_minus_shortest_busy_time():
    assert clock_spread_s({"a": [2.0, 10], "b": [0.5, 10], "c": [1.0, 5]}) == 1.5
    assert clock_spread_s({"a": [2.0, 10]}) == 0.0
    assert clock_spread_s({}) == 0.0
