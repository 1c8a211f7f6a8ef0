"""Benchmark: one process's sweep on 1 and T threads, in a plain process and in a Dask worker.

    .venv/bin/python pipelines/bench_in_worker.py --corpus runs/synth4m.zarr \\
        --sampler lightlda --topics 1000 --threads 2 --rounds 3

Training on one process of T threads reaches less of T x one thread than the same
partitioned sweep without Dask (on the 2-core VM, lightlda at K = 1,000: 1.49x against
1.88-2.11x; pipelines/README.md, "Twentieth session"). This runs the same protocol in both
places to tell the Dask worker's share from the machine's: from one random start it sweeps
``--warm`` times on one thread, keeps that state, then, ``--rounds`` times, sweeps from a
copy of it ``--reps`` times on one thread and ``--reps`` times on T threads (the first
sweep of each, which builds the layout, uncounted). Each round runs once in this process
and once in a worker of the embedded cluster (1 worker x T threads, biglda's settings),
alternating, so the VM's drift falls on both. Prints, per place and round, the median
seconds a sweep on 1 and T threads, their ratio and the T-thread CPU µs a token.
``--quiet-worker`` turns off what the worker runs beside the task on its event loop.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def protocol(path: str, sampler: str, n_topics: int, n_threads: int, warm: int, reps: int,
             ) -> tuple[float, float, float]:
    """``(s a sweep on 1 thread, on n_threads, CPU µs a token on n_threads)``, medians."""
    from concurrent.futures import ThreadPoolExecutor

    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z

    corpus = Corpus.open(path)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
    n_words = int(corpus.n_words)
    z = init_z(len(tokens), n_topics, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    first = get_sampler(sampler)
    for it in range(warm):
        first.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words, RandomKey(0, it))
    state = (z, n_wk, n_k)
    out = []
    with ThreadPoolExecutor(max(1, n_threads - 1)) as pool:
        for t in (1, n_threads):
            z, n_wk, n_k = (a.copy() for a in state)
            smp = get_sampler(sampler)
            secs, cpus = [], []
            for it in range(reps + 1):
                t0 = time.perf_counter()
                res = smp.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words,
                                RandomKey(1, it), pool=pool, n_threads=t)
                if it:  # (the first builds the layout)
                    secs.append(time.perf_counter() - t0)
                    cpus.append(res.cpu_seconds or 0.0)
            out.append((statistics.median(secs), 1e6 * statistics.median(cpus) / len(tokens)))
    return out[0][0], out[1][0], out[1][1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--sampler", default="lightlda")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quiet-worker", action="store_true",
                    help="the worker without Dask's profiler, memory monitor (every 100 ms) "
                    "and system monitor (every 500 ms): 60 s apart instead")
    args = ap.parse_args(argv)
    import contextlib

    import dask

    from biglda.trainer.cluster import connect

    quiet = {"distributed.worker.profile.enabled": False,
             "distributed.worker.memory.monitor-interval": "60s",
             "distributed.admin.system-monitor.interval": "60s"}
    stack = contextlib.ExitStack()
    if args.quiet_worker:
        stack.enter_context(dask.config.set(quiet))

    call = (args.corpus, args.sampler, args.topics, args.threads, args.warm, args.reps)
    print(f"| round | where | s a sweep, 1 thread | {args.threads} threads | ratio | "
          f"CPU µs/token, {args.threads} threads |\n|---|---|---|---|---|---|", flush=True)
    ratios: dict[str, list[float]] = {"process": [], "worker": []}
    with stack, connect(workers=1, threads_per_worker=args.threads) as client:
        for r in range(args.rounds):
            for where in ("process", "worker"):
                one, many, cpu = (protocol(*call) if where == "process" else
                                  client.submit(protocol, *call, pure=False).result())
                ratios[where].append(one / many)
                print(f"| {r + 1} | {where} | {one:.3f} | {many:.3f} | {one / many:.2f}x | "
                      f"{cpu:.3f} |", flush=True)
    for where, got in ratios.items():
        print(f"- {where}: {args.threads} threads against one, median over rounds "
              f"{statistics.median(got):.2f}x ({min(got):.2f}-{max(got):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
