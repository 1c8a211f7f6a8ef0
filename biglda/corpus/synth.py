"""Synthetic corpora drawn from the LDA generative process, with their ground truth.

Topics are Zipf-like: topic k is a Dirichlet draw whose base measure gives the
word of rank r (in a random per-topic order) weight proportional to 1/(r+1)^s, so
each topic has a few frequent words and a long tail, as real topics do. Documents
draw theta ~ Dir(alpha), a Poisson length, and then the LDA generative process.

Generation is batched and keyed by (seed, batch): the same seed and batch size give
the same corpus, and memory is bounded by one batch whatever the corpus size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SynthSpec:
    """Parameters of a synthetic LDA corpus (stored in the corpus attrs)."""

    n_docs: int = 1000
    n_words: int = 1000
    n_topics: int = 10
    mean_doc_length: float = 100.0
    alpha: float = 0.1
    beta: float = 0.01
    zipf_s: float = 1.0
    seed: int = 0
    batch_docs: int = 20_000


def _rng(seed: int, *key: int) -> np.random.Generator:
    # Counter-based (Philox) stream keyed by (seed, *key): batches are independent
    # and reproducible whatever order they are generated in.
    return np.random.Generator(np.random.Philox(np.random.SeedSequence([seed, *key])))


def topic_word_truth(spec: SynthSpec) -> np.ndarray:
    """True topic-word matrix phi, float64 [K, V], rows summing to 1 (raw word ids)."""
    rng = _rng(spec.seed, 0xF1)
    ranks = np.arange(spec.n_words, dtype=np.float64)
    zipf = 1.0 / (ranks + 1.0) ** spec.zipf_s
    zipf /= zipf.sum()
    phi = np.empty((spec.n_topics, spec.n_words))
    for k in range(spec.n_topics):
        base = zipf[rng.permutation(spec.n_words)]
        conc = np.maximum(spec.beta * spec.n_words * base, 1e-6)
        g = rng.gamma(conc)
        if g.sum() <= 0:  # every draw underflowed: fall back to the base measure
            g = base
        phi[k] = g / g.sum()
    return phi


def iter_batches(
    spec: SynthSpec, phi: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(tokens int32[n], doc_len int64[d], theta float32[d, K])`` per batch of documents.

    Token ids are the raw ids of ``phi``'s columns; documents have length >= 1.
    """
    cdf = np.cumsum(phi, axis=1)
    cdf[:, -1] = 1.0
    for b, start in enumerate(range(0, spec.n_docs, spec.batch_docs)):
        d = min(spec.batch_docs, spec.n_docs - start)
        rng = _rng(spec.seed, 0xD0C, b)
        theta = rng.dirichlet(np.full(spec.n_topics, spec.alpha), size=d)
        theta = np.nan_to_num(theta, nan=1.0 / spec.n_topics)
        lengths = np.maximum(rng.poisson(spec.mean_doc_length, size=d), 1).astype(np.int64)
        # Topic counts per document, then topic of each token in document order.
        counts = np.stack([rng.multinomial(n, t / t.sum()) for n, t in zip(lengths, theta)])
        topics = np.repeat(np.tile(np.arange(spec.n_topics), d), counts.ravel())
        tokens = np.empty(len(topics), dtype=np.int32)
        order = np.argsort(topics, kind="stable")
        bounds = np.searchsorted(topics[order], np.arange(spec.n_topics + 1))
        for k in range(spec.n_topics):
            idx = order[bounds[k]:bounds[k + 1]]
            if len(idx):
                tokens[idx] = np.searchsorted(cdf[k], rng.random(len(idx)), side="right")
        np.minimum(tokens, spec.n_words - 1, out=tokens)
        # Shuffle tokens within each document so topics are not in blocks.
        key = np.repeat(np.arange(d), lengths) * 2.0 + rng.random(len(tokens))
        tokens = tokens[np.argsort(key, kind="stable")]
        yield tokens, lengths, theta.astype(np.float32)


def generate(spec: SynthSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Whole small corpus in memory: ``(tokens, doc_ptr, phi [K,V], theta [D,K])``.

    For tests and small experiments; large corpora stream through :func:`iter_batches`.

    Examples
    --------
    >>> tokens, doc_ptr, phi, theta = generate(SynthSpec(n_docs=10, n_words=50, n_topics=3))
    >>> int(doc_ptr[-1]) == len(tokens)
    True
    """
    phi = topic_word_truth(spec)
    toks, lens, thetas = [], [], []
    for t, n, th in iter_batches(spec, phi):
        toks.append(t)
        lens.append(n)
        thetas.append(th)
    lengths = np.concatenate(lens)
    doc_ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_ptr[1:])
    return np.concatenate(toks), doc_ptr, phi, np.concatenate(thetas)
