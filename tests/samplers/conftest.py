"""Sampler test fixtures: the list every contract test is parametrized over."""

from __future__ import annotations

import pytest

# Every registered CPU sampler, including the O(K) Gibbs reference. GPU samplers join
# this list (under the CUDA simulator, and for real behind the `gpu` marker) when their
# backend lands.
CPU_SAMPLERS = [
    pytest.param(("cgs", "cpu", {"variant": "plain"}), id="cgs-plain"),
    pytest.param(("cgs", "cpu", {}), id="cgs-sparse"),
    pytest.param(("lightlda", "cpu", {}), id="lightlda"),
    pytest.param(("warplda", "cpu", {}), id="warplda"),
]


@pytest.fixture(params=CPU_SAMPLERS)
def sampler_spec(request):
    """``(algorithm, backend, params)`` of one registered sampler."""
    return request.param


@pytest.fixture
def sampler(sampler_spec):
    from biglda.samplers import get_sampler

    algorithm, backend, params = sampler_spec
    return get_sampler(algorithm, backend, **params)
