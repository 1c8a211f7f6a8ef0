"""A Dask actor call from one worker process to another: its round trip, by what the callee does.

Every call of the trainer's clock (wait, pull, a window's posts, push, tick) is one such
call. Two worker processes of an embedded cluster, a no-op actor on the second; the first
calls it ``--calls`` times, empty and carrying ``--megabytes`` of int32, while the second's
task thread is idle, runs a ``nogil`` numba loop (a sampling kernel), or runs Python code
(holding the GIL). Prints the median and 90th percentile in ms::

    .venv/bin/python pipelines/bench_actor_rtt.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _spin(n):
    s = 0.0
    for i in range(n):
        s += np.sqrt(i * 1.0)
    return s


class Noop:
    """The callee: answers at once."""

    def f(self, x=None):
        return 1


def _busy(kind: str, seconds: float) -> int:
    """Keep the task thread busy for ``seconds``: a nogil numba loop or Python code."""
    t, k = time.time(), 0
    while time.time() - t < seconds:
        if kind == "nogil":
            _spin(2_000_000)
        else:
            s = 0
            for i in range(100_000):
                s += i
        k += 1
    return k


def _calls(actor, n: int, entries: int) -> tuple[float, float]:
    x = np.zeros(entries, dtype=np.int32) if entries else None
    out = []
    for _ in range(n):
        t = time.perf_counter()
        actor.f(x).result()
        out.append(time.perf_counter() - t)
    return float(np.median(out)) * 1e3, float(np.percentile(out, 90)) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--megabytes", type=float, default=2.4)
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    entries = int(args.megabytes * 1e6 / 4)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        first, second = list(client.scheduler_info()["workers"])
        actor = client.submit(Noop, actor=True, workers=[second]).result()
        client.submit(_spin, 10, workers=[second]).result()  # (compiled there first)
        print("| the callee's task thread | payload | median ms | 90th percentile ms |\n"
              "|---|---|---|---|")
        for kind in ("idle", "nogil", "python"):
            for payload in (0, entries):
                busy = None
                if kind != "idle":
                    busy = client.submit(_busy, kind, 6.0, workers=[second], pure=False)
                    time.sleep(0.5)
                med, p90 = client.submit(_calls, actor, args.calls, payload, workers=[first],
                                         pure=False).result()
                if busy is not None:
                    busy.result()
                print(f"| {kind} | {4 * payload / 1e6:.1f} MB | {med:.2f} | {p90:.2f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
