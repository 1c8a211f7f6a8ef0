"""The clock actor's waiting: a waiter is released by the tick that lets it start (asyncio)."""

from __future__ import annotations

import asyncio
import math

import numpy as np

from biglda.ps.clock import ClockServer
from biglda.ps.protocol import ClockAnswer

GO, STOP, WAIT = ClockAnswer.GO, ClockAnswer.STOP, ClockAnswer.WAIT


def test_clock_server_staleness_bound():
    async def scenario(s):
        clock = ClockServer(n_shards=2, staleness=s)
        assert await clock.wait(0, 0, timeout=0.01) is WAIT  # nobody initialized
        await clock.tick(0, 0)
        await clock.tick(1, 0)
        assert await clock.wait(0, 0, timeout=0.01) is GO
        # shard 0 runs ahead while shard 1 stays at 0 completed clocks
        ahead = 0
        for c in range(1, 8):
            await clock.tick(0, c)
            if await clock.wait(0, c, timeout=0.01) is not GO:
                break
            ahead = c
        waiter = asyncio.ensure_future(clock.wait(0, ahead + 1, timeout=2.0))
        await asyncio.sleep(0.01)
        await clock.tick(1, 7)  # unblocks the waiter
        result = await waiter
        await clock.stop(3)
        assert await clock.wait(1, 3, timeout=0.01) is STOP
        return ahead, result

    assert asyncio.run(scenario(0)) == (0, GO)
    assert asyncio.run(scenario(2)) == (2, GO)
    assert asyncio.run(scenario(math.inf)) == (7, GO)


def test_mailbox_and_alpha_waits_end_with_the_tick_or_publication_they_wait_for():
    async def scenario():
        clock = ClockServer(n_shards=2, staleness=0)
        await clock.tick(0, 1, {"tokens": 3})
        assert await clock.mailbox_collect(0, timeout=0.01) is None  # shard 1 not done
        collect = asyncio.ensure_future(clock.mailbox_collect(0, timeout=2.0))  # (stats, clocks)
        lookup = asyncio.ensure_future(clock.alpha_lookup(1, need=True, timeout=2.0))
        await asyncio.sleep(0.01)
        await clock.tick(1, 1, {"tokens": 4})
        await clock.alpha_publish(1, [0.5, 0.5])
        return (await collect)[0], await lookup

    stats, alpha = asyncio.run(scenario())
    assert stats == {0: {"tokens": 3}, 1: {"tokens": 4}}
    assert alpha == (GO, (1, [0.5, 0.5]))


def test_a_process_waits_and_ticks_for_all_its_shards_in_one_call():
    """wait_many / tick_many: the same answers, starts, ticks and mailbox as one call each."""
    async def scenario():
        clock = ClockServer(n_shards=4, staleness=1)
        await clock.tick_many(0, {0: {"t": 0}, 1: {"t": 1}})  # process A: shards 0, 1
        assert await clock.wait_many([0, 1], 0, timeout=0.01) is WAIT  # B not initialized
        await clock.tick(2, 0)
        await clock.tick(3, 0)
        assert await clock.wait_many([0, 1], 0, timeout=0.01) is GO
        await clock.tick_many(1, {0: {"tokens": 5}, 1: {"tokens": 6}})
        assert await clock.wait_many([0, 1], 1, timeout=0.01) is GO  # staleness 1
        await clock.tick_many(2, {0: {}, 1: {}})
        waiter = asyncio.ensure_future(clock.wait_many([0, 1], 2, timeout=2.0))
        await asyncio.sleep(0.01)
        assert not waiter.done()  # B (shards 2, 3) is 2 clocks behind: A waits
        await clock.tick_many(1, {2: {"tokens": 7}, 3: {"tokens": 8}})
        answer = await waiter
        stats, completed = await clock.mailbox_collect(0, timeout=0.01)
        await clock.stop(3)
        stopped = await clock.wait_many([2, 3], 3, timeout=0.01)
        return answer, stats, completed, await clock.state(), stopped

    answer, stats, completed, state, stopped = asyncio.run(scenario())
    assert answer is GO and stopped is STOP
    assert completed == [2, 2, 1, 1]  # every shard's clocks when clock 0's stats were collected
    assert stats == {0: {"tokens": 5}, 1: {"tokens": 6}, 2: {"tokens": 7}, 3: {"tokens": 8}}
    assert state["completed"] == [2, 2, 1, 1]
    starts = [(s, c) for s, c, _, _ in state["starts"]]
    assert starts == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]


def test_tick_wait_and_totals_post_ask_answer_as_their_two_calls():
    """tick_wait = tick_many then wait_many (the answer waits for the clock's admission);
    totals_post_ask = totals_post then totals (answered once every process posted)."""
    async def scenario():
        clock = ClockServer(n_shards=2, staleness=0)
        await clock.tick_many(0, {0: {}})
        assert await clock.tick_wait(0, {1: {}}, timeout=0.01) is GO  # both initialized
        assert await clock.tick_wait(1, {0: {"tokens": 3}}, timeout=0.01) is WAIT  # BSP
        waiter = asyncio.ensure_future(clock.tick_wait(1, {1: {"tokens": 4}}, timeout=2.0))
        first = asyncio.ensure_future(clock.totals_post_ask(0, 0, np.array([1, -1]), 2,
                                                            timeout=2.0))
        await asyncio.sleep(0.01)
        assert not first.done()  # process 1 has not posted its totals of clock 0
        second = await clock.totals_post_ask(0, 1, np.array([2, -2]), 2, timeout=2.0)
        return await waiter, await first, second, (await clock.mailbox_collect(0, 0.01))[0], \
            await clock.state()

    answer, first, second, stats, state = asyncio.run(scenario())
    assert answer is GO and stats == {0: {"tokens": 3}, 1: {"tokens": 4}}
    np.testing.assert_array_equal(first, [3, -3])
    np.testing.assert_array_equal(second, [3, -3])
    assert [(s, c) for s, c, _, _ in state["starts"]] == [(1, 0), (1, 1)]
