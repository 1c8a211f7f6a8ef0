"""PartQueue: every part is worked on exactly once whatever thread takes it, and its result
and end time are kept by index."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from biglda.samplers.parts import PartQueue


def test_every_part_once_and_results_by_index():
    taken: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        time.sleep(0.001 * (i % 3))  # unequal parts, so the threads interleave
        with lock:
            taken.append(i)
        return 10 * i

    queue = PartQueue(40, work)
    t0 = time.time()
    with ThreadPoolExecutor(2) as pool:
        futs = [pool.submit(queue.drain) for _ in range(2)]
        cpu = queue.drain() + sum(f.result() for f in futs)
    assert sorted(taken) == list(range(40))
    assert queue.results == [10 * i for i in range(40)]
    assert all(t0 <= t <= time.time() for t in queue.ended) and cpu >= 0
