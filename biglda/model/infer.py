"""Batched fold-in inference and document completion, locally or on Dask.

The kernels live in :mod:`biglda.samplers.foldin`; this module splits the documents
into batches of about ``batch_tokens`` tokens, runs the batches (in this process, on a
thread pool, or as Dask tasks when a ``client`` is given) and puts the results back in
document order. Every document's random stream is keyed by (seed, its global index),
so the output does not depend on the batching or on where a batch ran.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from biglda.model._data import CorpusDocs, Docs
from biglda.samplers import foldin as _foldin

log = logging.getLogger(__name__)

DEFAULT_BATCH_TOKENS = 1_000_000


def split_even_odd(tokens: np.ndarray, doc_ptr: np.ndarray) -> tuple[Docs, Docs]:
    """Split each document by token position: even positions (0, 2, 4, ...) and odd ones.

    Examples
    --------
    >>> ev, od = split_even_odd(np.array([5, 6, 7, 8, 9]), np.array([0, 3, 5]))
    >>> ev.tokens.tolist(), ev.doc_ptr.tolist(), od.tokens.tolist(), od.doc_ptr.tolist()
    ([5, 7, 8], [0, 2, 3], [6, 9], [0, 1, 2])
    """
    tokens = np.asarray(tokens, dtype=np.int32)
    doc_ptr = np.asarray(doc_ptr, dtype=np.int64)
    lengths = np.diff(doc_ptr)
    position = np.arange(len(tokens), dtype=np.int64) - np.repeat(doc_ptr[:-1], lengths)
    even = position % 2 == 0
    n_even = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(even, out=n_even[1:])
    even_ptr = n_even[doc_ptr]
    odd_ptr = doc_ptr - even_ptr
    return Docs(tokens[even], even_ptr), Docs(tokens[~even], odd_ptr)


def _stream_keys(first_doc, n_docs: int) -> np.ndarray:
    """Return the documents' stream keys: given (int64[n_docs]), or their global positions."""
    if isinstance(first_doc, np.ndarray):
        return first_doc
    return np.arange(first_doc, first_doc + n_docs, dtype=np.int64)


def _foldin_task(tokens, doc_ptr, first_doc, phi_wk, prior_cdf, alpha, burn_in, samples, seed):
    index = _stream_keys(first_doc, len(doc_ptr) - 1)
    return _foldin.foldin_theta(tokens, doc_ptr, phi_wk, prior_cdf, alpha, burn_in=burn_in,
                                samples=samples, seed=seed, doc_index=index)


def _completion_task(tokens, doc_ptr, first_doc, phi_wk, prior_cdf, alpha, burn_in, samples,
                     seed):
    """Per-document (log-likelihood of the odd tokens, number of odd tokens)."""
    observed, scored = split_even_odd(tokens, doc_ptr)
    theta = _foldin_task(observed.tokens, observed.doc_ptr, first_doc, phi_wk, prior_cdf, alpha,
                         burn_in, samples, seed)
    ll = _foldin.score_tokens(scored.tokens, scored.doc_ptr, theta, phi_wk)
    return ll, np.diff(scored.doc_ptr)


def _left_to_right_task(tokens, doc_ptr, first_doc, phi_wk, prior_cdf, alpha, particles, _unused,
                        seed):
    index = _stream_keys(first_doc, len(doc_ptr) - 1)
    ll = _foldin.left_to_right_loglik(tokens, doc_ptr, phi_wk, alpha, particles=particles,
                                      seed=seed, doc_index=index)
    return ll, np.diff(doc_ptr)


def _batch(task, part, first_doc, phi_wk, prior_cdf, alpha, id_map, params):
    """Load one batch and run ``task`` on it.

    A batch is a slice of mapped documents, or a token range of a stored corpus read here.
    Returns (result, unknown tokens, document lengths).
    """
    docs = part.load(id_map)
    result = task(docs.tokens, docs.doc_ptr, first_doc, phi_wk, prior_cdf, alpha, *params)
    return result, docs.n_unknown, np.diff(docs.doc_ptr)


def map_batches(
    task: Callable[..., Any],
    docs: Docs | CorpusDocs,
    phi_wk: np.ndarray,
    prior_cdf: np.ndarray,
    alpha: np.ndarray,
    params: tuple,
    *,
    client: Any = None,
    n_jobs: int = 1,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
) -> tuple[list[Any], dict[str, int]]:
    """Run ``task(tokens, doc_ptr, first_doc, phi_wk, prior_cdf, alpha, *params)`` per batch.

    ``first_doc`` is the batch's first global document index, or, when ``docs.doc_keys``
    is set, the batch's stream keys (int64[n]).

    Returns the results in document order and the input statistics: ``n_docs``,
    ``n_tokens`` (known tokens used), ``n_unknown`` (tokens dropped: word unknown to the
    model), ``n_empty`` (documents with no known token). With ``client`` (a
    ``distributed.Client``) the model arrays are scattered once to every worker and each
    batch is one task; a stored corpus is then read by the workers themselves, batch by
    batch. Otherwise batches run here on ``n_jobs`` threads (the kernels release the GIL).
    """
    ranges = list(docs.batches(batch_tokens))
    id_map = docs.id_map
    keys = getattr(docs, "doc_keys", None)

    def first(start: int, stop: int) -> Any:  # what a task keys its documents' streams by
        return start if keys is None else keys[start:stop]

    t0 = time.perf_counter()
    if client is not None:
        # hash=False: content-hashed keys are shared by every call scattering the same
        # arrays (transform then heldout_loglik of one model), and the release of an
        # earlier call's futures then drops data a later call's tasks depend on
        # ("lost dependencies"). Unique keys per call keep each call's data its own.
        shared = client.scatter([phi_wk, prior_cdf, alpha], hash=False)
        id_map_f = None if id_map is None else client.scatter(id_map, hash=False)
        in_memory = isinstance(docs, CorpusDocs) and docs.url.startswith("memory://")
        futures = []
        for start, stop in ranges:
            part = docs.part(start, stop)
            if in_memory:  # worker processes cannot see this process's memory:// store
                part = part.load(id_map)
            futures.append(client.submit(_batch, task, part, first(start, stop), *shared,
                                         id_map_f, params, pure=False))
        outs = client.gather(futures)
    else:
        def run(rng: tuple[int, int]) -> Any:
            return _batch(task, docs.part(*rng), first(*rng), phi_wk, prior_cdf, alpha, id_map,
                          params)

        if n_jobs > 1 and len(ranges) > 1:
            with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                outs = list(pool.map(run, ranges))
        else:
            outs = [run(r) for r in ranges]
    lengths = (np.concatenate([o[2] for o in outs]) if outs else np.zeros(0, dtype=np.int64))
    stats = {"n_docs": int(docs.n_docs), "n_tokens": int(lengths.sum()),
             "n_unknown": int(docs.n_unknown + sum(int(o[1]) for o in outs)),
             "n_empty": int(np.sum(lengths == 0))}
    log.debug("%s: %s, %d batches in %.2fs", task.__name__, stats, len(ranges),
              time.perf_counter() - t0)
    return [o[0] for o in outs], stats


def foldin(docs: Docs | CorpusDocs, phi_wk: np.ndarray, prior_cdf: np.ndarray,
           alpha: np.ndarray, *, burn_in: int, samples: int, seed: int,
           **run: Any) -> tuple[np.ndarray, dict[str, int]]:
    """Return the doc-topic mixtures [D, K] of ``docs`` and the input statistics.

    See :func:`biglda.samplers.foldin.foldin_theta` for the mixtures and
    :func:`map_batches` for the statistics.
    """
    parts, stats = map_batches(_foldin_task, docs, phi_wk, prior_cdf, alpha,
                               (burn_in, samples, seed), **run)
    if not parts:
        return np.zeros((0, phi_wk.shape[1])), stats
    return np.concatenate(parts, axis=0), stats


def _joined(parts: list, stats: dict[str, int]
            ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Join the per-document values and counts of every batch, in document order."""
    if not parts:
        return np.zeros(0), np.zeros(0, dtype=np.int64), stats
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            stats)


def completion_loglik(docs: Docs | CorpusDocs, phi_wk: np.ndarray, prior_cdf: np.ndarray,
                      alpha: np.ndarray, *, burn_in: int, samples: int, seed: int,
                      **run: Any) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Per-document log-likelihood of the odd-position tokens, their counts, and stats."""
    parts, stats = map_batches(_completion_task, docs, phi_wk, prior_cdf, alpha,
                               (burn_in, samples, seed), **run)
    return _joined(parts, stats)


def left_to_right(docs: Docs | CorpusDocs, phi_wk: np.ndarray, prior_cdf: np.ndarray,
                  alpha: np.ndarray, *, particles: int, seed: int,
                  **run: Any) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Per-document left-to-right log p(w_d), document lengths, and stats."""
    parts, stats = map_batches(_left_to_right_task, docs, phi_wk, prior_cdf, alpha,
                               (particles, None, seed), **run)
    return _joined(parts, stats)
