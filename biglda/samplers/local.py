"""``fit_local``: the whole training loop in one process (tests, benchmarks, small data)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers.base import as_alpha
from biglda.samplers.counts import count_from_z, init_z, joint_loglik, z_dtype
from biglda.samplers.registry import get_sampler
from biglda.samplers.rng import RandomKey

# init_z draws from iteration -1 so that sweep i (1-based) uses RandomKey(seed, i, shard).
INIT_ITERATION = -1


@dataclass
class LocalFit:
    """Result of :func:`fit_local`: final ``z``, ``n_wk``, ``n_k`` and one record per iteration."""

    z: np.ndarray
    n_wk: np.ndarray
    n_k: np.ndarray
    history: list[dict] = field(default_factory=list)


def fit_local(tokens, doc_ptr, n_words: int, n_topics: int, algorithm: str = "cgs",
              iterations: int = 100, alpha=0.1, beta: float = 0.01, seed: int = 0,
              callback: Callable[[dict], object] | None = None, *, backend: str = "cpu",
              loglik_every: int = 1, z=None, **params) -> LocalFit:
    """Train LDA in this process: random ``z``, then ``iterations`` sweeps of one sampler.

    The table here is the global one, so each sweep's in-place update of ``n_wk``/``n_k``
    *is* the applied delta (a distributed worker instead pushes ``SweepResult``'s delta).

    Parameters
    ----------
    tokens, doc_ptr : int32 [N], int64 [D + 1]
        The corpus (word ids in [0, n_words)).
    n_words, n_topics : int
    algorithm : {"cgs", "lightlda", "warplda"}
    iterations : int
    alpha : float or float64 [K]
    beta : float
    seed : int
        Sweep ``i`` (1-based) uses ``RandomKey(seed, i, 0)``; initialisation ``iteration=-1``.
    callback : callable(record) or None
        Called after every iteration with its history record.
    backend : str
    loglik_every : int
        Compute the joint log-likelihood every this many iterations (and at the last one);
        0 never. It costs O(V K), which matters at large K.
    z : array or None
        Start from these topics instead of random ones (copied).
    **params
        Sampler settings (``variant``, ``mh_steps``).

    Returns
    -------
    LocalFit
        History records: ``iteration, seconds, elapsed, tokens_per_s, accept_rate`` and
        ``ll``/``ll_per_token`` where computed.

    Examples
    --------
    >>> tokens = np.array([0, 1, 2, 0, 1, 2], dtype=np.int32)
    >>> fit = fit_local(tokens, np.array([0, 3, 6]), 3, 2, iterations=3)
    >>> len(fit.history), int(fit.n_k.sum())
    (3, 6)
    """
    if iterations < 0:
        raise ConfigError(f"iterations must be >= 0, got {iterations}")
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    alpha = as_alpha(alpha, n_topics)
    sampler = get_sampler(algorithm, backend, **params)
    if z is None:
        z = init_z(tokens.shape[0], n_topics, RandomKey(seed, INIT_ITERATION, 0))
    else:
        z = np.ascontiguousarray(z).astype(z_dtype(n_topics), copy=True)
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    history: list[dict] = []
    elapsed = 0.0
    for it in range(1, iterations + 1):
        res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
                            RandomKey(seed, it, 0))
        elapsed += res.seconds
        record = {"iteration": it, "seconds": res.seconds, "elapsed": elapsed,
                  "tokens_per_s": res.n_tokens / res.seconds if res.seconds > 0 else float("inf"),
                  "accept_rate": res.accept_rate}
        if loglik_every and (it % loglik_every == 0 or it == iterations):
            ll = joint_loglik(doc_ptr, z, n_wk, n_k, alpha, beta, n_words)
            record["ll"] = ll
            record["ll_per_token"] = ll / max(tokens.shape[0], 1)
        history.append(record)
        if callback is not None:
            callback(record)
    return LocalFit(z, n_wk, n_k, history)
