"""Scaling studies of the trainer, as a pipeline stage (``kind = "script"``) or by hand.

Sections (``sections`` in the params; all by default):

- ``topics``  — tokens/s vs K (``topics``, default 100, 1000, 10000) for every sampler
  (``samplers``, default cgs and lightlda) on ``workers_k`` workers: the median over the
  iterations after the first two (JIT, first full pull), from the trainer's own records,
  plus tokens per CPU-second of the sampling kernel (independent of how busy the machine is);
- ``workers`` — tokens/s vs number of workers (``workers``, default [1, 2]; any numbers);
- ``ssp``     — LL/token vs wall time for staleness 0, 1, 2, 4, inf with one of two workers
  slowed 2x (the trainer's ``slow_shards`` debug option; ``section_ssp`` of
  ``pipelines/bench_train.py``), PNG + JSON;
- ``memory``  — peak memory vs corpus size: synthetic corpora of ``memory_docs`` documents
  (same vocabulary and K), each trained for ``memory_iterations`` sweeps by ``biglda train`` in
  its own process tree; peak RSS of the largest process and of the whole tree (the measuring
  function of ``pipelines/compare.py``).

Runs on any corpus (``corpus``, a ``corpus.zarr``); writes ``scaling.json`` and
``scaling.md`` to ``--out``. Pipeline: ``pipelines/scaling.toml``. By hand::

    .venv/bin/python pipelines/scaling.py --params params.json --out runs/scaling/manual
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import SimpleNamespace

# Both are scripts in this folder (on sys.path when this runs as a script).
from bench_train import run, section_ssp, steady  # noqa: E402
from compare import run_measured  # noqa: E402

DEFAULTS = {"sections": ["topics", "workers", "ssp", "memory"], "topics": [100, 1000, 10000],
            "samplers": ["cgs", "lightlda"], "iterations": 6, "workers_k": 2,
            "workers": [1, 2], "workers_topics": 1000, "ssp_topics": 1000, "ssp_iterations": 20,
            "memory_docs": [20000, 80000, 320000], "memory_words": 20000,
            "memory_topics": 1000, "memory_iterations": 3, "seed": 0,
            "peers_dir": "runs/peers"}


def section_topics(p: dict, out: str) -> list[dict]:
    rows = []
    for sampler in p["samplers"]:
        for k in p["topics"]:
            t0 = time.time()
            records, wall, _ = run(p["corpus"], os.path.join(out, "model.zarr"), n_topics=k,
                                   iterations=p["iterations"], sampler=sampler,
                                   workers=p["workers_k"], seed=p["seed"])
            s = steady(records)
            row = {"sampler": sampler, "k": k, "workers": p["workers_k"],
                   "tokens_per_s": s["tokens_per_s"], "wall_s": wall,
                   "kernel_cpu_s": s.get("kernel_cpu_s"), "ps_overhead": s["ps_overhead"],
                   "final_ll_per_token": s["final_ll_per_token"]}
            rows.append(row)
            print(f"topics: {sampler} K={k}: {row['tokens_per_s']:,.0f} tokens/s "
                  f"({time.time() - t0:.0f} s)", flush=True)
    return rows


def section_workers(p: dict, out: str) -> list[dict]:
    rows = []
    for w in p["workers"]:
        records, wall, _ = run(p["corpus"], os.path.join(out, "model.zarr"),
                               n_topics=p["workers_topics"], iterations=p["iterations"],
                               sampler="lightlda", workers=int(w), seed=p["seed"])
        s = steady(records)
        rows.append({"workers": int(w), "k": p["workers_topics"],
                     "tokens_per_s": s["tokens_per_s"], "ps_overhead": s["ps_overhead"],
                     "wall_s": wall})
        print(f"workers: {w}: {s['tokens_per_s']:,.0f} tokens/s", flush=True)
    return rows


def section_memory(p: dict, out: str) -> list[dict]:
    from biglda.corpus.synth import SynthSpec, write_synthetic

    rows = []
    biglda = os.path.join(os.path.dirname(sys.executable), "biglda")
    for n_docs in p["memory_docs"]:
        url = os.path.join(out, f"synth-{n_docs}.zarr")
        sizes = write_synthetic(url, SynthSpec(n_docs=int(n_docs), n_words=p["memory_words"],
                                               n_topics=50, mean_doc_length=100,
                                               seed=p["seed"]), overwrite=True)
        m = run_measured([biglda, "-q", "train", url, "--out", os.path.join(out, "mem.zarr"),
                          "--topics", str(p["memory_topics"]), "--iterations",
                          str(p["memory_iterations"]), "--workers", "2",
                          "--checkpoint-every", "0", "--overwrite"], 3600,
                         os.path.join(out, f"memory-{n_docs}.log"))
        rows.append({"n_docs": sizes["n_docs"], "n_tokens": sizes["n_tokens"],
                     "n_words": sizes["n_words"], "k": p["memory_topics"], **m})
        print(f"memory: {sizes['n_tokens']:,} tokens: largest process {m['maxrss_mib']:.0f} "
              f"MiB, tree {m['tree_rss_mib']:.0f} MiB (exit {m['returncode']})", flush=True)
    return rows


def markdown(res: dict) -> str:
    lines = [f"Scaling ({res['date']}, {res['machine']}); corpus {res['corpus']}", ""]
    if "topics" in res:
        lines += ["| sampler | K | workers | tokens/s | PS overhead | LL/token |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['sampler']} | {r['k']} | {r['workers']} | {r['tokens_per_s']:,.0f} | "
                  f"{r['ps_overhead']:.1%} | {r['final_ll_per_token']:.4f} |"
                  for r in res["topics"]]
        lines.append("")
    if "workers" in res:
        lines += ["| workers | K | tokens/s | PS overhead |", "|---|---|---|---|"]
        lines += [f"| {r['workers']} | {r['k']} | {r['tokens_per_s']:,.0f} | "
                  f"{r['ps_overhead']:.1%} |" for r in res["workers"]]
        lines.append("")
    if "ssp" in res:
        lines += ["| staleness | wall s | final LL/token | max clock spread |",
                  "|---|---|---|---|"]
        for name, r in res["ssp"]["runs"].items():
            lines.append(f"| {name} | {r['wall_s']:.1f} | {r['curve'][-1][2]:.4f} | "
                         f"{r['max_clock_spread']} |")
        lines.append("")
    if "memory" in res:
        lines += ["| tokens | V | K | peak RSS largest process MiB | peak RSS tree MiB |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['n_tokens']:,} | {r['n_words']:,} | {r['k']} | {r['maxrss_mib']:.0f} | "
                  f"{r['tree_rss_mib']:.0f} |" for r in res["memory"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import platform

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with open(args.params) as f:
        given = json.load(f)
    p = {**DEFAULTS, **given}
    unknown = set(p) - set(DEFAULTS) - {"corpus", "script", "outputs", "stage", "run_dir",
                                        "root"}
    if unknown:
        print(f"scaling: unknown parameter(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    # matplotlib (the SSP plot) is a peer like the compare stage's, not a dependency.
    sys.path.append(os.path.abspath(os.path.join(p.get("root") or ".", p["peers_dir"])))
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "machine": f"{platform.node()}, {os.cpu_count()} cores",
                 "corpus": p.get("corpus"), "params": p}

    def save() -> str:
        with open(os.path.join(args.out, "scaling.json"), "w") as f:
            json.dump(res, f, indent=1, default=str)
        md = markdown(res)
        with open(os.path.join(args.out, "scaling.md"), "w") as f:
            f.write(md)
        return md

    for section in p["sections"]:
        if section == "topics":
            res["topics"] = section_topics(p, args.out)
        elif section == "workers":
            res["workers"] = section_workers(p, args.out)
        elif section == "ssp":
            res["ssp"] = section_ssp(SimpleNamespace(topics=p["ssp_topics"],
                                                     iterations=p["ssp_iterations"],
                                                     out_dir=args.out), p["corpus"])
        elif section == "memory":
            res["memory"] = section_memory(p, args.out)
        else:
            print(f"scaling: unknown section {section!r}", file=sys.stderr)
            return 2
        save()
    print(save(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
