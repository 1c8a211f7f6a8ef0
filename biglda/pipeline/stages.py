"""The stage kinds, one :class:`StageKind` record each: parameters and runner together.

Every runner gets the stage's parameters with references and input paths resolved, and
writes only inside its ``folder``. The ``train`` stage's keys are the trainer's settings
(:func:`biglda.trainer.config.setting_names`), the ``ingest`` stage's the parameters of
:func:`biglda.corpus.ingest.ingest`, the ``synth`` stage's the fields of
:class:`~biglda.corpus.synth.SynthSpec`: nothing here repeats those declarations.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import subprocess
import sys
import time
from dataclasses import fields
from importlib.metadata import entry_points
from typing import Any

from biglda.corpus import Corpus, load_truth
from biglda.corpus.ingest import ingest
from biglda.corpus.split import split_corpus
from biglda.corpus.synth import SynthSpec, write_synthetic
from biglda.errors import ConfigError, PipelineError
from biglda.io import write_text_atomic
from biglda.pipeline.memory import PeakMemory
from biglda.pipeline.spec import Note, Pipeline, Stage, StageKind
from biglda.trainer.config import setting_names
from biglda.trainer.metrics import JsonlSink


def _keys(*names: str) -> frozenset[str]:
    return frozenset(names)


# --------------------------------------------------------------------------- synth


def _synth_params() -> frozenset[str]:
    return frozenset(f.name for f in fields(SynthSpec)) | {"chunk_tokens"}


def _run_synth(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    names = {f.name for f in fields(SynthSpec)}
    spec = SynthSpec(**{k: v for k, v in params.items() if k in names})
    sizes = write_synthetic(os.path.join(folder, "corpus.zarr"), spec,
                            chunk_tokens=params.get("chunk_tokens"))
    return (f"{sizes['n_docs']:,} documents, {sizes['n_tokens']:,} tokens, "
            f"{sizes['n_words']:,} words, {spec.n_topics} true topics")


# --------------------------------------------------------------------------- ingest

#: ingest's parameters a stage does not set: the output is the stage's own.
_INGEST_FIXED = ("inputs", "out", "overwrite")


def _ingest_params() -> frozenset[str]:
    """``input`` (ingest's ``inputs``), ``vocab_from``, and ingest's other parameters."""
    names = inspect.signature(ingest).parameters
    return frozenset(n for n in names if n not in _INGEST_FIXED) | {"input", "vocab_from"}


def _run_ingest(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    kw = {k: v for k, v in params.items() if k not in ("input", "vocab_from")}
    if "vocab_from" in params:
        if "vocabulary" in params:
            raise ConfigError("give either vocab_from or vocabulary, not both")
        # the model layer reads both formats; it pulls in numba, paid only with vocab_from
        from biglda.model.vocab_source import ingest_settings_from

        kw = ingest_settings_from(params["vocab_from"], "vocab_from", **kw)
    stats = ingest(params["input"], os.path.join(folder, "corpus.zarr"), **kw)
    unknown = (f", {stats.unknown_tokens:,} tokens outside the vocabulary"
               if kw.get("vocabulary") is not None else "")
    return (f"{stats.n_docs:,} documents, {stats.n_tokens:,} tokens, {stats.n_words:,} words "
            f"({stats.dropped_docs:,} documents dropped{unknown})")


# --------------------------------------------------------------------------- split


def _run_split(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    n_train, n_test = split_corpus(params["corpus"], os.path.join(folder, "train.zarr"),
                                   os.path.join(folder, "test.zarr"),
                                   float(params.get("test_fraction", 0.1)),
                                   int(params.get("seed", 0)))
    return f"{n_train:,} training and {n_test:,} held-out documents"


# --------------------------------------------------------------------------- train


def _train_params() -> frozenset[str]:
    """``corpus`` and every training setting (by its name)."""
    return frozenset(("corpus", *setting_names()))


class _Progress:
    """The train stage's record handler: metrics.jsonl, and progress lines.

    A progress line for the first and last iteration and at most every 30 s.
    """

    def __init__(self, folder: str, note: Note) -> None:
        self.metrics = JsonlSink(os.path.join(folder, "metrics.jsonl"))
        self.note = note
        self.last: dict[str, Any] = {}
        self.shown = 0.0

    def __call__(self, rec: dict) -> None:
        self.metrics(rec)
        if rec.get("type") != "iteration":
            return
        self.last.update(rec)
        now = time.monotonic()
        if rec["iteration"] in (1, rec["n_iterations"]) or now - self.shown >= 30:
            self.shown = now
            self.note(f"iteration {rec['iteration']}/{rec['n_iterations']}: LL/token "
                      f"{rec['ll_per_token']:.4f}, {rec['tokens_per_s']:,.0f} tokens/s, "
                      f"{rec['elapsed']:.0f} s")


def _run_train(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    from biglda.model.training import train_to_store  # numba kernels and the Dask trainer

    kw = {k: v for k, v in params.items() if k != "corpus"}
    progress = _Progress(folder, note)
    peaks = PeakMemory()
    try:
        with peaks:
            train_to_store(params["corpus"], os.path.join(folder, "model.zarr"),
                           on_record=progress, **kw)
    finally:
        progress.metrics.close()
        with open(os.path.join(folder, "resources.json"), "w") as f:
            json.dump(peaks.summary(), f, indent=1)
    last = progress.last
    if not last:
        return "trained"
    mem = peaks.summary()
    return (f"{last['iteration']} iterations in {last['elapsed']:.1f} s "
            f"({last['elapsed'] / max(last['iteration'], 1):.2f} s/iteration), LL/token "
            f"{last['ll_per_token']:.4f}, {last['tokens_per_s']:,.0f} tokens/s; peak RSS "
            f"{mem['this_process_mib']:.0f} MiB here, {mem['largest_child_mib']:.0f} MiB the "
            f"largest worker process")


# --------------------------------------------------------------------------- evaluate

_EVAL_PARAMS = _keys("model", "test", "coherence_corpus", "truth", "burn_in", "samples",
                     "top_n", "window", "seed", "jobs", "diversity_top_n")


def _training_summary(hist: list[dict]) -> dict[str, Any]:
    """Sum up a model's history: iterations, seconds, median seconds per iteration, tokens/s."""
    tps = [r["tokens_per_s"] for r in hist if r.get("tokens_per_s")]
    its = [b["elapsed"] - a["elapsed"] for a, b in itertools.pairwise(hist)]
    return {"iterations": len(hist), "seconds": hist[-1].get("elapsed"),
            "median_seconds_per_iteration": sorted(its)[len(its) // 2] if its else None,
            "final_ll_per_token": hist[-1].get("ll_per_token"),
            "median_tokens_per_s": sorted(tps)[len(tps) // 2] if tps else None}


def _run_evaluate(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    # biglda.model pulls in numba (the fold-in kernels): only evaluate stages pay for it
    from biglda.model import load
    from biglda.model.recovery import topic_recovery

    model = load(params["model"])
    top_n = int(params.get("top_n", 10))
    res: dict[str, Any] = {"model": params["model"], "n_topics": model.n_topics}
    if model.history:
        res["training"] = _training_summary(model.history)
    parts = []
    if "test" in params:
        held = model.heldout_loglik(Corpus.open(params["test"]),
                                    burn_in=int(params.get("burn_in", 20)),
                                    samples=int(params.get("samples", 30)),
                                    seed=int(params.get("seed", 0)),
                                    n_jobs=int(params.get("jobs", 1)))
        res["heldout"] = held.to_dict()
        res["heldout_loglik_per_token"] = held.loglik_per_token
        res["perplexity"] = held.perplexity
        parts.append(f"held-out LL/token {held.loglik_per_token:.4f}")
    ref = params.get("coherence_corpus") or params.get("test")
    if ref:
        ref_corpus = Corpus.open(ref)
        for measure in ("npmi", "umass"):
            score = model.coherence(ref_corpus, measure=measure, top_n=top_n,
                                    window=params.get("window"))
            res[measure] = score.mean
        res["coherence_corpus"] = ref
        parts.append(f"NPMI {res['npmi']:.4f}")
    res["diversity"] = model.diversity(int(params.get("diversity_top_n", 25)))
    parts.append(f"diversity {res['diversity']:.3f}")
    if "truth" in params:
        true_phi, _ = load_truth(params["truth"])
        true_vocab = Corpus.open(params["truth"]).vocab
        res["recovery"] = topic_recovery(model.topic_word, model.vocab, true_phi, true_vocab)
        parts.append(f"recovery cosine {res['recovery']['mean_cosine']:.3f} (random "
                     f"{res['recovery']['random_mean_cosine']:.3f})")
    with open(os.path.join(folder, "evaluation.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    return ", ".join(parts)


# --------------------------------------------------------------------------- report


def _run_report(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    found = entry_points(group="biglda.reports", name="html")
    if not found:
        raise ConfigError("no report plugin installed (entry point biglda.reports:html)")
    out = os.path.join(folder, "report.html")
    next(iter(found)).load()(params["model"], out, top_n=int(params.get("top_n", 15)))
    return f"wrote {os.path.relpath(out)}"


# --------------------------------------------------------------------------- script


def _run_script(p: Pipeline, st: Stage, params: dict, folder: str, note: Note) -> str:
    """Run a script of ``pipelines/`` (not part of the package) in a subprocess."""
    script = params["script"]
    if not os.path.isfile(script):
        raise ConfigError(f"script {script} does not exist")
    args_path = os.path.join(folder, "params.json")
    write_text_atomic(args_path, json.dumps(
        {**params, "stage": st.name, "run_dir": p.run_dir, "root": p.root}, indent=1))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (p.root, env.get("PYTHONPATH")) if x)
    proc = subprocess.run([sys.executable, script, "--params", args_path, "--out", folder],
                          cwd=p.root, env=env)
    if proc.returncode != 0:
        raise PipelineError(f"{os.path.relpath(script, p.root)} exited with status "
                            f"{proc.returncode}")
    return f"{os.path.relpath(script, p.root)} wrote {os.path.relpath(folder)}"


def _any() -> None:
    return None


# --------------------------------------------------------------------------- the registry

# Input parameters take a reference ("@stage", "@stage.output") or a path (relative to root);
# paths are fingerprinted like the outputs of referenced stages.
KINDS: dict[str, StageKind] = {k.name: k for k in (
    StageKind("synth", _synth_params, _run_synth, {"corpus": "corpus.zarr"}, "corpus"),
    StageKind("ingest", _ingest_params, _run_ingest, {"corpus": "corpus.zarr"}, "corpus",
              required=("input",), paths=("input", "vocab_from")),
    StageKind("split", lambda: _keys("corpus", "test_fraction", "seed"), _run_split,
              {"train": "train.zarr", "test": "test.zarr"}, "train",
              refs={"corpus": ("corpus",)}, required=("corpus",), paths=("corpus",)),
    StageKind("train", _train_params, _run_train,
              {"model": "model.zarr", "metrics": "metrics.jsonl"}, "model",
              refs={"corpus": ("train", "corpus")}, required=("corpus", "n_topics"),
              paths=("corpus",)),
    StageKind("evaluate", lambda: _EVAL_PARAMS, _run_evaluate,
              {"evaluation": "evaluation.json"}, "evaluation",
              refs={"model": ("model",), "test": ("test",)}, required=("model",),
              paths=("model", "test", "coherence_corpus", "truth")),
    StageKind("report", lambda: _keys("model", "top_n"), _run_report,
              {"report": "report.html"}, "report", refs={"model": ("model",)},
              required=("model",), paths=("model",)),
    StageKind("compare", _any, _run_script, {"results": "results.json", "table": "results.md"},
              "table", refs={"train": ("train",), "test": ("test",)},
              required=("train", "test"), paths=("script", "train", "test"),
              script="pipelines/compare.py"),
    StageKind("script", _any, _run_script, None, required=("script",), paths=("script",)),
)}
