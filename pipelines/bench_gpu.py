"""Benchmark: tokens/s of the GPU samplers on one GPU, next to the CPU kernels, same run.

    python pipelines/bench_gpu.py                      # the full grid (needs a CUDA GPU)
    python pipelines/bench_gpu.py --quick              # a 10 M-token smoke run
    python pipelines/bench_gpu.py --out bench_gpu.json # also write the records as JSON
    python pipelines/bench_gpu.py --train-only         # only the `biglda train --backend gpu` run

Grid: algorithms cgs and lightlda x K in {100, 1000, 10000} on
  * a synthetic LDA corpus (``biglda.corpus.synth``, >= 100 M tokens by default), and
  * the Debian package descriptions (/work/shared/corpora/debian-descriptions.tsv.gz),
    ingested once with the default tokenizer.
Per cell: one warm-up sweep (JIT compile), then ``--sweeps`` timed sweeps; tokens/s is
tokens / median sweep time. Cells per (corpus, K, algorithm):
  * ``gpu-shard`` - the device-resident sweep: ``sampler.load`` once, then
    ``sampler.sweep_shard`` (shard, word-major order and rows stay on the device; the delta
    is computed there and only it comes back); ``device_bytes`` is what CuPy's pool holds;
  * ``gpu-clock`` - ``gpu-shard`` plus the rest of a device-resident worker's clock: a
    pulled delta applied on the device and the doc log-likelihood computed there;
  * ``gpu`` - ``sweep`` on CuPy arrays (in place, the order recomputed every sweep);
  * ``gpu-host`` - ``sweep`` on NumPy arrays: every sweep copies the shard and its rows up
    and ``z`` back (what the trainer's GPU worker does until it uses ``load``).
CPU kernels (one thread, the unit a Dask worker thread runs) sweep a prefix of ``--cpu-tokens``
tokens of the same corpus, because one CPU sweep of 100 M tokens at K = 10000 takes minutes.

Then a full ``biglda train --backend gpu`` (the CLI, in a subprocess: the embedded cluster
with one worker per GPU) on the synthetic corpus written as a corpus.zarr, ``--train-iterations``
iterations at K = ``--train-topics``; it prints the command, the final log-likelihood per
token, tokens/s of the last iteration and the wall time (``--no-train`` skips it).

It refuses to run without a real GPU (the CUDA simulator does not count): a number
measured on the simulator would mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

DEBIAN = "/work/shared/corpora/debian-descriptions.tsv.gz"


def _fail(msg: str) -> None:
    print(f"bench_gpu: {msg}", file=sys.stderr)
    raise SystemExit(2)


def _need_gpu() -> str:
    from biglda.errors import ConfigError
    from biglda.samplers.backends import require_gpu

    try:
        status = require_gpu()
    except ConfigError as exc:
        _fail(f"needs a CUDA GPU: {exc}")
    if status.simulator:
        _fail("NUMBA_ENABLE_CUDASIM=1 is set: the CUDA simulator is not a GPU; unset it")
    return status.reason


def synthetic(n_tokens: int, n_words: int, seed: int = 0):
    """A synthetic LDA corpus of about ``n_tokens`` tokens: ``(tokens, doc_ptr, n_words)``."""
    from biglda.corpus.synth import SynthSpec, generate

    mean_len = 200
    spec = SynthSpec(n_docs=max(1, n_tokens // mean_len), n_words=n_words, n_topics=100,
                     mean_doc_length=mean_len, alpha=0.1, beta=0.01, seed=seed)
    tokens, doc_ptr, _, _ = generate(spec)
    return np.ascontiguousarray(tokens, np.int32), np.asarray(doc_ptr, np.int64), n_words


def debian(path: str, work: str):
    """The Debian descriptions corpus, ingested with the default settings."""
    from biglda.corpus import Corpus
    from biglda.corpus.ingest import ingest

    out = os.path.join(work, "debian.zarr")
    ingest(path, out, overwrite=True)
    corpus = Corpus.open(out)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    return tokens, np.asarray(corpus.doc_ptr, np.int64), int(corpus.n_words)


def prefix(tokens, doc_ptr, n_tokens: int):
    """The first whole documents holding at most ``n_tokens`` tokens (at least one doc)."""
    d = max(1, int(np.searchsorted(doc_ptr, n_tokens, side="right")) - 1)
    return tokens[: doc_ptr[d]], doc_ptr[: d + 1]


def time_sweeps(sampler, arrays, n_words, n_topics, sweeps, device):
    """Median seconds of ``sweeps`` sweeps after one warm-up sweep."""
    from biglda.samplers import RandomKey, count_from_z, init_z, z_dtype

    tokens, doc_ptr = arrays
    z = init_z(len(tokens), n_topics, RandomKey(0, -1)).astype(z_dtype(n_topics))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    args = [tokens, doc_ptr, z, n_wk, n_k]
    if device:
        import cupy

        args = [cupy.asarray(a) for a in args]
    times, accept = [], None
    for it in range(sweeps + 1):
        t0 = time.perf_counter()
        res = sampler.sweep(*args, 0.1, 0.01, n_words, RandomKey(0, it))
        if device:
            import cupy

            cupy.cuda.runtime.deviceSynchronize()
        if it > 0:  # sweep 0 compiles the kernels
            times.append(time.perf_counter() - t0)
        accept = res.accept_rate
    return statistics.median(times), accept


def time_shard_sweeps(sampler, arrays, n_words, n_topics, sweeps, clock: bool):
    """Median seconds of ``sweeps`` device-resident sweeps (``load`` once, ``sweep_shard``).

    ``clock``: each sweep also does what a device-resident worker does per clock besides
    sampling: applies a pulled delta the size of its own (the delta, then its negation, so
    the counts stay valid) and computes the doc log-likelihood on the device.
    Returns ``(seconds, accept_rate, device bytes held by CuPy's pool)``.
    """
    import cupy

    from biglda.samplers import RandomKey, count_from_z, init_z, z_dtype

    tokens, doc_ptr = arrays
    z = init_z(len(tokens), n_topics, RandomKey(0, -1)).astype(z_dtype(n_topics))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    shard = sampler.load(tokens, doc_ptr, z, n_wk, n_k)
    del z, n_wk, n_k
    times, accept = [], None
    for it in range(sweeps + 1):
        t0 = time.perf_counter()
        res = sampler.sweep_shard(shard, 0.1, 0.01, n_words, RandomKey(0, it))
        if clock:
            d = (res.delta_words, res.delta_topics, res.delta_counts, res.delta_k)
            shard.apply_delta(*d)
            shard.apply_delta(d[0], d[1], -d[2], -d[3])
            shard.doc_loglik(0.1)
        cupy.cuda.runtime.deviceSynchronize()
        if it > 0:  # sweep 0 compiles the kernels and builds the cached orders
            times.append(time.perf_counter() - t0)
        accept = res.accept_rate
    held = int(pool.total_bytes())
    del shard
    pool.free_all_blocks()
    return statistics.median(times), accept, held


def train_gpu(tokens, doc_ptr, n_words: int, work: str, args) -> dict:
    """``biglda train --backend gpu`` on the corpus; its final log-likelihood and speed."""
    import subprocess

    from biglda.corpus import write_corpus

    url = os.path.join(work, "train-corpus.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(n_words)])
    out, metrics = os.path.join(work, "model.zarr"), os.path.join(work, "metrics.jsonl")
    cmd = [sys.executable, "-m", "biglda.cli", "train", url, "--out", out, "-k",
           str(args.train_topics), "--iterations", str(args.train_iterations), "--sampler",
           args.train_sampler, "--backend", "gpu", "--metrics", metrics, "--overwrite"]
    print("$ biglda " + " ".join(cmd[3:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, text=True, capture_output=True)
    wall = time.perf_counter() - t0
    print(proc.stdout, end="")
    if proc.returncode != 0:
        _fail(f"biglda train --backend gpu failed (exit {proc.returncode}): "
              f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
    with open(metrics) as f:
        recs = [json.loads(line) for line in f]
    its = [r for r in recs if r.get("type") == "iteration"]
    last = its[-1]
    rec = {"corpus": "synthetic", "algorithm": args.train_sampler, "backend": "train-gpu",
           "n_topics": args.train_topics, "n_tokens": len(tokens),
           "iterations": len(its), "ll": last["ll"], "ll_per_token": last["ll_per_token"],
           "tokens_per_s": last["tokens_per_s"], "wall_s": wall,
           "backends": last.get("backends")}
    print(f"train --backend gpu: {len(its)} iterations, final LL/token "
          f"{rec['ll_per_token']:.4f} (LL {rec['ll']:.6g}), last iteration "
          f"{rec['tokens_per_s'] / 1e6:.2f} M tokens/s, {wall:.1f} s in all; backends "
          f"{rec['backends']}", flush=True)
    return rec


def run(args) -> list[dict]:
    from biglda.samplers import get_sampler

    device_name = _need_gpu()
    records = []
    with tempfile.TemporaryDirectory() as work:
        corpora = {}
        if args.train_only:
            args.corpora = ["synthetic"]
        if "synthetic" in args.corpora:
            t0 = time.perf_counter()
            corpora["synthetic"] = synthetic(args.tokens, args.words)
            print(f"synthetic: {len(corpora['synthetic'][0]):,} tokens, V={args.words} "
                  f"({time.perf_counter() - t0:.0f} s to generate)", flush=True)
        if "debian" in args.corpora:
            if not os.path.exists(args.debian):
                _fail(f"{args.debian} not found (--debian PATH, or --corpora synthetic)")
            corpora["debian"] = debian(args.debian, work)
            print(f"debian: {len(corpora['debian'][0]):,} tokens, "
                  f"V={corpora['debian'][2]}", flush=True)
        for name, (tokens, doc_ptr, n_words) in corpora.items():
            if args.train_only:
                break
            cpu_arrays = prefix(tokens, doc_ptr, args.cpu_tokens)
            for n_topics in args.topics:
                for algorithm in args.algorithms:
                    gpu = get_sampler(algorithm, "gpu")
                    cells = [("gpu-shard", gpu, (tokens, doc_ptr), "shard"),
                             ("gpu-clock", gpu, (tokens, doc_ptr), "clock"),
                             ("gpu", gpu, (tokens, doc_ptr), True)]
                    if not args.no_host_arrays:  # what a worker passing NumPy arrays gets
                        cells.append(("gpu-host", gpu, (tokens, doc_ptr), False))
                    if not args.no_cpu:
                        cells.append(("cpu", get_sampler(algorithm, "cpu"), cpu_arrays, False))
                    for backend, sampler, arrays, device in cells:
                        held = None
                        if device in ("shard", "clock"):
                            secs, accept, held = time_shard_sweeps(
                                sampler, arrays, n_words, n_topics, args.sweeps,
                                device == "clock")
                        else:
                            secs, accept = time_sweeps(sampler, arrays, n_words, n_topics,
                                                       args.sweeps, device)
                        rec = {"corpus": name, "algorithm": algorithm, "backend": backend,
                               "n_topics": n_topics, "n_tokens": len(arrays[0]),
                               "n_words": n_words, "seconds_per_sweep": secs,
                               "tokens_per_s": len(arrays[0]) / secs,
                               "accept_rate": accept, "device_bytes": held,
                               "device": device_name
                               if backend.startswith("gpu") else platform.processor() or "cpu"}
                        records.append(rec)
                        print(f"{name:9s} K={n_topics:<6d} {algorithm:9s} {backend:8s}: "
                              f"{rec['tokens_per_s'] / 1e6:10.2f} M tokens/s "
                              f"({rec['n_tokens']:,} tokens, {secs:.3f} s/sweep)", flush=True)
        if not args.no_train and "synthetic" in corpora:
            records.append(train_gpu(*corpora["synthetic"], work, args))
    return records


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=100_000_000,
                   help="synthetic corpus size (default 100 M)")
    p.add_argument("--words", type=int, default=50_000, help="synthetic vocabulary size")
    p.add_argument("--topics", type=lambda s: [int(x) for x in s.split(",")],
                   default=[100, 1000, 10000])
    p.add_argument("--algorithms", type=lambda s: s.split(","), default=["cgs", "lightlda"])
    p.add_argument("--corpora", type=lambda s: s.split(","), default=["synthetic", "debian"])
    p.add_argument("--debian", default=DEBIAN)
    p.add_argument("--sweeps", type=int, default=3, help="timed sweeps per cell (median)")
    p.add_argument("--cpu-tokens", type=int, default=5_000_000,
                   help="CPU kernels sweep a prefix of this many tokens")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU kernels")
    p.add_argument("--no-host-arrays", action="store_true",
                   help="skip the GPU cells with NumPy inputs (copies up and back each sweep)")
    p.add_argument("--no-train", action="store_true",
                   help="skip the `biglda train --backend gpu` run")
    p.add_argument("--train-only", action="store_true",
                   help="only the `biglda train --backend gpu` run on the synthetic corpus")
    p.add_argument("--train-topics", type=int, default=100, help="K of the train run")
    p.add_argument("--train-iterations", type=int, default=20,
                   help="iterations of the train run")
    p.add_argument("--train-sampler", default="lightlda", help="sampler of the train run")
    p.add_argument("--quick", action="store_true",
                   help="10 M synthetic tokens, K in {100, 1000}, 2 sweeps")
    p.add_argument("--out", help="write the records to this JSON file")
    args = p.parse_args(argv)
    if args.quick:
        args.tokens, args.topics, args.sweeps = 10_000_000, [100, 1000], 2
        args.cpu_tokens = min(args.cpu_tokens, 1_000_000)
        args.train_iterations = min(args.train_iterations, 5)
    records = run(args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
