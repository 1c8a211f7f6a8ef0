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
