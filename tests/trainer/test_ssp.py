"""SSP: no shard starts clock c before every shard has finished c - s (checked from the clock
server's recorded start and tick times), with one shard artificially slowed; with s = inf the
fast shard runs ahead; processes taking turns start at most one clock ahead under BSP.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from biglda.corpus import Corpus
from biglda.samplers import joint_loglik
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training

ITERATIONS = 8
SLOW = 0.15  # seconds of extra sleep per clock on shard 1


def _run(client, url, staleness, **kw):
    cfg = TrainConfig(n_topics=8, iterations=ITERATIONS, staleness=staleness, n_shards=2,
                      checkpoint_every=0, slow_shards={1: SLOW}, top_words_every=0,
                      **({"process_partition": "off"} | kw))
    return run_training(client, validate(url, None, cfg, False), cfg)


def _reached(ticks, shard, clock):
    """Time shard ``shard`` had completed ``clock`` sweeps (0 for clocks before the run)."""
    times = [t for s, c, t in ticks if s == shard and c >= clock]
    return min(times) if times else math.inf


@pytest.mark.parametrize("staleness", [0, 1, 3])
def test_no_shard_starts_more_than_s_clocks_ahead(local_cluster, synth_corpus, staleness):
    url, _ = synth_corpus
    r = _run(local_cluster, url, staleness)
    assert len(r.starts) == 2 * ITERATIONS
    for _shard, clock, t_start, low in r.starts:
        assert low >= clock - staleness  # the slowest clock when it started
        for other in (0, 1):  # and from the recorded times
            assert _reached(r.ticks, other, clock - staleness) <= t_start
    # the bound is used: the fast shard got exactly s clocks ahead at some point
    ahead = max(clock - low for _, clock, _, low in r.starts)
    assert ahead == staleness if staleness <= 1 else ahead >= 2
    assert r.clocks == [ITERATIONS, ITERATIONS]


def test_processes_taking_turns_start_a_clock_ahead_of_the_slowest(local_cluster, synth_corpus,
                                                                   recount):
    """Under BSP, processes taking turns on the vocabulary start a clock once the posts its
    first step folds have come, not at a barrier: the clock admits them one clock ahead of
    the slowest, no more, and the slow shard's delay makes the fast one use it. What they
    read is still BSP's (the turns' replay, tests/trainer/test_turns_reference.py); the
    table is the recount."""
    url, _ = synth_corpus
    r = _run(local_cluster, url, 0, sampler="cgs", process_partition="on")
    assert len(r.starts) == 2 * ITERATIONS and r.clocks == [ITERATIONS, ITERATIONS]
    for _shard, clock, t_start, low in r.starts:
        assert low >= clock - 1
        for other in (0, 1):
            assert _reached(r.ticks, other, clock - 1) <= t_start
    assert max(clock - low for _, clock, _, low in r.starts) == 1
    n_wk, n_k, _ = recount(url, r)
    assert (r.n_wk == n_wk).all() and (r.n_k == n_k).all()


def test_async_lets_the_fast_shard_run_ahead(local_cluster, synth_corpus, recount):
    url, _ = synth_corpus
    r = _run(local_cluster, url, math.inf)
    fast_done = _reached(r.ticks, 0, ITERATIONS)
    slow_half = _reached(r.ticks, 1, ITERATIONS // 2)
    assert fast_done < slow_half
    assert max(clock - low for _, clock, _, low in r.starts) > 3
    n_wk, n_k, z = recount(url, r)  # consistent whatever the staleness
    assert (r.n_wk == n_wk).all() and (r.n_k == n_k).all()
    corpus = Corpus.open(url)
    ll = joint_loglik(corpus.doc_ptr, z, n_wk, n_k, np.full(8, 0.1), 0.01, corpus.n_words)
    assert math.isclose(r.history[-1]["ll"], ll, rel_tol=1e-9)
