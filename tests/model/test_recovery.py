"""topic_recovery against an oracle: the true topics, permuted, are recovered exactly."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.model.recovery import topic_recovery


def test_topic_recovery_oracle():
    rng = np.random.default_rng(1)
    truth = rng.dirichlet(np.full(30, 0.1), size=4)
    vocab = np.array([f"w{i}" for i in range(30)])
    perm, wperm = rng.permutation(4), rng.permutation(30)
    learned = truth[perm][:, wperm]  # same topics, other order, other word ids
    rec = topic_recovery(learned, vocab[wperm], truth, vocab)
    assert rec["mean_cosine"] == pytest.approx(1.0)
    assert rec["share_above_0.9"] == 1.0
    assert rec["random_mean_cosine"] < 0.9
