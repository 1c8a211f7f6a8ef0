"""The clients on a real cluster: caches stay exact through pushes and pulls, and the client
travels to a worker task and works there.

Oracle: a dense NumPy table updated with the same moves (np.add.at).
"""

from __future__ import annotations

import pickle

import numpy as np

from biglda.ps import ClockAnswer, PSClient, ShardCache, start_parameter_server

K = 6
BETA = 0.05


def test_caches_on_a_real_cluster_match_the_recount(local_cluster):
    """Two shards push deltas through two table shards on two workers; caches stay exact."""
    client = local_cluster
    workers = sorted(client.scheduler_info()["workers"])
    n_words, n_shards = 50, 2
    ps = start_parameter_server(client, n_words, K, n_shards, BETA, staleness=0,
                                workers=workers)
    assert len(set(ps.workers)) == 2
    rng = np.random.default_rng(3)
    caches, tables = [], []
    for s in range(n_shards):
        tokens = rng.integers(0, n_words, 300).astype(np.int32)
        cache = ShardCache(s, tokens, ps.bounds, K)
        z = rng.integers(0, K, len(tokens))
        local = np.zeros((cache.n_local, K), dtype=np.int32)
        np.add.at(local, (cache.tokens, z), 1)
        cache.push_counts(ps.tables, -1, local, timeout=30)
        caches.append(cache)
        tables.append(local)
    truth = np.zeros((n_words, K), dtype=np.int64)
    for cache, local in zip(caches, tables, strict=True):
        truth[cache.vocab] += local
        cache.attach(ps.tables, -1, timeout=30)
    for cache in caches:  # both inits were pushed before either attached: exact rows
        np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
    for clock in range(3):
        for cache in caches:
            # a valid move: take one count away from a nonzero cell, give it to another topic
            w = rng.integers(0, cache.n_local, 20)
            t_from = cache.n_wk[w].argmax(1)
            t_to = rng.integers(0, K, 20)
            words = np.concatenate([w, w]).astype(np.int32)
            topics = np.concatenate([t_from, t_to]).astype(np.int32)
            counts = np.concatenate([-np.ones(20), np.ones(20)]).astype(np.int32)
            np.add.at(cache.n_wk, (words, topics), counts)  # own moves seen at once
            np.add.at(cache.n_k, topics, counts)
            np.add.at(truth, (cache.vocab[words], topics), counts)
            cache.push(ps.tables, clock, words, topics, counts, timeout=30)
            cache.push(ps.tables, clock, words, topics, counts, timeout=30)  # retried: ignored
        for cache in caches:
            cache.refresh(ps.tables, clock, timeout=30)
            np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
            np.testing.assert_array_equal(cache.n_k, truth.sum(0))
    server = np.zeros_like(truth)
    for start, rows, _nk in ps.tables.parts(timeout=30):
        server[start:start + len(rows)] = rows
    np.testing.assert_array_equal(server, truth)
    assert all(c.bytes_pulled > 0 and c.bytes_pushed > 0 for c in caches)


def _shard_task(ps: PSClient, shard: int) -> tuple[str, list[int]]:
    """A worker task: tick the initial clock, wait for clock 0, read the clocks."""
    ps.clock.tick(shard, 0, None, timeout=30)
    answer = ps.clock.wait(shard, 0, chunk=0.5, timeout=30)
    return answer.value, ps.clock.clocks(timeout=30)


def test_the_client_pickles_and_works_inside_worker_tasks(local_cluster):
    client = local_cluster
    workers = sorted(client.scheduler_info()["workers"])
    ps = start_parameter_server(client, 10, K, 2, BETA, staleness=0, workers=workers)
    try:
        again = pickle.loads(pickle.dumps(ps.client))
        np.testing.assert_array_equal(again.bounds, ps.bounds)
        futs = [client.submit(_shard_task, ps.client, s, workers=[workers[s]], pure=False)
                for s in (0, 1)]
        got = [f.result(timeout=60) for f in futs]
        assert [g[0] for g in got] == [ClockAnswer.GO.value] * 2
        assert ps.clock.clocks(timeout=30) == [0, 0]
        assert ps.clock.stop(timeout=30) == 1  # one past the newest clock started
        assert ps.clock.wait(0, 1, chunk=0.1, timeout=30) is ClockAnswer.STOP
        ps.clock.abort(timeout=30)
        assert ps.clock.wait(0, 0, chunk=0.1, timeout=30) is ClockAnswer.ABORT
        assert ps.alpha.lookup(0, 0, False, chunk=0.1, timeout=30) == (ClockAnswer.ABORT, None)
    finally:
        ps.close()


def _push_from_a_task(tables, clock):
    """In a worker task: the client on this process's actors; push through it, read it back."""
    from biglda.ps.calls import SameProcess

    local = tables.in_this_process()
    kinds = [isinstance(a, SameProcess) for a in local.actors]
    words = np.array([1, 7], dtype=np.int32)
    parts = []
    for lo, hi in zip(tables.bounds[:-1], tables.bounds[1:], strict=True):
        w = words[(words >= lo) & (words < hi)]
        parts.append((w, np.full(len(w), 3, np.int32), np.full(len(w), 4, np.int32)))
    local.push(0, clock, parts, timeout=30)
    return kinds, [i["pushes"] for i in local.info(timeout=30)]


def _tick_from_a_task(ps, clock):
    """In a worker task: the clock through this process's client; tick shard 0, wait for more."""
    from biglda.ps.calls import SameProcess

    local = ps.in_this_process()
    direct = isinstance(local.clock.actor, SameProcess)
    local.clock.tick_many(clock + 1, {0: {"clock": clock}}, timeout=30)
    answer = local.clock.wait_many([0], clock + 1, chunk=0.1, timeout=30)
    return direct, answer, local.clock.clocks(timeout=30)


def test_a_task_calls_its_own_processs_table_shards_directly(local_cluster):
    # A table shard in the task's own process is called on its actor thread (no comm: a
    # SameProcess), the other process's through Dask; both pushes land in the table the
    # driver reads through Dask. Outside a worker the client is unchanged.
    client = local_cluster
    workers = sorted(client.scheduler_info()["workers"])
    ps = start_parameter_server(client, 10, K, 1, BETA, staleness=0, workers=workers)
    try:
        assert len(set(ps.workers)) == 2
        home = ps.workers[0]
        kinds, pushes = client.submit(_push_from_a_task, ps.tables, 0, workers=[home],
                                      pure=False).result(timeout=60)
        assert kinds == [w == home for w in ps.workers] and pushes == [1, 1]
        n_wk = np.concatenate([rows for _, rows, _ in ps.tables.parts(timeout=30)])
        want = np.zeros((10, K), dtype=np.int32)
        want[[1, 7], 3] = 4
        np.testing.assert_array_equal(n_wk, want)
        assert ps.tables.in_this_process().actors == ps.tables.actors
        # the clock's coroutines run on its worker's event loop when called from there, and
        # through Dask from the other worker; both ticks reach the one clock
        other = ps.workers[1]
        got = {w: client.submit(_tick_from_a_task, ps.client, c, workers=[w],
                                pure=False).result(timeout=60)
               for w, c in ((home, 0), (other, 1))}
        assert got[home][:2] == (True, ClockAnswer.GO) and got[home][2] == [1]
        assert got[other][:2] == (False, ClockAnswer.GO) and got[other][2] == [2]
        # the driver's one call a clock: the stats and every shard's completed clocks
        assert ps.mailbox.iteration(1, poll=1.0, timeout=30) == ({0: {"clock": 1}}, [2])
        assert ps.clock.in_this_process().actor is ps.clock.actor
    finally:
        ps.close()
