"""One task and one table cache per worker process, with several threads per process and
several shards per thread: the table is the recount of ``z``, a process pulls once per table
shard per clock, BSP with the same seed and layout is deterministic, and a resume is the same
run as not stopping."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.corpus import Corpus
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training


@pytest.fixture(scope="module")
def threaded_cluster():
    """2 worker processes x 2 threads."""
    from biglda.trainer.cluster import connect

    with connect(workers=2, threads_per_worker=2) as client:
        yield client


def _run(client, url, out=None, **kw):
    cfg = TrainConfig(n_topics=8, n_shards=6, sampler="lightlda", seed=5, **kw)
    corpus = Corpus.open(url) if kw.get("resume") else validate(url, None, cfg, overwrite=False)
    return run_training(client, corpus, cfg, out=out)


def test_threads_and_shards_share_one_process_cache(threaded_cluster, synth_corpus, recount,
                                                    tmp_path):
    url, _ = synth_corpus
    out = str(tmp_path / "model.zarr")
    first = _run(threaded_cluster, url, out=out, iterations=3, checkpoint_every=2)
    n_wk, n_k, _ = recount(url, first)
    np.testing.assert_array_equal(first.n_wk, n_wk)
    np.testing.assert_array_equal(first.n_k, n_k)
    assert len(set(first.placement.values())) == 2 and first.clocks == [3] * 6
    # one pull per process per clock after the attach, whatever the shards and threads
    assert all(i["pulls"] == 2 * (3 - 1) for i in first.ps_info)
    assert ckpt.open_checkpoint(ckpt.checkpoint_url(out), 8, Corpus.open(url).n_tokens)[
        "clock"] == 3
    second = _run(threaded_cluster, url, out=out, iterations=5, checkpoint_every=2, resume=True)
    n_wk, n_k, _ = recount(url, second)
    np.testing.assert_array_equal(second.n_wk, n_wk)
    np.testing.assert_array_equal(second.n_k, n_k)
    # BSP, same seed and layout: resuming is the same run as not stopping, and runs repeat
    straight = _run(threaded_cluster, url, iterations=5, checkpoint_every=0)
    again = _run(threaded_cluster, url, iterations=5, checkpoint_every=0)
    for s in straight.shards:
        np.testing.assert_array_equal(second.z[s.index], straight.z[s.index])
        np.testing.assert_array_equal(again.z[s.index], straight.z[s.index])
    assert second.history[-1]["ll"] == pytest.approx(straight.history[-1]["ll"], rel=1e-12)


def test_managed_communication_with_threads_and_shards(threaded_cluster, synth_corpus,
                                                       recount):
    """--comm-budget with 2 threads x 3 shards per process: rounds of each thread's range,
    offers folded into the cache and the threads' copies; the table stays the recount."""
    url, _ = synth_corpus
    r = _run(threaded_cluster, url, iterations=4, checkpoint_every=0, staleness=1,
             comm_budget=5.0)
    n_wk, n_k, _ = recount(url, r)
    np.testing.assert_array_equal(r.n_wk, n_wk)
    np.testing.assert_array_equal(r.n_k, n_k)
    assert sum(h["bytes_early_sent"] for h in r.history) > 0
    assert sum(h["bytes_early_received"] for h in r.history) > 0
    assert all(i["offers_kept"] == 0 for i in r.ps_info)  # every clock's push dropped them
