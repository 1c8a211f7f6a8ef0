"""Managed communication in training (``--comm-budget``): with one shard slowed, the SSP
bound still holds per process (from the clock server's recorded starts and ticks), early
updates flow both ways, and the final table equals the recount of ``z`` (offers are never
part of the table)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from biglda.corpus import Corpus
from biglda.samplers import joint_loglik
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training

ITERATIONS = 6


@pytest.mark.parametrize("staleness", [1, math.inf])
def test_comm_budget_keeps_the_ssp_bound_and_the_table_exact(local_cluster, synth_corpus,
                                                             recount, staleness):
    url, _ = synth_corpus
    cfg = TrainConfig(n_topics=8, iterations=ITERATIONS, staleness=staleness, n_shards=2,
                      checkpoint_every=0, slow_shards={1: 0.1}, top_words_every=0,
                      comm_budget=5.0)
    r = run_training(local_cluster, validate(url, None, cfg, False), cfg)
    assert r.clocks == [ITERATIONS, ITERATIONS]
    for shard, clock, t_start, low in r.starts:
        assert low >= clock - staleness
        if math.isfinite(staleness):  # and from the recorded tick times
            done = [t for s, c, t in r.ticks if s != shard and c >= clock - staleness]
            assert clock - staleness <= 0 or min(done) <= t_start
    sent = sum(h["bytes_early_sent"] for h in r.history)
    got = sum(h["bytes_early_received"] for h in r.history)
    assert sent > 0 and got > 0
    n_wk, n_k, z = recount(url, r)
    assert (r.n_wk == n_wk).all() and (r.n_k == n_k).all()
    corpus = Corpus.open(url)
    ll = joint_loglik(corpus.doc_ptr, z, n_wk, n_k, np.full(8, 0.1), 0.01, corpus.n_words)
    assert math.isclose(r.history[-1]["ll"], ll, rel_tol=1e-9)


def test_without_a_budget_nothing_is_sent_early(local_cluster, synth_corpus):
    """Without a budget or turns on the vocabulary (whose steps are offers too, and send)."""
    url, _ = synth_corpus
    cfg = TrainConfig(n_topics=8, iterations=2, n_shards=2, checkpoint_every=0,
                      top_words_every=0, process_partition="off")
    r = run_training(local_cluster, validate(url, None, cfg, False), cfg)
    assert [h["bytes_early_sent"] for h in r.history] == [0, 0]
    turns = run_training(local_cluster, validate(url, None, cfg, False),
                         TrainConfig.from_settings(cfg, process_partition="auto"))
    assert all(h["bytes_early_sent"] > 0 for h in turns.history)
