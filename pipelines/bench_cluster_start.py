"""Benchmark: how long the embedded cluster takes to start, against the LocalCluster it replaced.

    python pipelines/bench_cluster_start.py --workers 2 --repeats 3

Both in one run, interleaved: ``LocalCluster(processes=True)`` as biglda started it before (its
nannies in this process, workers by multiprocessing spawn, which re-imports ``__main__``) and
:func:`biglda.trainer.cluster.start_local_cluster` (a nanny process per worker started by
``python -m dask spec``, forking its worker). Printed per start: seconds to the first task's
result, and seconds to close.
"""

from __future__ import annotations

import argparse
import time


def _old(n: int):
    import dask
    from distributed import LocalCluster

    from biglda.trainer.cluster import EMBEDDED_MEMORY_CONFIG, ignore_sigint

    with dask.config.set(EMBEDDED_MEMORY_CONFIG), ignore_sigint():
        return LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                            dashboard_address="127.0.0.1:0", host="127.0.0.1")


def main() -> None:
    from distributed import Client

    from biglda.trainer.cluster import start_local_cluster

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    for _ in range(args.repeats):
        starters = (("LocalCluster (before)", _old), ("embedded (now)", start_local_cluster))
        for name, start in starters:
            t = time.perf_counter()
            cluster = start(args.workers)
            with Client(cluster) as client:
                client.submit(int, 1).result()
            up = time.perf_counter() - t
            t = time.perf_counter()
            cluster.close()
            print(f"{name:22s} {args.workers} workers: first task after {up:.2f} s, "
                  f"closed in {time.perf_counter() - t:.2f} s", flush=True)


if __name__ == "__main__":  # the LocalCluster (before) needs the guard: spawn re-imports this
    main()
