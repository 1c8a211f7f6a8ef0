"""The sampler registry: (algorithm, backend) -> a factory of :class:`Sampler`.

CPU samplers register at import. The GPU backend registers itself lazily: a "gpu"
request imports ``biglda.samplers.<algorithm>_gpu`` (which calls :func:`register_sampler`)
only then, so importing biglda never touches CuPy or CUDA. A GPU request that cannot be
served is a :class:`~biglda.errors.ConfigError` naming the cause, never a CPU fallback.

Each sampler declares its parameters (:class:`SamplerParam`: type, default, help) where it is
registered; :func:`parse_sampler_params` checks and converts the settings a run was given
(``--sampler-param mh_steps=1``, ``sampler_params={"mh_steps": 1}``, a pipeline's table)
against that declaration, so an unknown name is one line that lists the known ones.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any, NamedTuple

from biglda.errors import ConfigError
from biglda.samplers.base import Sampler
from biglda.samplers.cgs_cpu import (
    DENSE_ABOVE_THREADS,
    DENSE_CAP_FROM_THREADS,
    SPARSE_BELOW,
    CGSSampler,
)
from biglda.samplers.lightlda_cpu import LightLDASampler
from biglda.samplers.warplda_cpu import WarpLDASampler

ALGORITHMS = ("cgs", "lightlda", "warplda")
BACKENDS = ("cpu", "gpu")


class SamplerParam(NamedTuple):
    """One parameter a sampler takes: its type (a converter from text too), default, help."""

    type: Callable[[Any], Any]
    default: Any
    help: str


_REGISTRY: dict[tuple[str, str], Callable[..., Sampler]] = {}
_PARAMS: dict[tuple[str, str], dict[str, SamplerParam]] = {}


def register_sampler(algorithm: str, backend: str, factory: Callable[..., Sampler],
                     params: dict[str, SamplerParam] | None = None) -> None:
    """Register ``factory(**params) -> Sampler`` for ``(algorithm, backend)``.

    ``params``: the parameters the factory takes; without them the settings a run gives
    are passed on unchecked (a wrong name then fails when the sampler is built).
    """
    _REGISTRY[(algorithm, backend)] = factory
    if params is not None:
        _PARAMS[(algorithm, backend)] = dict(params)


def sampler_params(algorithm: str, backend: str = "cpu") -> dict[str, SamplerParam] | None:
    """Return the parameters ``algorithm`` declares on ``backend`` (None: it declares none).

    Examples
    --------
    >>> sorted(sampler_params("lightlda"))
    ['mh_steps']
    """
    declared = _PARAMS.get((algorithm, backend))
    return None if declared is None else dict(declared)


def parse_sampler_params(algorithm: str, given: dict[str, Any], backend: str = "cpu",
                         name: str = "") -> dict[str, Any]:
    """``given`` checked against the declaration and converted to each parameter's type.

    Values may be text (``"1"`` from ``--sampler-param mh_steps=1``). An unknown parameter
    or a value of the wrong type is a one-line :class:`ConfigError` (starting with ``name``,
    if given).
    A sampler that declares no parameters gets ``given`` unchanged.

    Examples
    --------
    >>> parse_sampler_params("lightlda", {"mh_steps": "1"})
    {'mh_steps': 1}
    """
    declared = sampler_params(algorithm, backend)
    if declared is None:
        return dict(given)
    out = {}
    prefix = f"{name}: " if name else ""
    for key, value in given.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ConfigError(f"{prefix}sampler {algorithm!r} has no parameter {key!r} "
                              f"(known: {known})")
        try:
            out[key] = declared[key].type(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{prefix}{key} of sampler {algorithm!r} must be "
                              f"{getattr(declared[key].type, '__name__', 'valid')}, got "
                              f"{value!r}") from None
    return out


def available_samplers() -> list[tuple[str, str]]:
    """Return the registered ``(algorithm, backend)`` pairs (GPU ones once their module loaded)."""
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
    """Build the sampler for ``(algorithm, backend)`` with ``params``.

    Parameters
    ----------
    algorithm : {"cgs", "lightlda", "warplda"}
    backend : {"cpu", "gpu"}
    **params
        Sampler settings: ``variant`` ("sparse" | "plain") for cgs, ``mh_steps`` for
        lightlda and warplda.

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


register_sampler("cgs", "cpu", CGSSampler, params={
    "variant": SamplerParam(str, "sparse", "'sparse' (SparseLDA buckets, the dense kernel while "
                                           "the word rows are dense or most tokens still move; "
                                           "default), 'dense' (the dense O(K) kernel) or "
                                           "'plain' (O(K) reference)"),
    "dense_above": SamplerParam(float, None, "for 'sparse': the word-row density (share of "
                                             "non-zero topics, token-weighted) from which a "
                                             "sweep runs the dense kernel (default: the "
                                             "measured rule, SparseLDA where density x "
                                             "expected share of moving tokens < "
                                             f"{SPARSE_BELOW}, on "
                                             f"{DENSE_CAP_FROM_THREADS} threads or more "
                                             f"also density < {DENSE_ABOVE_THREADS})"),
})
register_sampler("lightlda", "cpu", LightLDASampler, params={
    "mh_steps": SamplerParam(int, 2, "Metropolis-Hastings rounds per token (default 2)"),
})
register_sampler("warplda", "cpu", WarpLDASampler, params={
    "mh_steps": SamplerParam(int, 2, "Metropolis-Hastings proposals per token and pass "
                                     "(default 2)"),
})
