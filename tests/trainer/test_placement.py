"""Shard placement: throughput balancing of heterogeneous workers (``balance_shards``)."""

import itertools

import numpy as np
import pytest

from biglda.errors import ConfigError
from biglda.trainer.placement import balance_shards


def _makespan(throughputs, sizes, assignment):
    load = np.zeros(len(throughputs))
    np.add.at(load, assignment, sizes)
    return float(np.max(load / np.asarray(throughputs, dtype=float)))


def test_balance_shards_against_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(40):
        speeds = rng.uniform(0.5, 8.0, size=int(rng.integers(1, 4)))
        sizes = rng.integers(1, 1000, size=int(rng.integers(0, 7)))
        got = balance_shards(speeds, sizes)
        assert len(got) == len(sizes) and all(0 <= w < len(speeds) for w in got)
        if len(sizes) == 0:
            continue
        best = min(_makespan(speeds, sizes, list(a))
                   for a in itertools.product(range(len(speeds)), repeat=len(sizes)))
        # LPT on uniform machines is within a factor 2 of the optimum
        assert _makespan(speeds, sizes, got) <= 2 * best + 1e-9


def test_balance_shards_is_throughput_proportional():
    speeds = [40e6, 10e6, 10e6]  # one GPU worker, two CPU workers
    sizes = [1_000_000] * 60
    got = np.bincount(balance_shards(speeds, sizes), minlength=3)
    np.testing.assert_array_equal(got, [40, 10, 10])
    with pytest.raises(ConfigError):
        balance_shards([1.0, 0.0], sizes)
    with pytest.raises(ConfigError):
        balance_shards([], sizes)
