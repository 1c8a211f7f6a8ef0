"""The measurement behind ``--sampler auto``: held-out LL per token at equal CPU time, per K.

Usage (from the repository root; TRAIN/TEST from ``biglda ingest`` + ``biglda split``)::

    .venv/bin/python pipelines/auto_rule.py --train TRAIN.zarr --test TEST.zarr \\
        --topics 50 100 300 1000 --checkpoints 5 10 20 40

For each K every sampler (default cgs, warplda, lightlda) trains on the whole training corpus
as one shard on one thread from the same random ``z``, and at each checkpoint of *CPU* seconds
of sampling (``time.thread_time``: the machine is shared, and wall time there measures the
other jobs) its topics are scored by biglda's evaluator: held-out log-likelihood per token by
document completion, as ``compare.py`` scores them (outside the timed part). The samplers
run round-robin, one sweep each in turn, so a change in the machine's load falls on all of
them alike. Prints one Markdown table: held-out LL/token of each sampler at each checkpoint
(sweeps done in brackets), and the best sampler at the last one, per K. ``--json`` writes
every record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from biglda.corpus import Corpus
from biglda.model import evaluate as ev
from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z


def _score(n_wk: np.ndarray, beta: float, alpha: float, test: Corpus, vocab: np.ndarray,
           args: argparse.Namespace) -> float:
    phi = (n_wk.T.astype(np.float64) + beta)
    phi /= phi.sum(axis=1, keepdims=True)
    return ev.heldout_loglik(phi, alpha, test, vocab=vocab, burn_in=args.burn_in,
                             samples=args.samples, n_jobs=1, seed=args.seed).loglik_per_token


def run_k(k: int, tokens: np.ndarray, doc_ptr: np.ndarray, vocab: np.ndarray, test: Corpus,
          args: argparse.Namespace) -> dict:
    """Every sampler at K, round-robin by sweeps, scored at each CPU-time checkpoint."""
    n_words = len(vocab)
    states = {}
    for name in args.samplers:  # compile the kernels outside the timed part
        end = int(doc_ptr[min(200, len(doc_ptr) - 1)])
        zw = init_z(end, k, RandomKey(args.seed, -2))
        nw, nk = count_from_z(tokens[:end], doc_ptr[:201], zw, n_words, k)
        get_sampler(name).sweep(tokens[:end], doc_ptr[:201], zw, nw, nk, args.alpha, args.beta,
                                n_words, RandomKey(args.seed, 0))
    for name in args.samplers:
        z = init_z(len(tokens), k, RandomKey(args.seed, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
        states[name] = {"sampler": get_sampler(name), "z": z, "n_wk": n_wk, "n_k": n_k,
                        "cpu": 0.0, "sweeps": 0, "next": 0, "scores": []}
    checkpoints = sorted(args.checkpoints)
    while any(s["next"] < len(checkpoints) for s in states.values()):
        for name, s in states.items():
            if s["next"] >= len(checkpoints):
                continue
            t = time.thread_time()
            s["sampler"].sweep(tokens, doc_ptr, s["z"], s["n_wk"], s["n_k"], args.alpha,
                               args.beta, n_words, RandomKey(args.seed, s["sweeps"] + 1))
            s["cpu"] += time.thread_time() - t
            s["sweeps"] += 1
            while s["next"] < len(checkpoints) and s["cpu"] >= checkpoints[s["next"]]:
                ll = _score(s["n_wk"], args.beta, args.alpha, test, vocab, args)
                s["scores"].append({"checkpoint": checkpoints[s["next"]], "cpu_s": s["cpu"],
                                    "sweeps": s["sweeps"], "heldout_ll_per_token": ll})
                print(f"K={k} {name}: {s['cpu']:.1f} CPU s, {s['sweeps']} sweeps, "
                      f"held-out LL/token {ll:.4f}", file=sys.stderr, flush=True)
                s["next"] += 1
    return {"k": k, "samplers": {n: s["scores"] for n, s in states.items()},
            "tokens_per_cpu_s": {n: len(tokens) * s["sweeps"] / s["cpu"]
                                 for n, s in states.items()}}


def table(results: list[dict], args: argparse.Namespace) -> str:
    cps = sorted(args.checkpoints)
    lines = ["| K | sampler | " + " | ".join(f"{c:g} CPU s" for c in cps) +
             " | tokens/CPU s | best at the end |",
             "|---|---|" + "---|" * (len(cps) + 2)]
    for r in results:
        finals = {n: sc[-1]["heldout_ll_per_token"] for n, sc in r["samplers"].items()}
        best = max(finals, key=finals.get)
        for n, sc in r["samplers"].items():
            cells = [f"{c['heldout_ll_per_token']:.4f} ({c['sweeps']})" for c in sc]
            lines.append(f"| {r['k']} | {n} | " + " | ".join(cells) +
                         f" | {r['tokens_per_cpu_s'][n] / 1e6:.2f} M | "
                         f"{'**best**' if n == best else f'{finals[n] - finals[best]:+.4f}'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--topics", type=int, nargs="+", default=[50, 100, 1000])
    ap.add_argument("--checkpoints", type=float, nargs="+", default=[5, 10, 20, 40],
                    help="CPU seconds of sampling at which each sampler is scored")
    ap.add_argument("--samplers", nargs="+", default=["cgs", "warplda", "lightlda"])
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--beta", type=float, default=0.01)
    ap.add_argument("--burn-in", type=int, default=20)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    train, test = Corpus.open(args.train), Corpus.open(args.test)
    tokens = np.ascontiguousarray(train.read_tokens(0, train.n_tokens), dtype=np.int32)
    doc_ptr = np.ascontiguousarray(train.doc_ptr, dtype=np.int64)
    vocab = np.asarray(train.vocab)
    results = [run_k(k, tokens, doc_ptr, vocab, test, args) for k in args.topics]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    print(f"Train {train.n_docs:,} docs / {train.n_tokens:,} tokens, V = {train.n_words:,}; "
          f"one thread, alpha {args.alpha}, beta {args.beta}; held-out LL/token (sweeps).")
    print(table(results, args), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
