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
                      picks for K and the corpus), embedded LocalCluster of ``workers``
                      workers; the run is resumed from its checkpoint after each budget
                      (cluster start-up and recount are not counted, as the peers' corpus
                      loading is not);
- ``biglda-cgs``, ``biglda-lightlda``, ``biglda-warplda``   the same with that sampler;
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
import contextlib
import importlib.util
import json
import logging
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
from repeats import fmt, median_index, spreads

log = logging.getLogger("compare")

SYSTEMS = ("biglda", "biglda-cgs", "biglda-lightlda", "biglda-warplda", "tomotopy-1",
           "tomotopy-2", "gensim", "gensim-multi", "sklearn-online", "sklearn-batch", "lda",
           "random")
#: Python module each system needs -> pip name.
NEEDS = {"tomotopy-1": ("tomotopy", "tomotopy"), "tomotopy-2": ("tomotopy", "tomotopy"),
         "gensim": ("gensim", "gensim"), "gensim-multi": ("gensim", "gensim"),
         "sklearn-online": ("sklearn", "scikit-learn"),
         "sklearn-batch": ("sklearn", "scikit-learn"), "lda": ("lda", "lda")}
GIBBS = {"biglda", "biglda-cgs", "biglda-lightlda", "biglda-warplda", "tomotopy-1",
         "tomotopy-2", "lda"}
DEFAULTS = {"topics": [100], "budgets": [15, 30, 60], "systems": list(SYSTEMS), "workers": 2,
            "seed": 0, "alpha": 0.1, "beta": 0.01, "peers_dir": "runs/peers", "setup": True,
            "burn_in": 20, "samples": 30, "jobs": 2, "kill_after": 3.0, "repeats": 1}


# --------------------------------------------------------------------------- set-up


def ensure_peers(peers_dir: str, systems: list[str], install: bool) -> dict[str, str]:
    """Make the peers importable (pip-installing the missing ones); return {system: problem}."""
    if peers_dir not in sys.path:
        sys.path.append(peers_dir)  # after the project's own numpy/scipy
    wanted = {NEEDS[s] for s in systems if s in NEEDS} | {("matplotlib", "matplotlib")}
    missing = [pip for mod, pip in sorted(wanted) if importlib.util.find_spec(mod) is None]
    if missing and install:
        print(f"compare: installing peers {' '.join(missing)} into {peers_dir} "
              "(not biglda dependencies)", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                               peers_dir, *missing])
        if proc.returncode:
            print(f"compare: pip install failed ({proc.returncode}); the missing peers are "
                  "reported as not installed", file=sys.stderr)
        importlib.invalidate_caches()
    problems = {}
    for s in systems:
        if s in NEEDS and importlib.util.find_spec(NEEDS[s][0]) is None:
            problems[s] = f"not installed (pip install {NEEDS[s][1]})"
    return problems


# --------------------------------------------------------------------------- systems
# Each trainer gets (data, job, checkpoint) and calls checkpoint(phi, vocab, units, sweeps)
# whenever a budget is crossed; checkpoint returns False once the last budget is done.


# The corpus as arrays and as gensim bags of words, as the quality benchmark reads them
# (this script's folder is on sys.path when it runs).
from bench_quality import _bow  # noqa: E402
from bench_quality import _train_arrays as _arrays  # noqa: E402


class Clock:
    """Training seconds, paused while checkpoints are taken."""

    def __init__(self, budgets: list[float], save: Callable[..., None]) -> None:
        self.budgets, self.save = list(budgets), save
        self.info: dict = {}  # what the run says about itself (biglda: the sampler chosen)
        self.restart()

    def restart(self) -> None:
        """Start counting from zero (after the data are loaded: loading is not training)."""
        self.spent, self.index, self._t0 = 0.0, 0, time.perf_counter()

    def now(self) -> float:
        return self.spent + time.perf_counter() - self._t0

    def after_unit(self, phi_fn: Callable[[], tuple[np.ndarray, np.ndarray]], units: int,
                   sweeps: int) -> bool:
        """Checkpoint if a budget was crossed; False when the last budget is done."""
        t = self.now()
        if t < self.budgets[self.index]:
            return True
        self.spent = t
        while self.index < len(self.budgets) and t >= self.budgets[self.index]:
            phi, vocab = phi_fn()
            self.save(phi, vocab, t, units, sweeps, self.budgets[self.index])
            self.index += 1
        self._t0 = time.perf_counter()
        return self.index < len(self.budgets)


def run_tomotopy(job: dict, clock: Clock, workers: int) -> None:
    import tomotopy as tp

    tokens, doc_ptr, vocab = _arrays(job["train"])
    mdl = tp.LDAModel(k=job["k"], alpha=job["alpha"], eta=job["beta"], seed=job["seed"])
    for d in range(len(doc_ptr) - 1):
        words = vocab[tokens[doc_ptr[d]:doc_ptr[d + 1]]].tolist()
        if words:
            mdl.add_doc(words)
    clock.restart()  # building the corpus is not training
    k, sweeps = job["k"], 0

    def phi() -> tuple[np.ndarray, np.ndarray]:
        return (np.array([mdl.get_topic_word_dist(t) for t in range(k)]),
                np.array(list(mdl.used_vocabs), dtype=object))

    while True:
        mdl.train(1, workers=workers)
        sweeps += 1
        if not clock.after_unit(phi, sweeps, sweeps):
            return


def run_gensim(job: dict, clock: Clock, multi: bool) -> None:
    from gensim.models import LdaModel, LdaMulticore

    tokens, doc_ptr, vocab = _arrays(job["train"])
    bow = _bow(tokens, doc_ptr)
    id2word = dict(enumerate(vocab.tolist()))
    kw = {"num_topics": job["k"], "id2word": id2word, "alpha": job["alpha"],
          "eta": job["beta"], "random_state": job["seed"]}
    lda = LdaMulticore(workers=job["workers"], **kw) if multi else LdaModel(**kw)
    clock.restart()
    passes = 0
    while True:
        lda.update(bow)
        passes += 1
        if not clock.after_unit(lambda: (lda.get_topics(), vocab), passes, 0):
            return


def _doc_word(tokens: np.ndarray, doc_ptr: np.ndarray, n_words: int):
    import scipy.sparse as sp

    rows = np.repeat(np.arange(len(doc_ptr) - 1), np.diff(doc_ptr))
    x = sp.csr_matrix((np.ones(len(tokens)), (rows, tokens)),
                      shape=(len(doc_ptr) - 1, n_words))
    x.sum_duplicates()
    return x


def run_sklearn(job: dict, clock: Clock, method: str) -> None:
    from sklearn.decomposition import LatentDirichletAllocation

    tokens, doc_ptr, vocab = _arrays(job["train"])
    x = _doc_word(tokens, doc_ptr, len(vocab))
    lda = LatentDirichletAllocation(n_components=job["k"], doc_topic_prior=job["alpha"],
                                    topic_word_prior=job["beta"], learning_method=method,
                                    max_iter=1, n_jobs=job["workers"],
                                    random_state=job["seed"])
    clock.restart()
    units = 0
    while True:
        if method == "online":
            lda.partial_fit(x)
        elif units == 0:
            lda.fit(x)  # initialises and does one EM step
        else:
            # One more batch EM step on the fitted state (what fit's loop does per iteration;
            # fit itself always starts over).
            lda._em_step(x, total_samples=x.shape[0], batch_update=True, parallel=None)
        units += 1
        if not clock.after_unit(lambda: (lda.components_, vocab), units, 0):
            return


def run_lda(job: dict, clock: Clock) -> None:
    import lda as lda_pkg
    import lda.utils

    tokens, doc_ptr, vocab = _arrays(job["train"])
    x = _doc_word(tokens, doc_ptr, len(vocab)).astype(np.int64)
    model = lda_pkg.LDA(n_topics=job["k"], n_iter=1, alpha=job["alpha"], eta=job["beta"],
                        random_state=job["seed"])
    # lda.LDA.fit runs a fixed number of sweeps from scratch; this is its _fit loop, one
    # sweep per unit, so the sampler can be stopped at the budgets.
    rng = lda.utils.check_random_state(job["seed"])
    model._initialize(x)
    rands = model._rands.copy()
    clock.restart()
    sweeps = 0

    def phi() -> tuple[np.ndarray, np.ndarray]:
        return (model.nzw_ + job["beta"]).astype(np.float64), vocab

    while True:
        rng.shuffle(rands)
        model._sample_topics(rands)
        sweeps += 1
        if not clock.after_unit(phi, sweeps, sweeps):
            return


def run_biglda(job: dict, clock: Clock, sampler: str = "auto") -> None:
    from biglda.model import load
    from biglda.model.training import train_to_store as train

    out = os.path.join(job["dir"], "model.zarr")
    spent, its = 0.0, 0
    for i, budget in enumerate(job["budgets"]):
        records: list[dict] = []
        # A checkpoint only at the stop (checkpoint_every is never reached), then resume.
        train(job["train"], out, n_topics=job["k"], iterations=10**9, sampler=sampler,
              alpha=job["alpha"], beta=job["beta"], workers=job["workers"], seed=job["seed"],
              max_seconds=max(budget - spent, 1.0), checkpoint_every=10**9 - 1,
              resume=i > 0, overwrite=True, on_record=records.append)
        new = [r for r in records if r.get("type") == "iteration"]
        spent += max((r["elapsed"] for r in new), default=0.0)
        its += len(new)
        model = load(out)
        choice = model.attrs.get("sampler_choice")
        if choice and i == 0:
            print(f"biglda sampler: {choice['sampler']} ({choice['reason']})", flush=True)
            clock.info["sampler_choice"] = choice
        clock.save(model.topic_word, model.vocab, spent, its, its, budget)
        if spent >= job["budgets"][-1]:
            return


def run_random(job: dict, clock: Clock) -> None:
    _, _, vocab = _arrays(job["train"])
    phi = np.random.default_rng(job["seed"]).dirichlet(np.ones(len(vocab)), size=job["k"])
    for b in job["budgets"]:
        clock.save(phi, vocab, 0.0, 0, 0, b)


def worker_main(job_path: str) -> int:
    """Train one system (in its own process) and save its checkpoints."""
    with open(job_path) as f:
        job = json.load(f)
    sys.path.append(job["peers_dir"])
    n_tokens = None
    saved: list[dict] = []
    clock: Clock | None = None

    def save(phi: np.ndarray, vocab: np.ndarray, seconds: float, units: int, sweeps: int,
             budget: float) -> None:
        i = len(saved)
        np.save(os.path.join(job["dir"], f"phi-{i}.npy"), np.asarray(phi, dtype=np.float32))
        np.save(os.path.join(job["dir"], f"vocab-{i}.npy"), np.asarray(vocab, dtype=str))
        saved.append({"budget": budget, "train_s": seconds, "units": units, "sweeps": sweeps,
                      "phi": f"phi-{i}.npy", "vocab": f"vocab-{i}.npy"})
        with open(os.path.join(job["dir"], "checkpoints.json"), "w") as f:
            json.dump({"n_tokens": n_tokens, "checkpoints": saved,
                       **(clock.info if clock is not None else {})}, f)

    from biglda.corpus import Corpus

    n_tokens = Corpus.open(job["train"]).n_tokens
    clock = Clock(job["budgets"], save)
    s = job["system"]
    if s == "biglda" or s.startswith("biglda-"):
        run_biglda(job, clock, sampler=s.partition("-")[2] or "auto")
    elif s.startswith("tomotopy"):
        run_tomotopy(job, clock, workers=int(s.split("-")[1]))
    elif s.startswith("gensim"):
        run_gensim(job, clock, multi=s == "gensim-multi")
    elif s.startswith("sklearn"):
        run_sklearn(job, clock, method=s.split("-")[1])
    elif s == "lda":
        run_lda(job, clock)
    elif s == "random":
        run_random(job, clock)
    else:
        raise SystemExit(f"unknown system {s}")
    return 0


# --------------------------------------------------------------------------- measuring


def run_measured(cmd: list[str], limit: float, log_path: str,
                 env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``; return its exit status, wall seconds and peak memory (MiB).

    ``maxrss_mib``: ``ru_maxrss`` of the child (the largest single process of its tree,
    reaped children included), read by ``/usr/bin/time`` when it exists: a child forked
    from this (large) process would inherit this process's high-water mark through exec.
    ``tree_rss_mib``: peak of the summed RSS of the child and all its descendants, sampled
    every 0.25 s (pages shared between processes count once per process).
    """
    import psutil

    rss_file = log_path + ".maxrss"
    if os.path.exists("/usr/bin/time"):
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd]
    t0 = time.perf_counter()
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not done.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
            except psutil.Error:
                pass
            peak[0] = max(peak[0], total)
            done.wait(0.25)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    killed = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > limit and not killed:
            killed = True
            for p in psutil.Process(proc.pid).children(recursive=True):
                p.kill()
            proc.kill()
        time.sleep(0.2)
    done.set()
    th.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    maxrss_kib = usage.ru_maxrss
    try:
        with open(rss_file) as f:
            maxrss_kib = int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return {"returncode": proc.returncode, "killed": killed,
            "wall_s": time.perf_counter() - t0, "maxrss_mib": maxrss_kib / 1024,
            "tree_rss_mib": peak[0] / 2**20}


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
    m = run_measured([sys.executable, os.path.abspath(__file__), "--worker", job_path], limit,
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


# --------------------------------------------------------------------------- repeats

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


def _write(out: str, results: list[dict], meta: dict) -> str:
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1, default=str)
    md = markdown(results, meta)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    return md


if __name__ == "__main__":
    sys.exit(main())
