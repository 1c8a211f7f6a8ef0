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

This package is orchestration on top of the public API: it may import ``biglda.corpus``,
``biglda.trainer`` and ``biglda.model``; only :mod:`biglda.cli` imports it. Modules:
:mod:`~biglda.pipeline.spec` (stage kinds, stages, the pipeline), :mod:`~biglda.pipeline.stages`
(every stage kind: its parameters and runner, in one registry), :mod:`~biglda.pipeline.load`
(reading a file), :mod:`~biglda.pipeline.state` (fingerprints, keys, what is up to date),
:mod:`~biglda.pipeline.runner` (running), :mod:`~biglda.pipeline.memory` (the peak-memory
sampler the ``train`` stage and the benchmark scripts share).
"""

from biglda.errors import PipelineError
from biglda.pipeline.load import list_pipelines, load_pipeline
from biglda.pipeline.runner import StageResult, run_pipeline
from biglda.pipeline.spec import RECORD_DIR, Pipeline, Stage, StageKind
from biglda.pipeline.stages import KINDS
from biglda.pipeline.state import (
    fingerprint,
    plan,
    read_record,
    resolved_params,
    stage_key,
    stage_state,
)

__all__ = [
    "KINDS",
    "RECORD_DIR",
    "Pipeline",
    "PipelineError",
    "Stage",
    "StageKind",
    "StageResult",
    "fingerprint",
    "list_pipelines",
    "load_pipeline",
    "plan",
    "read_record",
    "resolved_params",
    "run_pipeline",
    "stage_key",
    "stage_state",
]
