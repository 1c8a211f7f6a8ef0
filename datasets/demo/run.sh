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
# Train K=20 topics on 2 workers (BSP, LightLDA); a few dozen iterations take well under a minute.
$BIGLDA train "$OUT/corpus.zarr" --out "$OUT/model.zarr" --topics 20 --iterations 40 \
    --workers 2 --metrics "$OUT/metrics.jsonl" --overwrite
