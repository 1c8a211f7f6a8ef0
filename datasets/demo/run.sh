#!/usr/bin/env bash
# The README's main job on the shipped demo corpus (embedded LocalCluster; no download).
# Outputs go to runs/demo/.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIGLDA=".venv/bin/biglda"
OUT=runs/demo
mkdir -p "$OUT"
$BIGLDA ingest datasets/demo/debian-sample.tsv.gz --format tsv --out "$OUT/corpus.zarr" --overwrite
$BIGLDA info "$OUT/corpus.zarr"
# Train K=20 topics (exact collapsed Gibbs) on the embedded cluster's default layout: one
# worker process with a sampling thread per core (it says what it picked); 150 iterations
# take seconds.
$BIGLDA train "$OUT/corpus.zarr" --out "$OUT/model.zarr" --topics 20 --iterations 150 --sampler cgs \
    --metrics "$OUT/metrics.jsonl" --overwrite
# Inspect: the topics, and a static HTML report of the run.
$BIGLDA topics "$OUT/model.zarr" --top 8
$BIGLDA report "$OUT/model.zarr" --out "$OUT/report.html"
