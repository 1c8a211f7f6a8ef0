"""The sampler registry: (algorithm, backend) -> a factory of :class:`Sampler`.

CPU samplers register at import. The GPU backend registers itself lazily: a "gpu"
request imports ``biglda.samplers.<algorithm>_gpu`` (which calls :func:`register_sampler`)
only then, so importing biglda never touches CuPy or CUDA. A GPU request that cannot be
served is a :class:`~biglda.errors.ConfigError` naming the cause, never a CPU fallback.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable

from biglda.errors import ConfigError
from biglda.samplers.base import Sampler
from biglda.samplers.cgs_cpu import CGSSampler
from biglda.samplers.lightlda_cpu import LightLDASampler
from biglda.samplers.warplda_cpu import WarpLDASampler

ALGORITHMS = ("cgs", "lightlda", "warplda")
BACKENDS = ("cpu", "gpu")

_REGISTRY: dict[tuple[str, str], Callable[..., Sampler]] = {}


def register_sampler(algorithm: str, backend: str, factory: Callable[..., Sampler]) -> None:
    """Register ``factory(**params) -> Sampler`` for ``(algorithm, backend)``."""
    _REGISTRY[(algorithm, backend)] = factory


def available_samplers() -> list[tuple[str, str]]:
    """The registered ``(algorithm, backend)`` pairs (GPU ones once their module is loaded)."""
    return sorted(_REGISTRY)


def _load_gpu(algorithm: str) -> None:
    module = f"biglda.samplers.{algorithm}_gpu"
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"sampler {algorithm!r} on backend 'gpu': no GPU backend is installed "
                          f"(module {module} not found); use backend='cpu'")
    try:
        importlib.import_module(module)
    except ConfigError:
        raise
    except Exception as exc:  # missing CuPy / numba-cuda, no CUDA device or driver
        raise ConfigError(f"sampler {algorithm!r} on backend 'gpu' is unavailable: "
                          f"{type(exc).__name__}: {exc}".replace("\n", " ")) from exc
    if (algorithm, "gpu") not in _REGISTRY:
        raise ConfigError(f"sampler {algorithm!r} on backend 'gpu': {module} registered nothing")


def get_sampler(algorithm: str, backend: str = "cpu", **params) -> Sampler:
    """The sampler for ``(algorithm, backend)`` built with ``params``.

    Parameters
    ----------
    algorithm : {"cgs", "lightlda", "warplda"}
    backend : {"cpu", "gpu"}
    **params
        Sampler settings: ``variant`` ("sparse" | "plain") for cgs, ``mh_steps`` for lightlda and warplda.

    Raises
    ------
    ConfigError
        Unknown algorithm/backend/parameter, or a GPU backend that is not available.

    Examples
    --------
    >>> get_sampler("lightlda", mh_steps=2)
    LightLDASampler(mh_steps=2)
    """
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown sampler {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if (algorithm, backend) not in _REGISTRY and backend == "gpu":
        _load_gpu(algorithm)
    try:
        return _REGISTRY[(algorithm, backend)](**params)
    except TypeError as exc:
        raise ConfigError(f"bad settings for sampler {algorithm!r}: {exc}") from exc


register_sampler("cgs", "cpu", CGSSampler)
register_sampler("lightlda", "cpu", LightLDASampler)
register_sampler("warplda", "cpu", WarpLDASampler)
