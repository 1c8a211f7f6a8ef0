"""Managed communication (``biglda.ps.managed``): early updates under a byte budget.

Oracles: the books (a cache after receiving is exactly "table as received + own moves +
what the others sent early", and after the next pull exactly the table again: BSP's
invariant), the selection (the budget's number of entries, largest relative magnitude
first) and the server's delivery rules (an offer of clock c only to a reader holding the
writer's c - 1; dropped by the writer's next push; a late one ignored), and the steps of
``--process-partition`` (each writer's first n offers, empty ones counted, a wait for all).
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


def test_steps_fold_exactly_each_writers_first_offers_and_wait_for_every_writer():
    """Three processes in steps: a step's fold is the same whenever the reader asks."""
    rng = np.random.default_rng(5)
    _actors, tables, caches, truth, n_shards, mine = _setup(rng, [[0, 1], [2], [3]])
    ex = []
    for cache in caches:
        cache.attach(tables, -1, 5.0)
        ex.append(EarlyUpdates(cache, None, n_shards))
    clock = 0
    step_moves = []  # [step][process]: dense global moves
    for step in range(3):
        step_moves.append([])
        for i, cache in enumerate(caches):
            # the first process moves nothing in step 1 (its rows there are none): its empty
            # offer still counts
            words, topics, counts, dk = moves(rng, mine[i], 0 if (i, step) == (0, 1) else 5)
            add_coo(mine[i], words.astype(np.int64), topics, counts)
            add_coo(cache.n_wk, words.astype(np.int64), topics, counts)
            cache.n_k += dk
            g = np.zeros_like(truth)
            np.add.at(g, (cache.vocab[words], topics), counts)
            step_moves[-1].append(g)
            ex[i].offer_step(tables, clock, words, topics, counts, 5.0)
    # every process offered 3 steps before anyone reads: a reader asking for step 1 still
    # folds exactly the others' first offers
    for i, cache in enumerate(caches):
        assert not ex[i].step_done(clock, 1, 2)
        ex[i].wait_step(tables, clock, 1, 2, [(cache.n_wk, cache.n_k)], 5.0)
        assert ex[i].step_done(clock, 1, 2) and not ex[i].step_done(clock, 2, 2)
        own = sum(step_moves[s][i] for s in range(3))
        others = sum(step_moves[0][j] for j in range(3) if j != i)
        np.testing.assert_array_equal(cache.n_wk, (truth + own + others)[cache.vocab])
        ex[i].wait_step(tables, clock, 3, 2, [(cache.n_wk, cache.n_k)], 5.0)
        others = sum(step_moves[s][j] for s in range(3) for j in range(3) if j != i)
        np.testing.assert_array_equal(cache.n_wk, (truth + own + others)[cache.vocab])
    with pytest.raises(TimeoutError, match="step 4 of clock 0"):
        ex[1].wait_step(tables, clock, 4, 2, [(caches[1].n_wk, caches[1].n_k)], 0.05)
