"""Benchmark of distributed training on the Debian descriptions corpus.

Sections (``--section``, default all):

* ``scaling`` — LightLDA at K = 1000: tokens/s on 1 worker, 2 workers, and 1 worker with 2
  threads; the parameter-server overhead (the share of each clock spent outside the sampling
  kernel: waiting, pulling, pushing, log-likelihood, checkpoint); tokens per CPU-second of the
  kernel (a rate that does not depend on how busy other processes keep the cores).
* ``tomotopy`` — end to end against ``tomotopy.LDAModel(workers=2)``: tomotopy trains
  ``--tomotopy-iterations`` sweeps; its final state is scored with *our* joint log-likelihood
  (Griffiths & Steyvers: log p(w, z), the same formula, the same tokens, the same alpha/beta,
  alpha optimisation off), and we report how long biglda on 2 workers takes, from the call to
  ``train`` (cluster start included), to reach that log-likelihood.
* ``ssp`` — one of two workers slowed 2x (it sleeps as long as its sweep took in a BSP run);
  staleness 0, 1, 2, 4, inf: LL per token against wall time (JSON + PNG).

Usage::

    .venv/bin/python pipelines/bench_train.py                       # everything
    .venv/bin/python pipelines/bench_train.py --section scaling --iterations 12

The corpus is ingested from ``--source`` into ``runs/bench/debian.zarr`` (262,144-token
chunks so it can be cut into several shards) unless it exists. Results go to ``runs/bench/``.
Needs ``tomotopy`` and ``matplotlib`` for their sections (benchmark-only dependencies).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = "/work/shared/corpora/debian-descriptions.tsv.gz"


def ensure_corpus(url: str, source: str) -> str:
    if not os.path.exists(url):
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "biglda"), "ingest",
                        source, "--format", "tsv", "--out", url, "--chunk-tokens", "262144"],
                       check=True)
    return url


def run(corpus: str, out: str, **kw) -> tuple[list[dict], float, list[float]]:
    """Train; return (iteration records, wall seconds of the call, arrival time of each record)."""
    from biglda.model.training import train_to_store as train

    records: list[dict] = []
    arrivals: list[float] = []
    t0 = time.time()

    def cb(rec: dict) -> None:
        if rec["type"] == "iteration":
            records.append(rec)
            arrivals.append(time.time() - t0)

    train(corpus, out, overwrite=True, checkpoint_every=0, on_record=cb, **kw)
    return records, time.time() - t0, arrivals


def steady(records: list[dict], skip: int = 2) -> dict:
    """Medians over the iterations after the first ``skip`` (JIT, first full-row pull)."""
    rs = records[skip:] or records

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rs)

    return {key: med(key) for key in (
        "tokens_per_s", "ps_overhead", "kernel_s", "clock_s", "wait_s", "pull_s", "push_s",
        "ll_s", "bytes_pulled", "bytes_pushed", "kernel_cpu_s", "process_cpu_s")} | {
        "final_ll_per_token": records[-1]["ll_per_token"]}


def section_scaling(args, corpus: str, n_tokens: int) -> dict:
    results = {}
    configs = [("1 worker", dict(workers=1, threads_per_worker=1)),
               ("2 workers", dict(workers=2, threads_per_worker=1)),
               ("1 worker x 2 threads", dict(workers=1, threads_per_worker=2))]
    for name, cfg in configs:
        records, wall, _ = run(corpus, os.path.join(args.out_dir, "scaling.zarr"),
                               n_topics=args.topics, iterations=args.iterations,
                               sampler="lightlda", seed=0, **cfg)
        s = steady(records)
        s["tokens_per_kernel_cpu_s"] = n_tokens / s["kernel_cpu_s"]
        s["wall_s"] = wall
        results[name] = s
        print(f"{name:>22}: {s['tokens_per_s'] / 1e6:6.2f} M tokens/s, PS overhead "
              f"{s['ps_overhead']:.1%} (kernel {s['kernel_s']:.2f} s of {s['clock_s']:.2f} s "
              f"shard-clock seconds; wait {s['wait_s']:.2f}, pull {s['pull_s']:.2f}, push "
              f"{s['push_s']:.2f}, LL {s['ll_s']:.2f}), {s['tokens_per_kernel_cpu_s'] / 1e6:.2f} M "
              f"tokens per kernel CPU-second, LL/token {s['final_ll_per_token']:.4f}",
              flush=True)
    base = results["1 worker"]["tokens_per_s"]
    for name in ("2 workers", "1 worker x 2 threads"):
        results[name]["speedup"] = results[name]["tokens_per_s"] / base
        print(f"speedup {name} vs 1 worker: {results[name]['speedup']:.2f}x", flush=True)
    return results


def joint_ll_of_tomotopy(model, corpus) -> float:
    """Our joint log p(w, z) of tomotopy's current assignments."""
    from biglda.samplers import count_from_z, joint_loglik

    ids = np.array([int(w[1:]) for w in model.used_vocabs])
    toks, zs, lens = [], [], []
    for doc in model.docs:
        toks.append(ids[np.asarray(doc.words)])
        zs.append(np.asarray(doc.topics))
        lens.append(len(doc.words))
    tokens = np.concatenate(toks).astype(np.int32)
    z = np.concatenate(zs).astype(np.uint16)
    doc_ptr = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=doc_ptr[1:])
    k = model.k
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, corpus.n_words, k)
    return joint_loglik(doc_ptr, z, n_wk, n_k, np.full(k, 0.1), 0.01,
                        corpus.n_words)


def run_tomotopy(args, corpus) -> dict:
    import warnings

    import tomotopy as tp

    tokens = corpus.read_tokens(0, corpus.n_tokens)
    words = np.array([f"w{i}" for i in range(corpus.n_words)])
    k = args.tomotopy_topics
    t0 = time.time()
    model = tp.LDAModel(k=k, alpha=0.1, eta=0.01, seed=0)
    model.optim_interval = 0
    for d in range(corpus.n_docs):
        model.add_doc(list(words[tokens[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]]]))
    curve = []
    scoring = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "results may differ with workers != 1"
        model.train(0, workers=2)
        t_load = time.time() - t0
        done = 0
        while done < args.tomotopy_iterations:
            model.train(20, workers=2)
            done += 20
            t_s = time.time()
            ll = joint_ll_of_tomotopy(model, corpus)
            scoring += time.time() - t_s
            # scoring time is ours, not tomotopy's: take it out of its clock
            curve.append((done, time.time() - t0 - scoring, ll))
            print(f"tomotopy K={k}: {done} its, {curve[-1][1]:.1f} s, joint LL/token "
                  f"{ll / corpus.n_tokens:.4f}", flush=True)
    return {"topics": k, "iterations": args.tomotopy_iterations, "wall_s": curve[-1][1],
            "load_s": t_load, "ll": curve[-1][2], "ll_per_token": curve[-1][2] / corpus.n_tokens,
            "curve": curve}


def section_tomotopy(args, corpus_url: str) -> dict:
    from biglda.corpus import Corpus

    corpus = Corpus.open(corpus_url)
    cached = os.path.join(args.out_dir, "tomotopy_reference.json")
    tt = None
    if args.reuse_tomotopy and os.path.exists(cached):
        with open(cached) as f:
            tt = json.load(f)
        if (tt["topics"], tt["iterations"]) != (args.tomotopy_topics, args.tomotopy_iterations):
            tt = None
    if tt is None:
        tt = run_tomotopy(args, corpus)
        with open(cached, "w") as f:
            json.dump(tt, f)
    print(f"tomotopy LDAModel(workers=2) K={tt['topics']}: {tt['iterations']} its in "
          f"{tt['wall_s']:.1f} s (corpus load {tt['load_s']:.1f} s included), joint LL/token "
          f"{tt['ll_per_token']:.4f}", flush=True)
    res = {"tomotopy": tt, "biglda": {}}
    for sampler in args.chase_samplers.split(","):
        records, wall, arrivals = run(corpus_url, os.path.join(args.out_dir, "tomotopy-cmp.zarr"),
                                      n_topics=tt["topics"], iterations=args.max_iterations,
                                      sampler=sampler, workers=2, seed=0)
        reached = next((i for i, r in enumerate(records) if r["ll"] >= tt["ll"]), None)
        res["biglda"][sampler] = {
            "iterations_run": len(records), "wall_s": wall,
            "final_ll_per_token": records[-1]["ll_per_token"],
            "reached_at_iteration": None if reached is None else reached + 1,
            "seconds_to_reach": None if reached is None else arrivals[reached],
            "curve": [(r["iteration"], a, r["ll_per_token"])
                      for r, a in zip(records, arrivals, strict=True)],
        }
        at_tt = [r for r, a in zip(records, arrivals, strict=True) if a <= tt["wall_s"]]
        where = (f"; at tomotopy's {tt['wall_s']:.0f} s it was at iteration "
                 f"{at_tt[-1]['iteration']}, LL/token {at_tt[-1]['ll_per_token']:.4f}"
                 if at_tt else "")
        if reached is None:
            print(f"biglda {sampler} (2 workers): did not reach tomotopy's LL/token in "
                  f"{len(records)} iterations ({wall:.1f} s; final "
                  f"{records[-1]['ll_per_token']:.4f}){where}", flush=True)
        else:
            print(f"biglda {sampler} (2 workers): reached tomotopy's LL/token at iteration "
                  f"{reached + 1} after {arrivals[reached]:.1f} s end to end (cluster start "
                  f"included){where}", flush=True)
    return res


def section_ssp(args, corpus: str) -> dict:
    # how long a shard's sweep takes in BSP: the slowed worker sleeps that long again (2x)
    records, _, _ = run(corpus, os.path.join(args.out_dir, "ssp.zarr"), n_topics=args.topics,
                        iterations=4, sampler="lightlda", workers=2, seed=0)
    sweep = statistics.median(r["kernel_s"] / 2 for r in records[1:])
    print(f"ssp: one worker's sweep takes {sweep:.2f} s; shard 1 sleeps that long per clock",
          flush=True)
    res = {"sleep_s": sweep, "runs": {}}
    for s in (0, 1, 2, 4, math.inf):
        records, wall, _arrivals = run(corpus, os.path.join(args.out_dir, "ssp.zarr"),
                                       n_topics=args.topics, iterations=args.iterations,
                                       sampler="lightlda", workers=2, seed=0, staleness=s,
                                       slow_shards={1: sweep})
        name = "inf" if math.isinf(s) else str(s)
        res["runs"][name] = {
            "wall_s": wall,
            "curve": [(r["iteration"], r["elapsed"], r["ll_per_token"]) for r in records],
            "max_clock_spread": max(r["clock_spread"] for r in records),
        }
        print(f"ssp s={name:>3}: {args.iterations} its in {records[-1]['elapsed']:.1f} s of "
              f"training, final LL/token {records[-1]['ll_per_token']:.4f}, max clock spread "
              f"{res['runs'][name]['max_clock_spread']}", flush=True)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, r in res["runs"].items():
            c = np.array(r["curve"])
            ax.plot(c[:, 1], c[:, 2], marker="o", ms=3, label=f"s = {name}")
        ax.set_xlabel("training wall time (s)")
        ax.set_ylabel("log-likelihood per token")
        ax.set_title(f"SSP vs BSP, K={args.topics}, 2 workers, one slowed 2x")
        ax.legend()
        fig.tight_layout()
        png = os.path.join(args.out_dir, "ssp.png")
        fig.savefig(png, dpi=120)
        res["png"] = png
        print(f"wrote {png}", flush=True)
    except ImportError:
        print("matplotlib is not installed: no PNG", flush=True)
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--section", choices=("scaling", "tomotopy", "ssp", "all"), default="all")
    p.add_argument("--corpus", default=os.path.join(ROOT, "runs/bench/debian.zarr"))
    p.add_argument("--source", default=SOURCE)
    p.add_argument("--out-dir", default=os.path.join(ROOT, "runs/bench"))
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--tomotopy-topics", type=int, default=100)
    p.add_argument("--tomotopy-iterations", type=int, default=200)
    p.add_argument("--max-iterations", type=int, default=300,
                   help="biglda iterations at most when chasing tomotopy's LL")
    p.add_argument("--chase-samplers", default="lightlda,cgs",
                   help="biglda samplers that chase tomotopy's LL (comma-separated)")
    p.add_argument("--reuse-tomotopy", action="store_true",
                   help="reuse runs/bench/tomotopy_reference.json from an earlier run")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.makedirs(args.out_dir, exist_ok=True)
    corpus = ensure_corpus(args.corpus, args.source)
    from biglda.corpus import Corpus

    c = Corpus.open(corpus)
    print(f"corpus {corpus}: {c.n_docs:,} docs, {c.n_tokens:,} tokens, V={c.n_words:,}; "
          f"cpus={os.cpu_count()}, load {os.getloadavg()[0]:.1f}", flush=True)
    sections = ("scaling", "tomotopy", "ssp") if args.section == "all" else (args.section,)
    for name in sections:
        t = time.time()
        if name == "scaling":
            res = section_scaling(args, corpus, c.n_tokens)
        elif name == "tomotopy":
            res = section_tomotopy(args, corpus)
        else:
            res = section_ssp(args, corpus)
        res["load_after"] = os.getloadavg()[0]
        path = os.path.join(args.out_dir, f"bench_train_{name}.json")
        with open(path, "w") as f:
            json.dump(res, f, indent=1, default=str)
        print(f"[{name}] {time.time() - t:.0f} s, results in {path}", flush=True)


if __name__ == "__main__":
    main()
