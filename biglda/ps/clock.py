"""The clock actor: SSP clocks, the alpha broker and the per-clock stats mailbox, with waiting.

:class:`ClockServer` holds three pure components (:mod:`biglda.ps.rules`) — :class:`ClockRules`
(may a shard start clock ``c``, the stop clock, the abort flag), :class:`AlphaBroker` (the
optimized alpha and the clock it applies from) and :class:`StatsMailbox` (the shards' per-clock
statistics and notes) — and adds only what needs an event loop: waiting. Its waiting methods are
``async``, so a waiting caller never blocks the actor; each wait lasts at most its ``timeout``
and then answers ``WAIT`` (or None), so a call never outlives the caller's own timeout. The
three share one actor because a tick is one message that both advances a shard's clock and
delivers its statistics, and an alpha request must see the stop and abort of the clock.

It also records when each shard started each clock (and the slowest clock at that moment), so
tests check the SSP bound from the record. Workers and the driver reach it through
:mod:`biglda.ps.client`, never by method name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from biglda.ps.protocol import ClockAnswer
from biglda.ps.rules import AlphaBroker, ClockRules, StatsMailbox, TotalsBoard, alpha_answer


class ClockServer:
    """SSP clocks of all worker shards, the alpha broker and the stats mailbox (a Dask actor).

    Parameters
    ----------
    n_shards : int
        Number of worker (document) shards.
    staleness : float
        The SSP bound (0: BSP, ``math.inf``: asynchronous).
    start_clock : int
        The clock every shard starts from.
    ahead : int
        Clocks a shard may start past the bound (:class:`biglda.ps.rules.ClockRules`).

    Examples
    --------
    >>> import asyncio
    >>> server = ClockServer(1, staleness=0)
    >>> asyncio.run(server.wait(0, 0, timeout=0.0))
    <ClockAnswer.WAIT: 'wait'>
    """

    def __init__(self, n_shards: int, staleness: float, start_clock: int = 0,
                 ahead: int = 0) -> None:
        self.rules = ClockRules(n_shards, staleness, start_clock, ahead)
        self.alpha = AlphaBroker()
        self.mailbox = StatsMailbox()
        self.board = TotalsBoard()
        self.ticks: list[tuple[int, int, float]] = []  # (shard, completed, time)
        self.starts: list[tuple[int, int, float, int]] = []  # (shard, clock, time, min clock)
        self._event: asyncio.Event | None = None

    def _notify(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def _changed(self, timeout: float) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)

    # -- the SSP clock ------------------------------------------------------------------
    async def wait(self, shard: int, clock: int, timeout: float = 5.0) -> ClockAnswer:
        """Wait until shard ``shard`` may start ``clock``; ``WAIT`` after ``timeout`` seconds."""
        shard, clock = int(shard), int(clock)
        deadline = time.monotonic() + timeout
        while True:
            answer = self.rules.request(shard, clock)
            if answer is ClockAnswer.GO:
                self.starts.append((shard, clock, time.time(), self.rules.slowest))
            if answer is not ClockAnswer.WAIT:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                return ClockAnswer.WAIT
            await self._changed(left)

    async def wait_many(self, shards: list[int], clock: int, timeout: float = 5.0
                        ) -> ClockAnswer:
        """:meth:`wait` for every shard of a worker process at once (one call, not one each).

        The rules answer by clock alone, so the shards get one answer; a ``GO`` records
        every shard's start.
        """
        clock = int(clock)
        deadline = time.monotonic() + timeout
        while True:
            answers = {self.rules.request(int(s), clock) for s in shards}
            answer = (ClockAnswer.ABORT if ClockAnswer.ABORT in answers else
                      ClockAnswer.STOP if ClockAnswer.STOP in answers else
                      ClockAnswer.WAIT if ClockAnswer.WAIT in answers else ClockAnswer.GO)
            if answer is ClockAnswer.GO:
                now = time.time()
                self.starts.extend((int(s), clock, now, self.rules.slowest) for s in shards)
            if answer is not ClockAnswer.WAIT:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                return ClockAnswer.WAIT
            await self._changed(left)

    async def tick_many(self, completed: int, stats: dict[int, dict]) -> None:
        """:meth:`tick` for every shard in ``stats`` ({shard: its stats}) at once."""
        now = time.time()
        for shard, st in stats.items():
            self.rules.complete(int(shard), int(completed))
            self.ticks.append((int(shard), int(completed), now))
            self.mailbox.deliver(int(shard), int(completed), st)
        self._notify()

    async def tick_wait(self, completed: int, stats: dict[int, dict], timeout: float = 5.0
                        ) -> ClockAnswer:
        """:meth:`tick_many`, then :meth:`wait_many` of the same shards for ``completed``."""
        await self.tick_many(completed, stats)
        return await self.wait_many(list(stats), completed, timeout)

    async def tick(self, shard: int, completed: int, stats: dict | None = None) -> None:
        """Shard ``shard`` has finished ``completed`` sweeps (pushes done), with its stats."""
        shard, completed = int(shard), int(completed)
        self.rules.complete(shard, completed)
        self.ticks.append((shard, completed, time.time()))
        self.mailbox.deliver(shard, completed, stats)
        self._notify()

    async def stop(self, at: int | None = None) -> int:
        """Stop every shard before clock ``at`` (None: as soon as possible); the stop clock."""
        at = self.rules.stop(at)
        self._notify()
        return at

    async def abort(self) -> None:
        """Give the attempt up: every waiting or next request answers ``ABORT``."""
        self.rules.abort()
        self._notify()

    async def clocks(self) -> list[int]:
        """Completed clocks of every shard."""
        return self.rules.completed.tolist()

    async def state(self) -> dict[str, Any]:
        """Clocks, stop clock and recorded start and tick times (for tests and the driver)."""
        return {"completed": self.rules.completed.tolist(), "stop_at": self.rules.stop_at,
                "starts": list(self.starts), "ticks": list(self.ticks),
                "staleness": self.rules.staleness}

    # -- the alpha broker ---------------------------------------------------------------
    async def alpha_publish(self, clock: int, alpha: Any) -> None:
        """Publish the optimized alpha the shards use from ``clock`` on."""
        self.alpha.publish(clock, alpha)
        self._notify()

    async def alpha_lookup(self, clock: int, need: bool = False, timeout: float = 5.0
                           ) -> tuple[ClockAnswer, tuple[int, Any] | None]:
        """:func:`biglda.ps.rules.alpha_answer`, waiting up to ``timeout`` while it is ``WAIT``."""
        deadline = time.monotonic() + timeout
        while True:
            answer = alpha_answer(self.rules, self.alpha, clock, need)
            if answer[0] is not ClockAnswer.WAIT:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                return answer
            await self._changed(left)

    # -- the stats mailbox --------------------------------------------------------------
    async def mailbox_collect(self, clock: int, timeout: float = 5.0
                              ) -> tuple[dict[int, dict], list[int]] | None:
        """``(stats, clocks)`` once every shard finished ``clock``; None after ``timeout``.

        The per-shard stats of ``clock`` and every shard's completed clocks, as :meth:`clocks`
        answers at that moment: the driver's one call a clock, not two.
        """
        clock = int(clock)
        deadline = time.monotonic() + timeout
        while True:
            if self.rules.finished(clock):
                return self.mailbox.collect(clock), self.rules.completed.tolist()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            await self._changed(left)

    # -- the n_k board of processes taking turns -----------------------------------------
    async def totals_post(self, clock: int, writer: int, dk: Any) -> None:
        """Keep process ``writer``'s change of ``n_k`` in ``clock``."""
        self.board.post(clock, writer, dk)
        self._notify()

    async def totals_post_ask(self, clock: int, writer: int, dk: Any, n: int,
                              timeout: float = 5.0) -> Any:
        """:meth:`totals_post`, then :meth:`totals` of the same clock (one call, not two)."""
        await self.totals_post(clock, writer, dk)
        return await self.totals(clock, n, timeout)

    async def totals(self, clock: int, n: int, timeout: float = 5.0) -> Any:
        """Return the sum of ``clock``'s changes of ``n_k`` once ``n`` processes posted them.

        None after ``timeout`` seconds (or once the attempt is given up).
        """
        deadline = time.monotonic() + timeout
        while True:
            total = self.board.total(clock, n)
            if total is not None or self.rules.aborted:
                return total
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            await self._changed(left)

    async def mailbox_note(self, shard: int, info: dict) -> None:
        """Keep a shard's note (e.g. where it wrote its final checkpoint)."""
        self.mailbox.note(shard, info)

    async def mailbox_notes(self) -> dict[int, dict]:
        """Every shard's note."""
        return dict(self.mailbox.notes)
