"""Sampler test fixtures: the list every contract test is parametrized over.

Every registered sampler is a case: the CPU ones always; the GPU ones on the CUDA
simulator (ids ``*-gpu-sim``) in a process started with ``NUMBA_ENABLE_CUDASIM=1``, and on
a real device (ids ``*-gpu``, marker ``gpu``) otherwise. The simulator must be chosen
before numba.cuda is imported and would turn ``backend="gpu"`` on for every other test of
the session, so the normal run starts the ``gpu-sim`` cases in one subprocess
(``test_gpu_samplers.py::test_contract_suite_under_cuda_simulator``); run them directly with
``NUMBA_ENABLE_CUDASIM=1 pytest tests/samplers -k gpu-sim``.

A real-GPU case without a usable GPU skips with the cause, or fails when
``BIGLDA_REQUIRE_GPU=1`` (what a GPU session sets, so that a GPU that cannot compile is a
red run, not a green run that tested nothing).
"""

from __future__ import annotations

import sys

import pytest
from sampler_cases import SAMPLER_CASES, SIM, SamplerCase, require_real_gpu


@pytest.fixture(params=SAMPLER_CASES)
def sampler_case(request) -> SamplerCase:
    """The :class:`SamplerCase` of one registered sampler."""
    case = request.param
    if case.kind == "gpu":
        require_real_gpu()
    return case


@pytest.fixture
def sampler_spec(sampler_case):
    """``(algorithm, backend, params)`` of one registered sampler."""
    return sampler_case.algorithm, sampler_case.backend, sampler_case.params


@pytest.fixture
def sampler(sampler_case):
    return sampler_case.make()


@pytest.fixture
def exact_sampler(sampler_case):
    """The sampler in its exact sequential mode (the same sampler on the CPU)."""
    return sampler_case.make(exact=True)


@pytest.fixture(scope="session", autouse=True)
def _fast_simulator_thread_switching():
    # The simulator's threads meet at barriers and its launcher polls them: with Python's
    # default 5 ms GIL switch interval every barrier costs milliseconds.
    old = sys.getswitchinterval()
    if SIM:
        sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)
