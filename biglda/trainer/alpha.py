"""Asymmetric alpha: when it is optimized, from what, and which one is in force.

Every ``optimize_alpha_every`` clocks after the burn-in, each shard sends the doc-topic count
histograms of its state with its stats (:func:`alpha_due`); the driver sums them and runs
Minka's fixed point (:func:`optimized_alpha`), then publishes the result for the next clock.
The records carry it, so a resumed or recovered run continues with it
(:func:`alpha_from_history`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from biglda.trainer.config import TrainConfig


def alpha_due(done: int, every: int, burn_in: int) -> bool:
    """Whether alpha is optimized from the state after ``done`` completed clocks.

    Examples
    --------
    >>> alpha_due(10, 5, 10), alpha_due(12, 5, 10)
    (True, False)
    """
    return every > 0 and done >= max(burn_in, 1) and done % every == 0


def alpha_from_history(history: Sequence[Mapping[str, Any]], cfg: TrainConfig) -> np.ndarray:
    """Return the alpha in force after the records ``history``.

    That is the newest record's ``alpha`` (an optimization at clock ``c`` is in the record of
    iteration ``c + 1`` and applies from clock ``c + 1``), else ``cfg.alpha`` (one number for
    every topic, or K numbers). A checkpoint stores exactly the records of iterations
    ``1..clock``, so a resumed or recovered run continues with the alpha it had.
    """
    for r in reversed(history):
        a = r.get("alpha")
        if a is not None and len(a) == cfg.n_topics:
            return np.asarray(a, dtype=np.float64)
    if isinstance(cfg.alpha, list | tuple | np.ndarray):
        return np.asarray(cfg.alpha, dtype=np.float64)
    return np.full(cfg.n_topics, float(cfg.alpha))


def optimized_alpha(stats: dict[int, Any], alpha: np.ndarray, cfg: TrainConfig
                    ) -> np.ndarray | None:
    """Minka's fixed point on the histograms every shard sent with one clock (else None)."""
    from biglda.samplers.hyper import optimize_alpha

    hists = [r.get("alpha_hist") for r in stats.values()]
    if not hists or any(h is None for h in hists):
        return None
    width = max(np.asarray(h[0]).shape[1] for h in hists)
    length = max(len(h[1]) for h in hists)
    count_hist = np.zeros((cfg.n_topics, width), dtype=np.int64)
    length_hist = np.zeros(length, dtype=np.int64)
    for ch, lh in hists:
        ch, lh = np.asarray(ch), np.asarray(lh)
        count_hist[:, :ch.shape[1]] += ch
        length_hist[:len(lh)] += lh
    return optimize_alpha(count_hist, length_hist, alpha,
                          iterations=int(cfg.optimize_alpha_iterations))
