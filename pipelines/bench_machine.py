"""Benchmark: what the machine's cores give on their own, the ceiling of any thread scaling.

    .venv/bin/python pipelines/bench_machine.py --threads 1,2,4,8,16

Each of T threads runs the same job at once (numba, ``nogil``), and the line reports the
jobs done per second against one thread's: ``compute`` is a chain of float multiply-adds
(registers only: what independent cores give), ``memory`` random 4-byte reads of a
``--mib`` MiB array (far beyond the caches: what the shared memory system gives, the bound
of the samplers' scattered ``n_wk`` reads), ``stream`` one read per cache line through each
thread's own ``--mib`` MiB array (the memory bandwidth). A 16-vCPU machine of 8 cores with
two hardware threads each shows ``compute`` near 8-10x at 16 threads, not 16x.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _compute(n):
    x = 1.0
    y = 0.5
    for _ in range(n):
        x = x * 1.0000001 + y
        y = y * 0.9999999 + 1e-9
    return x + y


@njit(nogil=True, cache=True)
def _stream(a):
    total = 0
    for i in range(0, a.shape[0], 16):  # one int32 per 64-byte line
        total += a[i]
    return total


@njit(nogil=True, cache=True)
def _memory(a, n, seed):
    total = 0
    j = np.uint64(seed)
    for _ in range(n):
        j = j * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        total += a[(j >> np.uint64(16)) % np.uint64(a.shape[0])]
    return total


def _rate(pool: ThreadPoolExecutor, n_threads: int, job) -> float:
    """Jobs per second with ``n_threads`` of them at once (best of three); job ``i`` of each."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        list(pool.map(job, range(n_threads)))
        best = min(best, time.perf_counter() - t0)
    return n_threads / best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--mib", type=int, default=512)
    args = ap.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")]
    a = np.ones((args.mib << 20) // 4, dtype=np.int32)
    own = [np.ones_like(a) for _ in range(max(counts))]  # the stream's, one per thread
    jobs = {"compute": lambda i: _compute(100_000_000),
            "memory": lambda i: _memory(a, 10_000_000, i + 1),
            "stream": lambda i: [_stream(own[i]) for _ in range(4)]}
    _compute(10)
    _memory(a, 10, 1)
    _stream(a[:16])
    print("| job | " + " | ".join(f"{t} threads" for t in counts) + " |")
    print("|---|" + "---|" * len(counts))
    with ThreadPoolExecutor(max(counts)) as pool:
        for name, job in jobs.items():
            rates = [_rate(pool, t, job) for t in counts]
            print(f"| {name} | " + " | ".join(f"{r / rates[0]:.2f}x" for r in rates) + " |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
