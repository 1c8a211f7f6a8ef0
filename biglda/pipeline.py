"""Pipelines: a declared sequence of stages in one TOML file, outputs in one run directory.

A pipeline file names its stages in order; each stage has a kind (``synth``, ``ingest``,
``split``, ``train``, ``evaluate``, ``report``, ``compare``, ``script``) and parameters::

    [pipeline]
    name = "demo"                 # default: the file name without .toml
    description = "..."
    root = ".."                   # relative paths are relative to this (default: the file's folder)
    run_dir = "runs/demo"         # default: runs/<name> under root

    [stages.ingest]               # kind = the stage name unless `kind = ...` is given
    input = "datasets/demo/debian-sample.tsv.gz"

    [stages.train]
    corpus = "@ingest"            # "@stage" = that stage's main output, "@split.test" a named one
    n_topics = 20

Every stage writes only inside ``<run_dir>/<stage>/``. After a stage succeeds, its record
``<run_dir>/.stages/<stage>.json`` stores a key: the SHA-256 of the stage's kind and
parameters, the fingerprints of its inputs (files it reads, outputs of the stages it refers
to) and the biglda version, plus the fingerprints of its outputs. A later run skips the stage
when the key is the same and every output is still there, unchanged; otherwise the stage
runs again, and so do the stages that read its outputs (their input fingerprints change).
A stage that fails leaves no record (the old one is removed before it starts), so nothing
claims a success that did not happen.

Stages call biglda's Python API in this process; ``compare`` and ``script`` run a Python
script (``pipelines/compare.py``, ...) in a subprocess with ``--params PARAMS.json --out DIR``,
because those scripts are not part of the package.

This module is orchestration on top of the public API: it may import ``biglda.corpus``,
``biglda.train`` and ``biglda.model``; only :mod:`biglda.cli` imports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from biglda.corpus.split import split_corpus
from biglda.errors import BigLDAError, ConfigError, PipelineError

log = logging.getLogger("biglda.pipeline")

RECORD_DIR = ".stages"
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
#: Files up to this size are fingerprinted by content, larger ones by size and mtime.
HASH_LIMIT = 256 << 20


# --------------------------------------------------------------------------- stage kinds


@dataclass(frozen=True)
class Kind:
    """What a stage kind reads and writes."""

    outputs: dict[str, str]            # artifact name -> file name in the stage folder
    default: str                       # the artifact "@stage" means
    refs: dict[str, tuple[str, ...]]   # param -> artifacts it may default to (latest stage)
    required: tuple[str, ...] = ()     # params that must be given (or defaulted)
    paths: tuple[str, ...] = ()        # params that name input files (relative to root)


# Input parameters take a reference ("@stage", "@stage.output") or a path (relative to root);
# paths are fingerprinted like the outputs of referenced stages.
KINDS: dict[str, Kind] = {
    "synth": Kind({"corpus": "corpus.zarr"}, "corpus", {}),
    "ingest": Kind({"corpus": "corpus.zarr"}, "corpus", {}, ("input",), ("input",)),
    "split": Kind({"train": "train.zarr", "test": "test.zarr"}, "train",
                  {"corpus": ("corpus",)}, ("corpus",), ("corpus",)),
    "train": Kind({"model": "model.zarr", "metrics": "metrics.jsonl"}, "model",
                  {"corpus": ("train", "corpus")}, ("corpus", "n_topics"), ("corpus",)),
    "evaluate": Kind({"evaluation": "evaluation.json"}, "evaluation",
                     {"model": ("model",), "test": ("test",)}, ("model",),
                     ("model", "test", "coherence_corpus", "truth")),
    "report": Kind({"report": "report.html"}, "report", {"model": ("model",)}, ("model",),
                   ("model",)),
    "compare": Kind({"results": "results.json", "table": "results.md"}, "table",
                    {"train": ("train",), "test": ("test",)}, ("train", "test"),
                    ("script", "train", "test")),
    "script": Kind({}, "", {}, ("script",), ("script",)),
}
_DEFAULT_SCRIPTS = {"compare": "pipelines/compare.py"}


@dataclass
class Stage:
    """One declared stage: its name, kind and raw parameters (references unresolved)."""

    name: str
    kind: str
    params: dict[str, Any]
    deps: list[str] = field(default_factory=list)

    @property
    def outputs(self) -> dict[str, str]:
        if self.kind == "script":
            # named by stem ("@stage.scaling"); files sharing a stem keep their full names,
            # so every declared output is tracked (scaling.json and scaling.md both)
            files = list(self.params.get("outputs", []))
            stems = [os.path.splitext(o)[0] for o in files]
            return {(s if stems.count(s) == 1 else o): o for s, o in zip(stems, files, strict=True)}
        return KINDS[self.kind].outputs


@dataclass
class Pipeline:
    """A parsed pipeline file."""

    name: str
    path: str
    root: str
    run_dir: str
    description: str
    stages: list[Stage]

    def stage_dir(self, stage: Stage | str) -> str:
        return os.path.join(self.run_dir, stage if isinstance(stage, str) else stage.name)

    def record_path(self, stage: Stage | str) -> str:
        name = stage if isinstance(stage, str) else stage.name
        return os.path.join(self.run_dir, RECORD_DIR, f"{name}.json")

    def artifact(self, stage: str, name: str | None = None) -> str:
        st = self._by_name()[stage]
        name = name or KINDS[st.kind].default
        return os.path.join(self.stage_dir(st), st.outputs[name])

    def _by_name(self) -> dict[str, Stage]:
        return {s.name: s for s in self.stages}


# --------------------------------------------------------------------------- loading


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def load_pipeline(path: str, run_dir: str | None = None,
                  overrides: Iterable[str] = ()) -> Pipeline:
    """Read and check a pipeline file; ``overrides`` are ``STAGE.KEY=VALUE`` (TOML values).

    Raises :class:`PipelineError` (one line) for a missing or invalid file, an unknown stage
    kind, a reference to a stage that does not come earlier, or a missing parameter.

    Examples
    --------
    >>> p = load_pipeline("pipelines/demo.toml")  # doctest: +SKIP
    >>> [s.name for s in p.stages]  # doctest: +SKIP
    ['ingest', 'train', 'evaluate', 'report']
    """
    if not os.path.isfile(path):
        raise PipelineError(f"{path}: no such pipeline file")
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise PipelineError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{path}: cannot read: {exc}") from None
    head = doc.get("pipeline", {})
    if not isinstance(head, dict):
        raise PipelineError(f"{path}: [pipeline] must be a table")
    unknown = set(doc) - {"pipeline", "stages"}
    if unknown:
        raise PipelineError(f"{path}: unknown top-level table(s) {', '.join(sorted(unknown))} "
                            "(expected [pipeline] and [stages.NAME])")
    raw = doc.get("stages")
    if not isinstance(raw, dict) or not raw:
        raise PipelineError(f"{path}: no stages (declare them as [stages.NAME] tables)")
    name = str(head.get("name") or os.path.splitext(os.path.basename(path))[0])
    here = os.path.dirname(os.path.abspath(path))
    root = os.path.normpath(os.path.join(here, str(head.get("root", "."))))
    if run_dir is None:
        run_dir = os.path.join(root, str(head.get("run_dir", os.path.join("runs", name))))
    run_dir = os.path.abspath(run_dir)

    stages: list[Stage] = []
    for sname, params in raw.items():
        if not isinstance(params, dict):
            raise PipelineError(f"{path}: stages.{sname} must be a table")
        if not _NAME.match(sname):
            raise PipelineError(f"{path}: stage name {sname!r} may only use letters, digits, _ "
                                "and -")
        params = dict(params)
        kind = str(params.pop("kind", sname))
        if kind not in KINDS:
            raise PipelineError(f"{path}: stage {sname!r} has unknown kind {kind!r} (known: "
                                f"{', '.join(KINDS)})")
        if kind in _DEFAULT_SCRIPTS:
            params.setdefault("script", _DEFAULT_SCRIPTS[kind])
        stages.append(Stage(sname, kind, params))

    by_name = {s.name: s for s in stages}
    for item in overrides:
        key, eq, value = item.partition("=")
        sname, dot, param = key.strip().partition(".")
        if not eq or not dot or not param:
            raise PipelineError(f"--set {item!r}: expected STAGE.KEY=VALUE")
        if sname not in by_name:
            raise PipelineError(f"--set {item!r}: no stage named {sname!r}")
        by_name[sname].params[param] = _toml_value(value.strip())

    pipeline = Pipeline(name, os.path.abspath(path), root, run_dir,
                        str(head.get("description", "")), stages)
    for st in stages:
        allowed = _allowed_params(st.kind)
        extra = set(st.params) - allowed if allowed is not None else set()
        if extra:
            raise PipelineError(f"{path}: stage {st.name!r} ({st.kind}): unknown parameter(s) "
                                f"{', '.join(sorted(extra))} (allowed: "
                                f"{', '.join(sorted(allowed or ()))})")
    _resolve_refs(pipeline)
    return pipeline


def _allowed_params(kind: str) -> set[str] | None:
    """Parameters a kind accepts (None: any, passed on to a script)."""
    if kind == "synth":
        from biglda.corpus.synth import SynthSpec

        return set(SynthSpec.__dataclass_fields__) | {"chunk_tokens"}
    return {"ingest": set(_INGEST_KEYS), "split": {"corpus", "test_fraction", "seed"},
            "train": set(_train_keys()), "evaluate": set(_EVAL_KEYS),
            "report": {"model", "top_n"}}.get(kind)


def _resolve_refs(p: Pipeline) -> None:
    """Fill default references, check every reference, and list each stage's dependencies."""
    seen: list[Stage] = []
    for st in p.stages:
        kind = KINDS[st.kind]
        for param, wanted in kind.refs.items():
            if param in st.params:
                continue
            for prev in reversed(seen):
                hit = next((a for a in wanted if a in prev.outputs), None)
                if hit is not None:
                    st.params[param] = f"@{prev.name}.{hit}"
                    break
        for param in kind.required:
            if param not in st.params:
                raise PipelineError(f"{p.path}: stage {st.name!r} ({st.kind}) needs "
                                    f"{param!r}")
        for param, value in st.params.items():
            for ref in _refs_in(value):
                sname, _, art = ref[1:].partition(".")
                prev = next((s for s in seen if s.name == sname), None)
                if prev is None:
                    where = "is declared later" if sname in {s.name for s in p.stages} else \
                        "does not exist"
                    raise PipelineError(f"{p.path}: stage {st.name!r}: {param} = {ref!r}: stage "
                                        f"{sname!r} {where}")
                if art and art not in prev.outputs:
                    raise PipelineError(f"{p.path}: stage {st.name!r}: {param} = {ref!r}: "
                                        f"{sname!r} has no output {art!r} (it has "
                                        f"{', '.join(prev.outputs)})")
                if sname not in st.deps:
                    st.deps.append(sname)
        seen.append(st)


def _refs_in(value: Any) -> list[str]:
    if isinstance(value, str) and value.startswith("@"):
        return [value]
    if isinstance(value, list):
        return [r for v in value for r in _refs_in(v)]
    return []


# --------------------------------------------------------------------------- fingerprints


def fingerprint(path: str) -> str:
    """A short hash of a file (by content up to HASH_LIMIT) or of a folder (names, sizes, mtimes).

    Examples
    --------
    >>> fingerprint("/no/such/path")
    'missing'
    """
    h = hashlib.sha256()
    if os.path.isfile(path):
        st = os.stat(path)
        if st.st_size <= HASH_LIMIT:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        else:
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    elif os.path.isdir(path):
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for fn in sorted(filenames):
                full = os.path.join(dirpath, fn)
                st = os.stat(full)
                rel = os.path.relpath(full, path)
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    else:
        return "missing"
    return h.hexdigest()[:16]


def _version() -> str:
    import biglda

    return biglda.__version__


def _resolve_value(p: Pipeline, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("@"):
        sname, _, art = value[1:].partition(".")
        return p.artifact(sname, art or None)
    if isinstance(value, list):
        return [_resolve_value(p, v) for v in value]
    return value


def _abs(p: Pipeline, path: str) -> str:
    return path if "://" in path else os.path.normpath(os.path.join(p.root, path))


def resolved_params(p: Pipeline, st: Stage) -> dict[str, Any]:
    """The stage's parameters with references and input paths made absolute."""
    out = {k: _resolve_value(p, v) for k, v in st.params.items()}
    for param in KINDS[st.kind].paths:
        if param in out and not _refs_in(st.params[param]):
            v = out[param]
            out[param] = [_abs(p, x) for x in v] if isinstance(v, list) else _abs(p, str(v))
    return out


def stage_key(p: Pipeline, st: Stage) -> tuple[str, dict[str, str]]:
    """``(key, input fingerprints)`` of a stage as things are on disk now."""
    params = resolved_params(p, st)
    inputs: dict[str, str] = {}
    for value in st.params.values():
        for ref in _refs_in(value):
            sname, _, art = ref[1:].partition(".")
            inputs[ref] = fingerprint(p.artifact(sname, art or None))
    for param in KINDS[st.kind].paths:
        if param in params and not _refs_in(st.params[param]):
            vals = params[param] if isinstance(params[param], list) else [params[param]]
            for v in vals:
                inputs[v] = fingerprint(v) if "://" not in v else "url"
    payload = {"kind": st.kind, "params": st.params, "inputs": inputs, "version": _version()}
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest(), inputs


def read_record(p: Pipeline, st: Stage) -> dict | None:
    try:
        with open(p.record_path(st)) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("status") == "ok" else None


def stage_state(p: Pipeline, st: Stage) -> tuple[bool, str]:
    """``(up_to_date, why)`` of one stage given what is on disk now."""
    rec = read_record(p, st)
    if rec is None:
        return False, "never ran"
    key, _ = stage_key(p, st)
    if rec.get("key") != key:
        return False, "parameters or inputs changed"
    for name, fn in st.outputs.items():
        path = os.path.join(p.stage_dir(st), fn)
        if not os.path.exists(path):
            return False, f"output {fn} is missing"
        if rec.get("outputs", {}).get(name) != fingerprint(path):
            return False, f"output {fn} changed since it was written"
    return True, "up to date"


def plan(p: Pipeline) -> list[tuple[Stage, bool, str]]:
    """``(stage, up_to_date, why)`` of every stage; a stage after a stale one is stale too."""
    stale: set[str] = set()
    out = []
    for st in p.stages:
        ok, why = stage_state(p, st)
        after = [d for d in st.deps if d in stale]
        if ok and after:
            ok, why = False, f"after {', '.join(after)} reruns"
        if not ok:
            stale.add(st.name)
        out.append((st, ok, why))
    return out


# --------------------------------------------------------------------------- running


@dataclass
class StageResult:
    """What happened to one stage in a run."""

    name: str
    kind: str
    status: str                 # "ran" or "skipped"
    reason: str
    seconds: float = 0.0
    summary: str = ""


Event = Callable[[str, Stage, dict[str, Any]], None]
Note = Callable[[str], None]  # a stage's progress line


def run_pipeline(p: Pipeline, *, force: bool = False, stages: Iterable[str] | None = None,
                 on_event: Event | None = None) -> list[StageResult]:
    """Run the stages of ``p`` that are not up to date, in order; return what happened.

    ``force`` reruns every selected stage. ``stages`` selects stages by name; the stages they
    depend on are included (and run only if they are not up to date). ``on_event(what, stage,
    info)`` is called with ``what`` in {"skip", "start", "done"}.

    Examples
    --------
    >>> p = load_pipeline("pipelines/demo.toml")  # doctest: +SKIP
    >>> [(r.name, r.status) for r in run_pipeline(p)]  # doctest: +SKIP
    [('ingest', 'skipped'), ('train', 'skipped'), ('evaluate', 'skipped'), ('report', 'skipped')]
    """
    selected = _select(p, stages)
    emit = on_event or (lambda *a: None)
    os.makedirs(os.path.join(p.run_dir, RECORD_DIR), exist_ok=True)
    with _RunLock(os.path.join(p.run_dir, RECORD_DIR, "lock")):
        return _run_selected(p, selected, force, emit)


class _RunLock:
    """One run per run directory at a time: a lock file holding the runner's pid (a lock
    left by a process that no longer exists is taken over)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> _RunLock:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    with open(self.path) as f:
                        pid = int(f.read().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and _alive(pid):
                    run_dir = os.path.dirname(os.path.dirname(self.path))
                    raise PipelineError(f"another run is using {run_dir} (pid {pid}); wait for "
                                        f"it or remove {self.path}") from None
                os.remove(self.path)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return self
        raise PipelineError(f"cannot take the lock {self.path}")

    def __exit__(self, *exc: object) -> None:
        try:
            os.remove(self.path)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_selected(p: Pipeline, selected: set[str], force: bool, emit: Event) -> list[StageResult]:
    results: list[StageResult] = []
    for st in p.stages:
        if st.name not in selected:
            continue
        ok, why = stage_state(p, st)
        if ok and not force:
            emit("skip", st, {"reason": why})
            results.append(StageResult(st.name, st.kind, "skipped", why))
            continue
        why = "forced" if force else why
        emit("start", st, {"reason": why})
        t0 = time.perf_counter()
        summary = _run_stage(p, st, lambda text, st=st: emit("progress", st, {"text": text}))
        seconds = time.perf_counter() - t0
        emit("done", st, {"seconds": seconds, "summary": summary})
        results.append(StageResult(st.name, st.kind, "ran", why, seconds, summary))
    return results


def _select(p: Pipeline, names: Iterable[str] | None) -> set[str]:
    by_name = p._by_name()
    if names is None:
        return set(by_name)
    todo = list(names)
    for n in todo:
        if n not in by_name:
            raise PipelineError(f"no stage named {n!r} in {p.path} (stages: "
                                f"{', '.join(by_name)})")
    out: set[str] = set()
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += by_name[n].deps
    return out


def _run_stage(p: Pipeline, st: Stage, note: Note) -> str:
    record = p.record_path(st)
    if os.path.exists(record):
        os.remove(record)  # from here on, nothing claims this stage succeeded
    key, inputs = stage_key(p, st)
    folder = p.stage_dir(st)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    params = resolved_params(p, st)
    started = time.time()
    try:
        summary = _RUNNERS[st.kind](p, st, params, folder, note)
        for fn in st.outputs.values():
            if not os.path.exists(os.path.join(folder, fn)):
                raise PipelineError(f"did not write its output {fn}")
    except BaseException as exc:
        with open(os.path.join(folder, "error.log"), "w") as f:
            traceback.print_exc(file=f)
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, BigLDAError):
            msg = f"{type(exc).__name__}: {msg}"
        raise PipelineError(f"stage {st.name!r} ({st.kind}) failed: {msg} (details in "
                            f"{os.path.relpath(os.path.join(folder, 'error.log'))})") from exc
    rec = {"stage": st.name, "kind": st.kind, "status": "ok", "key": key,
           "params": st.params, "inputs": inputs,
           "outputs": {name: fingerprint(os.path.join(folder, fn))
                       for name, fn in st.outputs.items()},
           "biglda_version": _version(), "started": started, "finished": time.time(),
           "seconds": time.time() - started, "summary": summary}
    tmp = record + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1, default=str)
    os.replace(tmp, record)
    return summary


def _check_keys(st: Stage, params: dict, allowed: Iterable[str]) -> None:
    extra = set(params) - set(allowed)
    if extra:
        raise ConfigError(f"stage {st.name!r} ({st.kind}): unknown parameter(s) "
                          f"{', '.join(sorted(extra))} (allowed: {', '.join(sorted(allowed))})")


# --------------------------------------------------------------------------- stage kinds


def _run_synth(p: Pipeline, st: Stage, params: dict, folder: str,
               note: Note) -> str:
    from biglda.corpus.synth import SynthSpec, write_synthetic

    fields = set(SynthSpec.__dataclass_fields__)
    _check_keys(st, params, fields | {"chunk_tokens"})
    spec = SynthSpec(**{k: v for k, v in params.items() if k in fields})
    sizes = write_synthetic(os.path.join(folder, "corpus.zarr"), spec,
                            chunk_tokens=params.get("chunk_tokens"))
    return (f"{sizes['n_docs']:,} documents, {sizes['n_tokens']:,} tokens, "
            f"{sizes['n_words']:,} words, {spec.n_topics} true topics")


_INGEST_KEYS = ("input", "format", "lowercase", "token_pattern", "pretokenized", "stopwords",
                "min_df", "max_df", "max_vocab", "min_doc_length", "text_field", "id_field",
                "chunk_tokens", "jobs")


def _run_ingest(p: Pipeline, st: Stage, params: dict, folder: str,
                note: Note) -> str:
    from biglda.corpus.ingest import ingest

    _check_keys(st, params, _INGEST_KEYS)
    kw = {k: v for k, v in params.items() if k != "input"}
    stats = ingest(params["input"], os.path.join(folder, "corpus.zarr"), **kw)
    return (f"{stats.n_docs:,} documents, {stats.n_tokens:,} tokens, {stats.n_words:,} words "
            f"({stats.dropped_docs:,} documents dropped)")


def _run_split(p: Pipeline, st: Stage, params: dict, folder: str,
               note: Note) -> str:
    _check_keys(st, params, ("corpus", "test_fraction", "seed"))
    n_train, n_test = split_corpus(params["corpus"], os.path.join(folder, "train.zarr"),
                                   os.path.join(folder, "test.zarr"),
                                   float(params.get("test_fraction", 0.1)),
                                   int(params.get("seed", 0)))
    return f"{n_train:,} training and {n_test:,} held-out documents"


def _train_keys() -> tuple[str, ...]:
    """What a ``train`` stage takes: ``corpus`` and every training setting (by its name)."""
    from biglda.trainer.config import setting_names

    return ("corpus", *setting_names())


def _run_train(p: Pipeline, st: Stage, params: dict, folder: str,
               note: Note) -> str:
    from biglda.model.training import train_to_store
    from biglda.trainer.metrics import JsonlSink

    _check_keys(st, params, _train_keys())
    kw = {k: v for k, v in params.items() if k != "corpus"}
    metrics = JsonlSink(os.path.join(folder, "metrics.jsonl"))
    last: dict[str, Any] = {}
    shown = [0.0]

    def on_record(rec: dict) -> None:
        metrics(rec)
        if rec.get("type") == "iteration":
            last.update(rec)
            # A progress line for the first and last iteration and at most every 30 s.
            now = time.monotonic()
            if rec["iteration"] in (1, rec["n_iterations"]) or now - shown[0] >= 30:
                shown[0] = now
                note(f"iteration {rec['iteration']}/{rec['n_iterations']}: LL/token "
                     f"{rec['ll_per_token']:.4f}, {rec['tokens_per_s']:,.0f} tokens/s, "
                     f"{rec['elapsed']:.0f} s")

    peaks = _PeakMemory()
    try:
        with peaks:
            train_to_store(params["corpus"], os.path.join(folder, "model.zarr"),
                           on_record=on_record, **kw)
    finally:
        metrics.close()
        with open(os.path.join(folder, "resources.json"), "w") as f:
            json.dump(peaks.summary(), f, indent=1)
    if not last:
        return "trained"
    mem = peaks.summary()
    return (f"{last['iteration']} iterations in {last['elapsed']:.1f} s "
            f"({last['elapsed'] / max(last['iteration'], 1):.2f} s/iteration), LL/token "
            f"{last['ll_per_token']:.4f}, {last['tokens_per_s']:,.0f} tokens/s; peak RSS "
            f"{mem['this_process_mib']:.0f} MiB here, {mem['largest_child_mib']:.0f} MiB the "
            f"largest worker process")


class _PeakMemory:
    """Peak RSS of this process and of each descendant (the embedded cluster's workers),
    sampled every second while training runs (psutil comes with distributed)."""

    def __init__(self, interval: float = 1.0) -> None:
        import threading

        self.interval = interval
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        import psutil

        me = psutil.Process()
        while True:
            try:
                procs = [me, *me.children(recursive=True)]
            except psutil.Error:
                procs = [me]
            for proc in procs:
                try:
                    name = "self" if proc.pid == me.pid else f"{proc.pid} {proc.name()}"
                    rss = proc.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peaks[name] = max(self.peaks.get(name, 0.0), rss)
            if self._stop.wait(self.interval):
                return

    def summary(self) -> dict[str, Any]:
        children = {k: v for k, v in self.peaks.items() if k != "self"}
        return {"this_process_mib": self.peaks.get("self", 0.0),
                "largest_child_mib": max(children.values(), default=0.0),
                "per_process_mib": self.peaks}


def topic_recovery(phi: Any, vocab: Any, true_phi: Any, true_vocab: Any) -> dict[str, Any]:
    """How well topics ``phi`` recover the true topics: cosine matching (Hungarian).

    Words are matched by spelling (words missing on one side count as zero there). Each true
    topic is matched to a distinct learned topic maximising the total cosine similarity.
    Returns the mean matched cosine, the share of true topics matched above 0.8 and 0.9,
    and the same mean for random Dirichlet(1) topics (a floor).

    Examples
    --------
    >>> import numpy as np
    >>> truth = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    >>> rec = topic_recovery(truth[::-1], ["a", "b", "c"], truth, ["a", "b", "c"])
    >>> round(rec["mean_cosine"], 6), rec["share_above_0.9"]
    (1.0, 1.0)
    """
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    index = {w: i for i, w in enumerate(np.asarray(true_vocab).tolist())}
    cols = np.array([index.get(w, -1) for w in np.asarray(vocab).tolist()])
    keep = cols >= 0
    aligned = np.zeros((phi.shape[0], len(index)))
    aligned[:, cols[keep]] = np.asarray(phi)[:, keep]

    def matched(a: np.ndarray) -> np.ndarray:
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)
        t = true_phi / np.maximum(np.linalg.norm(true_phi, axis=1, keepdims=True), 1e-300)
        cos = t @ a.T
        rows, cols_ = linear_sum_assignment(-cos)
        return cos[rows, cols_]

    m = matched(aligned)
    rnd = np.random.default_rng(0).dirichlet(np.ones(len(index)), size=phi.shape[0])
    return {"true_topics": int(true_phi.shape[0]), "learned_topics": int(phi.shape[0]),
            "mean_cosine": float(m.mean()), "share_above_0.8": float((m > 0.8).mean()),
            "share_above_0.9": float((m > 0.9).mean()),
            "random_mean_cosine": float(matched(rnd).mean())}


_EVAL_KEYS = ("model", "test", "coherence_corpus", "truth", "burn_in", "samples", "top_n",
              "window", "seed", "jobs", "diversity_top_n")


def _run_evaluate(p: Pipeline, st: Stage, params: dict, folder: str,
                  note: Note) -> str:
    from biglda.corpus import Corpus, load_truth
    from biglda.model import load

    _check_keys(st, params, _EVAL_KEYS)
    model = load(params["model"])
    top_n = int(params.get("top_n", 10))
    res: dict[str, Any] = {"model": params["model"], "n_topics": model.n_topics}
    hist = model.history
    if hist:
        tps = [r["tokens_per_s"] for r in hist if r.get("tokens_per_s")]
        its = [b["elapsed"] - a["elapsed"] for a, b in zip(hist, hist[1:], strict=False)]
        res["training"] = {"iterations": len(hist), "seconds": hist[-1].get("elapsed"),
                           "median_seconds_per_iteration":
                               sorted(its)[len(its) // 2] if its else None,
                           "final_ll_per_token": hist[-1].get("ll_per_token"),
                           "median_tokens_per_s": sorted(tps)[len(tps) // 2] if tps else None}
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


def _run_report(p: Pipeline, st: Stage, params: dict, folder: str,
                note: Note) -> str:
    from importlib.metadata import entry_points

    _check_keys(st, params, ("model", "top_n"))
    found = entry_points(group="biglda.reports", name="html")
    if not found:
        raise ConfigError("no report plugin installed (entry point biglda.reports:html)")
    out = os.path.join(folder, "report.html")
    next(iter(found)).load()(params["model"], out, top_n=int(params.get("top_n", 15)))
    return f"wrote {os.path.relpath(out)}"


def _run_script(p: Pipeline, st: Stage, params: dict, folder: str,
                note: Note) -> str:
    script = params["script"]
    if not os.path.isfile(script):
        raise ConfigError(f"script {script} does not exist")
    args_path = os.path.join(folder, "params.json")
    with open(args_path, "w") as f:
        json.dump({**params, "stage": st.name, "run_dir": p.run_dir, "root": p.root}, f,
                  indent=1)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (p.root, env.get("PYTHONPATH")) if x)
    proc = subprocess.run([sys.executable, script, "--params", args_path, "--out", folder],
                          cwd=p.root, env=env)
    if proc.returncode != 0:
        raise PipelineError(f"{os.path.relpath(script, p.root)} exited with status "
                            f"{proc.returncode}")
    return f"{os.path.relpath(script, p.root)} wrote {os.path.relpath(folder)}"


_RUNNERS: dict[str, Callable[[Pipeline, Stage, dict, str, Note], str]] = {
    "synth": _run_synth, "ingest": _run_ingest, "split": _run_split, "train": _run_train,
    "evaluate": _run_evaluate, "report": _run_report, "compare": _run_script,
    "script": _run_script,
}


def list_pipelines(folder: str) -> list[tuple[str, str]]:
    """``(path, description)`` of every ``*.toml`` pipeline in ``folder``."""
    out = []
    for fn in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if fn.endswith(".toml"):
            path = os.path.join(folder, fn)
            try:
                with open(path, "rb") as f:
                    desc = str(tomllib.load(f).get("pipeline", {}).get("description", ""))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                desc = f"(unreadable: {exc})"
            out.append((path, desc))
    return out
