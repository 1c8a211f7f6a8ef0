"""The pure rules of the clock actor: SSP admission, stopping, the alpha broker, the mailbox.

No Dask, no asyncio, no clock reads: each class is a small state changed by plain method calls,
so the rules are tested in-process without sleeps (``tests/ps/test_clock_rules.py``).
:class:`biglda.ps.clock.ClockServer` holds one of each and only adds the waiting.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from biglda.ps.protocol import ALL_CLOCKS, ClockAnswer


class ClockRules:
    """SSP clocks of all worker shards (Ho et al. 2013), the stop clock and the abort flag.

    ``completed[j]`` is ``-1`` until shard ``j`` has pushed its initial counts; then it is the
    number of sweeps it finished (it starts at ``start_clock`` on resume). A shard may start
    clock ``c`` once every shard has pushed its initial counts and ``min_j completed[j] >=
    c - staleness``.

    Parameters
    ----------
    n_shards : int
        Number of worker (document) shards.
    staleness : float
        The SSP bound ``s`` (0: BSP, ``math.inf``: fully asynchronous).
    start_clock : int
        The clock every shard starts from (a resumed run's checkpoint clock).
    ahead : int
        Clocks a shard may start past the bound, where something else orders what it
        reads: processes taking turns on the vocabulary (``--process-partition``) start a
        clock's first step once the process that had its range in the clock before posted
        it (:mod:`biglda.ps.managed`), not once every shard ticked. The staleness of what
        they read stays ``staleness``; 0 for everyone else.

    Examples
    --------
    >>> rules = ClockRules(2, staleness=0)
    >>> rules.request(0, 0)
    <ClockAnswer.WAIT: 'wait'>
    >>> rules.complete(0, 0); rules.complete(1, 0)
    >>> rules.request(0, 0)
    <ClockAnswer.GO: 'go'>
    """

    def __init__(self, n_shards: int, staleness: float, start_clock: int = 0,
                 ahead: int = 0) -> None:
        self.n_shards = int(n_shards)
        self.staleness = float(staleness)
        self.start_clock = int(start_clock)
        self.ahead = int(ahead)
        self.completed = np.full(self.n_shards, -1, dtype=np.int64)
        self.started = np.full(self.n_shards, -1, dtype=np.int64)
        self.stop_at = ALL_CLOCKS
        self.aborted = False

    @property
    def slowest(self) -> int:
        """``min_j completed[j]``: the clock every shard has finished."""
        return int(self.completed.min())

    def may_start(self, clock: int) -> bool:
        """Whether the SSP bound (and ``ahead``) lets a shard start ``clock`` now."""
        low = self.slowest
        if low < self.start_clock:  # somebody has not pushed its initial counts yet
            return False
        return self.staleness == math.inf or low >= int(clock) - self.staleness - self.ahead

    def request(self, shard: int, clock: int) -> ClockAnswer:
        """Answer shard ``shard`` asking to start ``clock``; a ``GO`` records the start.

        Abort beats stop, stop beats the bound: a shard past the stop clock stops even when
        the bound would let it run.
        """
        shard, clock = int(shard), int(clock)
        if self.aborted:
            return ClockAnswer.ABORT
        if clock >= self.stop_at:
            return ClockAnswer.STOP
        if self.may_start(clock):
            self.started[shard] = max(self.started[shard], clock)
            return ClockAnswer.GO
        return ClockAnswer.WAIT

    def complete(self, shard: int, completed: int) -> None:
        """Shard ``shard`` has finished ``completed`` sweeps (a repeated or older tick is kept)."""
        shard = int(shard)
        self.completed[shard] = max(self.completed[shard], int(completed))

    def finished(self, clock: int) -> bool:
        """Whether every shard has finished clock ``clock``."""
        return self.slowest > int(clock)

    def stop(self, at: int | None = None) -> int:
        """Stop every shard before it starts clock ``at``; return the effective stop clock.

        ``at=None``: as soon as possible without abandoning a sweep — one past the newest clock
        any shard has started, so every shard ends with the same number of completed sweeps.
        A stop never moves later than one asked for before.
        """
        if at is None:
            newest = int(self.started.max())
            at = newest + 1 if newest >= 0 else self.start_clock
        self.stop_at = min(self.stop_at, int(at))
        return self.stop_at

    def abort(self) -> None:
        """Give the attempt up: every request from now on answers ``ABORT``."""
        self.aborted = True


class AlphaBroker:
    """The newest optimized alpha the driver published and the first clock it applies to.

    Examples
    --------
    >>> broker = AlphaBroker()
    >>> broker.publish(3, [0.1, 0.2])
    >>> broker.publish(2, [9.0, 9.0])  # older than the one published: ignored
    >>> broker.published
    (3, [0.1, 0.2])
    >>> broker.ready(4, need=True), broker.ready(3, need=True)
    (False, True)
    """

    def __init__(self) -> None:
        self.published: tuple[int, Any] | None = None

    def publish(self, clock: int, alpha: Any) -> None:
        """Publish ``alpha`` for clocks ``clock`` on.

        A publication older than the newest is ignored.
        """
        if self.published is None or int(clock) >= self.published[0]:
            self.published = (int(clock), alpha)

    def ready(self, clock: int, need: bool) -> bool:
        """Whether a shard at ``clock`` may take the newest alpha now.

        ``need``: it must be one published for ``clock`` or later (BSP, at the clock right
        after an optimization, so a seed and layout give the same run); otherwise any
        publication, or none, will do.
        """
        return not need or (self.published is not None and self.published[0] >= int(clock))


def alpha_answer(rules: ClockRules, broker: AlphaBroker, clock: int, need: bool
                 ) -> tuple[ClockAnswer, tuple[int, Any] | None]:
    """Answer a shard at ``clock`` asking for its alpha: ``(answer, publication)``.

    ``(GO, (from_clock, alpha))`` or ``(GO, None)`` (none published: keep the initial alpha);
    ``ABORT`` before anything else; ``STOP`` when the alpha it needs can no longer come
    because the run stops before ``clock``; else ``WAIT``.

    Examples
    --------
    >>> rules, broker = ClockRules(1, 0), AlphaBroker()
    >>> alpha_answer(rules, broker, 2, need=False)
    (<ClockAnswer.GO: 'go'>, None)
    >>> alpha_answer(rules, broker, 2, need=True)[0]
    <ClockAnswer.WAIT: 'wait'>
    """
    if rules.aborted:
        return ClockAnswer.ABORT, None
    if broker.ready(clock, need):
        return ClockAnswer.GO, broker.published
    if int(clock) >= rules.stop_at:
        return ClockAnswer.STOP, None
    return ClockAnswer.WAIT, None


class TotalsBoard:
    """Each process's clock's change of ``n_k``, for processes taking turns on the vocabulary.

    A process starts clock ``c`` from ``n_k`` after every process's clock ``c - 1``, as
    under BSP, without waiting for their pushes: each posts its clock's ``dk`` once it has
    swept it, and reads the sum of clock ``c - 1``'s once all ``n`` are here. Posts of a
    clock older than the newest but two are dropped: a process two clocks behind cannot
    exist (``ClockRules.ahead`` is 1).

    Examples
    --------
    >>> board = TotalsBoard()
    >>> board.post(3, 0, [1, 0]); board.total(3, 2) is None
    True
    >>> board.post(3, 1, [0, 2]); board.total(3, 2).tolist()
    [1, 2]
    """

    def __init__(self) -> None:
        self.posts: dict[int, dict[int, np.ndarray]] = {}

    def post(self, clock: int, writer: int, dk: Any) -> None:
        """Keep ``writer``'s ``dk`` of ``clock`` (a repeated post replaces its own)."""
        clock = int(clock)
        self.posts.setdefault(clock, {})[int(writer)] = np.asarray(dk, dtype=np.int64)
        for c in [c for c in self.posts if c < clock - 2]:
            del self.posts[c]

    def total(self, clock: int, n: int) -> np.ndarray | None:
        """Return the sum of ``clock``'s posts once ``n`` writers posted it, else None."""
        got = self.posts.get(int(clock), {})
        if len(got) < int(n):
            return None
        return np.sum([got[w] for w in sorted(got)], axis=0)


class StatsMailbox:
    """Per-clock statistics the shards send with their ticks, and their free-form notes.

    A shard's statistics of clock ``c`` arrive with its tick of ``c + 1`` completed sweeps;
    the driver collects a clock's letters once every shard finished it
    (:meth:`ClockRules.finished`).

    Examples
    --------
    >>> box = StatsMailbox()
    >>> box.deliver(0, 1, {"tokens": 5})
    >>> box.collect(0), box.collect(0)
    ({0: {'tokens': 5}}, {})
    """

    def __init__(self) -> None:
        self.stats: dict[int, dict[int, dict]] = {}
        self.notes: dict[int, dict] = {}

    def deliver(self, shard: int, completed: int, stats: dict | None) -> None:
        """Keep shard ``shard``'s statistics of clock ``completed - 1`` (None: nothing)."""
        if stats is not None:
            self.stats.setdefault(int(completed) - 1, {})[int(shard)] = stats

    def collect(self, clock: int) -> dict[int, dict]:
        """Take every shard's statistics of ``clock`` out of the mailbox."""
        return self.stats.pop(int(clock), {})

    def note(self, shard: int, info: dict) -> None:
        """Keep (update) a shard's note, e.g. where it wrote its final checkpoint."""
        self.notes.setdefault(int(shard), {}).update(info)
