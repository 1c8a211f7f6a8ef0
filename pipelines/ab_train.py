"""A/B of two trainings, alternating: ``biglda train`` from two checkouts, or with two flag sets.

The VM this project is measured on moves a run's speed by ±15% within minutes, so one run of
each variant says little. This runs A, B, A, B, ... ``--rounds`` times, each a fresh
``biglda train`` (its own embedded cluster) writing its metrics, and prints per run and in
all the median tokens/s over the iterations after ``--skip``, the kernel CPU, the wait and
the clock (summed over the workers' shards, as the records have them), and the last LL/token::

    git worktree add /tmp/base d9379bc
    .venv/bin/python pipelines/ab_train.py --corpus runs/synth4m.zarr --a /tmp/base \\
        --rounds 6 -- -k 100 --iterations 20 --workers 2 --threads-per-worker 1 --sampler cgs
    .venv/bin/python pipelines/ab_train.py --corpus runs/synth4m.zarr \\
        --flags-a "--turn-windows 1" --flags-b "--turn-windows 2" --rounds 3 -- -k 100 \\
        --iterations 20 --workers 2 --threads-per-worker 1 --sampler cgs

``--a`` / ``--b``: the checkout each variant's ``biglda`` is imported from (default: this
one); the flags after ``--`` go to both. Each variant compiles its kernels into a numba
cache of its own, fresh, in a first run of 2 iterations that is not measured: numba checks
a cached kernel against its own file only, not its callees' in other files, so a checkout's
``__pycache__`` can hold kernels compiled from older sources. The same code in this
checkout and in a fresh worktree still ran 0.89x–0.99x, the worktree faster in either
order (pipelines/README.md, "Twenty-third session"): compare two worktrees, or run both
orders and read the gain against that.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def summary(records: list[dict], skip: int) -> dict[str, float]:
    """Medians of a run's iteration records after the first ``skip``, and its last LL/token.

    >>> recs = [{"type": "iteration", "tokens_per_s": t, "kernel_cpu_s": 1.0, "wait_s": 0.1,
    ...          "clock_s": 2.0, "ll_per_token": -t} for t in (1.0, 5.0, 3.0, 4.0)]
    >>> summary(recs, 1)["tokens_per_s"], summary(recs, 1)["ll_per_token"]
    (4.0, -4.0)
    """
    its = [r for r in records if r.get("type") == "iteration"][skip:]
    if not its:
        raise SystemExit(f"ab_train.py: no iteration after the first {skip}")
    out = {k: statistics.median(float(r[k]) for r in its)
           for k in ("tokens_per_s", "kernel_cpu_s", "wait_s", "clock_s")}
    out["ll_per_token"] = float(its[-1]["ll_per_token"])
    return out


def run(checkout: Path, corpus: str, flags: list[str], out: Path, cache: Path) -> list[dict]:
    """One ``biglda train`` imported from ``checkout``, kernels cached in ``cache``; its records."""
    metrics = out / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(checkout), NUMBA_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-m", "biglda.cli", "train", corpus, *flags,
           "--out", str(out / "model.zarr"), "--overwrite", "--metrics", str(metrics),
           "--checkpoint-every", "0"]
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"ab_train.py: {shlex.join(cmd)} failed: "
                         f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--a", default=str(HERE), help="checkout of variant A (default: this one)")
    ap.add_argument("--b", default=str(HERE), help="checkout of variant B (default: this one)")
    ap.add_argument("--flags-a", default="", help="flags of A only")
    ap.add_argument("--flags-b", default="", help="flags of B only")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--skip", type=int, default=5, help="iterations left out of the medians")
    ap.add_argument("flags", nargs=argparse.REMAINDER, help="-- then flags for both")
    args = ap.parse_args()
    common = [f for f in args.flags if f != "--"]
    corpus = str(Path(args.corpus).resolve())
    variants = {"A": (Path(args.a).resolve(), shlex.split(args.flags_a)),
                "B": (Path(args.b).resolve(), shlex.split(args.flags_b))}
    got: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="ab_train_") as tmp:
        caches = {name: Path(tmp) / f"numba-{name}" for name in variants}
        for name, (checkout, flags) in variants.items():  # (the kernels' JIT, not measured)
            run(checkout, corpus, [*common, *flags, "--iterations", "2"], Path(tmp), caches[name])
        for r in range(1, args.rounds + 1):
            for name, (checkout, flags) in variants.items():
                s = summary(run(checkout, corpus, [*common, *flags], Path(tmp), caches[name]),
                            args.skip)
                got[name].append(s)
                print(f"{name} round {r}: {s['tokens_per_s'] / 1e6:.2f} M tokens/s, kernel "
                      f"CPU {s['kernel_cpu_s']:.4f} s, wait {s['wait_s']:.4f} s, clock "
                      f"{s['clock_s']:.4f} s, LL/token {s['ll_per_token']:.4f}", flush=True)
    a = [s["tokens_per_s"] for s in got["A"]]
    b = [s["tokens_per_s"] for s in got["B"]]
    per = [y / x for x, y in zip(a, b, strict=True)]
    print(f"B vs A, tokens/s: {statistics.median(b) / statistics.median(a):.2f}x "
          f"(rounds {min(per):.2f} – {max(per):.2f}); A median {statistics.median(a) / 1e6:.2f} "
          f"M, B {statistics.median(b) / 1e6:.2f} M")


if __name__ == "__main__":
    main()
