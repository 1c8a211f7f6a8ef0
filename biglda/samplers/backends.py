"""Which compute backend can run here: GPU detection, the ConfigError when it cannot, ``auto``.

Nothing here imports CUDA at module import; :func:`gpu_status` does, on first call, and
remembers the answer. Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before
numba is imported) the GPU samplers run their kernels on the CPU: an explicit
``backend="gpu"`` is then served (that is how CPU-only CI tests the kernels), but
``backend="auto"`` still picks the CPU, because the simulator is not a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from dataclasses import dataclass

from biglda.errors import ConfigError

__all__ = ["BACKEND_CHOICES", "GpuStatus", "gpu_status", "pick_backend",
           "require_gpu", "resolve_backend"]

log = logging.getLogger("biglda.samplers")

_INSTALL_HINT = ("install the GPU extra: pip install 'biglda[gpu-cu13]' (CUDA 13) or "
                 "'biglda[gpu]' (CUDA 12)")
_NUMPY_HINT = "numba-cuda 0.30 needs numpy < 2.5: pip install 'numpy<2.5'"

#: what a run may ask for: a backend, or ``auto`` (the GPU where a real one works, else CPU)
BACKEND_CHOICES = ("cpu", "gpu", "auto")


@dataclass(frozen=True)
class GpuStatus:
    """What :func:`gpu_status` found.

    ``usable``: GPU samplers can run (on a device, or on the simulator when ``simulator``);
    ``reason``: one line, the device name when usable, else the cause; ``n_devices``: CUDA
    devices visible to this process (0 under the simulator and when not usable).
    """

    usable: bool
    simulator: bool
    reason: str
    n_devices: int = 0


def simulator_requested() -> bool:
    """Tell whether numba's CUDA simulator is on (its config, else the environment)."""
    import os

    try:
        from numba.core import config
    except ImportError:  # pragma: no cover - numba is a hard dependency
        return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    return bool(config.ENABLE_CUDASIM)


@functools.lru_cache(maxsize=1)
def gpu_status() -> GpuStatus:
    """Find out, once per process, whether the GPU samplers can run and why not.

    Checks in order: numba-cuda installed, the simulator, the CUDA driver, a CUDA device,
    CuPy installed, then compiles and runs a one-thread kernel (:func:`_probe_kernel`):
    a GPU that imports but cannot compile (numba-cuda 0.30 with numpy 2.5: ``module
    'numpy' has no attribute 'row_stack'`` at the first compile) is not usable, so
    ``auto`` never picks it. The most basic missing piece is the one reported.

    Examples
    --------
    >>> s = gpu_status()
    >>> isinstance(s.reason, str) and s.reason != ""
    True
    """
    if importlib.util.find_spec("numba_cuda") is None:
        return GpuStatus(False, False, f"numba-cuda is not installed ({_INSTALL_HINT})")
    if simulator_requested():
        return GpuStatus(True, True, "the CUDA simulator (NUMBA_ENABLE_CUDASIM=1): kernels run "
                                     "on the CPU, for tests only")
    found = _detect_device()
    if isinstance(found, GpuStatus):
        return found
    name, n_devices = found
    try:
        _probe_kernel()
    except Exception as exc:
        return GpuStatus(False, False, _probe_failure(exc))
    return GpuStatus(True, False, f"CUDA device 0: {name} ({n_devices} visible)", n_devices)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _detect_device() -> tuple[str, int] | GpuStatus:
    """``(name of device 0, devices visible)``, or the :class:`GpuStatus` saying what is missing."""
    try:
        from numba import cuda
        from numba.cuda.cudadrv.driver import driver
    except Exception as exc:  # a broken numba-cuda install, or a numpy it does not support
        return GpuStatus(False, False, f"numba.cuda cannot be imported: {_one_line(exc)}"
                                       f"{_versions_hint()}")
    try:
        driver_ok = driver.is_available  # a property that runs cuInit, which may raise
        cause = driver.initialization_error
    except Exception as exc:
        driver_ok, cause = False, exc
    if not driver_ok:
        return GpuStatus(False, False,
                         f"no usable CUDA driver: {_one_line(cause or 'unknown error')}")
    try:
        n_devices = len(cuda.gpus)
        name = cuda.get_current_device().name if n_devices else ""
    except Exception as exc:
        return GpuStatus(False, False, f"no usable CUDA device: {_one_line(exc)}")
    if n_devices == 0:
        return GpuStatus(False, False, "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)")
    if importlib.util.find_spec("cupy") is None:
        return GpuStatus(False, False, f"CuPy is not installed ({_INSTALL_HINT})")
    if isinstance(name, bytes):
        name = name.decode()
    return str(name), n_devices


def _probe_kernel() -> None:
    """Compile and run a one-thread numba-cuda kernel on a CuPy array; raise what fails."""
    import cupy
    from numba import cuda

    from biglda.samplers._gpu_common import quiet_launches

    def probe(out):
        out[0] = out[0] + 1

    out = cupy.zeros(1, dtype=cupy.int32)
    with quiet_launches():
        cuda.jit(probe)[1, 1](out)
    cuda.synchronize()
    if int(out[0]) != 1:
        raise RuntimeError(f"the probe kernel wrote {int(out[0])}, expected 1")


def _versions_hint() -> str:
    """`` (numpy X, numba-cuda Y...)``: the versions a compile failure usually comes from."""
    from importlib import metadata

    found = []
    for dist in ("numpy", "numba-cuda", "cupy-cuda12x", "cupy-cuda13x"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return f" ({', '.join(found)}; {_NUMPY_HINT})" if found else ""


def _probe_failure(exc: BaseException) -> str:
    return (f"the GPU cannot compile or run a kernel: {type(exc).__name__}: {_one_line(exc)}"
            f"{_versions_hint()}")


def require_gpu() -> GpuStatus:
    """Return the :class:`GpuStatus`, or raise a ConfigError naming why the GPU cannot run."""
    status = gpu_status()
    if not status.usable:
        raise ConfigError(_unavailable(status))
    return status


def _unavailable(status: GpuStatus) -> str:
    return f"backend 'gpu' is unavailable: {status.reason.rstrip('.')}; use backend='cpu'"


def pick_backend(backend: str, status: GpuStatus) -> str:
    """Pick the backend a process with ``status`` runs for the request ``backend`` (no logging).

    ``"cpu"`` stays; ``"gpu"`` needs ``status.usable`` (the simulator counts: that is how
    CPU-only CI runs the kernels) else raises ConfigError naming the cause; ``"auto"`` is
    ``"gpu"`` only on a real device, never on the simulator.

    Examples
    --------
    >>> pick_backend("auto", GpuStatus(True, True, "the CUDA simulator"))
    'cpu'
    """
    if backend == "cpu":
        return "cpu"
    if backend == "gpu":
        if not status.usable:
            raise ConfigError(_unavailable(status))
        return "gpu"
    if backend != "auto":
        raise ConfigError(f"unknown backend {backend!r}; expected 'cpu', 'gpu' or 'auto'")
    return "gpu" if status.usable and not status.simulator else "cpu"


def resolve_backend(backend: str) -> str:
    """Map ``"auto"`` to ``"gpu"`` when a real GPU works, else ``"cpu"``; logs the choice.

    ``"cpu"`` and ``"gpu"`` pass through unchanged (``"gpu"`` is checked when the sampler
    is built, so its error names the cause).

    Examples
    --------
    >>> resolve_backend("cpu")
    'cpu'
    """
    if backend in ("cpu", "gpu"):
        return backend
    if backend != "auto":
        raise ConfigError(f"unknown backend {backend!r}; expected 'cpu', 'gpu' or 'auto'")
    status = gpu_status()
    chosen = pick_backend("auto", status)
    if chosen == "gpu":
        log.info("backend auto -> gpu (%s)", status.reason)
    else:
        log.info("backend auto -> cpu (%s)", "the CUDA simulator is not a GPU"
                 if status.simulator else status.reason)
    return chosen
