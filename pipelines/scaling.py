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

Repeats (issue "Pipelines and the public benchmark": machines are noisy, so short runs are
repeated and reported as a median). Every throughput measurement (a row of ``topics`` and
``workers``) is run ``repeats`` times (default 3), round by round: round r measures every
row of the section once, so a change in the machine's load falls on all rows alike. The
table prints the median with the spread (min – max) next to it; ratios (tokens/s against the
first K, against the first number of workers) are ratios of medians, and the workers table
also gives the range of the same ratio within each round. ``memory`` rows are repeated
``memory_repeats`` times (default 1: peak RSS hardly depends on the load, and the largest
corpus is the longest run here). The SSP experiment is a curve per staleness and stays one
run (the output says so). ``scaling.json`` keeps every repeat (``repeats`` of each row),
their ``spread`` and the medians under the old keys (``tokens_per_s``, ...).

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
from collections.abc import Callable
from types import SimpleNamespace

# Scripts in this folder (on sys.path when this runs as a script).
from bench_train import run, section_ssp, steady
from measure import run_measured
from repeats import fmt, ratio, spread, spreads

DEFAULTS = {"sections": ["topics", "workers", "ssp", "memory"], "topics": [100, 1000, 10000],
            "samplers": ["cgs", "lightlda"], "iterations": 6, "workers_k": 2,
            "workers": [1, 2], "workers_topics": 1000, "ssp_topics": 1000, "ssp_iterations": 20,
            "memory_docs": [20000, 80000, 320000], "memory_words": 20000,
            "memory_topics": 1000, "memory_iterations": 3, "seed": 0,
            "repeats": 3, "memory_repeats": 1, "peers_dir": "runs/peers"}


# What one short throughput run records; the medians of these are the table's numbers.
MEASURED = ("tokens_per_s", "ps_overhead", "kernel_cpu_s", "final_ll_per_token", "wall_s")


def measure_training(p: dict, out: str, **kw) -> dict:
    """One short training run: the trainer's steady-state medians (``steady``) and wall time."""
    records, wall, _ = run(p["corpus"], os.path.join(out, "model.zarr"),
                           iterations=p["iterations"], seed=p["seed"], **kw)
    s = steady(records)
    return {"tokens_per_s": s["tokens_per_s"], "ps_overhead": s["ps_overhead"],
            "kernel_cpu_s": s.get("kernel_cpu_s"),
            "final_ll_per_token": s["final_ll_per_token"], "wall_s": wall,
            "load_after": os.getloadavg()[0]}


def repeated(configs: list[tuple[dict, dict]], repeats: int, measure: Callable[..., dict],
             keys: tuple[str, ...], name: str) -> list[dict]:
    """Measure every configuration ``repeats`` times; one row per configuration.

    ``configs``: ``(fields, kwargs)`` pairs: the row's labels and ``measure``'s arguments.
    The runs go round by round (round r measures every configuration once), so a change in
    the machine's load during the section falls on all configurations alike rather than on
    the last one. A row holds its labels, the median of each of ``keys`` (the numbers the
    table prints), ``spread`` (``repeats.spread`` of each key) and ``repeats`` (every run's
    measurement, in order).
    """
    runs: list[list[dict]] = [[] for _ in configs]
    for r in range(repeats):
        for (fields, kw), done in zip(configs, runs, strict=True):
            t0 = time.time()
            m = measure(**kw)
            done.append(m)
            label = " ".join(f"{k}={v}" for k, v in fields.items())
            main_key = keys[0]
            print(f"{name}: {label} (repeat {r + 1}/{repeats}): {main_key} "
                  f"{m[main_key]:,.0f} ({time.time() - t0:.0f} s)", flush=True)
    rows = []
    for (fields, _), done in zip(configs, runs, strict=True):
        sp = spreads(done, keys)
        rows.append({**fields, **{k: v["median"] for k, v in sp.items()}, "spread": sp,
                     "repeats": done})
    return rows


def section_topics(p: dict, out: str) -> list[dict]:
    configs = [({"sampler": sampler, "k": int(k), "workers": p["workers_k"]},
                {"sampler": sampler, "n_topics": int(k), "workers": p["workers_k"]})
               for sampler in p["samplers"] for k in p["topics"]]
    rows = repeated(configs, p["repeats"], lambda **kw: measure_training(p, out, **kw),
                    MEASURED, "topics")
    # Ratio of medians: each sampler's tokens/s against its own at the first K.
    for row in rows:
        first = next(r for r in rows if r["sampler"] == row["sampler"])
        row["vs_first_k"] = ratio(row["spread"]["tokens_per_s"], first["spread"]["tokens_per_s"])
    return rows


def section_workers(p: dict, out: str) -> list[dict]:
    configs = [({"workers": int(w), "k": p["workers_topics"]},
                {"sampler": "lightlda", "n_topics": p["workers_topics"], "workers": int(w)})
               for w in p["workers"]]
    rows = repeated(configs, p["repeats"], lambda **kw: measure_training(p, out, **kw),
                    MEASURED, "workers")
    # speedup: ratio of the medians against the first row (e.g. 2 workers / 1 worker);
    # speedup_per_round: the same ratio within each round (runs minutes apart), its spread.
    base = rows[0]
    for row in rows:
        row["speedup"] = ratio(row["spread"]["tokens_per_s"], base["spread"]["tokens_per_s"])
        row["speedup_per_round"] = [a["tokens_per_s"] / b["tokens_per_s"] for a, b in
                                    zip(row["repeats"], base["repeats"], strict=True)]
    return rows


def section_memory(p: dict, out: str) -> list[dict]:
    from biglda.corpus.synth import SynthSpec, write_synthetic

    biglda = os.path.join(os.path.dirname(sys.executable), "biglda")
    sizes: dict[int, dict] = {}
    for n_docs in p["memory_docs"]:
        url = os.path.join(out, f"synth-{n_docs}.zarr")
        sizes[int(n_docs)] = write_synthetic(
            url, SynthSpec(n_docs=int(n_docs), n_words=p["memory_words"], n_topics=50,
                           mean_doc_length=100, seed=p["seed"]), overwrite=True)

    def measure(n_docs: int) -> dict:
        url = os.path.join(out, f"synth-{n_docs}.zarr")
        m = run_measured([biglda, "-q", "train", url, "--out", os.path.join(out, "mem.zarr"),
                          "--topics", str(p["memory_topics"]), "--iterations",
                          str(p["memory_iterations"]), "--workers", "2",
                          "--checkpoint-every", "0", "--overwrite"], 3600,
                         os.path.join(out, f"memory-{n_docs}.log"))
        if m["returncode"]:
            print(f"memory: {n_docs} documents: exit {m['returncode']}", flush=True)
        return m

    configs = [({"n_docs": s["n_docs"], "n_tokens": s["n_tokens"], "n_words": s["n_words"],
                 "k": p["memory_topics"]}, {"n_docs": n}) for n, s in sizes.items()]
    rows = repeated(configs, p["memory_repeats"], measure,
                    ("maxrss_mib", "tree_rss_mib", "wall_s"), "memory")
    for row in rows:
        row["returncode"] = next((m["returncode"] for m in row["repeats"] if m["returncode"]), 0)
    return rows


def _cell(row: dict, key: str, f: str | Callable[[float], str]) -> str:
    """The median (min – max) of ``key`` in a row of :func:`repeated`."""
    s = row.get("spread", {}).get(key)
    if s is None and isinstance(row.get(key), int | float):
        s = spread([row[key]])
    return fmt(s, f)


def _pct(v: float) -> str:
    return f"{v:.1%}"


def _times(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def markdown(res: dict) -> str:
    p = res.get("params", {})
    lines = [f"Scaling ({res['date']}, {res['machine']}); corpus {res['corpus']}",
             f"Load average {res.get('load_start', float('nan')):.1f} at the start.", ""]
    if "topics" in res or "workers" in res:
        n = p.get("repeats", 1)
        how = (f"median of {n} runs per row (min – max in brackets), run round by round "
               "(each round measures every row once)" if n > 1 else
               "one run per row (`repeats` = 1)")
        lines += [f"Throughput: {how}; tokens/s of one run is the trainer's median over its "
                  "iterations after the first two. Ratios are between medians.", ""]
    if "topics" in res:
        k0 = p.get("topics", [None])[0]
        lines += [f"| sampler | K | workers | tokens/s | vs K = {k0} | PS overhead | "
                  "LL/token |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['sampler']} | {r['k']} | {r['workers']} | "
                  f"{_cell(r, 'tokens_per_s', ',.0f')} | {_times(r.get('vs_first_k'))} | "
                  f"{_cell(r, 'ps_overhead', _pct)} | {_cell(r, 'final_ll_per_token', '.4f')} |"
                  for r in res["topics"]]
        lines.append("")
    if "workers" in res:
        w0 = res["workers"][0]["workers"] if res["workers"] else None
        lines += [f"| workers | K | tokens/s | vs {w0} worker(s) (per-round range) | "
                  "PS overhead |", "|---|---|---|---|---|"]
        for r in res["workers"]:
            per = r.get("speedup_per_round") or []
            rng = f" ({min(per):.2f} – {max(per):.2f})" if len(per) > 1 else ""
            lines.append(f"| {r['workers']} | {r['k']} | {_cell(r, 'tokens_per_s', ',.0f')} | "
                         f"{_times(r.get('speedup'))}{rng} | {_cell(r, 'ps_overhead', _pct)} |")
        lines.append("")
    if "ssp" in res:
        lines += ["SSP: a single run per staleness (a curve over wall time; not repeated).", "",
                  "| staleness | wall s | final LL/token | max clock spread |",
                  "|---|---|---|---|"]
        for name, r in res["ssp"]["runs"].items():
            lines.append(f"| {name} | {r['wall_s']:.1f} | {r['curve'][-1][2]:.4f} | "
                         f"{r['max_clock_spread']} |")
        lines.append("")
    if "memory" in res:
        n = p.get("memory_repeats", 1)
        lines += [f"Memory: median of {n} runs per corpus size (min – max in brackets)."
                  if n > 1 else "Memory: one run per corpus size (`memory_repeats` = 1).", "",
                  "| tokens | V | K | peak RSS largest process MiB | peak RSS tree MiB |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['n_tokens']:,} | {r['n_words']:,} | {r['k']} | "
                  f"{_cell(r, 'maxrss_mib', '.0f')} | {_cell(r, 'tree_rss_mib', '.0f')}"
                  + (f" (a run exited {r['returncode']})" if r.get("returncode") else "") + " |"
                  for r in res["memory"]]
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
    for key in ("repeats", "memory_repeats"):
        if not isinstance(p[key], int) or isinstance(p[key], bool) or p[key] < 1:
            print(f"scaling: {key} must be a whole number >= 1, not {p[key]!r}",
                  file=sys.stderr)
            return 2
    # matplotlib (the SSP plot) is a peer like the compare stage's, not a dependency.
    sys.path.append(os.path.abspath(os.path.join(p.get("root") or ".", p["peers_dir"])))
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "machine": f"{platform.node()}, {os.cpu_count()} cores",
                 "corpus": p.get("corpus"), "load_start": os.getloadavg()[0], "params": p}

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
            res["ssp"]["repeats"] = 1  # a curve per staleness: one run, not a median
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
