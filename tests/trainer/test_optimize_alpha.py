"""Asymmetric alpha learned during training (Minka's fixed point on the shards' histograms).

A synthetic corpus drawn with a known asymmetric alpha: training with optimization moves alpha
toward it, the table still equals the recount of z, the model and the checkpoint carry the
vector (resume continues with it), BSP stays deterministic, and off leaves alpha alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from biglda.corpus import Corpus, write_corpus
from biglda.model.training import train_to_store as train
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.alpha import alpha_due, alpha_from_history
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training

K = 8
TRUE_ALPHA = np.geomspace(0.05, 1.0, K)


@pytest.fixture(scope="module")
def asym_corpus(tmp_path_factory):
    rng = np.random.default_rng(11)
    n_docs, n_words = 1200, 300
    phi = rng.dirichlet(np.full(n_words, 0.05), size=K)
    theta = rng.dirichlet(TRUE_ALPHA, size=n_docs)
    lengths = rng.poisson(80, size=n_docs) + 5
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.empty(doc_ptr[-1], dtype=np.int32)
    for d in range(n_docs):
        zs = rng.choice(K, size=lengths[d], p=theta[d])
        cum = phi.cumsum(axis=1)
        u = rng.random(lengths[d])
        tokens[doc_ptr[d]:doc_ptr[d + 1]] = (u[:, None] > cum[zs]).sum(axis=1).clip(0, n_words - 1)
    url = str(tmp_path_factory.mktemp("alpha") / "asym.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(n_words)], chunk_tokens=8192)
    return url


def _run(client, url, out=None, **kw):
    cfg = TrainConfig(n_topics=K, sampler="cgs", **kw)
    corpus = validate(url, None, cfg, overwrite=False) if not kw.get("resume") else \
        Corpus.open(url)
    return run_training(client, corpus, cfg, out=out)


def test_due_clocks():
    assert [d for d in range(1, 31) if alpha_due(d, 5, 10)] == [10, 15, 20, 25, 30]
    assert not any(alpha_due(d, 0, 0) for d in range(50))
    assert TrainConfig(n_topics=2, iterations=1, optimize_alpha_every=10).alpha_burn_in == 20
    assert TrainConfig(n_topics=2, iterations=1, optimize_alpha_every=3).alpha_burn_in == 10


def test_optimized_alpha_moves_toward_truth(local_cluster, asym_corpus, recount):
    r = _run(local_cluster, asym_corpus, iterations=40, n_shards=3, checkpoint_every=0,
             optimize_alpha_every=5, optimize_alpha_burn_in=10)
    learned = np.sort(r.alpha)
    assert np.corrcoef(learned, np.sort(TRUE_ALPHA))[0, 1] > 0.8, learned
    assert 0.5 < learned.sum() / TRUE_ALPHA.sum() < 2.0, learned
    assert learned.max() / learned.min() > 2  # asymmetric like the truth (20x; from 1x)
    # records: alpha recorded at clocks 10, 15, .. 35 (iterations 10, 15, .. 35); not at 40
    with_alpha = [h["iteration"] for h in r.history if "alpha" in h]
    assert with_alpha == [10, 15, 20, 25, 30, 35]
    assert np.allclose(r.history[-6]["alpha"], r.alpha)
    n_wk, n_k, _ = recount(asym_corpus, r)
    assert np.array_equal(n_wk, r.n_wk) and np.array_equal(n_k, r.n_k)


def test_off_leaves_alpha_alone(local_cluster, asym_corpus):
    r = _run(local_cluster, asym_corpus, iterations=6, n_shards=2, checkpoint_every=0,
             alpha=0.3)
    assert np.array_equal(r.alpha, np.full(K, 0.3))
    assert not any("alpha" in h for h in r.history)


def test_bsp_same_alpha_trajectory_on_a_fresh_cluster_of_the_same_layout(local_cluster,
                                                                         asym_corpus):
    # BSP is deterministic for a seed and layout (processes x threads x shards). Not across
    # layouts since one cache per worker process: shards of one process see each other's
    # moves at once (docs/design.md, "One table cache per worker process").
    from distributed import Client, LocalCluster

    kw = dict(iterations=12, n_shards=2, checkpoint_every=0, optimize_alpha_every=2,
              optimize_alpha_burn_in=4, seed=3)
    two = _run(local_cluster, asym_corpus, **kw)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", host="127.0.0.1") as cluster, \
            Client(cluster, direct_to_workers=True) as client:
        one = _run(client, asym_corpus, **kw)
    assert [h["iteration"] for h in two.history if "alpha" in h] == [4, 6, 8, 10]
    # the same z (alpha from its histograms is bit-identical); the LL up to summation order
    # (one table shard per worker)
    assert [h.get("alpha") for h in two.history] == [h.get("alpha") for h in one.history]
    assert np.allclose([h["ll"] for h in two.history], [h["ll"] for h in one.history],
                       rtol=1e-12, atol=0)
    assert all(np.array_equal(one.z[i], two.z[i]) for i in two.z)
    assert np.array_equal(one.alpha, two.alpha)


def test_model_and_resume_carry_the_vector(local_cluster, asym_corpus, tmp_path):
    from biglda.model import TopicModel

    out = str(tmp_path / "m.zarr")
    # the first run stops at 8 with the alpha of clock 6 in its checkpoint's history
    first = _run(local_cluster, asym_corpus, out=out, iterations=8, n_shards=2,
                 checkpoint_every=4, optimize_alpha_every=3, optimize_alpha_burn_in=3, seed=5)
    attrs = ckpt.open_checkpoint(ckpt.checkpoint_url(out), K, Corpus.open(asym_corpus).n_tokens)
    cfg = TrainConfig(n_topics=K, iterations=1)
    assert np.array_equal(alpha_from_history(attrs["history"], cfg), first.alpha)
    straight = _run(local_cluster, asym_corpus, iterations=12, n_shards=2, checkpoint_every=0,
                    optimize_alpha_every=3, optimize_alpha_burn_in=3, seed=5)
    second = _run(local_cluster, asym_corpus, out=out, iterations=12, n_shards=2,
                  checkpoint_every=4, optimize_alpha_every=3, optimize_alpha_burn_in=3, seed=5,
                  resume=True)
    assert [h.get("alpha") for h in second.history] == [h.get("alpha") for h in straight.history]
    assert np.array_equal(second.alpha, straight.alpha)
    # the saved model carries the vector (train() end to end, embedded client reused)
    model_out = str(tmp_path / "model.zarr")
    train(asym_corpus, model_out, n_topics=K, iterations=12, sampler="cgs",
          scheduler=local_cluster, n_shards=2, checkpoint_every=0, seed=5,
          optimize_alpha_every=3, optimize_alpha_burn_in=3)
    model = TopicModel.load(model_out)
    assert np.allclose(np.asarray(model.alpha), straight.alpha)
    assert np.ptp(np.asarray(model.alpha)) > 0


def test_ssp_uses_the_newest_alpha(local_cluster, asym_corpus, recount):
    r = _run(local_cluster, asym_corpus, iterations=12, n_shards=3, checkpoint_every=0,
             staleness=1, optimize_alpha_every=2, optimize_alpha_burn_in=4)
    assert [h["iteration"] for h in r.history if "alpha" in h] == [4, 6, 8, 10]
    assert np.ptp(r.alpha) > 0
    n_wk, n_k, _ = recount(asym_corpus, r)
    assert np.array_equal(n_wk, r.n_wk) and np.array_equal(n_k, r.n_k)
