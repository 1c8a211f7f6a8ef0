"""Managed communication (``--comm-budget``) against plain SSP and BSP (issue 15, item 3).

One command::

    .venv/bin/python pipelines/bench_comm.py --corpus runs/synth2m.zarr --topics 100 \\
        --iterations 12 --budgets 5 50 --repeats 2 --out runs/bench_comm

2 worker processes. Runs BSP, SSP (``--staleness``, default 2) and both with each budget in
``--budgets`` (MB/s per worker process), without and with one worker slowed 2x (shard 1
sleeps, per clock, as long as one worker's sweep takes in BSP: measured first). Prints, per
configuration, the median over ``--repeats`` rounds (each round runs every configuration
once, so a change of load falls on all alike): LL/token after chosen clocks, at equal wall
time (the shortest run's training time in its group), the wall time, tokens/s and the early
bytes per token. Writes every run's curve to ``comm.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

import numpy as np
from bench_train import run


def configs(staleness: float, budgets: list[float]) -> list[tuple[str, dict]]:
    """The configurations: (name, training settings)."""
    s = "inf" if math.isinf(staleness) else f"{staleness:g}"
    out = [("BSP", dict(staleness=0)), (f"SSP s={s}", dict(staleness=staleness))]
    for b in budgets:
        out.append((f"SSP s={s} + {b:g} MB/s", dict(staleness=staleness, comm_budget=b)))
        out.append((f"BSP + {b:g} MB/s", dict(staleness=0, comm_budget=b)))
    return out


def ll_at(curve: list[tuple[int, float, float]], t: float) -> float:
    """LL/token at training time ``t``, linear between the iterations around it."""
    c = np.asarray(curve, dtype=float)
    return float(np.interp(t, c[:, 1], c[:, 2]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--staleness", type=float, default=2)
    ap.add_argument("--budgets", type=float, nargs="+", default=[5.0, 50.0])
    ap.add_argument("--sampler", default="auto")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--at", type=int, nargs="+", default=[1, 2, 4, 8],
                    help="clocks to print LL/token after (and the last)")
    args = ap.parse_args(argv)
    from biglda.corpus import Corpus

    n_tokens = Corpus.open(args.corpus).n_tokens
    os.makedirs(args.out, exist_ok=True)
    store = os.path.join(args.out, "model.zarr")
    common = dict(n_topics=args.topics, iterations=args.iterations, sampler=args.sampler,
                  workers=2, threads_per_worker=1, seed=0)
    records, _, _ = run(args.corpus, store, **(common | dict(iterations=4)))
    sleep = statistics.median(r["kernel_s"] / 2 for r in records[1:])
    print(f"one worker's sweep takes {sleep:.2f} s: the slowed worker sleeps that long per "
          f"clock", file=sys.stderr, flush=True)
    cases = [(f"{name}{', slowed 2x' if slow else ''}", kw | (
        dict(slow_shards={1: sleep}) if slow else {}))
        for slow in (False, True) for name, kw in configs(args.staleness, args.budgets)]
    runs: dict[str, list[dict]] = {name: [] for name, _ in cases}
    for _ in range(args.repeats):
        for name, kw in cases:
            records, wall, _ = run(args.corpus, store, **(common | kw))
            runs[name].append({
                "wall_s": wall, "train_s": records[-1]["elapsed"],
                "curve": [(r["iteration"], r["elapsed"], r["ll_per_token"]) for r in records],
                "tokens_per_s": statistics.median(r["tokens_per_s"] for r in records[2:]),
                "early_sent": sum(r.get("bytes_early_sent", 0) for r in records),
                "pushed": sum(r["bytes_pushed"] for r in records)})
            print(f"{name}: {records[-1]['elapsed']:.1f} s, LL/token "
                  f"{records[-1]['ll_per_token']:.4f}", file=sys.stderr, flush=True)
    with open(os.path.join(args.out, "comm.json"), "w") as f:
        json.dump({"n_tokens": n_tokens, "topics": args.topics, "sleep_s": sleep,
                   "iterations": args.iterations, "runs": runs}, f, indent=1)
    at = sorted({c for c in args.at if c < args.iterations} | {args.iterations})
    for slowed in (False, True):
        group = [n for n in runs if n.endswith("slowed 2x") == slowed]
        t_eq = min(statistics.median(r["train_s"] for r in runs[n]) for n in group)
        print(f"\n{'one worker slowed 2x' if slowed else 'no worker slowed'} "
              f"(median of {args.repeats}; equal time = {t_eq:.1f} s)\n")
        print("| configuration | " + " | ".join(f"LL after {c}" for c in at)
              + f" | LL at {t_eq:.1f} s | training s | tokens/s | early B/token |")
        print("|---|" + "---|" * (len(at) + 4))
        for n in group:
            rs = runs[n]

            def med(f, rs=rs):
                return statistics.median(f(r) for r in rs)

            cells = [f"{med(lambda r, c=c: r['curve'][c - 1][2]):.4f}" for c in at]
            print(f"| {n.replace(', slowed 2x', '')} | " + " | ".join(cells)
                  + f" | {med(lambda r, t=t_eq: ll_at(r['curve'], t)):.4f}"
                  f" | {med(lambda r: r['train_s']):.1f}"
                  f" | {med(lambda r: r['tokens_per_s']) / 1e6:.2f} M"
                  f" | {med(lambda r: r['early_sent'] / (n_tokens * args.iterations)):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
