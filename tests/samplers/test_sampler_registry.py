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
    (("cgs",), {"variant": "dense"}, "unknown cgs variant"),
    (("lightlda",), {"mh_steps": 0}, "mh_steps"),
    (("lightlda",), {"bogus": 1}, "bad settings"),
])
def test_bad_names_and_settings(args, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        get_sampler(*args, **kwargs)


def test_gpu_without_backend_names_the_cause():
    try:
        import importlib.util

        has_gpu_module = importlib.util.find_spec("biglda.samplers.cgs_gpu") is not None
    except ImportError:
        has_gpu_module = False
    if has_gpu_module:
        pytest.skip("a GPU backend is installed; its own tests cover it")
    with pytest.raises(ConfigError, match="no GPU backend is installed"):
        get_sampler("cgs", "gpu")


def test_import_touches_no_cuda():
    code = ("import sys, biglda.samplers as s; s.get_sampler('cgs'); "
            "bad = [m for m in ('cupy', 'numba.cuda') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
