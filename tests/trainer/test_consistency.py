"""The parameter server is a function of all z: after training and after resume it equals the
recount; n_k sums to N; the log-likelihood the driver reports is the joint LL of the final state.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from biglda.corpus import Corpus
from biglda.samplers import joint_loglik
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training


def _run(client, url, out=None, **kw):
    cfg = TrainConfig(n_topics=8, **kw)
    corpus = validate(url, None, cfg, overwrite=False) if not kw.get("resume") else \
        Corpus.open(url)
    return run_training(client, corpus, cfg, out=out)


@pytest.mark.parametrize("sampler", ["lightlda", "cgs"])
def test_table_equals_recount_and_reported_loglik_is_exact(local_cluster, synth_corpus, sampler,
                                                           recount):
    url, _ = synth_corpus
    # 3 shards on 2 workers: more shards than workers
    r = _run(local_cluster, url, iterations=6, sampler=sampler, n_shards=3, checkpoint_every=0)
    n_wk, n_k, z = recount(url, r)
    np.testing.assert_array_equal(r.n_wk, n_wk)
    np.testing.assert_array_equal(r.n_k, n_k)
    corpus = Corpus.open(url)
    assert r.n_k.sum() == corpus.n_tokens
    assert len(set(r.placement.values())) == 2 and len(r.shards) == 3
    assert r.clocks == [6, 6, 6]
    assert [h["iteration"] for h in r.history] == list(range(1, 7))
    # BSP: the last record's LL is the joint LL of the final z and table
    ll = joint_loglik(corpus.doc_ptr, z, n_wk, n_k, np.full(8, 0.1), 0.01, corpus.n_words)
    assert math.isclose(r.history[-1]["ll"], ll, rel_tol=1e-9)
    assert r.history[-1]["ll_per_token"] > r.history[0]["ll_per_token"]
    assert all(i["ignored"] == 0 for i in r.ps_info)
    rec = r.history[-1]
    for key in ("tokens_per_s", "bytes_pushed", "bytes_pulled", "ps_overhead", "clock_spread"):
        assert rec[key] is not None
    assert rec["clock_spread"] == 0 and rec["top_words"] is not None


def test_resume_from_checkpoint_recounts_the_table(local_cluster, synth_corpus, tmp_path,
                                                   recount):
    url, _ = synth_corpus
    out = str(tmp_path / "model.zarr")
    first = _run(local_cluster, url, out=out, iterations=5, checkpoint_every=2, n_shards=2)
    ck = ckpt.checkpoint_url(out)
    attrs = ckpt.open_checkpoint(ck, 8, Corpus.open(url).n_tokens)
    assert attrs["clock"] == 5  # the final state is resumable (5 is not a multiple of 2)
    z_saved = np.concatenate([ckpt.read_z(ck, attrs, s.token_start, s.token_stop)
                              for s in first.shards])
    np.testing.assert_array_equal(z_saved, np.concatenate([first.z[s.index] for s in first.shards]))
    # a kill in the middle of the next write: garbage in the uncommitted slot changes nothing
    import zarr
    free = 1 - attrs["slot"]
    zarr.open_array(f"{ck}/slot{free}/0", mode="r+")[:10] = 7
    second = _run(local_cluster, url, out=out, iterations=8, checkpoint_every=2, n_shards=2,
                  resume=True)
    n_wk, n_k, _ = recount(url, second)
    np.testing.assert_array_equal(second.n_wk, n_wk)
    np.testing.assert_array_equal(second.n_k, n_k)
    assert second.clocks == [8, 8]
    assert [h["iteration"] for h in second.history] == list(range(1, 9))
    assert second.history[5]["ll_per_token"] > first.history[0]["ll_per_token"]
    assert ckpt.open_checkpoint(ck, 8, Corpus.open(url).n_tokens)["clock"] == 8
    # BSP is deterministic for a seed and shard layout: resuming is the same run as not stopping
    straight = _run(local_cluster, url, iterations=8, checkpoint_every=0, n_shards=2)
    for s in straight.shards:
        np.testing.assert_array_equal(second.z[s.index], straight.z[s.index])


@pytest.mark.parametrize("rule", [{"tol": 0.5}, {"max_seconds": 0.01}])
def test_stop_rules_end_every_shard_at_the_same_clock(local_cluster, synth_corpus, recount,
                                                      rule):
    url, _ = synth_corpus
    r = _run(local_cluster, url, iterations=50, n_shards=2, checkpoint_every=0, **rule)
    assert r.stop_reason == next(iter(rule))
    # stopped early (how early depends on the sampler auto picks), every shard at one clock
    assert len(r.history) < 50 and len(set(r.clocks)) == 1 and r.clocks[0] == len(r.history)
    n_wk, _n_k, _ = recount(url, r)
    np.testing.assert_array_equal(r.n_wk, n_wk)
