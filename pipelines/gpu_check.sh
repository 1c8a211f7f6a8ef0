#!/usr/bin/env bash
# One-shot GPU diagnostic for the loaded-shard / exact-posterior failures (150 s at most),
# as it ran on an H100 on 2026-11-26 (docs/gpu.md, "The known bug ... found": its H1-H3
# figures). There, after the wheel install line of ../shared/device/wheels.sh:
#     NO_PYTEST=1 OUT=/tmp/gc bash pipelines/gpu_check.sh     # the probe only (~45 s)
# NO_PYTEST=1 leaves out its pytest step (device_scale_out.sh runs the whole GPU suite).
# From any directory, deps importable by python3; everything goes to ${OUT:-/tmp/gpu_check}:
# env.txt, pytest.txt (full pytest output), probe.py + probe.txt (the hypothesis probe). Read:
#   H1 <alg> det=True|False: chi-square of a 400-sample chain against the exact posterior (K=3
#      test case). det=True fine and det=False far off: the exact-posterior tests ran the parallel
#      (non-deterministic) samplers; the kernels' exact chains are fine.
#   H2 deterministic resident (load/sweep_shard) vs sweep() on host arrays: must be "identical".
#   H3 deterministic device chain vs the CUDA simulator's (REF_* below, 40 sweeps of 5 tokens,
#      made by `NUMBA_ENABLE_CUDASIM=1 python3 probe.py ref`): "identical" = compiled == simulated.
OUT="${OUT:-/tmp/gpu_check}"; mkdir -p "$OUT"; cd "$(dirname "$0")/.." || exit 1
export REF_CGS=11120222122222022210022122222111220122202220222202222221112112221220022111222212122222221212221122211222002210022211222112221120211222102221122210002000121211221222112221122101220122221022000222122112
export REF_LDA=20221022200112211121111222112211121122122221222112222211202110222222122221222022112201220122211221122222112211220222211221122211122111221112211122102222212221122221212221100111022112122222222220202210
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  timeout 20 python3 -c "import numba, numba_cuda, cupy, numpy; print(numba.__version__, numba_cuda.__version__, cupy.__version__, numpy.__version__)"
  env | grep -E 'STREAM|ARRAY_INTERFACE|CUDASIM'; } > "$OUT/env.txt" 2>&1
echo "== env"; cat "$OUT/env.txt"
echo "== pytest (full output in $OUT/pytest.txt)"
[ -n "${NO_PYTEST:-}" ] || BIGLDA_REQUIRE_GPU=1 timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/samplers -x --tb=short -k "loaded_shard or exact_posterior" > "$OUT/pytest.txt" 2>&1
echo "pytest rc=$? (124 = timed out)"
grep -nE '^(E  |FAILED|ERROR)|^tests/.*:[0-9]+: |[0-9]+ (passed|failed)|ConfigError' "$OUT/pytest.txt" | head -40
cat > "$OUT/probe.py" <<'PY'
import os, sys, time; sys.path[:0] = ["tests/samplers", "tests"]; T0 = time.time()
import numpy as np; from scipy.stats import chisquare; from sampler_oracle import exact_posterior, state_index
from biglda.samplers import get_sampler, RandomKey, init_z, count_from_z
TOK, PTR, V, K, A, B = np.array([0, 1, 1, 2, 0], np.int32), np.array([0, 2, 4, 5], np.int64), 5, 3, np.array([.2, .7, 1.5]), .2
REF, N = dict(cgs=os.environ.get("REF_CGS", ""), lightlda=os.environ.get("REF_LDA", "")), int(os.environ.get("PROBE_SAMPLES", 400))
def mk(alg, det, **kw): return get_sampler(alg, "gpu", deterministic=det, **({"run_len": 256} if alg == "cgs" else {}), **kw)
def chain(s, n, seed=21, resident=True):  # z (host) after each of n sweeps; rows of the K=3 test (V_local 3, V 5)
    z = init_z(5, K, RandomKey(seed, -1)); wk, nk = count_from_z(TOK, PTR, z, V - 2, K); sh = s.load(TOK, PTR, z, wk, nk) if resident else None
    for it in range(1, n + 1):
        if resident: s.sweep_shard(sh, A, B, V, RandomKey(seed, it)); yield sh.z_host()
        else: s.sweep(TOK, PTR, z, wk, nk, A, B, V, RandomKey(seed, it)); yield z.copy()
def s2(zs): return "".join(str(int(x)) for z in zs for x in z)
if sys.argv[1:] == ["ref"]:  # under NUMBA_ENABLE_CUDASIM=1; cgs as a 32-lane warp, as on a device
    sys.exit(print("REF_CGS=" + s2(chain(mk("cgs", True, block_threads=32), 40)) + "\nREF_LDA=" + s2(chain(mk("lightlda", True), 40))))
def diff(a, b):
    i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)
    return ("identical" if len(a) == len(b) else "length differs") if i is None else f"FIRST MISMATCH sweep {i // 5 + 1} token {i % 5}"
for alg in ("cgs", "lightlda"):
    dev = s2(chain(mk(alg, True), 40))
    print(f"H3 {alg} det resident vs simulator, 40 sweeps: {diff(dev, REF[alg]) if REF[alg] else 'no reference'}", flush=True)
    print(f"H2 {alg} det resident vs sweep(), 40 sweeps: {diff(dev, s2(chain(mk(alg, True), 40, resident=False)))}", flush=True)
p = exact_posterior(TOK, PTR, V, K, A, B)
for det in (False, True):
    for alg in ("cgs", "lightlda"):
        if time.time() - T0 > 28: print(f"H1 {alg} det={det}: skipped (time)"); continue
        t = time.time(); v = np.zeros(K ** 5, np.int64)
        for n, z in enumerate(chain(mk(alg, det), 50 + 3 * N)):
            if n >= 50 and (n - 50) % 3 == 2: v[state_index(z, K)] += 1
        e = p * v.sum(); r = e < 5; o = np.append(v[~r], v[r].sum()); e = np.append(e[~r], e[r].sum())
        st, pv = chisquare(o, e); print(f"H1 {alg} det={det}: chi2={st:.1f} dof={len(o) - 1} p={pv:.1e} ({time.time() - t:.1f}s)", flush=True)
try:
    import cupy, numba.cuda as nc; print("streams: cupy", cupy.cuda.get_current_stream(), "numba", nc.default_stream())
except Exception as exc: print("streams: ?", repr(exc))
PY
echo "== probe (full output in $OUT/probe.txt)"
timeout 45 python3 "$OUT/probe.py" > "$OUT/probe.txt" 2>&1; echo "probe rc=$? (124 = timed out)"
grep -E '^(H[123] |streams)|Error' "$OUT/probe.txt" | head -20
