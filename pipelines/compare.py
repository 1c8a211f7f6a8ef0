"""The ``compare`` stage: biglda against other LDA libraries at equal wall-clock budgets.

Every system trains on the same training corpus with the same priors (alpha 0.1, beta/eta
0.01) and is stopped at the same checkpoints of training wall time (``budgets``, seconds,
increasing; the last is the total budget). At every checkpoint its topic-word matrix is
saved, and afterwards every matrix is scored by biglda's own evaluator
(``biglda.model.evaluate``, as in ``pipelines/bench_quality.py``): held-out log-likelihood
per token on the test corpus (document completion), NPMI coherence of the top 10 words
(document co-occurrence in the training corpus) and diversity of the top 25 words.

Systems (``systems`` in the stage; each one runs in its own subprocess, so its peak memory
is its own: ``ru_maxrss`` of the process tree from ``wait4`` and the peak of the summed RSS
of the tree, sampled every 0.25 s):

- ``biglda``          biglda's default settings (``sampler="auto"``: the sampler its rule
                      picks for K and the corpus), embedded LocalCluster of one worker
                      process with ``workers`` sampling threads (as tomotopy's ``workers``
                      are threads; until 2026-11-27 ``workers`` processes of one thread,
                      which lag each other a clock per iteration); the run is resumed
                      from its checkpoint after each budget
                      (cluster start-up and recount are not counted, as the peers' corpus
                      loading is not);
- ``biglda-processes``  the same on ``workers`` worker processes of one thread;
- ``biglda-cgs``, ``biglda-lightlda``, ``biglda-warplda``   the same with that sampler;
- ``biglda-random-init``, ``biglda-sequential-init``   default sampler, that ``init``;
- ``tomotopy-1``, ``tomotopy-2``   ``LDAModel(k, alpha, eta).train(1, workers=1 or 2)``;
- ``gensim``          ``LdaModel`` (one online pass over the corpus per unit);
- ``gensim-multi``    ``LdaMulticore(workers)``;
- ``sklearn-online``  ``LatentDirichletAllocation(learning_method="online")``, one
                      ``partial_fit`` pass per unit;
- ``sklearn-batch``   ``learning_method="batch"``, one EM step per unit;
- ``lda``             the ``lda`` package's collapsed Gibbs sampler, one sweep per unit;
- ``random``          Dirichlet(1) topics, the floor of every score.

The loops look at the clock between units of work, so a checkpoint can come one unit late:
the tables show the real training seconds. A system whose first unit does not fit in the
budget is reported as over budget (its numbers are shown with that note); one killed at
the hard limit (``kill_after`` x total budget + 120 s) is reported as not finished.
Tokens/s is given for the Gibbs samplers (tokens x sweeps / training seconds).

Peers are not dependencies of biglda: unless ``setup = false``, the stage pip-installs the
missing ones (``pip install --target PEERS_DIR tomotopy gensim scikit-learn lda
matplotlib``), and PEERS_DIR is appended to ``sys.path``. A peer that still cannot be
imported is reported as such. Outputs: ``results.json``, ``results.md`` (tables) and
``curves-k<K>.png`` (held-out LL vs training seconds).

Repeats (``repeats``, default 1: each system already runs for the whole wall-clock budget).
With ``repeats`` > 1 every (system, K) is trained and scored that many times, round by round
(round r runs every system once, so a change in the machine's load falls on all systems
alike), each time with the same seed: the spread is the machine's (how much work fits in the
budget), not the chain's. Each row of the main table then prints the median of every final
metric (training seconds, work, held-out LL/token, perplexity, NPMI, diversity, tokens/s,
peak memory) with min – max next to it; the checkpoint table and the plot show the *median
run* (the one whose final held-out LL/token is the median). ``results.json`` keeps every
repeat (``repeats`` of each row, their folders ``k<K>/<system>/repeat-<i>``), ``spread`` and
``median_run``; with ``repeats = 1`` the outputs are as they always were.

Run as the ``compare`` stage of a pipeline (``biglda pipeline run pipelines/debian.toml``),
or by hand::

    .venv/bin/python pipelines/compare.py --params params.json --out DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time

import numpy as np
import peers
from compare_tables import FINAL, PROCESS, _mem, _write, aggregate, markdown, plot
from measure import run_measured
from peers import GIBBS, NEEDS, SYSTEMS, Clock, ensure_peers, worker_main

__all__ = ["DEFAULTS", "FINAL", "GIBBS", "NEEDS", "PROCESS", "SYSTEMS", "Clock", "aggregate",
           "ensure_peers", "main", "markdown", "plot", "run_measured", "run_system", "score",
           "worker_main"]

log = logging.getLogger("compare")

DEFAULTS = {"topics": [100], "budgets": [15, 30, 60], "systems": list(SYSTEMS), "workers": 2,
            "seed": 0, "alpha": 0.1, "beta": 0.01, "peers_dir": "runs/peers", "setup": True,
            "burn_in": 20, "samples": 30, "jobs": 2, "kill_after": 3.0, "repeats": 1}


def score(phi: np.ndarray, vocab: np.ndarray, params: dict) -> dict:
    from biglda.corpus import Corpus
    from biglda.model import evaluate as ev

    held = ev.heldout_loglik(phi.astype(np.float64), params["alpha"],
                             Corpus.open(params["test"]), vocab=vocab,
                             burn_in=params["burn_in"], samples=params["samples"],
                             n_jobs=params["jobs"], seed=params["seed"])
    npmi = ev.coherence(phi, vocab, Corpus.open(params["train"]), measure="npmi", top_n=10)
    return {"heldout_ll_per_token": held.loglik_per_token, "perplexity": held.perplexity,
            "npmi": npmi.mean, "diversity": ev.diversity(phi, 25)}


def run_system(system: str, k: int, params: dict, out: str, repeat: int | None = None) -> dict:
    """Train ``system`` at K in a subprocess, then score each of its checkpoints.

    ``repeat``: the repeat's number when the stage repeats runs (its own folder).
    """
    folder = os.path.join(out, f"k{k}", system)
    if repeat is not None:
        folder = os.path.join(folder, f"repeat-{repeat}")
    os.makedirs(folder, exist_ok=True)
    job = {**params, "system": system, "k": k, "dir": folder}
    job_path = os.path.join(folder, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    limit = params["kill_after"] * max(params["budgets"]) + 120
    env = None
    if system.startswith("sklearn"):
        # joblib's worker processes start from scratch and must find the peers too (the
        # peers' numpy/scipy are the versions of the project's own: pip resolved them).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            x for x in (os.environ.get("PYTHONPATH"), params["peers_dir"]) if x)}
    # The child runs peers.py, which imports only what training needs (not the measuring).
    m = run_measured([sys.executable, os.path.abspath(peers.__file__), job_path], limit,
                     os.path.join(folder, "log.txt"), env)
    row = {"system": system, "k": k, **m, "checkpoints": []}
    try:
        with open(os.path.join(folder, "checkpoints.json")) as f:
            ck = json.load(f)
    except (OSError, ValueError):
        ck = {"checkpoints": [], "n_tokens": None}
    if ck.get("sampler_choice"):
        row["sampler_choice"] = ck["sampler_choice"]
    if m["killed"]:
        row["status"] = f"not finished: killed after {m['wall_s']:.0f} s"
    elif m["returncode"]:
        with open(os.path.join(folder, "log.txt")) as f:
            tail = [ln.strip() for ln in f if ln.strip()]
        row["status"] = f"failed ({tail[-1][:120] if tail else m['returncode']})"
    else:
        row["status"] = "ok"
    for c in ck["checkpoints"]:
        phi = np.load(os.path.join(folder, c["phi"]))
        vocab = np.load(os.path.join(folder, c["vocab"]))
        entry = {**c, **score(phi, vocab, params)}
        if system in GIBBS and c["train_s"] > 0 and ck.get("n_tokens"):
            entry["tokens_per_s"] = ck["n_tokens"] * c["sweeps"] / c["train_s"]
        row["checkpoints"].append(entry)
    budget = max(params["budgets"])
    if row["status"] == "ok" and system != "random" and row["checkpoints"]:
        first = row["checkpoints"][0]
        if first["train_s"] > 1.5 * budget:
            row["status"] = f"over budget (first unit took {first['train_s']:.0f} s)"
    elif row["status"] == "ok" and not row["checkpoints"]:
        row["status"] = "no checkpoint written"
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", help="the stage's parameters (JSON)")
    ap.add_argument("--out", help="output folder")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    if not args.params or not args.out:
        ap.error("--params and --out are required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s compare: %(message)s")
    with open(args.params) as f:
        given = json.load(f)
    params = {**DEFAULTS, **{k: v for k, v in given.items() if k != "script"}}
    unknown = set(params) - set(DEFAULTS) - {"train", "test", "stage", "run_dir", "root"}
    if unknown:
        print(f"compare: unknown parameter(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    bad = [s for s in params["systems"] if s not in SYSTEMS]
    if bad:
        print(f"compare: unknown system(s) {', '.join(bad)} (known: {', '.join(SYSTEMS)})",
              file=sys.stderr)
        return 2
    params["budgets"] = sorted(float(b) for b in params["budgets"])
    repeats = params["repeats"]
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        print(f"compare: repeats must be a whole number >= 1, not {repeats!r}",
              file=sys.stderr)
        return 2
    root = params.get("root") or os.getcwd()
    params["peers_dir"] = os.path.abspath(os.path.join(root, params["peers_dir"]))
    problems = ensure_peers(params["peers_dir"], params["systems"], bool(params["setup"]))

    from biglda.corpus import Corpus

    train, test = Corpus.open(params["train"]), Corpus.open(params["test"])
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.node()}, {os.cpu_count()} cores, "
                       f"load {os.getloadavg()[0]:.1f} at start",
            "train_docs": train.n_docs, "train_tokens": train.n_tokens,
            "test_docs": test.n_docs, "test_tokens": test.n_tokens, "n_words": train.n_words,
            **{k: params[k] for k in ("alpha", "beta", "budgets", "workers", "topics",
                                      "burn_in", "samples", "seed", "repeats")},
            "scoring": "biglda.model.evaluate: document completion (even positions observed, "
                       "odd scored), NPMI top 10 by document co-occurrence in the training "
                       "corpus, diversity top 25"}
    # runs[(K, system)]: that system's runs so far; the rows are their aggregates.
    runs: dict[tuple[int, str], list[dict]] = {}

    def rows() -> list[dict]:
        out = []
        for (k, s), done in runs.items():  # in the order of topics and systems
            if done:
                out.append(aggregate(done))
            elif s in problems:
                out.append({"system": s, "k": k, "status": problems[s], "checkpoints": []})
        return out

    results: list[dict] = []
    for k in params["topics"]:
        for s in params["systems"]:
            runs[k, s] = []
        for rep in range(repeats):
            for system in params["systems"]:
                if system in problems:
                    continue
                which = f" (run {rep + 1} of {repeats})" if repeats > 1 else ""
                log.info("K=%d %s%s: training (checkpoints at %s s)", k, system, which,
                         params["budgets"])
                row = run_system(system, int(k), params, args.out,
                                 rep if repeats > 1 else None)
                last = row["checkpoints"][-1] if row["checkpoints"] else {}
                log.info("K=%d %s%s: %s, %.1f s, LL/token %s, peak %s MiB", k, system, which,
                         row["status"], last.get("train_s", float("nan")),
                         last.get("heldout_ll_per_token"), _mem(row))
                runs[k, system].append(row)
                results = rows()
                _write(args.out, results, meta)
        results = rows()
        plot(results, int(k), os.path.join(args.out, f"curves-k{k}.png"))
    print(_write(args.out, results, meta), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
