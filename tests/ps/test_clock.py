"""The clock actor's waiting: a waiter is released by the tick that lets it start (asyncio)."""

from __future__ import annotations

import asyncio
import math

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
        collect = asyncio.ensure_future(clock.mailbox_collect(0, timeout=2.0))
        lookup = asyncio.ensure_future(clock.alpha_lookup(1, need=True, timeout=2.0))
        await asyncio.sleep(0.01)
        await clock.tick(1, 1, {"tokens": 4})
        await clock.alpha_publish(1, [0.5, 0.5])
        return await collect, await lookup

    stats, alpha = asyncio.run(scenario())
    assert stats == {0: {"tokens": 3}, 1: {"tokens": 4}}
    assert alpha == (GO, (1, [0.5, 0.5]))
