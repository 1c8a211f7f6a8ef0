"""Benchmark a worker's push to the table shard of its own process: through Dask or direct.

A Dask actor call from a task goes through the worker's RPC even when the actor lives in the
same process (arguments pickled, sent over loopback to itself); :func:`biglda.ps.calls.
same_process` submits the method to the worker's actor thread instead. One worker process,
one :class:`biglda.ps.TableShard` (V = 50,000, K = 1000) on it; a task on that worker pushes
the same COO delta of ``--entries`` entries both ways, alternating, ``--repeats`` times each
(zero counts, so the table and the apply work stay the same; each push has a new clock, so
none is ignored as a repeat). Wall seconds of each push, call to answer.

Usage (from the repository root, < 1 min)::

    .venv/bin/python pipelines/bench_push.py     # --entries 4000000 20000000 --repeats 3
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

V, K = 50_000, 1000


def _push_both_ways(actor, n: int, repeats: int, first_clock: int) -> dict[str, list[float]]:
    """In a worker task: time pushes of ``n`` entries through Dask and directly."""
    from biglda.ps.calls import same_process

    rng = np.random.default_rng(0)
    words = np.sort(rng.integers(0, V, n)).astype(np.int32)
    topics = rng.integers(0, K, n).astype(np.int32)
    counts = np.zeros(n, np.int32)
    direct = same_process(actor)
    if direct is actor:
        raise RuntimeError("the table shard is not in this task's process")
    clocks = itertools.count(first_clock)  # new clocks: no push is ignored as a repeat
    out: dict[str, list[float]] = {"dask rpc": [], "same process": []}
    for _ in range(repeats):
        for name, handle in (("dask rpc", actor), ("same process", direct)):
            t0 = time.perf_counter()
            handle.push(0, next(clocks), words, topics, counts).result()
            out[name].append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[4_000_000, 20_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from biglda.ps import TableShard
    from biglda.trainer.cluster import connect

    print("| entries | MB | dask rpc s | same process s |\n|---|---|---|---|")
    with connect(workers=1, threads_per_worker=1) as client:
        actor = client.submit(TableShard, 0, 0, V, K, 1, 0.01, actor=True).result()
        for i, n in enumerate(args.entries):
            got = client.submit(_push_both_ways, actor, n, args.repeats,
                                i * 2 * args.repeats, pure=False).result()
            cells = [", ".join(f"{x:.3f}" for x in got[k]) for k in ("dask rpc", "same process")]
            print(f"| {n:,} | {n * 12 / 1e6:.0f} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
