"""Processes taking turns on the vocabulary (``--process-partition on``) against a replay.

Oracle: a NumPy-level replay of the documented scheme on three processes of one shard each
(docs/design.md, "Across processes, one chain"): the vocabulary in W = m x 3 windows of
equal tokens (cgs weighs a word by its tokens; ``--turn-windows m``, 2 by default, and 1),
W steps a clock, and in step ``s`` process ``p`` on window ``w = (m p + s) mod W``. Each
clock every process starts from the table after the clock before, on its own words' rows;
in step ``s`` it first adds the
moves on ``w`` of the clock's steps before (the processes that had ``w``; only its rows,
and ``n_k`` by those same entries), then sweeps the tokens of window ``w`` with the stream
``(seed, clock, shard, s)``. The trained ``z`` of
every shard and the table must equal the replay's, bit for bit: the run folds exactly the
steps the scheme names, no more (another window's) and no fewer (a step not waited for),
although it has no barrier and no pull (its rows come from the posts, its ``n_k`` at a
clock's start from the processes' posted totals).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from biglda.corpus import Corpus
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training


# (the dense kernel's windows also run in test_process_threads' turns test, fast)
@pytest.mark.parametrize(("dense_above", "m"), [
    (2.0, 2), pytest.param(0.0, 2, marks=pytest.mark.slow),
    pytest.param(2.0, 1, marks=pytest.mark.slow)], ids=["sparse", "dense", "sparse-1-window"])
def test_three_processes_taking_turns_are_the_documented_scheme(synth_corpus, dense_above, m):
    from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z
    from biglda.samplers.partition import word_windows
    from biglda.trainer.cluster import connect

    url, _ = synth_corpus
    k, seed, iterations, n_proc = 8, 6, 3, 3
    params = {"dense_above": dense_above}
    with connect(workers=n_proc, threads_per_worker=1) as client:
        cfg = TrainConfig(n_topics=k, n_shards=n_proc, sampler="cgs", seed=seed,
                          iterations=iterations, checkpoint_every=0, top_words_every=0,
                          process_partition="on", sampler_params=params, turn_windows=m)
        r = run_training(client, validate(url, None, cfg, overwrite=False), cfg)
    assert len(set(r.placement.values())) == n_proc

    corpus = Corpus.open(url)
    shards = sorted(r.shards, key=lambda s: s.index)  # a process each; ranked by shard
    data = [corpus.read_shard(s) for s in shards]
    z = [init_z(len(t), k, RandomKey(seed, -1, s.index)) for s, (t, _) in zip(shards, data,
                                                                                strict=True)]
    n_words = corpus.n_words
    n_wk, n_k = count_from_z(np.concatenate([t for t, _ in data]),
                             np.concatenate([[0]] + [p[1:] + s.token_start for s, (_, p) in
                                                     zip(shards, data, strict=True)]),
                             np.concatenate(z), n_words, k)
    n_win = m * n_proc  # (m windows a process)
    windows = word_windows(corpus.word_count, n_win)  # global word ranges
    vocab = [np.unique(t) for t, _ in data]  # each process's rows, sorted
    local = [np.searchsorted(v, t).astype(np.int32) for v, (t, _) in zip(vocab, data,
                                                                          strict=True)]
    samplers = [get_sampler("cgs", **params) for _ in range(n_proc)]
    alpha = np.full(k, cfg.alpha)
    with ThreadPoolExecutor(1) as pool:
        for clock in range(iterations):
            caches = [(n_wk[v].copy(), n_k.copy()) for v in vocab]
            posts: dict[tuple[int, int], np.ndarray] = {}  # (window, step) -> global moves
            moves = np.zeros_like(n_wk)
            for s in range(n_win):
                for p in range(n_proc):
                    w = (m * p + s) % n_win
                    wk, kk = caches[p]
                    for t in range(s):  # the window's steps before, on p's rows only
                        if (w, t) not in posts:  # (nobody had w in step t)
                            continue
                        g = posts[w, t][vocab[p]]
                        wk += g.astype(wk.dtype)
                        kk += g.sum(axis=0)
                    lo, hi = np.searchsorted(vocab[p], windows[w])
                    before = wk.copy()
                    samplers[p].sweep(local[p], data[p][1], z[p], wk, kk, alpha, cfg.beta,
                                      n_words, RandomKey(seed, clock, shards[p].index, s),
                                      pool=pool, n_threads=1, window=(int(lo), int(hi)),
                                      follows=s > 0)
                    g = np.zeros_like(n_wk)
                    g[vocab[p]] = wk.astype(np.int64) - before
                    posts[w, s] = g
                    moves += g
            n_wk = n_wk + moves
            n_k = n_k + moves.sum(axis=0)
    for s, zs in zip(shards, z, strict=True):
        np.testing.assert_array_equal(r.z[s.index], zs)
    np.testing.assert_array_equal(r.n_wk, n_wk)
    np.testing.assert_array_equal(r.n_k, n_k)
