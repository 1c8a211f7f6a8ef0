#!/usr/bin/env bash
# A change against its baseline on the device machine's 16 cores, in one call (issue 15).
# Device leases differ by up to 30% in speed, so a change is only measured against a
# baseline on the same machine, in alternating rounds. First, here, from the project root:
#
#     bash ../shared/device/wheels.sh                    # Dask, Zarr, Bokeh as wheels in .whl/
#     mkdir -p .baseline && git archive REV biglda | tar -x -C .baseline
#     grep -qx /.baseline/ .git/info/exclude || echo /.baseline/ >> .git/info/exclude
#
# then, through the device tool with carry [".whl", ".baseline"]:
#
#     bash pipelines/device_ab.sh
#
# It draws the issue's 20 M-token corpus (V = 50,000; 12 s there), then for each sampler of
# SAMPLERS (default "warplda:1000 cgs:100", sampler:K) trains 1 x TH (TH = 16) with this
# tree and with the baseline, alternating, ROUNDS times (default 3 for the first sampler,
# 2 for the others), then 1 x 1 once with each (`pipelines/scale_out.py`, 8 iterations,
# medians of 3-8), and prints each run's tokens/s and its clock's phases. About 5 minutes
# for the defaults on the fifteenth session's machines. The baseline runs from inside
# .baseline, whose biglda/ its Dask workers then import (`python -m` puts the working
# directory first). Set OUT to keep the phases file (the device tool's $OUT); to try it on a
# small machine: `NO_WHEELS=1 DOCS=3000 TH=2 WORK=/tmp/ab bash pipelines/device_ab.sh`.
set -uo pipefail
if [ -z "${NO_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "wheel install failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
fi
[ -d .baseline/biglda ] || { echo "no .baseline/biglda (see the header)" >&2; exit 1; }
export PYTHONUNBUFFERED=1
out=${OUT:-runs/device_ab}; mkdir -p "$out"
th=${TH:-16}; work=${WORK:-/tmp/biglda_device}; mkdir -p "$work"
root=$PWD
corpus=$work/synth20m.zarr
[ -d "$corpus" ] || python3 -m biglda.cli datasets synth --docs "${DOCS:-100000}" \
  --vocab 50000 --topics 200 --doc-length 200 --seed 0 --out "$corpus" 2>&1 | tail -1
one() {  # tree sampler K layout round
  local dir=$root
  [ "$1" = base ] && dir=$root/.baseline
  echo "== $1 $2 K=$3 $4"
  (cd "$dir" && PYTHONPATH="$PWD:${PYTHONPATH:-}" python3 "$root/pipelines/scale_out.py" \
    --corpus "$corpus" --out "$work/$1_$2_$4_$5" --sampler "$2" --topics "$3" \
    --iterations 8 --skip 2 --layouts "$4" 2>&1 | grep -E "^biglda from|M tokens/s \(")
}
date -u
first=1
for sk in ${SAMPLERS:-warplda:1000 cgs:100}; do
  s=${sk%:*}; k=${sk#*:}
  rounds=${ROUNDS:-$([ $first = 1 ] && echo 3 || echo 2)}
  for r in $(seq "$rounds"); do one new "$s" "$k" "1x$th" "$r"; one base "$s" "$k" "1x$th" "$r"; done
  one new "$s" "$k" 1x1 1; one base "$s" "$k" 1x1 1
  first=0
done
date -u
python3 - "$work" <<'PY' 2>&1 | tee "$out/phases.txt"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*_*_*_*/scale_out.json")):
    d = json.load(open(f))
    for name, r in d["runs"].items():
        r = r[0] if isinstance(r, list) else r
        print(f.split("/")[-2], " ".join(f"{k} {r[k]:.4f}" for k in
              ("clock_s", "kernel_s", "push_s", "ll_s", "pull_s", "wait_s")),
              f"M/s {r['tokens_per_s'] / 1e6:.2f} kcpu {r['kernel_cpu_us_per_token']:.3f}",
              f"LL {r['ll_per_token'][-1]:.4f}")
PY
date -u
