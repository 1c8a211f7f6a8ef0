"""The kernels are plain Python too: with NUMBA_DISABLE_JIT=1 (how coverage sees them) a
couple of sweeps of every sampler give bit-identical z and deltas to the JIT-compiled run,
because the random streams are explicit integer arithmetic."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z

_CASES = [("cgs", {"variant": "plain"}), ("cgs", {}), ("cgs", {"variant": "dense"}),
          ("cgs", {"dense_above": 2.0}), ("lightlda", {}), ("warplda", {})]

_SCRIPT = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")  # numpy warns on the intended uint64 wrap-around of the RNG
sys.path.insert(0, sys.argv[1])
from test_sampler_nojit import run_cases
print(json.dumps(run_cases()))
"""


def run_cases():
    tokens = np.array([0, 1, 1, 2, 0, 3, 3, 1, 2, 0, 4], dtype=np.int32)
    doc_ptr = np.array([0, 2, 4, 5, 9, 11], dtype=np.int64)
    alpha = np.array([0.1, 0.4, 0.8])
    out = []
    for algorithm, params in _CASES:
        sampler = get_sampler(algorithm, **params)
        z = init_z(len(tokens), 3, RandomKey(4, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, 5, 3)
        for it in (1, 2):
            res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, 0.1, 6, RandomKey(4, it))
            out.append([z.tolist(), res.delta_words.tolist(), res.delta_topics.tolist(),
                        res.delta_counts.tolist(), n_k.tolist()])
    return out


def test_no_jit_matches_jit():
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, here], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == run_cases()
