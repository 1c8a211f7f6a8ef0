"""Which backend runs: gpu_status, require_gpu, ``auto``, and the launch-warning filter.

These need no GPU: each failure met on real hardware is injected here (a decorated
low-occupancy warning, a GPU that imports but cannot compile), so CPU-only CI catches it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

import pytest

from biglda.errors import ConfigError
from biglda.samplers import backends

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


@pytest.fixture
def fresh_status():
    backends.gpu_status.cache_clear()
    yield backends
    backends.gpu_status.cache_clear()


def test_gpu_request_without_gpu_names_the_cause():
    status = backends.gpu_status()
    if status.usable:
        pytest.skip("a GPU (or the simulator) is usable here")
    from biglda.samplers import get_sampler

    for algorithm in ("cgs", "lightlda"):
        with pytest.raises(ConfigError, match=r"backend 'gpu' is unavailable: (numba-cuda is not "
                           r"installed|no usable CUDA driver|no usable CUDA device|no CUDA "
                           r"device|CuPy is not installed|numba.cuda cannot be imported|the GPU "
                           r"cannot compile)"):
            get_sampler(algorithm, "gpu")


def test_status_names_a_missing_numba_cuda(monkeypatch, fresh_status):
    real = backends.importlib.util.find_spec
    monkeypatch.setattr(backends.importlib.util, "find_spec",
                        lambda name, *a: None if name == "numba_cuda" else real(name, *a))
    with pytest.raises(ConfigError, match="numba-cuda is not installed"):
        backends.require_gpu()


def test_a_gpu_that_cannot_compile_is_not_usable(monkeypatch, caplog, fresh_status):
    # Found on an H100: numpy 2.5 let numba.cuda import and see the device, then the first
    # kernel compile raised. gpu_status must run a kernel before it says "usable".
    def broken_compile():
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.setattr(backends, "simulator_requested", lambda: False)
    monkeypatch.setattr(backends, "_detect_device", lambda: ("NVIDIA H100 80GB HBM3", 1))
    monkeypatch.setattr(backends, "_probe_kernel", broken_compile)
    status = backends.gpu_status()
    assert not status.usable and not status.simulator
    assert "\n" not in status.reason
    assert status.reason.startswith("the GPU cannot compile or run a kernel: AttributeError: "
                                    "module 'numpy' has no attribute 'row_stack'")
    assert "numpy<2.5" in status.reason
    with caplog.at_level(logging.INFO, logger="biglda.samplers"):
        assert backends.resolve_backend("auto") == "cpu"
    assert "row_stack" in caplog.text
    with pytest.raises(ConfigError, match="backend 'gpu' is unavailable: the GPU cannot compile"):
        backends.require_gpu()


def test_a_gpu_whose_probe_runs_is_usable(monkeypatch, fresh_status):
    monkeypatch.setattr(backends, "simulator_requested", lambda: False)
    monkeypatch.setattr(backends, "_detect_device", lambda: ("NVIDIA H100 80GB HBM3", 2))
    monkeypatch.setattr(backends, "_probe_kernel", lambda: None)
    status = backends.gpu_status()
    assert status.usable and status.n_devices == 2 and "H100" in status.reason
    assert backends.resolve_backend("auto") == "gpu"


@pytest.mark.parametrize("text", [
    "Grid size 49 will likely result in GPU under-utilization due to low occupancy.",
    # numba with colorama installed: the whole text highlighted
    "\x1b[1mGrid size 49 will likely result in GPU under-utilization due to low occupancy."
    "\x1b[0m",
    "\x1b[1m\x1b[33mGrid size 1 will likely result in GPU \x1b[0munder-utilization\x1b[0m",
    "\n  Grid size 2 will likely result in GPU under-utilization due to low occupancy.",
])
def test_low_occupancy_warning_is_quiet_whatever_its_decoration(text):
    # pytest runs with filterwarnings = error: an unmatched warning fails the launch.
    from biglda.samplers._gpu_common import _numba_cuda_config, quiet_launches

    class NumbaPerformanceWarning(UserWarning):
        pass

    config = _numba_cuda_config()
    before = config.CUDA_LOW_OCCUPANCY_WARNINGS
    with quiet_launches():
        assert config.CUDA_LOW_OCCUPANCY_WARNINGS == 0  # numba's own switch is off
        warnings.warn(NumbaPerformanceWarning(text), stacklevel=1)
    assert before == config.CUDA_LOW_OCCUPANCY_WARNINGS
    with pytest.raises(NumbaPerformanceWarning):  # outside, the test's error filter still bites
        warnings.warn(NumbaPerformanceWarning(text), stacklevel=1)
    with quiet_launches(), pytest.raises(UserWarning):  # and other warnings still surface
        warnings.warn("Grid size is fine", stacklevel=1)


@pytest.mark.parametrize("status, want", [
    ((True, False, "CUDA device 0: H100"), "gpu"),
    ((True, True, "the CUDA simulator"), "cpu"),
    ((False, False, "no usable CUDA driver: not found"), "cpu"),
])
def test_resolve_backend_auto(monkeypatch, caplog, status, want):
    monkeypatch.setattr(backends, "gpu_status", lambda: backends.GpuStatus(*status))
    with caplog.at_level(logging.INFO, logger="biglda.samplers"):
        assert backends.resolve_backend("auto") == want
    assert f"backend auto -> {want}" in caplog.text
    assert backends.resolve_backend("cpu") == "cpu"
    assert backends.resolve_backend("gpu") == "gpu"
    with pytest.raises(ConfigError, match="unknown backend"):
        backends.resolve_backend("tpu")


def test_gpu_modules_import_without_cuda():
    code = ("import sys, biglda, biglda.samplers.cgs_gpu, biglda.samplers.lightlda_gpu; "
            "print([m for m in ('cupy', 'numba.cuda') if m in sys.modules])")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == "[]"
