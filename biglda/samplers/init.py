"""A run's first topics: ``init = "random" | "sequential"``.

- ``random`` (the default): every token a uniform topic (:func:`biglda.samplers.init_z`).
  The word rows of the table start dense (at K = 100 on the Debian corpus, 87 of the 100
  topics per token's word), the sparse sampler's (``cgs``) costliest state, and the first
  sweeps are slow.
- ``sequential``: Griffiths & Steyvers' initialisation. Each token draws its topic from the
  collapsed conditional given the tokens drawn before it, then joins the counts
  (:func:`biglda.samplers._kernels._sequential_z`, O(K) per token). The table starts sparse
  and where a random start gets to after about ten sweeps, and cgs runs at its steady speed
  from the second sweep.

Sequential draws happen per shard, in parallel, so two shards would name the same topic
differently. To keep the names aligned, every shard starts from the counts of one
*anchor*: the first documents of the corpus (:func:`anchor_documents`), initialised
sequentially with the same key on every worker. The anchor's counts are only a starting
point of each shard's draws; they are not part of the table. A shard's ``z`` depends only
on the seed, its index, the corpus and the priors, not on which worker holds it, so a
recovery that starts over from the beginning draws the same topics.

Why ``random`` stays the default: measured on 2 workers (Debian, K = 100 and 1,000,
``pipelines/README.md``, "Initialisation"), the sequential start is ahead only in the first
seconds; from the 10 s checkpoint on its held-out log-likelihood is behind the random
start's (by 0.01 nats/token at K = 100 and 0.03 at K = 1,000 after 60 s). Any start is
valid for MCMC: the stationary distribution does not depend on it, only the path there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from biglda.samplers.base import as_alpha
from biglda.samplers.counts import z_dtype
from biglda.samplers.rng import RandomKey

Init = Literal["random", "sequential"]
#: The values of the ``init`` setting.
INIT_CHOICES: tuple[str, ...] = get_args(Init)
#: The anchor: 1/ANCHOR_FRACTION of the corpus' tokens ...
ANCHOR_FRACTION = 50
#: ... but at least this many per topic ...
ANCHOR_PER_TOPIC = 50
#: ... and at most this many tokens (whole documents, so it can go a document over).
ANCHOR_MAX_TOKENS = 1_000_000
#: The anchor's random stream: iteration -2 (the per-shard draws use -1, sweeps 1, 2, ...).
ANCHOR_ITERATION = -2


def anchor_documents(doc_ptr: np.ndarray, n_topics: int) -> int:
    """How many leading documents make the anchor (see the module docstring).

    Examples
    --------
    >>> anchor_documents(np.arange(0, 1001, 10), 2)  # 1000 tokens: 100 (50 per topic, 2)
    10
    """
    n_tokens = int(doc_ptr[-1])
    want = min(n_tokens, ANCHOR_MAX_TOKENS,
               max(n_tokens // ANCHOR_FRACTION, ANCHOR_PER_TOPIC * int(n_topics)))
    return int(min(np.searchsorted(doc_ptr, want, side="left"), len(doc_ptr) - 1))


@dataclass
class Anchor:
    """The anchor's counts over the words it holds (``words`` sorted, one row each)."""

    words: np.ndarray
    n_wk: np.ndarray
    n_k: np.ndarray


def _draw(tokens: np.ndarray, doc_ptr: np.ndarray, n_topics: int, n_words: int, alpha: Any,
          beta: float, key: RandomKey, anchor: Anchor | None) -> tuple[np.ndarray, Anchor]:
    """Sequential draws over ``tokens`` (global ids) on top of ``anchor``'s counts."""
    from biglda.samplers._kernels import _sequential_z

    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    if len(doc_ptr) == 0 or doc_ptr[0] != 0 or doc_ptr[-1] != len(tokens) or np.any(
            np.diff(doc_ptr) < 0):  # the kernel does not check bounds
        raise AssertionError(f"doc_ptr must run from 0 to len(tokens)={len(tokens)}, "
                             f"non-decreasing")
    words, local = np.unique(np.asarray(tokens), return_inverse=True)
    n_wk = np.zeros((len(words), n_topics), dtype=np.int32)
    n_k = np.zeros(n_topics, dtype=np.int64)
    if anchor is not None and len(anchor.words):
        pos = np.minimum(np.searchsorted(anchor.words, words), len(anchor.words) - 1)
        hit = anchor.words[pos] == words
        n_wk[hit] = anchor.n_wk[pos[hit]]
        n_k += anchor.n_k
    z = np.empty(len(local), dtype=z_dtype(n_topics))
    _sequential_z(local.astype(np.int64).reshape(-1), doc_ptr,
                  z, n_wk, n_k, as_alpha(alpha, n_topics), float(beta),
                  float(n_words) * float(beta), key.state())
    return z, Anchor(words, n_wk, n_k)


def anchor_counts(tokens: np.ndarray, doc_ptr: np.ndarray, n_topics: int, n_words: int,
                  alpha: Any, beta: float, seed: int) -> Anchor:
    """Draw the anchor documents (``tokens``, ``doc_ptr``) sequentially; return their counts.

    Every worker computes the same ones (the key is fixed by ``seed``).
    """
    return _draw(tokens, doc_ptr, n_topics, n_words, alpha, beta,
                 RandomKey(seed, ANCHOR_ITERATION), None)[1]


def sequential_z(tokens: np.ndarray, doc_ptr: np.ndarray, n_topics: int, n_words: int,
                 alpha: Any, beta: float, key: RandomKey,
                 anchor: Anchor | None = None) -> np.ndarray:
    """``z`` of one shard drawn sequentially, starting from ``anchor``'s counts.

    Parameters
    ----------
    tokens, doc_ptr : int [N], int64 [D + 1]
        The shard (global word ids; ``doc_ptr`` from 0).
    n_topics, n_words : int
        K and the corpus' V (the ``V beta`` of the conditional is global).
    alpha : float or float64 [K]
    beta : float
    key : RandomKey
        The shard's initialisation stream.
    anchor : Anchor or None
        Counts every shard starts from (:func:`anchor_counts`); None: empty counts.

    Examples
    --------
    >>> toks = np.array([0, 0, 1, 1, 0, 1], dtype=np.int32)
    >>> z = sequential_z(toks, np.array([0, 3, 6]), 2, 2, 0.1, 0.01, RandomKey(0, -1))
    >>> z.dtype, int(z.max()) < 2
    (dtype('uint16'), True)
    """
    return _draw(tokens, doc_ptr, n_topics, n_words, alpha, beta, key, anchor)[0]
