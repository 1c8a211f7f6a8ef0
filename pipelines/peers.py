"""The peer systems of the ``compare`` stage and the child process that trains one of them.

``worker_main`` runs in its own process (``python pipelines/peers.py JOB``, started by
``compare.py``; ``compare.py --worker JOB`` does the same): it trains one system
on the training corpus and saves its topic-word matrix at every budget. Each trainer gets
(job, clock) and calls ``clock.after_unit`` between units of work (``clock.save`` when it
checkpoints by itself); ``after_unit`` returns False once the last budget is done. Which
systems there are and what each one runs: ``compare.py``'s docstring.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

# The corpus as arrays and as gensim bags of words, as the quality benchmark reads them
# (this script's folder is on sys.path when it runs).
from bench_quality import _bow
from bench_quality import _train_arrays as _arrays

SYSTEMS = ("biglda", "biglda-processes", "biglda-cgs", "biglda-lightlda", "biglda-warplda",
           "biglda-random-init", "biglda-sequential-init", "tomotopy-1",
           "tomotopy-2", "gensim", "gensim-multi", "sklearn-online", "sklearn-batch", "lda",
           "random")
#: Python module each system needs -> pip name.
NEEDS = {"tomotopy-1": ("tomotopy", "tomotopy"), "tomotopy-2": ("tomotopy", "tomotopy"),
         "gensim": ("gensim", "gensim"), "gensim-multi": ("gensim", "gensim"),
         "sklearn-online": ("sklearn", "scikit-learn"),
         "sklearn-batch": ("sklearn", "scikit-learn"), "lda": ("lda", "lda")}
GIBBS = {"biglda", "biglda-processes", "biglda-cgs", "biglda-lightlda", "biglda-warplda",
         "biglda-random-init", "biglda-sequential-init", "tomotopy-1",
         "tomotopy-2", "lda"}



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


def run_biglda(job: dict, clock: Clock, sampler: str = "auto", init: str = "random",
               processes: bool = False) -> None:
    """biglda on one process of ``workers`` threads, or ``workers`` processes of one."""
    from biglda.model import load
    from biglda.model.training import train_to_store as train

    out = os.path.join(job["dir"], "model.zarr")
    spent, its = 0.0, 0
    for i, budget in enumerate(job["budgets"]):
        records: list[dict] = []
        # A checkpoint only at the stop (checkpoint_every is never reached), then resume.
        train(job["train"], out, n_topics=job["k"], iterations=10**9, sampler=sampler,
              init=init, alpha=job["alpha"], beta=job["beta"],
              workers=job["workers"] if processes else 1,
              threads_per_worker=1 if processes else job["workers"], seed=job["seed"],
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
    if s.startswith("biglda-") and s.endswith("-init"):  # biglda-<random|sequential>-init
        run_biglda(job, clock, init=s.split("-")[1])
    elif s == "biglda-processes":
        run_biglda(job, clock, processes=True)
    elif s == "biglda" or s.startswith("biglda-"):
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


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1]))
