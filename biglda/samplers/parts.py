"""Work cut into parts that threads take one at a time (a sweep's blocks, the doc LL's runs).

More parts than threads even out parts of unequal cost and a thread the OS lends to
someone else for a while. The parts' results are kept by index, so what is computed does
not depend on which thread took which part.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, wait
from typing import Any


class PartQueue:
    """Parts ``0 .. n_parts - 1`` of ``work``, handed to the threads that :meth:`drain` it.

    ``results[i]`` is ``work(i)``; ``ended[i]`` the wall time (``time.time()``) it finished.

    Examples
    --------
    >>> q = PartQueue(3, lambda i: i * i)
    >>> _ = q.drain()
    >>> q.results
    [0, 1, 4]
    """

    def __init__(self, n_parts: int, work: Callable[[int], Any]) -> None:
        self.results: list[Any] = [None] * n_parts
        self.ended: list[float] = [0.0] * n_parts
        self._work = work
        self._next = iter(range(n_parts))
        self._lock = threading.Lock()

    def drain(self) -> float:
        """Work on parts not taken yet until none is left; return this thread's CPU seconds."""
        c0 = time.thread_time()
        while True:
            with self._lock:
                i = next(self._next, None)
            if i is None:
                return time.thread_time() - c0
            self.results[i] = self._work(i)
            self.ended[i] = time.time()


def run_parts(pool: Executor | None, n_threads: int, n_parts: int,
               work: Callable[[int], Any]) -> tuple[list[Any], float]:
    """Run ``work(0 .. n_parts - 1)`` on ``n_threads`` threads: this one and ``pool``'s.

    Returns the results in part order and the CPU seconds of all the threads
    (:class:`PartQueue`).
    """
    if pool is None and n_threads > 1:
        raise ValueError(f"{n_threads} threads need a pool")
    queue = PartQueue(n_parts, work)
    futs = [pool.submit(queue.drain) for _ in range(n_threads - 1)] if pool is not None else []
    try:
        cpu = queue.drain()
    finally:
        wait(futs)  # no thread may still work on the sweep's arrays when it ends, even failed
    return queue.results, cpu + sum(f.result() for f in futs)
