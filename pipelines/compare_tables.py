"""The ``compare`` stage's outputs: repeats aggregated, the markdown tables, the plot.

``results.json`` (every row), ``results.md`` (the tables) and ``curves-k<K>.png`` (held-out
LL vs training seconds); what they show: ``compare.py``'s docstring.
"""

from __future__ import annotations

import json
import logging
import os

from peers import GIBBS
from repeats import fmt, median_index, spreads

log = logging.getLogger("compare")


#: Final metrics (of the last checkpoint) and process measurements aggregated over repeats.
FINAL = ("train_s", "units", "sweeps", "heldout_ll_per_token", "perplexity", "npmi",
         "diversity", "tokens_per_s")
PROCESS = ("maxrss_mib", "tree_rss_mib", "wall_s")


def aggregate(runs: list[dict]) -> dict:
    """One row for the repeats of one (system, K): the median run, with every metric's spread.

    The row is the median run's (the run whose final held-out LL/token is the median; its
    checkpoints are the curve that is plotted) plus ``spread`` (``repeats.spread`` of each
    final metric over the runs that were scored, and of the peak memory and wall time over
    all runs), ``median_run`` (its index), ``repeats`` (every run's row) and a status that
    names the runs that were not ok. The top-level memory and wall time are the medians.
    One run is returned as it is.
    """
    if len(runs) == 1:
        return runs[0]
    scored = [i for i, r in enumerate(runs) if r.get("checkpoints")]
    finals = [runs[i]["checkpoints"][-1] for i in scored]
    mid = scored[median_index([f["heldout_ll_per_token"] for f in finals])] if scored else 0
    row = {**runs[mid], "median_run": mid, "repeats": runs}
    row["spread"] = {**spreads(finals, FINAL), **spreads(runs, PROCESS)}
    for key in PROCESS:
        if key in row["spread"]:
            row[key] = row["spread"][key]["median"]
    # The same kind of status in every run ("ok", "over budget (first unit took 91 s)"): the
    # median run's, noted when not ok; otherwise each run that was not ok is named.
    statuses = [r.get("status", "") for r in runs]
    kinds = {st.split(" (")[0].split(":")[0] for st in statuses}
    if len(kinds) == 1:
        if statuses[mid] != "ok":
            row["status"] = f"{statuses[mid]} (all {len(runs)} runs)"
    else:
        row["status"] = f"ok in {statuses.count('ok')} of {len(runs)} runs; " + "; ".join(
            f"run {i + 1}: {st}" for i, st in enumerate(statuses) if st != "ok")
    return row


def _final_spreads(r: dict) -> dict[str, dict]:
    """The row's spreads, or (one run) those of its last checkpoint: the same cells."""
    if "spread" in r:
        return r["spread"]
    return {**spreads(r["checkpoints"][-1:], FINAL), **spreads([r], PROCESS)}


# --------------------------------------------------------------------------- outputs


def markdown(results: list[dict], meta: dict) -> str:
    lines = [f"Corpus: train {meta['train_docs']:,} documents / {meta['train_tokens']:,} tokens, "
             f"test {meta['test_docs']:,} documents / {meta['test_tokens']:,} tokens, "
             f"V = {meta['n_words']:,}. Priors alpha {meta['alpha']}, beta {meta['beta']}; "
             f"budget {max(meta['budgets']):g} s of training per system (checkpoints at "
             f"{', '.join(f'{b:g}' for b in meta['budgets'])} s); {meta['workers']} workers "
             f"where a system has them. {meta['machine']}. {meta['date']}.", "",
             "| K | system | train s | work | held-out LL/token | perplexity | NPMI | "
             "diversity | tokens/s | peak RSS MiB (largest process / sum) | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    n = meta.get("repeats", 1)
    if n > 1:
        lines[1:1] = ["", f"Each row: the median of {n} runs (min – max in brackets) of every "
                      "final metric; the runs went round by round (each round trains every "
                      "system once), with the same seed. The checkpoint table and the plot "
                      "show each system's median run (median final held-out LL/token)."]
    for r in results:
        if not r.get("checkpoints"):
            lines.append(f"| {r['k']} | {r['system']} | | | | | | | | "
                         f"{_mem(r)} | {r.get('status', '')} |")
            continue
        sp = _final_spreads(r)
        work = (f"{fmt(sp.get('sweeps'), _count)} sweeps" if r["system"] in GIBBS else
                "-" if r["system"] == "random" else f"{fmt(sp.get('units'), _count)} passes")
        tps = fmt(sp["tokens_per_s"], ",.0f") if sp.get("tokens_per_s", {}).get(
            "median") else "-"
        lines.append(f"| {r['k']} | {r['system']} | {fmt(sp.get('train_s'), '.0f')} | {work} | "
                     f"{fmt(sp.get('heldout_ll_per_token'), '.4f')} | "
                     f"{fmt(sp.get('perplexity'), '.0f')} | {fmt(sp.get('npmi'), '.4f')} | "
                     f"{fmt(sp.get('diversity'), '.3f')} | {tps} | {_mem(r)} | {r['status']} |")
    head = ("Held-out LL/token at each checkpoint (training seconds in brackets)" +
            (f", median run of {n}:" if n > 1 else ":"))
    lines += ["", head, "",
              "| K | system | " + " | ".join(f"{b:g} s" for b in meta["budgets"]) + " |",
              "|---|---|" + "---|" * len(meta["budgets"])]
    for r in results:
        cells = [f"{c['heldout_ll_per_token']:.4f} ({c['train_s']:.0f})"
                 for c in r.get("checkpoints", [])]
        cells += [""] * (len(meta["budgets"]) - len(cells))
        lines.append(f"| {r['k']} | {r['system']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _count(v: float) -> str:
    """Sweeps or passes: a whole number (the median of an even count may be a half)."""
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def _mem(r: dict) -> str:
    if "maxrss_mib" not in r:
        return "-"
    sp = r.get("spread", {})
    if "maxrss_mib" in sp and "tree_rss_mib" in sp:
        return f"{fmt(sp['maxrss_mib'], '.0f')} / {fmt(sp['tree_rss_mib'], '.0f')}"
    return f"{r['maxrss_mib']:.0f} / {r['tree_rss_mib']:.0f}"


def plot(results: list[dict], k: int, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plot")
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        if r["k"] != k or r["system"] == "random" or not r.get("checkpoints"):
            continue
        xs = [max(c["train_s"], 0.1) for c in r["checkpoints"]]
        ys = [c["heldout_ll_per_token"] for c in r["checkpoints"]]
        n = len(r.get("repeats", ()))
        ax.plot(xs, ys, marker="o",
                label=r["system"] + (f" (median run of {n})" if n > 1 else ""))
    rnd = [r for r in results if r["k"] == k and r["system"] == "random" and r["checkpoints"]]
    if rnd:
        ax.axhline(rnd[0]["checkpoints"][0]["heldout_ll_per_token"], color="grey", ls=":",
                   label="random topics")
    ax.set_xscale("log")
    ax.set_xlabel("training wall time (s)")
    ax.set_ylabel("held-out log-likelihood / token")
    ax.set_title(f"K = {k}: held-out LL vs training time (higher is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _write(out: str, results: list[dict], meta: dict) -> str:
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1, default=str)
    md = markdown(results, meta)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    return md
