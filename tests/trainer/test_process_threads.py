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


def _run(client, url, out=None, sampler="lightlda", **kw):
    cfg = TrainConfig(n_topics=8, n_shards=6, sampler=sampler, seed=5, **kw)
    corpus = Corpus.open(url) if kw.get("resume") else validate(url, None, cfg, overwrite=False)
    return run_training(client, corpus, cfg, out=out)


@pytest.mark.parametrize("sampler", ["cgs", "lightlda", "warplda"])
def test_threads_and_shards_share_one_process_cache(threaded_cluster, synth_corpus, recount,
                                                    tmp_path, sampler):
    # one sweep of the process on its threads: cgs's and lightlda's partitioned by documents
    # and words, warplda's by blocks
    url, _ = synth_corpus
    out = str(tmp_path / "model.zarr")
    first = _run(threaded_cluster, url, out=out, iterations=3, checkpoint_every=2,
                 sampler=sampler)
    n_wk, n_k, _ = recount(url, first)
    np.testing.assert_array_equal(first.n_wk, n_wk)
    np.testing.assert_array_equal(first.n_k, n_k)
    assert len(set(first.placement.values())) == 2 and first.clocks == [3] * 6
    # one pull per process per clock after the attach, whatever the shards and threads;
    # processes taking turns (cgs, lightlda) have every move from the posts: from the third
    # clock an advance each (a pull that sends nothing), no pull
    if sampler == "warplda":
        assert all(i["pulls"] == 2 * (3 - 1) and i["advances"] == 0 for i in first.ps_info)
    else:
        assert all(i["pulls"] == 0 and i["advances"] == 2 * (3 - 2) for i in first.ps_info)
    assert ckpt.open_checkpoint(ckpt.checkpoint_url(out), 8, Corpus.open(url).n_tokens)[
        "clock"] == 3
    second = _run(threaded_cluster, url, out=out, iterations=5, checkpoint_every=2, resume=True,
                  sampler=sampler)
    n_wk, n_k, _ = recount(url, second)
    np.testing.assert_array_equal(second.n_wk, n_wk)
    np.testing.assert_array_equal(second.n_k, n_k)
    # BSP, same seed and layout: resuming is the same run as not stopping, and runs repeat
    straight = _run(threaded_cluster, url, iterations=5, checkpoint_every=0, sampler=sampler)
    again = _run(threaded_cluster, url, iterations=5, checkpoint_every=0, sampler=sampler)
    for s in straight.shards:
        np.testing.assert_array_equal(second.z[s.index], straight.z[s.index])
        np.testing.assert_array_equal(again.z[s.index], straight.z[s.index])
    assert second.history[-1]["ll"] == pytest.approx(straight.history[-1]["ll"], rel=1e-12)


def test_managed_communication_with_threads_and_shards(threaded_cluster, synth_corpus,
                                                       recount):
    """--comm-budget with 2 threads x 3 shards per process (cgs's plain kernel: a part per
    thread): rounds of each thread's range, offers folded into the cache and the threads'
    copies; the table stays the recount."""
    url, _ = synth_corpus
    r = _run(threaded_cluster, url, iterations=4, checkpoint_every=0, staleness=1,
             comm_budget=5.0, sampler="cgs", sampler_params={"variant": "plain"})
    n_wk, n_k, _ = recount(url, r)
    np.testing.assert_array_equal(r.n_wk, n_wk)
    np.testing.assert_array_equal(r.n_k, n_k)
    assert sum(h["bytes_early_sent"] for h in r.history) > 0
    assert sum(h["bytes_early_received"] for h in r.history) > 0
    # (each writer's offers stay until its next push: the last clock's remain on the table)


@pytest.mark.parametrize("sampler", [("cgs", {"dense_above": 2.0}),
                                     ("cgs", {"dense_above": 0.0}), ("lightlda", {})],
                         ids=["sparse", "dense", "lightlda"])
def test_processes_take_turns_on_the_vocabulary(threaded_cluster, synth_corpus, recount,
                                                tmp_path, sampler):
    """--process-partition on 2 processes of 2 threads and 3 shards: the table is the
    recount after a run and after a resume; BSP repeats and resumes bit for bit (a clock's
    later steps take the documents' state the step before kept); each clock's steps
    exchange their moves (offers both ways)."""
    url, _ = synth_corpus
    out = str(tmp_path / "model.zarr")
    kw = dict(sampler=sampler[0], process_partition="on", sampler_params=sampler[1])
    first = _run(threaded_cluster, url, out=out, iterations=3, checkpoint_every=2, **kw)
    n_wk, n_k, _ = recount(url, first)
    np.testing.assert_array_equal(first.n_wk, n_wk)
    np.testing.assert_array_equal(first.n_k, n_k)
    assert len(set(first.placement.values())) == 2
    assert all(h["bytes_early_sent"] > 0 and h["bytes_early_received"] > 0
               for h in first.history)
    second = _run(threaded_cluster, url, out=out, iterations=5, checkpoint_every=2,
                  resume=True, **kw)
    n_wk, n_k, _ = recount(url, second)
    np.testing.assert_array_equal(second.n_wk, n_wk)
    straight = _run(threaded_cluster, url, iterations=5, checkpoint_every=0, **kw)
    again = _run(threaded_cluster, url, iterations=5, checkpoint_every=0, **kw)
    for s in straight.shards:
        np.testing.assert_array_equal(second.z[s.index], straight.z[s.index])
        np.testing.assert_array_equal(again.z[s.index], straight.z[s.index])


def test_rounds_follow_the_documented_rule():
    from biglda.trainer.worker import rounds_of

    cfg = TrainConfig(n_topics=8)
    assert [rounds_of(cfg, 2, a) for a in ("cgs", "lightlda", "warplda")] == [4, 1, 1]
    assert [rounds_of(cfg, 1, a) for a in ("cgs", "warplda")] == [1, 1]
    assert rounds_of(TrainConfig(n_topics=8, comm_budget=1.0), 1, "warplda") == 4
    assert rounds_of(TrainConfig(n_topics=8, rounds=3), 2, "warplda") == 3
    with pytest.raises(Exception, match="rounds must be >= 2 with --comm-budget"):
        TrainConfig.from_settings(n_topics=8, comm_budget=1.0, rounds=1)


def test_rounds_are_the_reference_scheme(synth_corpus, embedded_cluster):
    """1 process x 2 threads, BSP, 3 rounds, cgs's plain kernel (the one sampler that still
    gives each thread its own part): the trained ``z`` equals a NumPy-level replay of the
    scheme (each round every thread sweeps its round's documents on a copy of the round's
    table with the stream (seed, clock, shard, round); then the table gets every thread's
    moves)."""
    from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z

    url, _ = synth_corpus
    rounds, iterations, k, seed = 3, 2, 8, 4
    client = embedded_cluster(1, 2)
    cfg = TrainConfig(n_topics=k, n_shards=2, sampler="cgs", seed=seed, rounds=rounds,
                      iterations=iterations, checkpoint_every=0, top_words_every=0,
                      sampler_params={"variant": "plain"})
    r = run_training(client, validate(url, None, cfg, overwrite=False), cfg)
    corpus = Corpus.open(url)
    shards = sorted(r.shards, key=lambda s: s.index)
    data = [corpus.read_shard(s) for s in shards]
    z = [init_z(len(t), k, RandomKey(seed, -1, s.index)) for s, (t, _) in zip(shards, data,
                                                                                strict=True)]
    tokens_all = np.concatenate([t for t, _ in data])
    ptr_all = np.concatenate([[0]] + [p[1:] + s.token_start for s, (_, p) in zip(
        shards, data, strict=True)]).astype(np.int64)
    n_wk, n_k = count_from_z(tokens_all, ptr_all, np.concatenate(z), corpus.n_words, k)
    sampler = get_sampler("cgs", variant="plain")
    alpha = np.full(k, 0.1)
    for clock in range(iterations):
        for rnd in range(rounds):
            start_wk, start_k = n_wk.copy(), n_k.copy()
            for s, (tokens, ptr), zs in zip(shards, data, z, strict=True):
                cuts = np.searchsorted(ptr, np.linspace(0, ptr[-1], rounds + 1)[1:-1])
                docs = np.concatenate([[0], cuts, [len(ptr) - 1]]).astype(np.int64)
                lo, hi = int(ptr[docs[rnd]]), int(ptr[docs[rnd + 1]])
                if hi == lo:
                    continue
                wk, kk = start_wk.copy(), start_k.copy()
                sampler.sweep(tokens[lo:hi], ptr[docs[rnd]:docs[rnd + 1] + 1] - lo, zs[lo:hi],
                              wk, kk, alpha, 0.01, corpus.n_words,
                              RandomKey(seed, clock, s.index, rnd))
                n_wk += wk - start_wk
                n_k += kk - start_k
    for s, zs in zip(shards, z, strict=True):
        np.testing.assert_array_equal(r.z[s.index], zs)
    np.testing.assert_array_equal(r.n_wk, n_wk)


def test_warplda_sweeps_a_process_on_all_its_threads(synth_corpus, recount, embedded_cluster):
    """warplda takes the process's threads into one sweep of all its shards (blocks of words
    and of documents, a stream per block): 1 process x 2 threads is the same chain as 1 x 1,
    bit for bit, with no table copies; the table is the recount of ``z``."""
    url, _ = synth_corpus
    cfg = TrainConfig(n_topics=8, n_shards=4, sampler="warplda", seed=3, iterations=4,
                      checkpoint_every=0, top_words_every=0)
    runs = [run_training(embedded_cluster(1, threads), validate(url, None, cfg, overwrite=False),
                         cfg) for threads in (1, 2)]
    one, two = runs
    n_wk, n_k, _ = recount(url, two)
    np.testing.assert_array_equal(two.n_wk, n_wk)
    np.testing.assert_array_equal(two.n_k, n_k)
    for s in one.shards:
        np.testing.assert_array_equal(two.z[s.index], one.z[s.index])
    assert [h["ll"] for h in two.history] == [h["ll"] for h in one.history]


def test_a_process_clock_is_shared_by_its_shards_wait_included():
    # A process of 2 threads, the first of 3 shards (100, 200 and 100 tokens), the second of
    # 1 (400): each shard reports its share of its thread's time by tokens, so the sums over
    # the process's shards are its own times: 1 s waited, 2.5 s clock (the wait was each
    # shard's in full until the fifteenth session: 1 + 1 + 1 + 1 = 4 s for 1 s waited).
    from types import SimpleNamespace

    from biglda.trainer.worker import _shard_stats, _ShardState, _ThreadPart

    sizes, lo, shards = (100, 200, 100, 400), 0, []
    for i, n in enumerate(sizes):
        shards.append(_ShardState(SimpleNamespace(index=i), lo, np.array([0, n])))
        lo += n
    proc = SimpleNamespace(shards=shards,
                           threads=[_ThreadPart(shards[:3]), _ThreadPart(shards[3:])])
    times = {"start": 10.0, "waited": 11.0, "pull": 11.1, "sweep": 12.0, "ll": 12.1,
             "push": 12.2, "end": 12.5}
    res = SimpleNamespace(seconds=0.8, accept_rate=None)
    stats = _shard_stats(proc, [(res, 0.7), (res, 0.75)], times, "w", "cpu", 0,
                         dict.fromkeys(range(4), 0.0), (10, 20), None, 1.5)
    for thread in (stats[0], stats[1], stats[2]), (stats[3],):
        assert sum(s["wait_s"] for s in thread) == pytest.approx(1.0)
        assert sum(s["clock_s"] for s in thread) == pytest.approx(2.5)
        assert sum(s["kernel_s"] for s in thread) == pytest.approx(0.8)
        assert sum(s["pull_s"] + s["sweep_s"] + s["ll_s"] + s["push_s"] + s["checkpoint_s"]
                   for s in thread) == pytest.approx(1.5)
    assert stats[1]["wait_s"] == pytest.approx(0.5)  # 200 of the thread's 400 tokens
    assert [stats[i]["bytes_pushed"] for i in range(4)] == [20, 0, 0, 0]
