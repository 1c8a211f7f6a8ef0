"""The registry: names, settings, and GPU requests without a GPU backend."""

from __future__ import annotations

import subprocess
import sys

import pytest

from biglda.errors import ConfigError
from biglda.samplers import available_samplers, get_sampler


def test_cpu_samplers_are_registered():
    assert ("cgs", "cpu") in available_samplers()
    assert ("lightlda", "cpu") in available_samplers()
    assert get_sampler("cgs").variant == "sparse"
    assert get_sampler("lightlda").mh_steps == 2


@pytest.mark.parametrize("args, kwargs, match", [
    (("gibbs",), {}, "unknown sampler 'gibbs'"),
    (("cgs", "tpu"), {}, "unknown backend 'tpu'"),
    (("cgs",), {"variant": "warp"}, "unknown cgs variant"),
    (("cgs",), {"dense_above": -0.5}, "dense_above must be >= 0"),
    (("cgs",), {"dense_above": float("nan")}, "dense_above must be >= 0"),
    (("lightlda",), {"mh_steps": 0}, "mh_steps"),
    (("lightlda",), {"bogus": 1}, "bad settings"),
])
def test_bad_names_and_settings(args, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        get_sampler(*args, **kwargs)


def test_gpu_request_is_an_error_naming_the_cause_or_a_gpu_sampler():
    # Without a usable GPU the request fails with the reason (whether the GPU module is
    # missing or CUDA is); it never falls back to the CPU.
    try:
        sampler = get_sampler("cgs", "gpu")
    except ConfigError as exc:
        assert "gpu" in str(exc).lower() and "\n" not in str(exc)
    else:
        assert sampler.backend == "gpu"


def test_missing_gpu_module_names_the_cause():
    from biglda.samplers.registry import _load_gpu

    with pytest.raises(ConfigError, match="no GPU backend is installed"):
        _load_gpu("nosuchalgorithm")


def test_import_touches_no_cuda():
    code = ("import sys, biglda.samplers as s; s.get_sampler('cgs'); "
            "bad = [m for m in ('cupy', 'numba.cuda') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
