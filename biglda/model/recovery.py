"""Recovery of known topics: how close learned topics come to a synthetic corpus's truth."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment


def topic_recovery(phi: Any, vocab: Any, true_phi: Any, true_vocab: Any) -> dict[str, Any]:
    """How well topics ``phi`` recover the true topics: cosine matching (Hungarian).

    Words are matched by spelling (words missing on one side count as zero there). Each true
    topic is matched to a distinct learned topic maximising the total cosine similarity.
    Returns the mean matched cosine, the share of true topics matched above 0.8 and 0.9,
    and the same mean for random Dirichlet(1) topics (a floor).

    Examples
    --------
    >>> truth = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    >>> rec = topic_recovery(truth[::-1], ["a", "b", "c"], truth, ["a", "b", "c"])
    >>> round(rec["mean_cosine"], 6), rec["share_above_0.9"]
    (1.0, 1.0)
    """
    index = {w: i for i, w in enumerate(np.asarray(true_vocab).tolist())}
    cols = np.array([index.get(w, -1) for w in np.asarray(vocab).tolist()])
    keep = cols >= 0
    aligned = np.zeros((phi.shape[0], len(index)))
    aligned[:, cols[keep]] = np.asarray(phi)[:, keep]

    def matched(a: np.ndarray) -> np.ndarray:
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-300)
        t = true_phi / np.maximum(np.linalg.norm(true_phi, axis=1, keepdims=True), 1e-300)
        cos = t @ a.T
        rows, cols_ = linear_sum_assignment(-cos)
        return cos[rows, cols_]

    m = matched(aligned)
    rnd = np.random.default_rng(0).dirichlet(np.ones(len(index)), size=phi.shape[0])
    return {"true_topics": int(true_phi.shape[0]), "learned_topics": int(phi.shape[0]),
            "mean_cosine": float(m.mean()), "share_above_0.8": float((m > 0.8).mean()),
            "share_above_0.9": float((m > 0.9).mean()),
            "random_mean_cosine": float(matched(rnd).mean())}
