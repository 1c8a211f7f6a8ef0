"""Benchmark: the same training with and without throughput balancing on a mixed cluster.

    python pipelines/bench_hetero.py              # --mode auto: gpu if a GPU works, else slow
    python pipelines/bench_hetero.py --mode slow  # 2 CPU workers, one slowed to ~2x
    python pipelines/bench_hetero.py --mode sim   # a CPU worker + a CUDA-simulator worker
    python pipelines/bench_hetero.py --mode gpu   # the embedded GPU + CPU cluster (--backend auto)

Both runs use the same cluster, corpus, seed and shard plan (``--shards-per-worker`` shards per
worker thread); only ``balance`` differs ("none" vs "throughput"). With "throughput" the driver
measures each worker's tokens/s over clock 1 (clock 0 compiles and fills caches), restarts
from a checkpoint at clock 2 with the shards placed in proportion to it, and goes on.

Printed per run, over the iterations after the balance (the same iterations in both runs):
* clock spread — per iteration, the slowest worker's busy time minus the fastest's (busy:
  clock time minus SSP wait, summed over the worker's shards); under BSP, how long the fastest
  worker sits idle (``biglda.trainer.metrics.clock_spread_s``): mean and median;
* tokens/s — corpus tokens x those iterations / their wall time;
* the tokens each worker holds at the end, and the whole run's wall time (the balanced one
  pays one restart).

Modes: ``slow`` sleeps on one worker after each of its shards' sweeps for as long as a shard's
clock took in a calibration run (``slow_workers``), so that worker is ~2x slower; ``sim`` runs
the GPU sampler on numba's CUDA simulator on one worker (orders of magnitude slower than a
CPU worker: keep the corpus tiny); ``gpu`` needs a real GPU (one worker per GPU plus CPU workers).
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


def _fail(msg: str) -> None:
    print(f"bench_hetero: {msg}", file=sys.stderr)
    raise SystemExit(2)


def make_corpus(work: str, docs: int, words: int, length: float, seed: int) -> str:
    from biglda.corpus import write_corpus
    from biglda.corpus.synth import SynthSpec, generate

    spec = SynthSpec(n_docs=docs, n_words=words, n_topics=20, mean_doc_length=length,
                     alpha=0.1, beta=0.01, seed=seed)
    tokens, doc_ptr, _, _ = generate(spec)
    url = os.path.join(work, "corpus.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(words)],
                 chunk_tokens=max(256, len(tokens) // 64))
    return url


def one_run(client, url: str, out: str, args, balance: str, **extra) -> dict:
    from biglda.trainer.config import TrainConfig, validate
    from biglda.trainer.run import run_training

    cfg = TrainConfig(n_topics=args.topics, iterations=args.iterations, sampler=args.sampler,
                      seed=args.seed, checkpoint_every=args.iterations, top_words_every=0,
                      balance=balance, rebalance_after=0, n_shards=args.n_shards,
                      call_timeout=300.0, **extra)
    records: list[dict] = []
    t0 = time.perf_counter()
    r = run_training(client, validate(url, None, cfg, False), cfg, out=out,
                     on_record=[records.append])
    wall = time.perf_counter() - t0
    its = [x for x in records if x["type"] == "iteration"]
    first = args.balance_after + 1  # iterations after the balance clock
    window = [x for x in its if x["iteration"] > first]
    t_start = next(x["elapsed"] for x in its if x["iteration"] == first)
    n_tokens = sum(s.n_tokens for s in r.shards)
    tokens = {}
    for s in r.shards:
        tokens[r.placement[s.index]] = tokens.get(r.placement[s.index], 0) + s.n_tokens
    spreads = [x["clock_spread_s"] for x in window]
    # seconds per token of each worker over the window: how unequal the workers really are
    per_token = {}
    for x in window:
        for w, busy in x["busy_s_per_worker"].items():
            acc = per_token.setdefault(w, [0.0, 0])
            acc[0] += busy
            acc[1] += x["tokens_per_worker"][w]
    speed = {w: b / max(n, 1) for w, (b, n) in per_token.items()}
    return {"balance": balance, "wall_s": wall, "iterations": len(its),
            "measured_iterations": [window[0]["iteration"], window[-1]["iteration"]],
            "clock_spread_mean_s": statistics.fmean(spreads),
            "clock_spread_median_s": statistics.median(spreads),
            "tokens_per_s": n_tokens * len(window) / (window[-1]["elapsed"] - t_start),
            "tokens_per_worker": tokens, "backends": its[-1]["backends"],
            "slowdown": max(speed.values()) / min(speed.values()) if speed else 1.0,
            "rebalances": [e.clock for e in r.rebalances], "ll_per_token": its[-1]["ll_per_token"]}


def calibrate_slow(client, url: str, work: str, args, **extra) -> float:
    """Seconds a shard's clock takes with no slow worker (median over workers and clocks)."""
    from biglda.trainer.config import TrainConfig, validate
    from biglda.trainer.run import run_training

    cfg = TrainConfig(n_topics=args.topics, iterations=3, sampler=args.sampler, seed=args.seed,
                      checkpoint_every=0, top_words_every=0, balance="none",
                      n_shards=args.n_shards, **extra)
    records: list[dict] = []
    r = run_training(client, validate(url, None, cfg, False), cfg,
                     out=os.path.join(work, "calib.zarr"), on_record=[records.append])
    per_worker = {}
    for s in r.shards:
        per_worker[r.placement[s.index]] = per_worker.get(r.placement[s.index], 0) + 1
    per_shard = [busy / per_worker[w] for x in records if x.get("type") == "iteration"
                 and x["iteration"] > 1 for w, busy in x["busy_s_per_worker"].items()]
    return statistics.median(per_shard)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=("auto", "slow", "sim", "gpu"), default="auto")
    p.add_argument("--docs", type=int, default=None, help="synthetic documents")
    p.add_argument("--words", type=int, default=2000, help="vocabulary size")
    p.add_argument("--doc-length", type=float, default=100.0)
    p.add_argument("--topics", type=int, default=50)
    p.add_argument("--sampler", default="lightlda")
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--shards-per-worker", type=int, default=4)
    p.add_argument("--balance-after", type=int, default=2)
    p.add_argument("--slow-s", type=float, default=None,
                   help="slow mode: seconds of sleep per shard-clock (default: calibrated to 2x)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write the results as JSON here")
    args = p.parse_args(argv)

    import logging

    # distributed logs at INFO by its config; its import reads this (the workers inherit it)
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    logging.basicConfig(level=logging.WARNING)
    from distributed import Client

    from biglda.samplers.backends import gpu_status
    from biglda.trainer.cluster import connect, start_local_cluster

    status = gpu_status()
    mode = args.mode
    if mode == "auto":
        mode = "gpu" if status.usable and not status.simulator else "slow"
    if mode == "gpu" and not (status.usable and not status.simulator):
        _fail(f"--mode gpu needs a real GPU: {status.reason}")
    if args.docs is None:
        args.docs = {"sim": 40, "slow": 10_000, "gpu": 200_000}[mode]
        if mode == "sim":
            args.doc_length, args.topics, args.words = 20.0, 8, 100
    results = {"mode": mode, "date": time.strftime("%Y-%m-%d %H:%M"),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.node()}",
               "load_before": os.getloadavg(), "gpu": status.reason, "args": vars(args)}
    with tempfile.TemporaryDirectory() as work:
        url = make_corpus(work, args.docs, args.words, args.doc_length, args.seed)
        extra: dict = {}
        if mode == "gpu":
            ctx = connect(backend="auto")
            extra["backend"] = "auto"
        elif mode == "sim":
            cluster = start_local_cluster(1, 1, [{"NUMBA_ENABLE_CUDASIM": "1"}])
            ctx = Client(cluster, direct_to_workers=True)
        else:
            cluster = start_local_cluster(2, 1)
            ctx = Client(cluster, direct_to_workers=True)
        with ctx as client:
            workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
            n_threads = sum(w["nthreads"] for w in
                            client.scheduler_info(n_workers=-1)["workers"].values())
            args.n_shards = args.shards_per_worker * n_threads
            if mode == "sim":
                env = client.run(lambda: os.environ.get("NUMBA_ENABLE_CUDASIM", ""))
                slow = next(w for w, v in env.items() if v == "1")
                extra["worker_backends"] = {slow: "gpu"}
                results["slow_worker"] = slow
            # a warm-up run on the same cluster (kernels compiled, modules imported), so that
            # neither measured run pays for it; in slow mode it also measures a shard's clock
            per_shard_s = calibrate_slow(client, url, work, args, **extra)
            if mode == "slow":
                slow = workers[1]
                slow_s = args.slow_s if args.slow_s is not None else per_shard_s
                extra["slow_workers"] = {slow: slow_s}
                results["slow_worker"], results["slow_s_per_shard_clock"] = slow, slow_s
            results["runs"] = [one_run(client, url, os.path.join(work, f"{b}.zarr"), args, b,
                                       **extra) for b in ("none", "throughput")]
        if mode in ("sim", "slow"):
            cluster.close()
    results["load_after"] = os.getloadavg()
    _print(results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


def _print(res: dict) -> None:
    a = res["args"]
    print(f"bench_hetero {res['date']}  mode {res['mode']}  {res['machine']}  load "
          f"{res['load_before'][0]:.2f} -> {res['load_after'][0]:.2f}")
    print(f"corpus: {a['docs']:,} docs x {a['doc_length']:g} tokens, V={a['words']}, "
          f"K={a['topics']}, {a['sampler']}, {a['iterations']} iterations, {a['n_shards']} "
          f"shards, balance after {a['balance_after']} clocks")
    if "slow_s_per_shard_clock" in res:
        print(f"slow worker {res['slow_worker']}: +{res['slow_s_per_shard_clock']:.3f} s per "
              "shard-clock (a shard's clock time in the warm-up run)")
    elif "slow_worker" in res:
        print(f"simulator worker {res['slow_worker']} runs the GPU sampler")
    none, thr = res["runs"]
    its = none["measured_iterations"]
    rows = [
        (f"clock spread, mean (s), it. {its[0]}-{its[1]}", "clock_spread_mean_s", "{:.3f}"),
        ("clock spread, median (s)", "clock_spread_median_s", "{:.3f}"),
        (f"tokens/s, it. {its[0]}-{its[1]}", "tokens_per_s", "{:,.0f}"),
        ("wall time, whole run (s)", "wall_s", "{:.1f}"),
        ("slowest/fastest worker, s per token", "slowdown", "{:.1f}x"),
        ("rebalanced at clock", "rebalances", "{}"),
        ("final LL/token", "ll_per_token", "{:.4f}"),
    ]
    print(f"{'':34s} {'balance=none':>18s} {'balance=throughput':>20s}")
    for label, key, fmt in rows:
        print(f"{label:34s} {fmt.format(none[key]):>18s} {fmt.format(thr[key]):>20s}")
    for w in sorted(set(none["tokens_per_worker"]) | set(thr["tokens_per_worker"])):
        b = thr["backends"].get(w) or none["backends"].get(w, "?")
        label = f"tokens on {w} ({b})"
        print(f"{label:34s} {none['tokens_per_worker'].get(w, 0):>18,d} "
              f"{thr['tokens_per_worker'].get(w, 0):>20,d}")


if __name__ == "__main__":
    raise SystemExit(main())
