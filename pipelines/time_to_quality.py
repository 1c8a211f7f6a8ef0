"""Time to quality: held-out LL per token against training wall time, biglda vs tomotopy.

The headline figure of issue 17. One command (from the repository root; the corpus is the
Debian one, ingested and split as the ``debian`` pipeline does)::

    .venv/bin/python pipelines/time_to_quality.py --train TRAIN.zarr --test TEST.zarr \\
        --out runs/ttq                       # K = 100 and 1,000, median of 3

It runs ``compare.py`` (same scoring, same subprocess per system, same checkpoints of
training wall time, ``repeats`` round by round) for ``biglda`` (default settings:
``sampler="auto"``, one worker process of ``workers`` threads; 2 processes of one thread
before 2026-11-27, ``biglda-processes`` now) and ``tomotopy-2`` (``LDAModel(k, alpha, eta)
.train(1, workers=2)``), same alpha, beta and tokens, then reads its ``results.json`` and
prints, per K:

- each system's held-out LL/token at every checkpoint (median of the repeats),
- the target: tomotopy's final quality (the median over its repeats of its held-out LL/token
  at the last checkpoint),
- the wall time at which each system first reaches it (linear between checkpoints; median
  over repeats, min - max; "not reached" when a run never does), and the ratio biglda /
  tomotopy of the medians (< 1: biglda is there first),
- biglda's lead at the last checkpoint (equal wall time).

Outputs in ``--out``: compare's (``results.json``, ``results.md``, ``curves-k<K>.png``) and
``time_to_quality.md`` / ``.json`` and ``ttq-k<K>.png`` (the median runs' curves with the
target line and where each crosses it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import compare  # noqa: E402  (a script in this folder)

DEFAULTS = {"topics": [100, 1000], "budgets": [5, 10, 20, 40, 60, 90], "repeats": 3,
            "systems": ["biglda", "tomotopy-2"], "workers": 2, "reference": "tomotopy-2"}


def time_to_reach(checkpoints: list[dict], target: float) -> float:
    """Wall seconds at which a run's held-out LL/token first reaches ``target``: linear
    between the checkpoint before and the first at or above it (the first checkpoint itself
    if it is already there); ``inf`` if none is."""
    prev = None
    for c in checkpoints:
        t, ll = float(c["train_s"]), float(c["heldout_ll_per_token"])
        if ll >= target:
            if prev is None or prev[1] >= ll:
                return t
            t0, ll0 = prev
            return t0 + (t - t0) * (target - ll0) / (ll - ll0)
        prev = (t, ll)
    return math.inf


def _runs(row: dict) -> list[dict]:
    return [r for r in row.get("repeats", [row]) if r.get("checkpoints")]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def summarize(results: list[dict], reference: str) -> list[dict]:
    """One entry per (K, system): target, times to reach it, ratio, final LL."""
    out = []
    for k in sorted({r["k"] for r in results}):
        rows = {r["system"]: r for r in results if r["k"] == k}
        ref = rows.get(reference)
        if ref is None or not _runs(ref):
            continue
        target = _median([r["checkpoints"][-1]["heldout_ll_per_token"] for r in _runs(ref)])
        # the reference reaches its own final quality at the end of its budget, by definition
        # (a run whose final LL is below the median of the runs would never "reach" it)
        ref_times = [r["checkpoints"][-1]["train_s"] for r in _runs(ref)]
        for system, row in rows.items():
            runs = _runs(row)
            if not runs:
                continue
            times = (ref_times if system == reference else
                     [time_to_reach(r["checkpoints"], target) for r in runs])
            finals = [r["checkpoints"][-1]["heldout_ll_per_token"] for r in runs]
            final_s = [r["checkpoints"][-1]["train_s"] for r in runs]
            t_med, ref_med = _median(times), _median(ref_times)
            out.append({"k": k, "system": system, "target": target, "times": times,
                        "time": t_med, "ratio": t_med / ref_med if ref_med else math.nan,
                        "final": _median(finals), "finals": finals,
                        "final_s": _median(final_s),
                        "sampler": (row.get("sampler_choice") or {}).get("sampler"),
                        "curve": [(c["train_s"], c["heldout_ll_per_token"])
                                  for c in row["checkpoints"]]})
    return out


def _t(v: float) -> str:
    return "not reached" if math.isinf(v) else f"{v:.1f}"


def markdown(summary: list[dict], meta: dict) -> str:
    budgets = meta["budgets"]
    lines = [f"Time to tomotopy's final quality. Train {meta['train_tokens']:,} tokens, test "
             f"{meta['test_tokens']:,} tokens, V = {meta['n_words']:,}; alpha {meta['alpha']},"
             f" beta {meta['beta']}; {meta['workers']} workers; checkpoints at "
             f"{', '.join(f'{b:g}' for b in budgets)} s of training; median of "
             f"{meta['repeats']} (min - max); {meta['machine']}; {meta['date']}.", "",
             "| K | system | target (tomotopy final LL/token) | time to target s | ratio to "
             "tomotopy | LL/token at the last checkpoint | vs tomotopy |",
             "|---|---|---|---|---|---|---|"]
    ref = {s["k"]: s for s in summary if s["system"] == meta["reference"]}
    for s in summary:
        spread = (f" ({_t(min(s['times']))} - {_t(max(s['times']))})"
                  if len(s["times"]) > 1 else "")
        name = s["system"] + (f" ({s['sampler']})" if s["sampler"] else "")
        lead = s["final"] - ref[s["k"]]["final"]
        lines.append(f"| {s['k']} | {name} | {s['target']:.4f} | {_t(s['time'])}{spread} | "
                     f"{s['ratio']:.2f} | {s['final']:.4f} ({s['final_s']:.0f} s) | "
                     f"{lead:+.4f} |")
    lines += ["", "Held-out LL/token at each checkpoint (median run; training seconds in "
              "brackets):", "",
              "| K | system | " + " | ".join(f"{b:g} s" for b in budgets) + " |",
              "|---|---|" + "---|" * len(budgets)]
    for s in summary:
        cells = [f"{ll:.4f} ({t:.0f})" for t, ll in s["curve"]]
        cells += [""] * (len(budgets) - len(cells))
        lines.append(f"| {s['k']} | {s['system']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(summary: list[dict], k: int, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [s for s in summary if s["k"] == k]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in rows:
        xs, ys = zip(*s["curve"], strict=True)
        name = s["system"] + (f" ({s['sampler']})" if s["sampler"] else "")
        line, = ax.plot(xs, ys, marker="o", label=name)
        if not math.isinf(s["time"]):
            ax.axvline(s["time"], color=line.get_color(), ls="--", lw=0.8)
    ax.axhline(rows[0]["target"], color="grey", ls=":", label="tomotopy's final quality")
    ax.set_xlabel("training wall time (s)")
    ax.set_ylabel("held-out log-likelihood / token")
    ax.set_title(f"K = {k}: time to quality (higher is better; dashed: target reached)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="training corpus.zarr")
    ap.add_argument("--test", required=True, help="held-out corpus.zarr")
    ap.add_argument("--out", required=True)
    ap.add_argument("--topics", type=int, nargs="+", default=DEFAULTS["topics"])
    ap.add_argument("--budgets", type=float, nargs="+", default=DEFAULTS["budgets"],
                    help="checkpoints of training wall time, seconds")
    ap.add_argument("--repeats", type=int, default=DEFAULTS["repeats"])
    ap.add_argument("--systems", nargs="+", default=DEFAULTS["systems"],
                    help=f"compare.py systems (one of them {DEFAULTS['reference']})")
    ap.add_argument("--workers", type=int, default=DEFAULTS["workers"])
    ap.add_argument("--peers-dir", default="runs/peers")
    ap.add_argument("--burn-in", type=int, default=20)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--kill-after", type=float, default=6.0,
                    help="a system's process is killed after this many times the last budget "
                         "+ 120 s (biglda restarts its cluster at every checkpoint)")
    ap.add_argument("--report-only", action="store_true",
                    help="only summarize an existing --out/results.json")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if not args.report_only:
        params = {"train": os.path.abspath(args.train), "test": os.path.abspath(args.test),
                  "topics": args.topics, "budgets": args.budgets, "systems": args.systems,
                  "workers": args.workers, "repeats": args.repeats,
                  "peers_dir": os.path.abspath(args.peers_dir), "burn_in": args.burn_in,
                  "samples": args.samples, "kill_after": args.kill_after}
        path = os.path.join(args.out, "params.json")
        with open(path, "w") as f:
            json.dump(params, f)
        code = compare.main(["--params", path, "--out", args.out])
        if code:
            return code
    with open(os.path.join(args.out, "results.json")) as f:
        data = json.load(f)
    meta = {**data["meta"], "reference": DEFAULTS["reference"]}
    summary = summarize(data["results"], meta["reference"])
    for k in sorted({s["k"] for s in summary}):
        plot(summary, k, os.path.join(args.out, f"ttq-k{k}.png"))
    md = markdown(summary, meta)
    with open(os.path.join(args.out, "time_to_quality.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "time_to_quality.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary}, f, indent=1, default=str)
    print("\n" + md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
