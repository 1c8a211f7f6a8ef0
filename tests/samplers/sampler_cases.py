"""The sampler cases every contract test is parametrized over (imported by conftest.py and
the GPU tests under its own name: ``from conftest import`` would find whichever test folder's
conftest was imported first)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
REQUIRE_GPU = os.environ.get("BIGLDA_REQUIRE_GPU", "0") not in ("", "0")

# Every registered CPU sampler, including the O(K) Gibbs reference. cgs's default switches
# per sweep between its two fast kernels by the density of the word rows (dense on these
# small corpora), so each kernel is a case of its own: "cgs-sparse" is SparseLDA on every
# sweep, "cgs-dense" the dense kernel; test_cgs_switch.py checks the switch.
CPU_SAMPLERS = [
    pytest.param(("cgs", "cpu", {"variant": "plain"}), id="cgs-plain"),
    pytest.param(("cgs", "cpu", {"dense_above": 2.0}), id="cgs-sparse"),
    pytest.param(("cgs", "cpu", {"variant": "dense"}), id="cgs-dense"),
    pytest.param(("lightlda", "cpu", {}), id="lightlda"),
    pytest.param(("warplda", "cpu", {}), id="warplda"),
]


@dataclass(frozen=True)
class SamplerCase:
    """One sampler the suite runs over, and how much work its tests can afford.

    ``exact_params`` are added where a test needs the exact sequential chain (a GPU sampler's
    ``deterministic=True``: one block, no concurrent count updates); ``budget`` scales the
    chain lengths of the exact-posterior tests; ``small`` asks for corpora sized for the
    simulator, which runs a Python thread per CUDA thread.
    """

    algorithm: str
    backend: str
    params: dict
    kind: str = "cpu"  # "cpu", "sim" (CUDA simulator) or "gpu" (a real device)
    exact_params: dict = field(default_factory=dict)
    budget: float = 1.0
    small: bool = False

    def make(self, exact: bool = False):
        from biglda.samplers import get_sampler

        params = {**self.params, **(self.exact_params if exact else {})}
        return get_sampler(self.algorithm, self.backend, **params)


def _gpu_cases() -> list:
    exact = {"deterministic": True}
    if SIM:
        # one-lane warps for the long exact chains: each simulated shuffle is two barriers;
        # test_gpu_samplers checks that more lanes give the same chain
        one_lane = {"cgs": {"block_threads": 1}, "lightlda": {}}
        return [pytest.param(SamplerCase(alg, "gpu", {}, "sim", {**exact, **one_lane[alg]},
                                         budget=0.04, small=True),
                             id=f"{alg}-gpu-sim") for alg in ("cgs", "lightlda")]
    # a 5-token sweep costs a few ms on a device (launches, transfers, ~4 ms measured on an
    # H100): 15% of the CPU chain (1,200 / 1,800 samples, 2 sweeps apart) keeps each
    # exact-posterior test within 8-32 s on an H100 (2026-11-28, kernel compiles included)
    return [pytest.param(SamplerCase(alg, "gpu", {}, "gpu", exact, budget=0.15),
                         id=f"{alg}-gpu", marks=pytest.mark.gpu)
            for alg in ("cgs", "lightlda")]


SAMPLER_CASES = [pytest.param(SamplerCase(*p.values[0]), id=p.id, marks=p.marks)
                 for p in CPU_SAMPLERS] + _gpu_cases()


def require_real_gpu() -> None:
    """Skip (or fail under ``BIGLDA_REQUIRE_GPU=1``) unless a real GPU is usable here."""
    from biglda.samplers.backends import gpu_status

    status = gpu_status()
    if status.usable and not status.simulator:
        return
    why = f"no usable GPU: {status.reason}"
    if REQUIRE_GPU:
        pytest.fail(f"BIGLDA_REQUIRE_GPU=1 but {why}")
    pytest.skip(why)
