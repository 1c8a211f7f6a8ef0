"""Managed communication (``biglda.ps.managed``): early updates under a byte budget.

Oracles: the books (a cache after receiving is exactly "table as received + own moves +
what the others sent early", and after the next pull exactly the table again: BSP's
invariant), the selection (the budget's number of entries, largest relative magnitude
first) and the server's delivery rules (an offer of clock c only to a reader holding the
writer's c - 1; dropped by the writer's next push; a late one ignored), and the steps of
``--process-partition`` (a range's posts of the steps since the reader last had it, exactly,
waited for; no pull).
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_moves import moves, start_process_cache

from biglda.ps import TableShard
from biglda.ps._kernels import add_coo
from biglda.ps.calls import InProcess
from biglda.ps.client import TableClient
from biglda.ps.managed import ENTRY_BYTES, EarlyUpdates
from biglda.ps.sizing import row_bounds

K = 5


def _dense(cache, words, topics, counts) -> np.ndarray:
    out = np.zeros((cache.n_local, K), dtype=np.int64)
    np.add.at(out, (np.asarray(words, np.int64), topics), counts)
    return out


def _setup(rng, groups, n_words=40, n_parts=2, n_tokens=80):
    bounds = row_bounds(n_words, n_parts)
    n_shards = sum(len(g) for g in groups)
    actors = [TableShard(a, int(bounds[a]), int(bounds[a + 1]), K, n_shards, 0.1)
              for a in range(n_parts)]
    tables = TableClient(tuple(InProcess(a) for a in actors), bounds)
    caches, truth, mine = [], np.zeros((n_words, K), dtype=np.int64), []
    for members in groups:
        cache, init = start_process_cache(rng, members, n_words, n_tokens, bounds, tables, K)
        truth[cache.vocab] += init
        caches.append(cache)
        mine.append(init.copy())  # the counts of this process's own tokens
    return actors, tables, caches, truth, n_shards, mine


def test_early_updates_keep_the_books_exact():
    """BSP, three processes, three rounds a clock, a budget that sends part of the changes."""
    rng = np.random.default_rng(7)
    actors, tables, caches, truth, n_shards, mine = _setup(rng, [[0, 1], [2], [3, 4]])
    early = []
    for clock in range(5):
        for i, cache in enumerate(caches):
            if clock == 0:
                cache.attach(tables, clock - 1, 5.0)
                early.append(EarlyUpdates(cache, 1.0, n_shards))
            else:
                cache.refresh(tables, clock - 1, 5.0)
            early[i].settle()
            # exactly the table after the previous clock: every preview was taken out
            np.testing.assert_array_equal(cache.n_wk, truth[cache.vocab])
            assert early[i].outstanding() == 0
            early[i].start_clock(0.0)
        own = [np.zeros((c.n_local, K), np.int64) for c in caches]  # own moves this clock
        sent_global = [np.zeros_like(truth) for _ in caches]  # what each sent early
        deltas: list[list[tuple[np.ndarray, ...]]] = [[] for _ in caches]
        for r in range(3):
            for i, cache in enumerate(caches):
                words, topics, counts, dk = moves(rng, mine[i], 6)  # of its own tokens
                add_coo(mine[i], words.astype(np.int64), topics, counts)
                add_coo(cache.n_wk, words.astype(np.int64), topics, counts)
                cache.n_k += dk
                own[i] += _dense(cache, words, topics, counts)
                deltas[i].append((words, topics, counts, dk))
                early[i].add([(words, topics, counts)])
                before = _dense(cache, *early[i].pending)
                # 4 entries' worth of budget per round (1 byte/s over 4 * 12 "seconds")
                sent = early[i].send(tables, clock, (r + 1) * 4.0 * ENTRY_BYTES, 5.0)
                assert sent == min(4, int(np.count_nonzero(before))) * ENTRY_BYTES
                sent_local = before - _dense(cache, *early[i].pending)
                assert np.count_nonzero(sent_local) == sent // ENTRY_BYTES
                np.add.at(sent_global[i], cache.vocab, sent_local)
            for i, cache in enumerate(caches):
                early[i].receive(tables, [(cache.n_wk, cache.n_k)], 5.0)
                others = sum(sent_global[j] for j in range(len(caches)) if j != i)
                expect = truth[cache.vocab] + own[i] + others[cache.vocab]
                np.testing.assert_array_equal(cache.n_wk, expect)
                assert cache.n_wk.min() >= 0
        for i, cache in enumerate(caches):
            cache.push_all(tables, clock, deltas[i], 5.0)
            for w, t, c, _ in deltas[i]:
                np.add.at(truth, (cache.vocab[w], t), c)
        for a in actors:  # the pushes dropped every offer of the clocks before
            assert all(c == clock for c, _ in a._offers.values())
    assert all(e.entries_sent > 0 and e.entries_received > 0 for e in early)


def test_the_budget_sends_the_largest_relative_changes_first():
    rng = np.random.default_rng(1)
    _actors, tables, caches, _truth, n_shards, _ = _setup(rng, [[0], [1]], n_parts=1)
    for cache in caches:
        cache.attach(tables, -1, 5.0)
    cache = caches[0]
    e = EarlyUpdates(cache, 2.0 * ENTRY_BYTES, n_shards)  # two entries per second
    e.start_clock(10.0)
    words = np.arange(min(6, cache.n_local), dtype=np.int32)
    topics = np.zeros(len(words), np.int32)
    counts = np.array([1, -3, 2, 1, 5, -1][:len(words)], np.int32)
    cache.n_wk[words, 0] = [9, 2, 0, 0, 40, 0][:len(words)]
    e.add([(words, topics, counts)])
    rel = np.abs(counts) / (cache.n_wk[words, 0] + 1.0)
    assert e.send(tables, 0, 11.5, 5.0) == 3 * ENTRY_BYTES  # 1.5 s: 3 entries
    left = set(e.pending[0].tolist())
    chosen = sorted(set(words.tolist()) - left)
    assert chosen == sorted(np.argsort(-rel, kind="stable")[:3].tolist())
    assert e.send(tables, 0, 11.6, 5.0) == 0  # 0.2 entries' worth: nothing yet
    assert e.send(tables, 0, 12.5, 5.0) == 2 * ENTRY_BYTES  # 0.2 + 1.8 entries' worth


def test_offers_go_only_to_readers_holding_the_previous_clock():
    rng = np.random.default_rng(2)
    actors, tables, caches, _truth, n_shards, _ = _setup(rng, [[0], [1]], n_parts=1)
    a, b = caches
    a.attach(tables, -1, 5.0)
    b.attach(tables, -1, 5.0)
    table = actors[0]
    got = np.stack([np.full(n_shards, -(2 ** 62)), np.zeros(n_shards)], axis=1)
    words = a.vocab[:3]
    one = np.ones(3, np.int32)
    # a pushes clock 0 and offers clock 1; b has received nothing of clock 0 yet
    a.push(tables, 0, np.zeros(0), np.zeros(0), np.zeros(0), 5.0)
    assert table.offer(0, 1, words, one * 0, one) == 1
    reply = table.offers(1, got, b.received[0])
    assert len(reply[2]) == 0  # withheld: b lacks a's clock 0
    b.push(tables, 0, np.zeros(0), np.zeros(0), np.zeros(0), 5.0)
    b.refresh(tables, 0, 5.0)
    assert b.received[0][0] == 0
    got2, writers, w, t, c = table.offers(1, got, b.received[0])
    assert sorted(w.tolist()) == sorted(x for x in words.tolist() if x in set(b.vocab.tolist()))
    assert (writers == 0).all() and got2[0].tolist() == [1, 1]
    assert (t == 0).all() and (c == 1).all()
    assert len(table.offers(1, got2, b.received[0])[2]) == 0  # nothing new since
    assert len(table.offers(0, got, a.received[0])[2]) == 0  # never one's own
    a.push(tables, 1, np.zeros(0), np.zeros(0), np.zeros(0), 5.0)
    assert table.offer(0, 1, words, one * 0, one) == 0  # a late offer: ignored
    # kept until a's next push, for a reader that has not received clock 1 (c has not)
    c_reader = table.offers(1, got, b.received[0])
    assert len(c_reader[2]) == len(w) and table.info()["offers_kept"] == 1
    b.push(tables, 1, np.zeros(0), np.zeros(0), np.zeros(0), 5.0)
    b.refresh(tables, 1, 5.0)
    assert len(table.offers(1, got, b.received[0])[2]) == 0  # b holds clock 1: none
    a.push(tables, 2, np.zeros(0), np.zeros(0), np.zeros(0), 5.0)
    assert table.info()["offers_kept"] == 0  # the push of clock 2 dropped them


def test_a_budget_must_be_positive():
    rng = np.random.default_rng(0)
    _actors, _tables, caches, _truth, n, _ = _setup(rng, [[0]], n_parts=1)
    with pytest.raises(ValueError, match="budget"):
        EarlyUpdates(caches[0], 0.0, n)


def test_steps_fold_exactly_the_windows_steps_since_and_wait_for_them():
    """Three processes take turns on three ranges of words for three clocks: in step s
    process p sweeps range w = (p + s) mod 3. Before it, it folds exactly the range's posts
    since it last had w (the clock before's after step s, this clock's before s), whenever
    it asks, only on its rows, and n_k only the current clock's: its rows of w are then
    the table's after every move so far on w (no pull). An advance trims the table's log
    as a pull would; the mailbox drops what no reader can ask for any more."""
    rng = np.random.default_rng(5)
    n_words, P, clocks = 40, 3, 3
    actors, tables, caches, truth, n_shards, mine = _setup(rng, [[0, 1], [2], [3]],
                                                           n_words=n_words, n_parts=2)
    ex = []
    for cache in caches:
        cache.attach(tables, -1, 5.0)
        ex.append(EarlyUpdates(cache, None, n_shards))
    cuts = [0, 13, 27, n_words]  # global word ranges
    posted = {}  # (clock, step, window) -> dense global moves
    for clock in range(clocks):
        own = [np.zeros((c.n_local, K), np.int64) for c in caches]  # own moves this clock
        for s in range(P):
            for i, cache in enumerate(caches):
                w = (i + s) % P
                steps = ([(clock - 1, t) for t in range(s + 1, P)] if clock else []) + [
                    (clock, t) for t in range(s)]
                lo, hi = np.searchsorted(cache.vocab, [cuts[w], cuts[w + 1]])
                if steps:
                    before_wk, before_k = cache.n_wk.astype(np.int64), cache.n_k.copy()
                    got = ex[i].wait_window(tables, w, steps, [(cache.n_wk, cache.n_k)], 5.0,
                                            k_from=clock)
                    folded = sum(posted[c, t, w] for c, t in steps)
                    assert got == ENTRY_BYTES * sum(int(np.count_nonzero(posted[c, t, w]))
                                                    for c, t in steps)
                    np.testing.assert_array_equal(cache.n_wk - before_wk, folded[cache.vocab])
                    now = sum(posted[c, t, w] for c, t in steps if c == clock)
                    np.testing.assert_array_equal(cache.n_k - before_k,
                                                  np.asarray(now)[cache.vocab].sum(0)
                                                  if steps[-1][0] == clock else 0)
                # the rows it resamples are the table's after every move on them so far
                np.testing.assert_array_equal(cache.n_wk[lo:hi], truth[cache.vocab[lo:hi]])
                # moves of its own tokens in the range only (none for process 0 in step 1:
                # its empty post still counts)
                words, topics, counts, dk = moves(rng, mine[i][lo:hi],
                                                  0 if (i, s) == (0, 1) else 4)
                words = (words + lo).astype(np.int32)
                add_coo(mine[i], words.astype(np.int64), topics, counts)
                add_coo(cache.n_wk, words.astype(np.int64), topics, counts)
                cache.n_k += dk
                own[i] += _dense(cache, words, topics, counts)
                g = np.zeros_like(truth)
                np.add.at(g, (cache.vocab[words], topics), counts)
                posted[clock, s, w] = g
                truth += g
                assert ex[i].send_step(tables, clock, w, s, words, topics, counts).result(5) \
                    == s + 1  # (the window's steps of the clock so far)
        for i, cache in enumerate(caches):  # the clock's push: the table's record
            words, topics = np.nonzero(own[i])
            cache.push_all(tables, clock, [(words.astype(np.int32), topics.astype(np.int32),
                                            own[i][words, topics].astype(np.int32))], 5.0)
        if clock >= 1:  # every writer pushed clock - 1: nothing to pull, an advance trims
            logged = sum(a.info()["log_entries"] for a in actors)
            for cache in caches:
                assert cache.advance(tables, clock - 1, 5.0) == 0
                assert all((r >= clock - 1).all() for r in cache.received)
            assert sum(a.info()["log_entries"] for a in actors) < logged
    for a in actors:
        row_start, rows, _ = a.table()
        np.testing.assert_array_equal(rows, truth[row_start:row_start + len(rows)])
    assert sum(a.info()["advances"] for a in actors) == 2 * 3 * (clocks - 1)
    assert all(a.info()["pulls"] == 0 for a in actors)
    # asked again later, the mailbox gives exactly the same steps
    steps = [(clocks - 2, 2), (clocks - 1, 0), (clocks - 1, 1)]
    again = tables.window_steps(2, steps, 0.0, 5.0)
    assert [p[0] for p in again] == [0, 3, 2]  # the lead shards of processes 0, 2, 1
    g = np.zeros_like(truth)
    for _, words, topics, counts in again:
        np.add.at(g, (words, topics), counts)
    np.testing.assert_array_equal(g, sum(posted[c, t, 2] for c, t in steps))
    # a step not posted: None from the mailbox within its wait, TimeoutError from the reader
    assert tables.window_steps(0, [(clocks, 0)], 0.05, 5.0) is None
    with pytest.raises(TimeoutError, match=r"the steps \[\(3, 0\)\] on words' range 0"):
        ex[1].wait_window(tables, 0, [(clocks, 0)], [(caches[1].n_wk, caches[1].n_k)], 0.05,
                          wait=0.02)
    # a post of clock c drops the window's posts up to c - 2; a late post is ignored, and a
    # question for a dropped step is an error
    m = tables.actors[tables.mailbox(1)]
    assert m.post_step(0, clocks + 1, 1, 0, _I32, _I32, _I32).result(5) == 1
    assert m.post_step(2, clocks - 1, 1, 1, _I32, _I32, _I32).result(5) == 0
    with pytest.raises(RuntimeError, match="were dropped"):
        m.window_steps(1, [(clocks - 1, 0)], 0.0).result(5)
    assert actors[tables.mailbox(1)].info()["step_entries_in"] > 0


def test_a_reader_waiting_for_a_step_wakes_when_it_is_posted():
    """The mailbox answers a waiting reader as soon as the step comes (no polling)."""
    import threading
    import time

    rng = np.random.default_rng(3)
    _actors, tables, caches, _truth, _n, _ = _setup(rng, [[0], [1]])
    for cache in caches:
        cache.attach(tables, -1, 5.0)
    words = caches[0].vocab[:2].astype(np.int32)
    one = np.ones(2, np.int32)
    timer = threading.Timer(0.2, tables.post_step, (0, 0, 1, 0, words, one, one, 5.0))
    t0 = time.monotonic()
    timer.start()
    posts = tables.window_steps(1, [(0, 0)], 5.0, 5.0)
    assert 0.15 < time.monotonic() - t0 < 2.0
    assert [p[0] for p in posts] == [0] and posts[0][1].tolist() == words.tolist()


def test_a_step_asked_for_before_it_is_posted_is_folded_from_that_answer():
    """A reader asks for a step's posts before it sweeps the step before (the answer comes
    while it sweeps), and a writer does not wait for its post's answer. The mailbox holds
    the question until the post comes; an answer that came without it (the mailbox's wait
    ran out first) makes the reader ask again. Either way it folds exactly the post."""
    rng = np.random.default_rng(11)
    _actors, tables, caches, _truth, n_shards, _ = _setup(rng, [[0], [1]])
    ex = []
    for cache in caches:
        cache.attach(tables, -1, 5.0)
        ex.append(EarlyUpdates(cache, None, n_shards))
    for window, wait in ((1, 5.0), (0, 0.01)):
        asked = ex[1].ask_window(tables, window, [(0, 0)], wait=wait)
        if wait < 1:  # the mailbox's wait runs out before the post: an answer without it
            assert asked.result(5) is None
        else:
            assert not asked.done()  # held until the post comes
        shared = np.flatnonzero(np.isin(caches[0].vocab, caches[1].vocab))
        local = shared[:3].astype(np.int32)  # rows both processes hold
        topics, counts = np.array([0, 2, 4], np.int32), np.array([1, 2, 3], np.int32)
        sent = ex[0].send_step(tables, 0, window, 0, local, topics, counts)
        assert sent.result(5) == 1  # the mailbox has the window's first step
        before_wk, before_k = caches[1].n_wk.astype(np.int64), caches[1].n_k.copy()
        got = ex[1].wait_window(tables, window, [(0, 0)], [(caches[1].n_wk, caches[1].n_k)],
                                5.0, asked=asked)
        assert got == ENTRY_BYTES * 3
        expect = np.zeros((caches[1].n_local, K), np.int64)
        local1, keep = caches[1].rows_of(caches[0].vocab[local])
        assert keep is None
        np.add.at(expect, (local1, topics), counts)
        np.testing.assert_array_equal(caches[1].n_wk - before_wk, expect)
        np.testing.assert_array_equal(caches[1].n_k - before_k, expect.sum(0))


_I32 = np.zeros(0, np.int32)
