"""Quality benchmark: biglda vs tomotopy, gensim and scikit-learn at the same wall-clock budget.

Every system trains on the same 90% of the Debian package descriptions and is scored by
biglda's own evaluator from its topic-word matrix alone (``biglda.model.evaluate``):

- held-out log-likelihood per token on the other 10% by document completion (even token
  positions fold in theta with phi fixed — 20 burn-in + 30 averaged sweeps, alpha = 0.1 for
  every system — odd positions are scored; see ``biglda.model.evaluate``);
- NPMI coherence of the top 10 words, document co-occurrence in the training documents;
- topic diversity of the top 25 words.

Systems (each gets ``--budget`` seconds of training wall clock; the loops check the clock
between units of work, so a run can overshoot by one unit — the table shows the real time):

- ``biglda``   — ``biglda.train`` (lightlda sampler, embedded LocalCluster with ``--workers``
  workers, alpha 0.1, beta 0.01, ``max_seconds=budget``);
- ``tomotopy`` — ``LDAModel(k, alpha=0.1, eta=0.01)``, ``train(10, workers=2)`` per unit;
- ``gensim``   — ``LdaMulticore(workers=2)`` with its default priors, one pass per unit;
- ``sklearn``  — ``LatentDirichletAllocation(learning_method="online", n_jobs=2)`` with its
  default priors, one ``partial_fit`` pass per unit;
- ``random``   — Dirichlet(1) topics (a floor for the scores).

Peers are not dependencies of biglda: ``--setup`` pip-installs them into ``--peers-dir``
(default ``runs/bench_quality/peers``, ``pip install --target``), which is appended to
``sys.path`` (so the project's own numpy/scipy stay first). A peer that is not importable is
skipped and reported.

Usage::

    .venv/bin/python pipelines/bench_quality.py --setup            # once: install peers
    .venv/bin/python pipelines/bench_quality.py --topics 100 --budget 120
    .venv/bin/python pipelines/bench_quality.py --topics 100 1000 --budget 300

Outputs ``OUT/results.json`` and ``OUT/results.md`` (default ``OUT=runs/bench_quality``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

DEFAULT_CORPUS = "/work/shared/corpora/debian-descriptions.tsv.gz"
PEERS = ("tomotopy", "gensim", "sklearn")
PIP_NAMES = {"tomotopy": "tomotopy", "gensim": "gensim", "sklearn": "scikit-learn"}

log = logging.getLogger("bench_quality")


# --------------------------------------------------------------------------- data


def prepare_data(corpus_path: str, out: str, test_fraction: float, seed: int) -> dict:
    """Ingest once, then split documents into train/test corpora (same words, by spelling)."""
    from biglda.corpus import Corpus, write_corpus
    from biglda.corpus.ingest import ingest  # the function (biglda.corpus.ingest is also a module)

    full = os.path.join(out, "corpus.zarr")
    if not os.path.exists(full):
        log.info("ingesting %s", corpus_path)
        ingest(corpus_path, full, format="tsv")
    c = Corpus.open(full)
    tokens = c.read_tokens(0, c.n_tokens)
    doc_ptr = np.asarray(c.doc_ptr, dtype=np.int64)
    vocab = np.array(c.vocab.tolist(), dtype=object)
    doc_ids = np.array(c.doc_ids.tolist(), dtype=object)
    rng = np.random.default_rng(seed)
    is_test = rng.random(c.n_docs) < test_fraction
    parts = {}
    for name, mask in (("train", ~is_test), ("test", is_test)):
        idx = np.flatnonzero(mask)
        lengths = np.diff(doc_ptr)[idx]
        ptr = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        take = np.concatenate([np.arange(doc_ptr[d], doc_ptr[d + 1]) for d in idx])
        url = os.path.join(out, f"{name}.zarr")
        write_corpus(url, tokens[take], ptr, vocab, doc_ids=doc_ids[idx],
                     attrs={"tokenizer": c.tokenizer}, overwrite=True)
        parts[name] = url
    train, test = Corpus.open(parts["train"]), Corpus.open(parts["test"])
    log.info("train: %d docs %d tokens V=%d; test: %d docs %d tokens", train.n_docs,
             train.n_tokens, train.n_words, test.n_docs, test.n_tokens)
    return {"train": parts["train"], "test": parts["test"],
            "n_train_docs": train.n_docs, "n_train_tokens": train.n_tokens,
            "n_test_docs": test.n_docs, "n_test_tokens": test.n_tokens,
            "n_words": train.n_words}


def _train_arrays(url: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from biglda.corpus import Corpus

    c = Corpus.open(url)
    return (c.read_tokens(0, c.n_tokens), np.asarray(c.doc_ptr, dtype=np.int64),
            np.array(c.vocab.tolist(), dtype=object))


def _run_until(budget: float, step: Callable[[], None]) -> tuple[float, int]:
    t0 = time.perf_counter()
    units = 0
    while True:
        step()
        units += 1
        if time.perf_counter() - t0 >= budget:
            return time.perf_counter() - t0, units


# --------------------------------------------------------------------------- systems
# Each returns (phi [K, V] float, vocab [V] str, info dict).


def run_biglda(data: dict, k: int, budget: float, seed: int, workers: int, out: str):
    import biglda

    t0 = time.perf_counter()
    model = biglda.train(data["train"], n_topics=k, out=os.path.join(out, f"biglda-k{k}.zarr"),
                         iterations=100_000, sampler="lightlda", alpha=0.1, beta=0.01,
                         workers=workers, seed=seed, max_seconds=budget, overwrite=True,
                         checkpoint_every=0)
    wall = time.perf_counter() - t0
    hist = model.history
    train_s = float(hist[-1].get("elapsed", wall)) if hist else wall
    # Fold-in speed (the transform target: >= 1 M token samples/s per core at K=100):
    # one thread, 50 sweeps over every test document.
    from biglda.corpus import Corpus

    test = Corpus.open(data["test"])
    t1 = time.perf_counter()
    model.transform(test, iterations=50, n_jobs=1)
    foldin_s = time.perf_counter() - t1
    return model.topic_word, model.vocab, {
        "train_s": train_s, "wall_s": wall, "units": f"{len(hist)} iterations",
        "foldin_token_samples_per_s_1core": 50 * test.n_tokens / foldin_s}


def run_tomotopy(data: dict, k: int, budget: float, seed: int, workers: int, out: str):
    import tomotopy as tp

    tokens, doc_ptr, vocab = _train_arrays(data["train"])
    mdl = tp.LDAModel(k=k, alpha=0.1, eta=0.01, seed=seed)
    for d in range(len(doc_ptr) - 1):
        words = vocab[tokens[doc_ptr[d]:doc_ptr[d + 1]]].tolist()
        if words:
            mdl.add_doc(words)
    seconds, units = _run_until(budget, lambda: mdl.train(10, workers=workers))
    phi = np.array([mdl.get_topic_word_dist(t) for t in range(k)])
    return phi, np.array(list(mdl.used_vocabs), dtype=object), {
        "train_s": seconds, "units": f"{10 * units} iterations"}


def _bow(tokens: np.ndarray, doc_ptr: np.ndarray) -> list[list[tuple[int, int]]]:
    out = []
    for d in range(len(doc_ptr) - 1):
        ids, counts = np.unique(tokens[doc_ptr[d]:doc_ptr[d + 1]], return_counts=True)
        out.append(list(zip(ids.tolist(), counts.tolist(), strict=True)))
    return out


def run_gensim(data: dict, k: int, budget: float, seed: int, workers: int, out: str):
    from gensim.models import LdaMulticore

    tokens, doc_ptr, vocab = _train_arrays(data["train"])
    bow = _bow(tokens, doc_ptr)
    id2word = dict(enumerate(vocab.tolist()))
    lda = LdaMulticore(num_topics=k, id2word=id2word, workers=workers, random_state=seed)
    seconds, units = _run_until(budget, lambda: lda.update(bow))
    return lda.get_topics(), vocab, {"train_s": seconds, "units": f"{units} passes"}


def run_sklearn(data: dict, k: int, budget: float, seed: int, workers: int, out: str):
    import scipy.sparse as sp
    from sklearn.decomposition import LatentDirichletAllocation

    tokens, doc_ptr, vocab = _train_arrays(data["train"])
    rows = np.repeat(np.arange(len(doc_ptr) - 1), np.diff(doc_ptr))
    x = sp.csr_matrix((np.ones(len(tokens)), (rows, tokens)),
                      shape=(len(doc_ptr) - 1, len(vocab)))
    lda = LatentDirichletAllocation(n_components=k, learning_method="online", n_jobs=workers,
                                    random_state=seed)
    seconds, units = _run_until(budget, lambda: lda.partial_fit(x))
    return lda.components_, vocab, {"train_s": seconds, "units": f"{units} passes"}


def run_random(data: dict, k: int, budget: float, seed: int, workers: int, out: str):
    _, _, vocab = _train_arrays(data["train"])
    phi = np.random.default_rng(seed).dirichlet(np.ones(len(vocab)), size=k)
    return phi, vocab, {"train_s": 0.0, "units": "-"}


SYSTEMS = {"biglda": run_biglda, "tomotopy": run_tomotopy, "gensim": run_gensim,
           "sklearn": run_sklearn, "random": run_random}


# --------------------------------------------------------------------------- scoring


def score(phi: np.ndarray, vocab: np.ndarray, data: dict, jobs: int) -> dict:
    from biglda.corpus import Corpus
    from biglda.model import evaluate as ev

    t0 = time.perf_counter()
    held = ev.heldout_loglik(phi, 0.1, Corpus.open(data["test"]), vocab=vocab, n_jobs=jobs)
    npmi = ev.coherence(phi, vocab, Corpus.open(data["train"]), measure="npmi", top_n=10)
    return {"heldout_ll_per_token": held.loglik_per_token, "perplexity": held.perplexity,
            "heldout_unknown_tokens": held.n_unknown, "npmi": npmi.mean,
            "diversity": ev.diversity(phi, 25), "score_s": time.perf_counter() - t0}


def _markdown(results: list[dict], meta: dict) -> str:
    lines = [f"# biglda quality benchmark ({meta['date']})", "",
             f"Corpus: {meta['corpus']} — train {meta['data']['n_train_docs']} docs / "
             f"{meta['data']['n_train_tokens']} tokens, test {meta['data']['n_test_docs']} docs / "
             f"{meta['data']['n_test_tokens']} tokens, V = {meta['data']['n_words']}. "
             f"Budget {meta['budget']} s of training per system, {meta['workers']} workers.", "",
             "| K | system | train s | work | held-out LL/token | perplexity | NPMI | diversity |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['k']} | {r['system']} | - | {r['error']} | | | | |")
            continue
        lines.append(f"| {r['k']} | {r['system']} | {r['train_s']:.0f} | {r['units']} | "
                     f"{r['heldout_ll_per_token']:.4f} | {r['perplexity']:.1f} | "
                     f"{r['npmi']:.4f} | {r['diversity']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--out", default="runs/bench_quality")
    ap.add_argument("--topics", type=int, nargs="+", default=[100])
    ap.add_argument("--budget", type=float, default=120.0, help="training seconds per system")
    ap.add_argument("--systems", default="biglda,tomotopy,gensim,sklearn,random")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--test-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--append", action="store_true",
                    help="keep earlier rows of OUT/results.json (same K and system replaced)")
    ap.add_argument("--peers-dir", default="runs/bench_quality/peers",
                    help="where --setup installs the peers (appended to sys.path)")
    ap.add_argument("--setup", action="store_true",
                    help="pip-install the peers into --peers-dir and exit")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("distributed").setLevel(logging.WARNING)
    os.makedirs(args.out, exist_ok=True)
    peers_dir = os.path.abspath(args.peers_dir)
    if args.setup:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", peers_dir,
                        *PIP_NAMES.values()], check=True)
        return 0
    if os.path.isdir(peers_dir):
        sys.path.append(peers_dir)  # after the project's own packages
        # worker processes of joblib/loky (sklearn n_jobs) start fresh interpreters
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.environ.get("PYTHONPATH"), peers_dir) if p)
    data = prepare_data(args.corpus, args.out, args.test_fraction, args.seed)
    results = []
    previous = os.path.join(args.out, "results.json")
    if args.append and os.path.exists(previous):
        with open(previous) as f:
            results = json.load(f)["results"]
    for k in args.topics:
        for name in args.systems.split(","):
            log.info("K=%d %s: training (budget %.0f s)", k, name, args.budget)
            try:
                phi, vocab, info = SYSTEMS[name](data, k, args.budget, args.seed, args.workers,
                                                 args.out)
            except ImportError as exc:
                log.warning("%s skipped: %s (run with --setup)", name, exc)
                row = {"k": k, "system": name, "error": f"not installed ({exc.name})"}
            except Exception as exc:  # one peer failing must not lose the other rows
                log.exception("%s failed", name)
                row = {"k": k, "system": name, "error": f"failed: {type(exc).__name__}"}
            else:
                row = {"k": k, "system": name, **info, **score(phi, vocab, data, args.workers)}
            results = [r for r in results if (r["k"], r["system"]) != (k, name)]
            log.info("%s", row)
            results.append(row)
            _write(args, data, results)
    print(_write(args, data, results), end="")
    return 0


def _write(args: argparse.Namespace, data: dict, results: list[dict]) -> str:
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "corpus": args.corpus,
            "budget": args.budget, "workers": args.workers, "data": data,
            "scoring": "document completion (even positions observed, odd scored; 20 burn-in + "
                       "30 averaged fold-in sweeps, alpha 0.1); NPMI top 10, document "
                       "co-occurrence in the training documents; diversity top 25"}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    md = _markdown(results, meta)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    return md


if __name__ == "__main__":
    sys.exit(main())
