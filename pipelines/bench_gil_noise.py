"""Benchmark: warplda on T threads (no Dask), alone and beside a Python thread that holds the GIL.

    .venv/bin/python pipelines/bench_gil_noise.py --corpus runs/synth4m.zarr --threads 2

A Dask worker runs Python threads beside the sampling threads: its event loop, the table
actor, Dask's profiler (which holds the GIL while it walks every stack). This measures what
such a thread costs a sweep: the same sweeps from the same start, without and with a thread
that spins in Python for ``--busy-ms`` then sleeps ``--idle-ms`` (1 ms in 7 by default),
for each ``--parts-per-thread`` (warplda's ``PARTS_PER_THREAD``). It prints wall M tokens/s,
the median of the sweeps after the first two. Where the threads claim their parts without
the GIL (biglda/samplers/_claim.py) the noise should cost about the CPU it takes.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def _spin(stop: threading.Event, busy: float, idle: float) -> None:
    while not stop.is_set():
        end = time.perf_counter() + busy
        while time.perf_counter() < end:  # Python bytecode: holds the GIL
            pass
        time.sleep(idle)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--sweeps", type=int, default=6)
    ap.add_argument("--busy-ms", type=float, default=1.0)
    ap.add_argument("--idle-ms", type=float, default=6.0)
    ap.add_argument("--parts-per-thread", default="32")
    args = ap.parse_args(argv)

    import biglda.samplers.warplda_cpu as warplda
    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z

    corpus = Corpus.open(args.corpus)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
    n_words, k, t = int(corpus.n_words), args.topics, args.threads
    print(f"{args.corpus}: {len(tokens):,} tokens, K = {k}, warplda on {t} threads")
    print("| parts per thread | noise | M tokens/s |\n|---|---|---|")
    with ThreadPoolExecutor(max(1, t - 1)) as pool:
        for ppt in (int(p) for p in args.parts_per_thread.split(",")):
            warplda.PARTS_PER_THREAD = ppt
            for noisy in (False, True):
                stop = threading.Event()
                spinner = threading.Thread(target=_spin, daemon=True, args=(
                    stop, args.busy_ms / 1e3, args.idle_ms / 1e3))
                if noisy:
                    spinner.start()
                z = init_z(len(tokens), k, RandomKey(0, -1))
                n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
                sampler, secs = get_sampler("warplda"), []
                for it in range(args.sweeps):
                    t0 = time.perf_counter()
                    sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words,
                                  RandomKey(0, it), pool=pool, n_threads=t)
                    secs.append(time.perf_counter() - t0)
                stop.set()
                if noisy:
                    spinner.join()
                noise = f"{args.busy_ms:g} ms in {args.busy_ms + args.idle_ms:g}" if noisy \
                    else "none"
                print(f"| {ppt} | {noise} | "
                      f"{len(tokens) / statistics.median(secs[2:]) / 1e6:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
