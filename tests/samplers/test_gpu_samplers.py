"""GPU samplers: the sampler contract, exact posterior, determinism, recovery.

Every kernel test runs in two modes:

* ``sim`` — numba's CUDA simulator. ``NUMBA_ENABLE_CUDASIM=1`` must be set before numba is
  imported and would change ``backend="gpu"`` for every other test of a session, so these
  run in a subprocess started by :func:`test_gpu_suite_under_cuda_simulator` (run them
  directly with ``NUMBA_ENABLE_CUDASIM=1 pytest tests/samplers/test_gpu_samplers.py -k sim``).
  The simulator runs a Python thread per CUDA thread: grids and corpora are tiny.
* ``gpu`` — a real device, marked ``gpu``; skipped with the cause when there is none.

Oracles are the CPU suite's: enumeration of the posterior (``sampler_oracle``), its
chi-square check and its contract tests (imported, not copied), plus a slow pure-Python
replay of the single-block CGS sweep that must agree bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec

import numpy as np
import pytest

from biglda.errors import ConfigError
from biglda.samplers import RandomKey, count_from_z, init_z

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _real_gpu() -> tuple[bool, str]:
    if SIM:
        return False, "the CUDA simulator is on in this process"
    from biglda.samplers.backends import gpu_status

    status = gpu_status()
    return status.usable, status.reason


_GPU_OK, _GPU_WHY = _real_gpu()

MODES = [
    pytest.param("sim", id="sim", marks=pytest.mark.skipif(
        not SIM, reason="runs in the NUMBA_ENABLE_CUDASIM=1 subprocess of "
                        "test_gpu_suite_under_cuda_simulator")),
    pytest.param("gpu", id="gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not _GPU_OK, reason=f"no GPU: {_GPU_WHY}")]),
]


@pytest.fixture(scope="module", autouse=True)
def _fast_thread_switching():
    # The simulator's threads meet at barriers (syncthreads) and its launcher polls them:
    # with Python's default 5 ms GIL switch interval every barrier costs milliseconds.
    old = sys.getswitchinterval()
    if SIM:
        sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def _sampler(mode, algorithm, **params):
    from biglda.samplers import get_sampler

    return get_sampler(algorithm, "gpu", **params)


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
    from biglda.samplers import _gpu_kernels as kernels

    i32, i64, f64, b1 = nt.int32, nt.int64, nt.float64, nt.boolean

    def a(dtype, ndim=1):
        return nt.Array(dtype, ndim, "C")

    for zt in (nt.uint16, nt.int32):
        signatures = {
            "_count_doc_topics": (a(i64), a(i32), a(zt), i64, i64, i64, a(i32, 2)),
            "_move_counts": (a(i64), a(i32), a(zt), a(i32, 2), a(i64), i64),
            "_cgs_kernel": (a(i32), a(i64), a(i32), a(zt), a(i32, 2), a(i64), a(i32, 2), a(f64),
                            f64, f64, i64, i64, i64, i64, i64, i64, b1),
            "_build_alias_rows": (a(i64), a(f64), a(nt.uint32), a(i32), a(f64), a(i32), a(i32)),
            "_lightlda_kernel": (a(i32), a(i64), a(i32), a(i64), a(zt), a(i32, 2), a(i64),
                                 a(i32, 2), a(f64), f64, f64, a(i32, 2), a(f64), a(i64), a(i32),
                                 a(f64), a(nt.uint32), a(i32), i64, f64, i64, f64, b1, i64, i64,
                                 i64, i64, i64, i64, a(i64)),
        }
        for name, sig in signatures.items():
            ptx, _ = cuda.compile_ptx(getattr(kernels, name).py_func, sig, cc=(9, 0))
            assert ".entry" in ptx, name


def _makespan(throughputs, sizes, assignment):
    load = np.zeros(len(throughputs))
    np.add.at(load, assignment, sizes)
    return float(np.max(load / np.asarray(throughputs, dtype=float)))


def test_balance_shards_against_brute_force():
    import itertools

    from biglda.samplers.backends import balance_shards

    rng = np.random.default_rng(1)
    for _ in range(40):
        speeds = rng.uniform(0.5, 8.0, size=int(rng.integers(1, 4)))
        sizes = rng.integers(1, 1000, size=int(rng.integers(0, 7)))
        got = balance_shards(speeds, sizes)
        assert len(got) == len(sizes) and all(0 <= w < len(speeds) for w in got)
        if len(sizes) == 0:
            continue
        best = min(_makespan(speeds, sizes, list(a))
                   for a in itertools.product(range(len(speeds)), repeat=len(sizes)))
        # LPT on uniform machines is within a factor 2 of the optimum
        assert _makespan(speeds, sizes, got) <= 2 * best + 1e-9


def test_balance_shards_is_throughput_proportional():
    from biglda.samplers.backends import balance_shards

    speeds = [40e6, 10e6, 10e6]  # one GPU worker, two CPU workers
    sizes = [1_000_000] * 60
    got = np.bincount(balance_shards(speeds, sizes), minlength=3)
    np.testing.assert_array_equal(got, [40, 10, 10])
    with pytest.raises(ConfigError):
        balance_shards([1.0, 0.0], sizes)
    with pytest.raises(ConfigError):
        balance_shards([], sizes)


def test_gpu_suite_under_cuda_simulator():
    if SIM:
        pytest.skip("already under the simulator")
    if find_spec("numba_cuda") is None:
        pytest.skip("numba-cuda is not installed (pip install numba-cuda): the simulator "
                    "tests of the GPU kernels need it")
    _run_simulator_suite("not slow")


@pytest.mark.slow
def test_gpu_suite_under_cuda_simulator_slow():
    if SIM or find_spec("numba_cuda") is None:
        pytest.skip("already under the simulator, or numba-cuda is not installed")
    _run_simulator_suite("slow")


def _run_simulator_suite(marker: str) -> None:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
           "-k", "sim and not suite", "-m", marker]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    out = proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.returncode in (0, 5), out  # 5: nothing selected
    assert "passed" in out or proc.returncode == 5, out


# ------------------------------------------------------------------ the kernels
def _corpus(seed=3, n_docs=12, n_words=10, max_len=10):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, size=n_docs)
    lengths[4] = 0  # an empty document must be harmless
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, n_words, size=int(doc_ptr[-1])).astype(np.int32)
    return tokens, doc_ptr, n_words


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm, params", [
    ("cgs", {}),
    ("cgs", {"ndk_budget": 40}),  # several document chunks
    ("lightlda", {}),
    ("lightlda", {"mh_steps": 1, "ndk_budget": 40, "deterministic": True}),
], ids=["cgs", "cgs-chunks", "lightlda", "lightlda-1step-det"])
def test_contract_invariants(mode, algorithm, params, monkeypatch):
    # The CPU contract test itself, on a corpus sized for the simulator.
    import test_sampler_contract as contract

    if mode == "sim":
        monkeypatch.setattr(contract, "_small_corpus",
                            lambda seed=3: _corpus(seed, n_docs=10, max_len=8))
    sampler = _sampler(mode, algorithm, **params)
    combos = [("asymmetric", np.uint16)]
    if algorithm == "lightlda" or mode == "gpu":
        combos += [("symmetric", np.int32)]
    for alpha_kind, z_type in combos:
        contract.test_invariants_after_every_sweep(sampler, alpha_kind, z_type)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_cached_rows_may_be_a_superset(mode, algorithm, monkeypatch):
    import test_sampler_contract as contract

    if mode == "sim":
        monkeypatch.setattr(contract, "_small_corpus",
                            lambda seed=5: _corpus(seed, n_docs=8, max_len=8))
    contract.test_cached_rows_may_be_a_superset(_sampler(mode, algorithm))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm, params, n_samples", [
    ("cgs", {"deterministic": True, "block_threads": 2}, 300),
    ("lightlda", {"deterministic": True}, 500),
    pytest.param("lightlda", {"deterministic": True, "mh_steps": 1}, 1500,
                 marks=pytest.mark.slow),
], ids=["cgs", "lightlda", "lightlda-1step"])
def test_exact_posterior(mode, algorithm, params, n_samples, tiny_docs):
    # Fewer samples than the CPU suite (the simulator is slow), still enough power: the
    # 32 states of the tiny corpus get ~15 visits each on average, and the LightLDA
    # variant whose tables included the tokens being swept failed this test at p < 1e-4.
    from sampler_oracle import exact_posterior
    from test_sampler_exact_posterior import _check, _visits

    tokens, doc_ptr, n_words, n_topics = tiny_docs
    alpha, beta = 0.5, 0.3
    if mode == "gpu":
        n_samples *= 16
    p = exact_posterior(tokens, doc_ptr, n_words, n_topics, alpha, beta)
    visits = _visits(_sampler(mode, algorithm, **params), tokens, doc_ptr, n_words, n_topics,
                     alpha, beta, n_samples=n_samples, thin=2, seed=30)
    _check(visits, p)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", [
    # cgs: slow here; the bit-exact replay below already pins its sweep to exact Gibbs
    pytest.param("cgs", marks=pytest.mark.slow), "lightlda"])
def test_exact_posterior_asymmetric_k3(mode, algorithm, tiny_docs):
    from sampler_oracle import exact_posterior
    from test_sampler_exact_posterior import _check, _visits

    tokens, doc_ptr, n_words, _ = tiny_docs
    alpha, beta, global_v = np.array([0.2, 0.7, 1.5]), 0.2, n_words + 2
    p = exact_posterior(tokens, doc_ptr, global_v, 3, alpha, beta)
    params = {"deterministic": True, "block_threads": 1} if algorithm == "cgs" else \
        {"deterministic": True}
    visits = _visits(_sampler(mode, algorithm, **params), tokens, doc_ptr, global_v, 3, alpha,
                     beta, n_samples=400 if mode == "sim" else 12000, thin=2, seed=31)
    _check(visits, p)


def _sweeps(sampler, tokens, doc_ptr, n_words, n_topics, seed, n_sweeps):
    z = init_z(len(tokens), n_topics, RandomKey(seed, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    for it in range(1, n_sweeps + 1):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.2, 0.05, n_words, RandomKey(seed, it))
    return z, n_wk


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_single_block_is_deterministic(mode, algorithm):
    tokens, doc_ptr, n_words = _corpus(seed=8, n_docs=6)
    sampler = _sampler(mode, algorithm, deterministic=True)
    a = _sweeps(sampler, tokens, doc_ptr, n_words, 4, 11, 2)
    b = _sweeps(sampler, tokens, doc_ptr, n_words, 4, 11, 2)
    c = _sweeps(sampler, tokens, doc_ptr, n_words, 4, 12, 2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert np.mean(a[0] != c[0]) > 0.2


# A slow, obvious replay of the single-block CGS sweep: same hash, same word-major order,
# same sums in the same order (one thread), so z must agree exactly.
def _mix32(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x31848BAB) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _rand_unit(k0, k1, i, c):
    h = _mix32((i & 0xFFFFFFFF) ^ k0)
    h = _mix32(h ^ ((i >> 32) & 0xFFFFFFFF) ^ k1)
    h = _mix32(h ^ ((c * 0x1E3779B9) & 0xFFFFFFFF))
    return _mix32(h ^ k0) * 2.0 ** -32


def _cgs_reference_sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key):
    from biglda.samplers._gpu_common import stream_keys

    k0, k1 = stream_keys(key)
    n_topics = n_k.shape[0]
    doc_of = np.repeat(np.arange(len(doc_ptr) - 1), np.diff(doc_ptr))
    n_dk = np.zeros((len(doc_ptr) - 1, n_topics), dtype=np.int64)
    np.add.at(n_dk, (doc_of, z.astype(np.int64)), 1)
    for i in np.lexsort((np.arange(len(tokens)), tokens)):
        i, w, d, s = int(i), int(tokens[i]), int(doc_of[i]), int(z[i])
        n_dk[d, s] -= 1
        n_wk[w, s] -= 1
        n_k[s] -= 1
        p = [(int(n_dk[d, k]) + alpha[k]) * (int(n_wk[w, k]) + beta)
             / (int(n_k[k]) + n_words * beta) for k in range(n_topics)]
        u = _rand_unit(k0, k1, i, 0) * sum(p)
        t = next((k for k, c in enumerate(np.cumsum(p)) if u < c), n_topics - 1)
        z[i] = t
        n_dk[d, t] += 1
        n_wk[w, t] += 1
        n_k[t] += 1


@pytest.mark.parametrize("mode", MODES)
def test_single_block_cgs_matches_python_replay(mode):
    tokens, doc_ptr, n_words = _corpus(seed=4, n_docs=8)
    n_topics = 5
    alpha = np.linspace(0.1, 0.9, n_topics)
    z = init_z(len(tokens), n_topics, RandomKey(9, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    z_ref, wk_ref, k_ref = z.copy(), n_wk.copy(), n_k.copy()
    sampler = _sampler(mode, "cgs", deterministic=True, block_threads=1)
    for it in range(1, 3):
        key = RandomKey(9, it)
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.1, n_words + 3, key)
        _cgs_reference_sweep(tokens, doc_ptr, z_ref, wk_ref, k_ref, alpha, 0.1, n_words + 3,
                             key)
        np.testing.assert_array_equal(z, z_ref)
        np.testing.assert_array_equal(n_wk, wk_ref)
        np.testing.assert_array_equal(n_k, k_ref)


def _recovery(phi_true, n_wk, beta):
    from scipy.optimize import linear_sum_assignment

    phi = (n_wk.T + beta) / (n_wk.T + beta).sum(axis=1, keepdims=True)  # [K, V]
    a = phi_true / np.linalg.norm(phi_true, axis=1, keepdims=True)
    b = phi / np.linalg.norm(phi, axis=1, keepdims=True)
    sim = a @ b.T
    rows, cols = linear_sum_assignment(-sim)
    return sim[rows, cols]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_recovers_synthetic_topics(mode, algorithm):
    from biglda.corpus.synth import SynthSpec, generate

    spec = SynthSpec(n_docs=60 if mode == "sim" else 1000, n_words=40, n_topics=3,
                     mean_doc_length=25 if mode == "sim" else 120, alpha=0.1, beta=0.05,
                     seed=7)
    tokens, doc_ptr, phi, _ = generate(spec)
    n_iter = 25 if mode == "sim" else 100
    z = init_z(len(tokens), 3, RandomKey(1, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, spec.n_words, 3)
    sampler = _sampler(mode, algorithm)
    for it in range(1, n_iter + 1):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.05, spec.n_words,
                      RandomKey(1, it))
    sim = _recovery(phi, n_wk, 0.05)
    assert sim.min() > 0.8, sim


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


@pytest.mark.parametrize("mode", [MODES[0]])
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_device_array_path_under_the_simulator(mode, algorithm, fake_cupy):
    _check_device_arrays_in_place(fake_cupy, algorithm, n_docs=10, max_len=8)


@pytest.mark.gpu
@pytest.mark.skipif(not _GPU_OK, reason=f"no GPU: {_GPU_WHY}")
@pytest.mark.parametrize("algorithm", ["cgs", "lightlda"])
def test_device_arrays_in_place(algorithm):
    import cupy

    _check_device_arrays_in_place(cupy, algorithm, n_docs=200, max_len=60)


def _check_device_arrays_in_place(cupy, algorithm, n_docs, max_len):
    # A GPU worker passes CuPy arrays: the sweep then works in place, with no transfers.

    tokens, doc_ptr, n_words = _corpus(seed=6, n_docs=n_docs, max_len=max_len)
    n_topics = 6
    z = init_z(len(tokens), n_topics, RandomKey(3, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    d = [cupy.asarray(a) for a in (tokens, doc_ptr, z, n_wk, n_k)]
    sampler = _sampler("gpu", algorithm)
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
