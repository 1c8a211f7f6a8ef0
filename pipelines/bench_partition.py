"""Benchmark: one sampler's sweep on 1..T threads of one table, no Dask (the partitioned
sweeps of lightlda and cgs, biglda/samplers/partition.py; warplda's too).

    .venv/bin/python pipelines/bench_partition.py --corpus runs/synth4m.zarr \\
        --sampler lightlda --topics 1000 --threads 1,2,4,8,16

For each thread count it sweeps the whole corpus ``--sweeps`` times from the same random
start and prints the median seconds per sweep over the sweeps after ``--skip`` (JIT, the
first dense sweeps), the CPU seconds per token of all the sweep's threads
(``SweepResult.cpu_seconds``; the calling thread's alone on one thread), and the doc
log-likelihood per token at the end (the chains differ by thread count; on one thread it is
the exact chain). More threads than cores share them: CPU per token still shows what the
partition adds. ``--word-cost-power P`` sets the sampler's ``word_cost_power`` (how word
ranges are cut); ``--part-times`` prints each part's seconds of the last sweep (document
range, word range), the balance a step waits for. ``--snapshot-entries N`` sets how many
row entries a token the partitioned sweeps still snapshot for their delta (0: they record
the moved tokens instead). ``--ranges-per-thread`` and ``--lag`` set the partition's R
(``RANGES_PER_THREAD`` x T) and how far behind a part's ``n_k`` may be (its ``N_K_LAG``; for
lightlda also the ``_KEPT`` forms, which it takes where it keeps its documents' counts).
``--kept-entries N[,M...]`` sets lightlda's ``KEPT_DOC_COUNT_ENTRIES`` (0: its documents' counts
are kept only at ``DOC_COUNT_ENTRIES_PER_TOKEN``); with several values each thread count
sweeps a chain per value, alternating sweep by sweep (the VM's speed drifts within minutes),
and prints a row per value; ``--doc-counts int16,int32`` alternates chains whose documents'
counts take each dtype (the same chain: it says whether their topics came out equal).
"busy" is the sweep's CPU over its threads' time (T x seconds):
what the steps' waits leave. ``--serial`` runs every part of a T-thread sweep on the calling
thread, one after another (a synchronous executor): the same work as on T threads without
their contention for memory bandwidth. All the parts' data then passes through one core's
caches, where T cores would each keep their own ranges' in their own: at large T it
overstates the cache misses.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import numpy as np


class _Serial(Executor):
    """Run each submitted call at once, on the calling thread (``--serial``)."""

    def submit(self, fn, /, *args, **kwargs):
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # (the sweep re-raises it from the future)
            fut.set_exception(exc)
        return fut


def _counts(text: str) -> list[int]:
    """``N[,M...]``: non-negative integers (argparse reports anything else in one line)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"entries must be >= 0: {text!r}")
    return values


def _dtypes(text: str) -> list[str]:
    """``int16[,int32]``: the dtypes lightlda's documents' counts may take."""
    values = text.split(",")
    if not values or any(v not in ("int16", "int32") for v in values):
        raise argparse.ArgumentTypeError(f"not a list of int16 / int32: {text!r}")
    return values


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--sampler", default="lightlda")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--skip", type=int, default=4)
    ap.add_argument("--word-cost-power", type=float)
    ap.add_argument("--part-times", action="store_true")
    ap.add_argument("--ranges-per-thread", type=int,
                    help="the sampler's RANGES_PER_THREAD (R = that x the threads)")
    ap.add_argument("--lag", type=int, help="the sampler's N_K_LAG: how many steps a part's n_k "
                    "may be behind (1: every step waits for the one before)")
    ap.add_argument("--serial", action="store_true",
                    help="run a sweep's parts one after another on one thread")
    ap.add_argument("--snapshot-entries", type=float,
                    help="SNAPSHOT_ENTRIES_PER_TOKEN: 0 makes the sweeps record moves")
    ap.add_argument("--kept-entries", default=None, type=_counts,
                    help="lightlda's KEPT_DOC_COUNT_ENTRIES, or several (comma-separated: "
                    "alternating chains)")
    ap.add_argument("--doc-counts", default=None, type=_dtypes,
                    help="lightlda's documents' counts as int16 and/or int32 (comma-separated: "
                    "alternating chains; by default the sampler's choice)")
    args = ap.parse_args(argv)
    for name in ("kept_entries", "doc_counts"):
        if getattr(args, name) is not None and args.sampler != "lightlda":
            ap.error(f"--{name.replace('_', '-')} sets a lightlda setting: use it with "
                     "--sampler lightlda")
    if args.kept_entries is not None and args.doc_counts is not None:
        ap.error("--kept-entries and --doc-counts: one of them at a time")

    import importlib

    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, doc_loglik, get_sampler, init_z

    module = importlib.import_module({"lightlda": "biglda.samplers.lightlda_cpu",
                                      "cgs": "biglda.samplers.cgs_cpu"}.get(
                                          args.sampler, "biglda.samplers.warplda_cpu"))
    for name, value in (("RANGES_PER_THREAD", args.ranges_per_thread), ("N_K_LAG", args.lag)):
        for variant in (name, name + "_KEPT"):  # (lightlda's with its documents' counts kept)
            if value is not None and hasattr(module, variant):
                setattr(module, variant, value)
    if args.snapshot_entries is not None:
        import biglda.samplers.base as base

        base.SNAPSHOT_ENTRIES_PER_TOKEN = args.snapshot_entries  # (one and several threads)
    parts: list[tuple] = []
    # name -> (the kernel, its timed wrapper): the wrapper is in place for the partitioned
    # sweeps only, as the one-thread sweeps' own kernels (njit) call the parts' kernels and
    # cannot compile against a Python function
    swaps: dict[str, tuple[Any, Any]] = {}
    if args.part_times:  # time each part of each step (the kernels the steps call)
        for name in ("_half_sweep", "_dense_part", "_sparse_part"):
            kernel = getattr(module, name, None)
            if kernel is not None:
                # where d_lo and wlo are among the kernel's arguments (read off its signature:
                # fixed offsets went stale when the kernels took more arguments)
                names = list(inspect.signature(kernel.py_func).parameters)
                at_d, at_w = names.index("d_lo"), names.index("wlo")

                def timed(*a, _k=kernel, _d=at_d, _w=at_w):  # (only partitioned sweeps call it)
                    t0 = time.perf_counter()
                    out = _k(*a)
                    parts.append((a[_d], a[_w], time.perf_counter() - t0))
                    return out
                swaps[name] = (kernel, timed)
    corpus = Corpus.open(args.corpus)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
    n_words, k = int(corpus.n_words), args.topics
    print(f"{args.corpus}: {len(tokens):,} tokens, V = {n_words}, K = {k}, {args.sampler}"
          + (f", WORD_COST_POWER {args.word_cost_power}" if args.word_cost_power else "")
          + (", parts run serially on one thread" if args.serial else ""))
    # the chains' variants, alternating sweep by sweep: (label, what sets it before a sweep)
    if args.doc_counts is not None:
        variants = [(v, lambda v=v: setattr(module, "_no_doc_counts",
                                            lambda _: module._NO_DOC_COUNTS[np.dtype(v)]))
                    for v in args.doc_counts]
    elif args.kept_entries is not None:
        variants = [(str(v), lambda v=v: setattr(module, "KEPT_DOC_COUNT_ENTRIES", v))
                    for v in args.kept_entries]
    else:
        variants = [("default", lambda: None)]
    print("| threads | variant | s per sweep | busy | CPU µs/token | doc LL/token |\n"
          "|---|---|---|---|---|---|")
    n_max = max(int(t) for t in args.threads.split(","))
    with (_Serial() if args.serial else ThreadPoolExecutor(max(1, n_max - 1))) as pool:
        for n_threads in (int(t) for t in args.threads.split(",")):
            for name, (kernel, timed) in swaps.items():
                setattr(module, name, timed if n_threads > 1 else kernel)
            chains = []
            for _ in variants:
                z = init_z(len(tokens), k, RandomKey(0, -1))
                n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
                sampler = get_sampler(args.sampler)
                if args.word_cost_power is not None:  # (its threads' ranges)
                    sampler.word_cost_power = args.word_cost_power
                chains.append((sampler, z, n_wk, n_k, [], []))
            for it in range(args.sweeps):
                for (_, set_it), (sampler, z, n_wk, n_k, secs, cpus) in zip(
                        variants, chains, strict=True):
                    set_it()
                    parts.clear()
                    t0, c0 = time.perf_counter(), time.thread_time()
                    res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words,
                                        RandomKey(0, it), pool=pool, n_threads=n_threads)
                    secs.append(time.perf_counter() - t0)
                    cpus.append(res.cpu_seconds if res.cpu_seconds is not None
                                else time.thread_time() - c0)
            rest = slice(args.skip, None)
            for (label, _), (_, z, _, _, secs, cpus) in zip(variants, chains, strict=True):
                ll = doc_loglik(doc_ptr, z, np.full(k, 0.1), k) / len(tokens)
                sec, cpu = statistics.median(secs[rest]), statistics.median(cpus[rest])
                print(f"| {n_threads} | {label} | {sec:.3f} | "
                      f"{cpu / (n_threads * sec):.3f} | {1e6 * cpu / len(tokens):.3f} | "
                      f"{ll:.4f} |", flush=True)
            if args.doc_counts is not None and len(chains) > 1:  # (the same chain, any dtype)
                same = all(np.array_equal(chains[0][1], c[1]) for c in chains[1:])
                print(f"    the chains' topics are {'the same' if same else 'NOT the same'}")
            if args.part_times and n_threads > 1:
                for d_lo, wlo, s in parts:
                    print(f"    part: documents from {d_lo}, words from {wlo}: {s:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
