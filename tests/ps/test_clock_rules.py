"""The pure rules of the clock: SSP admission, stop, abort, the alpha broker, the mailbox.

In-process, no Dask, no event loop, no sleeps. Oracle of the SSP tests: the clocks recorded by
the test itself (a shard started clock c only when every shard had finished c - s), and
liveness (whenever that holds, the answer is GO).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from biglda.ps.protocol import ALL_CLOCKS, NO_CLOCK, ClockAnswer
from biglda.ps.rules import AlphaBroker, ClockRules, StatsMailbox, TotalsBoard, alpha_answer

GO, STOP, ABORT, WAIT = ClockAnswer.GO, ClockAnswer.STOP, ClockAnswer.ABORT, ClockAnswer.WAIT


@pytest.mark.parametrize("s", [0, 1, 3, math.inf])
@pytest.mark.parametrize("start", [0, 5])
def test_random_schedules_keep_the_ssp_bound_and_never_hold_back_an_allowed_start(s, start):
    rng = np.random.default_rng(int(start * 10 + (9 if s == math.inf else s)))
    n = 4
    rules = ClockRules(n, staleness=s, start_clock=start)
    done = [-1] * n  # the test's own record of completed clocks
    for j in range(n):
        assert rules.request(j, start) is WAIT  # nobody starts before every shard pushed
        rules.complete(j, start)
        done[j] = start
    nxt, running, starts = [start] * n, [False] * n, []
    for _ in range(3000):
        j = int(rng.integers(n))
        if running[j]:
            nxt[j] += 1
            rules.complete(j, nxt[j])
            done[j] = nxt[j]
            running[j] = False
            continue
        allowed = s == math.inf or min(done) >= nxt[j] - s
        answer = rules.request(j, nxt[j])
        assert answer is (GO if allowed else WAIT)
        if answer is GO:
            running[j] = True
            starts.append((j, nxt[j], min(done)))
    assert all(s == math.inf or low >= c - s for _, c, low in starts)
    assert min(nxt) > start  # everybody made progress
    if s != math.inf:
        assert max(nxt) - min(nxt) <= s + 1
    assert rules.completed.tolist() == done


def test_a_shard_runs_exactly_s_clocks_ahead_of_the_slowest():
    """And ``ahead`` clocks more (processes taking turns, ``ahead`` 1: under BSP a shard
    starts clock c once every shard finished c - 1, one clock earlier, no more)."""
    for s, ahead in ((0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (0, 2)):
        rules = ClockRules(2, staleness=s, ahead=ahead)
        rules.complete(0, 0)
        rules.complete(1, 0)
        c = 0
        while rules.request(0, c) is GO:
            rules.complete(0, c + 1)
            c += 1
        # clocks 0..s + ahead started with shard 1 still at 0 completed
        assert c == s + ahead + 1


def test_the_totals_board_sums_a_clock_once_every_process_posted_it():
    board = TotalsBoard()
    board.post(0, 3, [1, 2])
    board.post(0, 0, np.array([0, 5]))
    assert board.total(0, 3) is None and board.total(1, 2) is None
    assert board.total(0, 2).tolist() == [1, 7]
    board.post(0, 3, [2, 2])  # a repeated post replaces the writer's own
    assert board.total(0, 2).tolist() == [2, 7]
    for c in (1, 2, 3):
        board.post(c, 0, [c, 0])
    assert board.total(0, 1) is None and board.total(1, 1).tolist() == [1, 0]  # (kept: 3 - 2)


def test_ticks_are_monotone_and_finished_means_every_shard():
    rules = ClockRules(2, staleness=0)
    rules.complete(0, 3)
    rules.complete(0, 1)  # an older (retried) tick does not move the clock back
    assert rules.completed.tolist() == [3, -1]
    assert not rules.finished(0)
    rules.complete(1, 1)
    assert rules.finished(0) and not rules.finished(1) and rules.slowest == 1


def test_stop_as_soon_as_possible_is_one_past_the_newest_start_and_never_moves_later():
    rules = ClockRules(2, staleness=1, start_clock=4)
    assert rules.stop_at == ALL_CLOCKS
    assert ClockRules(2, 1, start_clock=4).stop() == 4  # nothing started yet
    rules.complete(0, 4)
    rules.complete(1, 4)
    assert rules.request(0, 4) is GO and rules.request(0, 5) is GO
    assert rules.stop() == 6
    assert rules.stop(9) == 6
    assert rules.stop(5) == 5
    assert rules.request(1, 5) is STOP  # the bound would allow it; the stop comes first
    assert rules.request(1, 4) is GO


def test_abort_beats_stop_and_go():
    rules = ClockRules(1, staleness=math.inf)
    rules.complete(0, 0)
    rules.stop(1)
    rules.abort()
    assert rules.request(0, 0) is ABORT and rules.request(0, 1) is ABORT


def test_alpha_broker_keeps_the_newest_publication():
    broker = AlphaBroker()
    assert broker.published is None and broker.ready(3, need=False)
    assert not broker.ready(3, need=True)
    broker.publish(3, "a3")
    broker.publish(2, "a2")  # late: ignored
    assert broker.published == (3, "a3")
    assert broker.ready(3, need=True) and not broker.ready(4, need=True)
    broker.publish(3, "b3")  # same clock again: replaces
    assert broker.published == (3, "b3")


def test_alpha_answer_order_abort_then_ready_then_stop_then_wait():
    rules, broker = ClockRules(1, staleness=0), AlphaBroker()
    assert alpha_answer(rules, broker, 2, need=False) == (GO, None)
    assert alpha_answer(rules, broker, 2, need=True) == (WAIT, None)
    rules.stop(2)
    assert alpha_answer(rules, broker, 2, need=True) == (STOP, None)  # it can no longer come
    assert alpha_answer(rules, broker, 1, need=True) == (WAIT, None)
    broker.publish(2, "a")
    assert alpha_answer(rules, broker, 2, need=True) == (GO, (2, "a"))
    rules.abort()
    assert alpha_answer(rules, broker, 2, need=False) == (ABORT, None)


def test_mailbox_collects_a_clock_once_and_merges_notes():
    box = StatsMailbox()
    box.deliver(0, 1, {"tokens": 1})
    box.deliver(1, 1, {"tokens": 2})
    box.deliver(1, 0, None)  # the initial tick may carry nothing
    box.deliver(0, 2, {"tokens": 3})
    assert box.collect(0) == {0: {"tokens": 1}, 1: {"tokens": 2}}
    assert box.collect(0) == {}
    assert box.collect(1) == {0: {"tokens": 3}}
    box.note(2, {"a": 1})
    box.note(2, {"b": 2})
    assert box.notes == {2: {"a": 1, "b": 2}}


def test_the_two_sentinels_bracket_every_clock():
    assert NO_CLOCK < -1 < 0 < 10**12 < ALL_CLOCKS
    assert {a.value for a in ClockAnswer} == {"go", "stop", "abort", "wait"}
