"""A training compiles its kernels before its first clock ends, not mid-run.

numba compiles a kernel at its first call in a process (or loads it from its disk cache);
cgs first called its SparseLDA path when the chain's state made it switch from the dense
kernel, and on a fresh install that clock stalled for seconds (biglda.samplers.warm). Each
case trains in a fresh process (``warm_probe.py``: an in-process cluster, so the workers'
kernels are that process's), where every kernel starts without a signature whatever the disk
cache holds, and lists the kernels that gained one after the first clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("warm_probe.py")

# (sampler, K, sampler parameters, processes x threads, the kernels chosen after clock 0).
# cgs with dense_above = 0.5 at K = 100 on the synthetic corpus: the rows' density falls
# from 0.96 below 0.5 by clock 4, so the sweeps switch from the dense kernel to SparseLDA;
# lightlda and warplda have no switch (their cases check the table's kernels: top words
# every 2 clocks, the first non-empty push).
CASES = [
    ("cgs", 100, ["dense_above=0.5"], (1, 1), ["dense kernel", "sparse kernel"]),
    ("cgs", 100, ["dense_above=0.5"], (1, 2), ["dense kernel", "sparse kernel"]),
    ("cgs", 100, ["dense_above=0.5"], (2, 1), ["dense kernel", "sparse kernel"]),
    ("cgs", 100, ["dense_above=0.5"], (2, 2), ["dense kernel", "sparse kernel"]),
    ("lightlda", 20, [], (1, 2), []),
    ("warplda", 20, [], (1, 2), []),
]


@pytest.mark.parametrize("sampler, k, params, layout, kernels", CASES,
                         ids=["cgs-1x1", "cgs-1x2", "cgs-2x1-turns", "cgs-2x2-turns",
                              "lightlda-1x2", "warplda-1x2"])
def test_no_kernel_is_first_called_after_the_first_clock(synth_corpus, tmp_path, sampler, k,
                                                         params, layout, kernels):
    url, _ = synth_corpus
    done = subprocess.run(
        [sys.executable, str(PROBE), url, sampler, str(k), "10", str(layout[0]),
         str(layout[1]), str(tmp_path / "model.zarr"), *params],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["kernels"] == kernels  # (cgs: the run did switch kernels after clock 0)
    assert got["late"] == {}, f"kernels first compiled or loaded mid-run: {got['late']}"
