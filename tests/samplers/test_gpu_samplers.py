"""What is GPU-specific: the simulator run of the sampler suite, kernels compiled to PTX, the
device-array path, document chunks, the single-block replay. The sampler contract,
exact-posterior and recovery tests are not here: they run once, over every sampler, from
``tests/samplers/conftest.py`` (GPU cases: ``*-gpu-sim`` under the CUDA simulator, ``*-gpu``
on a real device with the ``gpu`` marker).

Every kernel test here runs in two modes, like the conftest cases:

* ``gpu-sim`` — numba's CUDA simulator, only in a process started with
  ``NUMBA_ENABLE_CUDASIM=1``: :func:`test_sampler_suite_under_cuda_simulator` starts one
  (run it directly with ``NUMBA_ENABLE_CUDASIM=1 pytest tests/samplers -k gpu-sim``).
* ``gpu`` — a real device, marked ``gpu``; skipped with the cause when there is none
  (failed, with ``BIGLDA_REQUIRE_GPU=1``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec

import numpy as np
import pytest
from sampler_cases import SIM, require_real_gpu

from biglda.samplers import RandomKey, count_from_z, init_z

if SIM:
    from numba import cuda  # a module global: the simulator swaps it inside kernels

    MODES = [pytest.param("sim", id="gpu-sim")]
else:
    MODES = [pytest.param("gpu", id="gpu", marks=pytest.mark.gpu)]


def _sampler(mode, algorithm, **params):
    from biglda.samplers import get_sampler

    if mode == "gpu":
        require_real_gpu()
    return get_sampler(algorithm, "gpu", **params)


# ------------------------------------------------------------------ the simulator run
def test_sampler_suite_under_cuda_simulator():
    if SIM:
        pytest.skip("already under the simulator")
    if find_spec("numba_cuda") is None:
        pytest.skip("numba-cuda is not installed (pip install -e '.[test]'): the simulator "
                    "tests of the GPU kernels need it")
    _run_simulator_suite("not slow")


@pytest.mark.slow
def test_sampler_suite_under_cuda_simulator_slow():
    if SIM or find_spec("numba_cuda") is None:
        pytest.skip("already under the simulator, or numba-cuda is not installed")
    _run_simulator_suite("slow")


def _run_simulator_suite(marker: str) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", here,
           "-k", "gpu-sim", "-m", marker]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                          cwd=os.path.dirname(os.path.dirname(here)))
    out = proc.stdout[-6000:] + proc.stderr[-3000:]
    if marker == "slow" and proc.returncode == 5:  # nothing slow selected
        return
    assert proc.returncode == 0, out
    assert "passed" in out and " failed" not in out, out


# ------------------------------------------------------------------ without any GPU
def test_array_delta_matches_the_cpu_delta():
    # sweep_delta_xp is what runs on CuPy arrays; NumPy here, the CPU kernel is the oracle.
    from biglda.samplers._gpu_common import sweep_delta_xp
    from biglda.samplers._kernels import _sweep_delta

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 20, size=3000).astype(np.int32)
    z_old = rng.integers(0, 9, size=3000).astype(np.uint16)
    z_new = np.where(rng.random(3000) < 0.3, rng.integers(0, 9, size=3000), z_old)
    z_new = z_new.astype(np.uint16)
    got = sweep_delta_xp(np, tokens, z_old, z_new, 9)
    want = _sweep_delta(tokens, z_old, z_new, 20, 9)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    empty = sweep_delta_xp(np, tokens, z_old, z_old, 9)
    assert [len(a) for a in empty[:3]] == [0, 0, 0] and not empty[3].any()


def test_kernels_compile_for_a_real_gpu(monkeypatch):
    # numba-cuda type-checks every kernel and lowers it to PTX for sm_90 without a device:
    # the simulator runs the Python source, so only this catches what the compiler rejects.
    if SIM or find_spec("numba_cuda") is None:
        pytest.skip("needs numba-cuda without the simulator")
    from types import SimpleNamespace

    from numba import cuda
    from numba import types as nt

    try:
        # Compiling needs both libNVVM and NVRTC; a machine with only a system CUDA toolkit
        # (nvcc) can have the first without the second.
        from numba.cuda.cudadrv import nvrtc
        from numba.cuda.cudadrv.nvvm import NVVM

        NVVM()
        nvrtc._get_nvrtc_version()
    except Exception as exc:
        pytest.skip(f"libNVVM/NVRTC not found ({type(exc).__name__}); "
                    "pip install 'numba-cuda[cu12]'")
    import numba.cuda.dispatcher as dispatcher

    # device functions ask the current device for its compute capability: there is none
    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: SimpleNamespace(compute_capability=(9, 0)))
    from types import SimpleNamespace as NS

    from biglda.samplers import cgs_gpu, lightlda_gpu

    found = {**vars(cgs_gpu.kernels()), **vars(lightlda_gpu.kernels())}
    kernels = NS(**found, **{n: getattr(found["shared"], n) for n in
                             ("_count_doc_topics", "_move_counts", "_build_alias_rows")})

    i32, i64, f32, f64, b1 = nt.int32, nt.int64, nt.float32, nt.float64, nt.boolean

    def a(dtype, ndim=1):
        return nt.Array(dtype, ndim, "C")

    for zt in (nt.uint16, nt.int32):
        signatures = {
            "_count_doc_topics": (a(i64), a(i32), a(zt), i64, i64, i64, a(i32, 2)),
            "_move_counts": (a(i64), a(i32), a(zt), a(i32, 2), a(i64), i64),
            "_cgs_sparse_kernel": (a(i32), a(i64), a(i32), a(i64), a(zt), a(i32, 2), a(i64),
                                   a(f32), f32, f32, a(f32, 2), a(i64), i64, i64),
            "_build_alias_rows": (a(i64), a(f64), a(nt.uint32), a(i32), a(f64), a(i32), a(i32)),
            "_lightlda_kernel": (a(i32), a(i64), a(i32), a(i64), a(zt), a(i32, 2), a(i64),
                                 a(i32, 2), a(f64), f64, f64, a(i32), a(i32), a(f64), a(i64),
                                 a(i32), a(f64), a(nt.uint32), a(i32), i64, f64, i64, f64, b1,
                                 i64, i64, i64, i64, i64, i64, a(i64)),
        }
        for name, sig in signatures.items():
            ptx, _ = cuda.compile_ptx(getattr(kernels, name).py_func, sig, cc=(9, 0))
            assert ".entry" in ptx, name


def test_doc_loglik_on_device_matches_the_cpu():
    # doc_loglik_xp is what runs on CuPy arrays; NumPy here, the CPU kernel is the oracle
    from biglda.samplers import doc_loglik
    from biglda.samplers.gpu_shard import doc_loglik_xp

    tokens, doc_ptr, _ = _corpus(seed=2, n_docs=30, max_len=20)
    for alpha in (0.3, np.linspace(0.05, 2.0, 6)):
        z = init_z(len(tokens), 6, RandomKey(5, -1))
        want = doc_loglik(doc_ptr, z, alpha, 6)
        assert doc_loglik_xp(np, doc_ptr, z, alpha, 6) == pytest.approx(want, rel=1e-12)
    empty = np.zeros(1, dtype=np.int64)
    assert doc_loglik_xp(np, empty, np.zeros(0, np.uint16), 0.5, 3) == 0.0


# ------------------------------------------------------------------ the kernels
def _corpus(seed=3, n_docs=12, n_words=10, max_len=10):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, size=n_docs)
    lengths[4] = 0  # an empty document must be harmless
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, n_words, size=int(doc_ptr[-1])).astype(np.int32)
    return tokens, doc_ptr, n_words


_OWNER = None  # cgs_gpu._owner_lane compiled, bound here before the probe compiles


def _owner_probe(scan, acc, u, out):
    lane = cuda.threadIdx.x
    out[lane] = _OWNER(scan[lane], acc[lane], u[0])


@pytest.mark.parametrize("mode", [pytest.param("sim", id="gpu-sim", marks=pytest.mark.skipif(
    not SIM, reason="runs in the simulator subprocess"))])
def test_owner_lane_has_mass(mode):
    # The cgs kernel's draw asks which lane's block of masses holds u. A lane without mass
    # repeats the prefix sum of the lane below through another addition tree, and on an
    # H100 that sum rounded above u where the lane below did not: the empty lane was chosen,
    # picked nothing, and wrote topic -1 (65535 in uint16 z) at K = 100, 10 M tokens. The
    # sums are given here as the device rounded them.
    global _OWNER
    from biglda.samplers import cgs_gpu

    cgs_gpu.kernels()
    _OWNER = cgs_gpu._owner_lane
    probe = cuda.jit(_owner_probe)
    f32 = np.float32
    cases = [  # (masses of lanes 0.., prefix sums, u, the lane that must own u)
        ([1, 1, 1], [1, 2, 3], 1.5, 1),
        ([1, 1, 1], [1, 2, 3] + [np.nextafter(f32(3), f32(4))] * 29, 3.0, 2),
        ([1, 0, 1], [1, np.nextafter(f32(1), f32(2)), 2], 1.0, 2),
        ([0, 2, 1], [0, 2, 3], 0.0, 1),
    ]
    for acc, scan, u, want in cases:
        acc = np.array(acc + [0] * (32 - len(acc)), f32)
        scan = np.array(scan + [scan[-1]] * (32 - len(scan)), f32)
        out = np.full(32, -9, np.int32)
        probe[1, 32](scan, acc, np.array([u], f32), out)
        assert (out == want).all(), (acc, scan, u, out)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_topics_stay_in_range_on_millions_of_tokens(algorithm):
    # The rounding cases above are rare per draw (the bench's first sweep of 10 M tokens at
    # K = 100 met one): millions of draws at a K that is not a multiple of the warp, every
    # topic in [0, K) and the counts equal to the recount of z after each sweep.
    if SIM:
        pytest.skip("millions of tokens: a real GPU only")
    require_real_gpu()
    rng = np.random.default_rng(0)
    n_docs, n_words, n_topics = 25_000, 50_000, 100
    doc_ptr = np.arange(0, 200 * n_docs + 1, 200, dtype=np.int64)
    tokens = (rng.zipf(1.2, size=int(doc_ptr[-1])) % n_words).astype(np.int32)
    z = init_z(len(tokens), n_topics, RandomKey(5, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    sampler = _sampler("gpu", algorithm)
    shard = sampler.load(tokens, doc_ptr, z, n_wk, n_k)
    for it in (1, 2, 3):
        sampler.sweep_shard(shard, 0.1, 0.01, n_words, RandomKey(5, it))
        z_dev = shard.z_host()
        assert int(z_dev.max()) < n_topics
        want_wk, want_k = count_from_z(tokens, doc_ptr, z_dev, n_words, n_topics)
        np.testing.assert_array_equal(_to_numpy(shard.n_wk), want_wk)
        np.testing.assert_array_equal(_to_numpy(shard.n_k), want_k)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm, params", [
    ("lightlda", {"mh_steps": 1, "ndk_budget": 40, "deterministic": True}),
], ids=["lightlda-1step-det"])
def test_several_document_chunks(mode, algorithm, params):
    # ndk_budget = 40 entries: a few documents per chunk, so a sweep runs several chunks
    import test_sampler_contract as contract

    sampler = _sampler(mode, algorithm, **params)
    case = type("Case", (), {"small": mode == "sim"})()
    contract.test_invariants_after_every_sweep(case, sampler, "asymmetric", np.uint16)


@pytest.mark.parametrize("mode", MODES)
def test_warp_lanes_give_the_same_chain(mode):
    # The exact chain of one warp does not depend on its width: the scans, ballots and
    # shuffles that split the work over 1, 2 or 4 lanes pick the same topics (sums differ
    # in float32 rounding only, which a draw meets with probability ~1e-6 per token).
    tokens, doc_ptr, n_words = _corpus(seed=4, n_docs=6)
    alpha = np.linspace(0.1, 0.9, 5)
    runs = []
    for lanes in ((1, 2, 4) if mode == "sim" else (32,)):
        sampler = _sampler(mode, "cgs", deterministic=True, block_threads=lanes)
        z = init_z(len(tokens), 5, RandomKey(9, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, 5)
        for it in (1, 2):
            sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.1, n_words + 3,
                          RandomKey(9, it))
        runs.append(z)
    for z in runs[1:]:
        np.testing.assert_array_equal(z, runs[0])
    assert np.mean(runs[0] != init_z(len(tokens), 5, RandomKey(9, -1))) > 0.3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_loaded_shard_stays_on_the_device(mode, algorithm):
    # GPUSampler.load + sweep_shard: the shard and rows stay on the device across sweeps;
    # the same exact chain as sweep() on host arrays, the delta as the contract says, the
    # pulled deltas and the doc log-likelihood applied / computed there.
    from biglda.samplers import doc_loglik

    tokens, doc_ptr, n_words = _corpus(seed=7, n_docs=8, max_len=8)
    n_topics = 4
    rng = np.random.default_rng(1)
    other = rng.integers(0, 3, size=(n_words, n_topics)).astype(np.int32)  # other shards
    z = init_z(len(tokens), n_topics, RandomKey(4, -1))
    own_wk, own_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    n_wk, n_k = own_wk + other, own_k + other.sum(axis=0)
    # two lanes only under the simulator (a Python thread per lane): on a device the cgs
    # kernel refuses anything but a full warp (ConfigError), so it keeps its default 32
    lanes = {"block_threads": 2} if algorithm == "cgs" and mode == "sim" else {}
    params = {"deterministic": True, **lanes}
    sampler = _sampler(mode, algorithm, **params)
    shard = sampler.load(tokens, doc_ptr, z, n_wk, n_k)
    ref = [a.copy() for a in (z, n_wk, n_k)]
    for it in (1, 2, 3):
        before = np.asarray(_to_numpy(shard.n_wk)).copy()
        res = sampler.sweep_shard(shard, 0.2, 0.1, n_words + 5, RandomKey(4, it))
        sampler.sweep(tokens, doc_ptr, *ref, 0.2, 0.1, n_words + 5, RandomKey(4, it))
        z_dev = shard.z_host()
        np.testing.assert_array_equal(z_dev, ref[0])  # the cached order changes nothing
        want_wk, want_k = count_from_z(tokens, doc_ptr, z_dev, n_words, n_topics)
        np.testing.assert_array_equal(_to_numpy(shard.n_wk) - other, want_wk)
        np.testing.assert_array_equal(_to_numpy(shard.n_k) - other.sum(axis=0), want_k)
        np.add.at(before, (res.delta_words, res.delta_topics), res.delta_counts)
        np.testing.assert_array_equal(before, _to_numpy(shard.n_wk))
        assert res.n_tokens == len(tokens) and type(res.delta_words) is np.ndarray
    assert np.any(z_dev != z)
    assert shard.doc_loglik(0.2) == pytest.approx(doc_loglik(doc_ptr, z_dev, 0.2, n_topics))
    # another worker's moves, pulled from the parameter server, land on the device rows
    words = np.array([0, 2], dtype=np.int32)
    topics = np.array([1, 3], dtype=np.int32)
    counts = np.array([2, -1], dtype=np.int32)
    delta_k = np.array([0, 2, 0, -1], dtype=np.int64)
    before_wk, before_k = _to_numpy(shard.n_wk).copy(), _to_numpy(shard.n_k).copy()
    shard.apply_delta(words, topics, counts, delta_k)
    np.add.at(before_wk, (words, topics), counts)
    np.testing.assert_array_equal(_to_numpy(shard.n_wk), before_wk)
    np.testing.assert_array_equal(_to_numpy(shard.n_k), before_k + delta_k)
    with pytest.raises(ValueError, match="rows of shape"):
        shard.set_rows(np.zeros((1, n_topics), np.int32), np.zeros(n_topics, np.int64))


def _to_numpy(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


class _FakeDeviceArray(np.ndarray):
    """A NumPy array the sampler takes for a device array (simulator only)."""


@pytest.fixture
def fake_cupy(monkeypatch):
    # Under the simulator "device arrays" are NumPy: a stand-in CuPy module (NumPy plus
    # asnumpy) lets the CuPy-array path of sweep() run, array ops and all.
    import types

    from biglda.samplers import _gpu_common

    fake = types.ModuleType("cupy")
    fake.__getattr__ = lambda name: getattr(np, name)
    fake.asnumpy = lambda a: np.asarray(a).view(np.ndarray)
    fake.asarray = lambda a, dtype=None: np.asarray(a, dtype=dtype).view(_FakeDeviceArray)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_gpu_common, "is_device_array",
                        lambda a: isinstance(a, _FakeDeviceArray))
    return fake


@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
@pytest.mark.parametrize("mode", [pytest.param("sim", id="gpu-sim", marks=pytest.mark.skipif(
    not SIM, reason="runs in the simulator subprocess"))])
def test_device_array_path_under_the_simulator(mode, algorithm, fake_cupy):
    _check_device_arrays_in_place(fake_cupy, algorithm, n_docs=10, max_len=8, mode="sim")


def _tug(cell, n):
    # odd threads add, even threads subtract, all on one cell
    for _ in range(n):
        if cuda.threadIdx.x % 2:
            cuda.atomic.add(cell, 0, 1)
        else:
            cuda.atomic.sub(cell, 0, 1)


@pytest.mark.parametrize("mode", [pytest.param("sim", id="gpu-sim", marks=pytest.mark.skipif(
    not SIM, reason="runs in the simulator subprocess"))])
def test_simulated_atomic_add_and_sub_never_lose_an_update(mode):
    # numba-cuda's simulator locks atomic.add and atomic.sub with different locks, so a
    # count move racing another on the same cell lost updates (a CI failure: n_wk one above
    # the recount of z). _gpu_kernels makes them share one lock; without it this kernel
    # loses updates in every trial (measured 20 of 20).
    from biglda.samplers import _gpu_kernels  # noqa: F401 - installs the shared lock

    tug = cuda.jit(_tug)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for _ in range(3):
            cell = np.zeros(1, np.int64)
            tug[1, 32](cell, 100)
            assert cell[0] == 0
    finally:
        sys.setswitchinterval(old)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_device_arrays_in_place(algorithm):
    if SIM:
        pytest.skip("needs a real GPU")
    require_real_gpu()
    import cupy

    _check_device_arrays_in_place(cupy, algorithm, n_docs=200, max_len=60, mode="gpu")


def _check_device_arrays_in_place(cupy, algorithm, n_docs, max_len, mode):
    # A GPU worker passes CuPy arrays: the sweep then works in place, with no transfers.

    tokens, doc_ptr, n_words = _corpus(seed=6, n_docs=n_docs, max_len=max_len)
    n_topics = 6
    z = init_z(len(tokens), n_topics, RandomKey(3, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    d = [cupy.asarray(a) for a in (tokens, doc_ptr, z, n_wk, n_k)]
    sampler = _sampler(mode, algorithm)
    for it in (1, 2):
        before = cupy.asnumpy(d[3]).copy()
        res = sampler.sweep(*d, 0.1, 0.05, n_words, RandomKey(3, it))
        z_new = cupy.asnumpy(d[2])
        assert z_new.dtype == z.dtype
        want_wk, want_k = count_from_z(tokens, doc_ptr, z_new, n_words, n_topics)
        np.testing.assert_array_equal(cupy.asnumpy(d[3]), want_wk)
        np.testing.assert_array_equal(cupy.asnumpy(d[4]), want_k)
        got = (res.delta_words, res.delta_topics, res.delta_counts, res.delta_k)
        for a, dtype in zip(got, (np.int32, np.int32, np.int32, np.int64), strict=True):
            assert type(a) is np.ndarray and a.dtype == dtype  # host arrays, as the contract
        np.add.at(before, (res.delta_words, res.delta_topics), res.delta_counts)
        np.testing.assert_array_equal(before, want_wk)
    with pytest.raises(TypeError, match="device array"):
        sampler.sweep(tokens, *d[1:], 0.1, 0.05, n_words, RandomKey(3, 3))
