"""The words of the parameter-server protocol: clock answers and the two clock sentinels.

Declared once here; the actors, the pure rules and the clients use these names, and nothing
outside :mod:`biglda.ps` spells a status string or a sentinel value.
"""

from __future__ import annotations

from enum import StrEnum

NO_CLOCK = -(2**62)
"""Before every clock: "nothing received / applied yet"."""

ALL_CLOCKS = 2**62
"""After every clock: "every clock that has arrived" (a pull), "never" (a stop clock)."""


class ClockAnswer(StrEnum):
    """What the clock answers a shard that asks to start a clock (or for its alpha).

    ``GO``: start it. ``STOP``: the run ends before this clock; return normally.
    ``ABORT``: the driver gave this attempt up (a lost worker, a rebalance); return at once and
    write nothing more. ``WAIT``: not yet, after one server-side wait; the client asks again,
    so callers never see it.
    """

    GO = "go"
    STOP = "stop"
    ABORT = "abort"
    WAIT = "wait"
