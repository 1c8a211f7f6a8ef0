#!/usr/bin/env bash
# Issue 15's 16-core measurement, as one command for the device machine (16 CPU cores; its GPU
# is not used). The machine lacks Dask, Zarr and Bokeh: first, here, from the project root,
#
#     bash ../shared/device/wheels.sh          # fetches them into .whl/ (git-ignored)
#
# then run, through the device tool, with carry [".whl"]:
#
#     bash pipelines/device_scale_out.sh
#
# It draws the 20 M-token synthetic corpus of the issue (V = 50,000; 8 s), sweeps it with
# warplda alone on 1, 2, 4, 8 and 16 threads (no Dask: what the kernel does), then runs
# pipelines/scale_out.py at K = 1,000 on 1 process x 1..16 threads, 2..16 single-thread
# processes and two mixed layouts (about 4 minutes), and where there is a GPU the GPU
# benchmark's quick grid (up to GPU_BENCH_S = 180 s) and its sampler tests (up to
# GPU_TESTS_S = 240 s). Everything at once can pass a device call's 600 s: split it over
# calls, e.g. `NO_GPU_BENCH=1 NO_GPU_TESTS=1 bash ...`, then `LAYOUTS=1x1 THREADS=1 bash ...`
# for the GPU parts and little else (the corpus stays in WORK while the machine is held).
# What it prints and the JSON land in $OUT (or runs/device_scale_out where $OUT is unset, to
# try it on a small machine with LAYOUTS and THREADS narrowed). Figures go to pipelines/README.md
# ("16 cores"). Other settings: LAYOUTS, THREADS, ROUNDS, BASELINE (below), PROFILE (below),
# DOCS, NO_GPU_TESTS, PYTHON (an absolute path with BASELINE), WORK, and
# PARTITIONED="1x1,1x16": those layouts also with lightlda (K = 1,000) and cgs (K = 100), the
# samplers whose threads share a sweep by tomotopy's PARTITION (about 2 minutes more).
#
# A layout `16x1:i` in LAYOUTS adds the machine's own ceiling: 16 one-thread runs at once, each
# its own embedded cluster, nothing exchanged (scale_out.py); every 16-core layout then gets a
# line against it (what its coordination costs), at the price of one more run.
#
# PROFILE=PxT (e.g. 1x16) also trains that layout for 20 iterations under py-spy (every
# thread of every process, idle or not, 20 samples a second) and prints where each busy
# thread spent its time (pipelines/pyspy_threads.py; about 40 s). It needs the py-spy wheel
# in .whl too: `.venv/bin/python -m pip download --no-deps --only-binary=:all: --platform
# manylinux2014_x86_64 -d .whl py-spy` (the device machine has no network).
set -uo pipefail
out=${OUT:-runs/device_scale_out}
work=${WORK:-/tmp/biglda_device}
py=${PYTHON:-python3}
layouts=${LAYOUTS:-1x1,1x16,1x2,1x4,1x8,16x1,2x1,4x1,8x1,2x8,4x4}
threads=${THREADS:-1 2 4 8 16}
mkdir -p "$out" "$work"
if [ -d .whl ] && [ -z "${NO_WHEELS:-}" ]; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "wheel install failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
{
  date -u; nproc; lscpu | grep -E 'Model name|^CPU\(s\)|Socket|Core|Thread|NUMA node|L3'
  free -g | head -2
  $py -c 'import numpy, numba, dask, distributed, zarr; print("numpy", numpy.__version__,
"numba", numba.__version__, "dask", dask.__version__, "zarr", zarr.__version__)'
} 2>&1 | tee "$out/machine.txt"
corpus=$work/synth20m.zarr
[ -d "$corpus" ] || $py -m biglda.cli datasets synth --docs "${DOCS:-100000}" --vocab 50000 \
  --topics 200 --doc-length 200 --seed 0 --out "$corpus" 2>&1 | tee -a "$out/machine.txt"
# shellcheck disable=SC2086
$py pipelines/bench_warplda_threads.py --corpus "$corpus" --topics 1000 --threads $threads \
  --sweeps 8 --rounds 1 --skip-passes 2>&1 | tee "$out/threads.txt"
# With BASELINE (a folder holding another commit's biglda/, carried beside .whl: e.g.
# `mkdir -p .baseline && git archive REV biglda | tar -x -C .baseline`, with /.baseline/ in
# .git/info/exclude), each round runs the layouts on this checkout, then on the baseline:
# the machine's speed changes between leases, so a change is measured against its baseline
# in one call.
for round in $(seq "${ROUNDS:-1}"); do
  $py pipelines/scale_out.py --corpus "$corpus" --out "$work/so$round" --sampler warplda \
    --topics 1000 --iterations 8 --skip 2 --layouts "$layouts" 2>&1 | tee -a "$out/scale_out.txt"
  cp "$work/so$round/scale_out.json" "$out/scale_out$round.json" 2>/dev/null || true
  if [ -n "${BASELINE:-}" ]; then
    echo "== baseline $BASELINE, round $round" | tee -a "$out/scale_out_base.txt"
    # from inside it: the Dask workers start with `python -m`, whose first import path is
    # the working directory (a checkout's biglda/ there would shadow PYTHONPATH's)
    (root=$PWD && cd "$BASELINE" && PYTHONPATH="$PWD:${PYTHONPATH:-}" $py \
      "$root/pipelines/scale_out.py" --corpus "$corpus" --out "$work/base$round" \
      --sampler warplda --topics 1000 --iterations 8 --skip 2 --layouts "$layouts") 2>&1 \
      | tee -a "$out/scale_out_base.txt"
    cp "$work/base$round/scale_out.json" "$out/scale_out_base$round.json" 2>/dev/null || true
  fi
done
if [ -n "${PARTITIONED:-}" ]; then
  for sk in lightlda:1000 cgs:100; do
    $py pipelines/scale_out.py --corpus "$corpus" --out "$work/part_${sk%:*}" \
      --sampler "${sk%:*}" --topics "${sk#*:}" --iterations 6 --skip 2 \
      --layouts "$PARTITIONED" 2>&1 | tee -a "$out/partitioned.txt"
  done
fi
if [ -n "${PROFILE:-}" ]; then
  spy=$(command -v py-spy || echo /tmp/site/bin/py-spy)
  procs=${PROFILE%x*}; tpw=${PROFILE#*x}
  if [ -x "$spy" ]; then
    "$spy" record --subprocesses --threads --idle -r 20 -f raw -o "$out/pyspy_$PROFILE.txt" -- \
      $py -m biglda.cli train "$corpus" -k 1000 --iterations 20 --sampler warplda \
      --workers "$procs" --threads-per-worker "$tpw" --out "$work/pyspy.zarr" \
      > "$out/pyspy_train.txt" 2>&1
    $py pipelines/pyspy_threads.py "$out/pyspy_$PROFILE.txt" | tee "$out/pyspy_threads.txt"
  else
    echo "PROFILE=$PROFILE: no py-spy (put its wheel in .whl, see the header)" >&2
  fi
fi
# Where there is a GPU, the GPU benchmark's quick grid (10 M synthetic tokens, K = 100 and
# 1,000, cgs and lightlda, the device-resident sweep against the CPU kernels, then a 5-iteration
# `biglda train --backend gpu`; up to GPU_BENCH_S = 180 s; NO_GPU_BENCH leaves it out) and its
# sampler cases (they fail, rather than skip, under BIGLDA_REQUIRE_GPU=1): on the same lease.
if command -v nvidia-smi >/dev/null && [ -z "${NO_GPU_BENCH:-}" ]; then
  timeout "${GPU_BENCH_S:-180}" $py pipelines/bench_gpu.py --quick --corpora synthetic \
    --out "$out/bench_gpu.json" > "$out/bench_gpu.txt" 2>&1
  echo "bench_gpu rc=$? (124: timed out)"; tail -40 "$out/bench_gpu.txt"
fi
if command -v nvidia-smi >/dev/null && [ -z "${NO_GPU_TESTS:-}" ]; then
  BIGLDA_REQUIRE_GPU=1 timeout "${GPU_TESTS_S:-240}" $py -m pytest -m gpu -q -p no:cacheprovider \
    -rfE --tb=short tests/samplers > "$out/gpu_tests.txt" 2>&1
  tail -40 "$out/gpu_tests.txt"
fi
