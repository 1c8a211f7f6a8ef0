"""Scoring any topic-word matrix: held-out likelihood, perplexity, coherence, diversity.

These functions take a plain ``phi`` [K, V] (rows are normalised here) with its
vocabulary, so a matrix from another library (tomotopy, gensim, scikit-learn) is scored
exactly like a biglda model; :class:`biglda.model.TopicModel` methods call them.

Held-out likelihood by document completion (Wallach et al. 2009, "Evaluation methods
for topic models", sec. 4; the "estimated theta" form):

1. Words of a test document that are not in ``vocab`` are dropped (and counted in
   ``n_unknown``); what is left keeps its order.
2. Each document is split by token position: tokens at even positions (0, 2, 4, ...)
   are *observed*, tokens at odd positions (1, 3, ...) are *scored*. A document with
   one token is observed only.
3. theta_d is estimated from the observed half by fold-in Gibbs with phi fixed:
   ``burn_in`` sweeps discarded, then the posterior mean ``(n_dk + alpha)/(N_d + sum alpha)``
   averaged over ``samples`` sweeps (defaults 20 and 30).
4. Each scored token contributes ``log sum_k theta_dk phi_kw``. The result is the sum
   over scored tokens; per token = sum / number of scored tokens; perplexity =
   exp(-per token).

The left-to-right estimator (``method="left_to_right"``, Wallach et al. 2009 Alg. 3)
scores whole documents instead, with ``particles`` particles; it costs O(N_d^2 K) per
document, so use it on short documents or a sample.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from biglda.errors import ConfigError, InputError
from biglda.model import infer as _infer
from biglda.model._cooccurrence import count_cooccurrence
from biglda.model._data import (
    CorpusDocs,
    Docs,
    corpus_arrays,
    docs_from_corpus,
    str_array,
    vocab_map,
)
from biglda.samplers.foldin import prepare_phi

__all__ = [
    "CoherenceScore",
    "HeldoutScore",
    "coherence",
    "diversity",
    "heldout_loglik",
    "normalize_phi",
    "perplexity",
    "top_word_ids",
]


def normalize_phi(phi: np.ndarray) -> np.ndarray:
    """Rows of ``phi`` scaled to sum to 1 (float64); refuses negative or all-zero rows."""
    phi = np.asarray(phi, dtype=np.float64)
    if phi.ndim != 2:
        raise ConfigError(f"phi must be a [K, V] matrix, got shape {phi.shape}")
    if np.any(phi < 0) or not np.all(np.isfinite(phi)):
        raise ConfigError("phi must be finite and non-negative")
    sums = phi.sum(axis=1, keepdims=True)
    if np.any(sums <= 0):
        raise ConfigError("every topic of phi needs some probability mass")
    return phi / sums


def _alpha_vector(alpha: Any, n_topics: int) -> np.ndarray:
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_topics,)).copy()
    if np.any(alpha <= 0):
        raise ConfigError("alpha must be positive")
    return alpha


@dataclass
class HeldoutScore:
    """Result of :func:`heldout_loglik`."""

    loglik: float
    n_tokens: int  # tokens scored
    n_docs: int
    n_unknown: int  # test tokens dropped: word not in the model's vocabulary
    method: str
    settings: dict = field(default_factory=dict)

    @property
    def loglik_per_token(self) -> float:
        """Log-likelihood per scored token (NaN when none was scored)."""
        return self.loglik / self.n_tokens if self.n_tokens else float("nan")

    @property
    def perplexity(self) -> float:
        """``exp(-loglik_per_token)`` (NaN when no token was scored)."""
        return math.exp(-self.loglik_per_token) if self.n_tokens else float("nan")

    def to_dict(self) -> dict:
        """Return the fields and the derived per-token values as a plain dict."""
        out = asdict(self)
        out["loglik_per_token"] = self.loglik_per_token
        out["perplexity"] = self.perplexity
        return out


def _test_docs(test: Any, vocab: np.ndarray | None, n_words: int) -> Docs | CorpusDocs:
    if isinstance(test, Docs | CorpusDocs):
        return test
    if isinstance(test, tuple) and len(test) == 2:
        tokens = np.asarray(test[0], dtype=np.int32)
        doc_ptr = np.asarray(test[1], dtype=np.int64)
        if len(tokens) and (tokens.min() < 0 or tokens.max() >= n_words):
            raise InputError(f"test token ids must lie in [0, {n_words})")
        return Docs(tokens, doc_ptr)
    if vocab is None:
        raise ConfigError("scoring a corpus needs the model's vocab to map its words")
    return docs_from_corpus(test, vocab)


def heldout_loglik(
    phi: np.ndarray,
    alpha: Any,
    test: Any,
    *,
    vocab: np.ndarray | None = None,
    method: str = "completion",
    burn_in: int = 20,
    samples: int = 30,
    particles: int = 10,
    seed: int = 0,
    client: Any = None,
    n_jobs: int = 1,
    batch_tokens: int = _infer.DEFAULT_BATCH_TOKENS,
) -> HeldoutScore:
    """Held-out log-likelihood of a test corpus under topics ``phi`` (see module docstring).

    Parameters
    ----------
    phi : float[K, V]
        Topic-word matrix (rows normalised here).
    alpha : float or float[K]
        Doc-topic Dirichlet prior used for the fold-in.
    test : Corpus, URL, (tokens, doc_ptr, vocab) tuple, or (tokens, doc_ptr) pair
        The held-out documents. A pair is taken to be in ``phi``'s word ids already;
        the other forms are mapped to ``vocab`` by word, unknown words dropped and counted.
    vocab : str[V], optional
        ``phi``'s words; needed unless ``test`` is a pair of arrays.
    method : {"completion", "left_to_right"}
    burn_in, samples : int
        Fold-in sweeps of document completion: discarded, then averaged.
    particles : int
        Particles of the left-to-right estimator.
    seed : int
        Random stream key: a fixed seed gives the same score.
    client : distributed.Client, optional
        Run the batches as Dask tasks; ``n_jobs`` threads otherwise.

    Examples
    --------
    >>> phi = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]) + 1e-3
    >>> s = heldout_loglik(phi, 0.1, (np.array([0, 1, 0, 1]), np.array([0, 4])))
    >>> s.n_tokens, bool(-1.0 < s.loglik_per_token < -0.6)
    (2, True)
    """
    phi = normalize_phi(phi)
    n_topics, n_words = phi.shape
    alpha = _alpha_vector(alpha, n_topics)
    docs = _test_docs(test, vocab, n_words)
    phi_wk, prior_cdf = prepare_phi(phi, alpha)
    run = {"client": client, "n_jobs": n_jobs, "batch_tokens": batch_tokens}
    if method == "completion":
        ll, n, stats = _infer.completion_loglik(docs, phi_wk, prior_cdf, alpha, burn_in=burn_in,
                                                samples=samples, seed=seed, **run)
        settings = {"split": "even positions observed, odd positions scored",
                    "burn_in": burn_in, "samples": samples, "seed": seed}
    elif method == "left_to_right":
        ll, n, stats = _infer.left_to_right(docs, phi_wk, prior_cdf, alpha, particles=particles,
                                            seed=seed, **run)
        settings = {"particles": particles, "seed": seed}
    else:
        raise ConfigError(f"unknown held-out method {method!r} (completion, left_to_right)")
    return HeldoutScore(float(ll.sum()), int(n.sum()), stats["n_docs"], stats["n_unknown"],
                        method, settings)


def perplexity(phi: np.ndarray, alpha: Any, test: Any, **kw: Any) -> float:
    """``exp(-held-out log-likelihood per token)``; arguments as :func:`heldout_loglik`."""
    return heldout_loglik(phi, alpha, test, **kw).perplexity


def top_word_ids(phi: np.ndarray, top_n: int) -> np.ndarray:
    """Ids of each topic's ``top_n`` most probable words, most probable first (int64[K, n]).

    ``top_n`` larger than V is clipped to V. Ties are broken by the smaller word id.
    """
    phi = np.asarray(phi)
    top_n = max(1, min(int(top_n), phi.shape[1]))
    # argsort of -phi (stable) so ties keep id order: deterministic across platforms.
    return np.argsort(-phi, axis=1, kind="stable")[:, :top_n].astype(np.int64)


@dataclass
class CoherenceScore:
    """Result of :func:`coherence`: per-topic scores, their mean, and how they were counted."""

    per_topic: np.ndarray
    measure: str
    top_n: int
    window: int | None
    n_windows: int
    n_missing_words: int  # top words (per topic) that never occur in the reference corpus

    @property
    def mean(self) -> float:
        """Mean over the topics whose score is finite (NaN when none is)."""
        vals = self.per_topic[np.isfinite(self.per_topic)]
        return float(vals.mean()) if len(vals) else float("nan")

    def to_dict(self) -> dict:
        """Return the score as a plain (JSON-ready) dict."""
        return {"measure": self.measure, "mean": self.mean, "top_n": self.top_n,
                "window": self.window, "n_windows": self.n_windows,
                "n_missing_words": self.n_missing_words,
                "per_topic": [float(x) for x in self.per_topic]}


def coherence(
    phi: np.ndarray,
    vocab: np.ndarray,
    corpus: Any,
    *,
    measure: str = "npmi",
    top_n: int = 10,
    window: int | None = None,
) -> CoherenceScore:
    """Topic coherence of each topic's ``top_n`` words in a reference corpus.

    Counts (``window``): None counts each non-empty document as one window (document
    co-occurrence); an int ``w`` counts boolean sliding windows of ``w`` tokens moved one
    token at a time, a document shorter than ``w`` being one window. Probabilities are
    window counts over the number of windows.

    Measures:

    - ``"npmi"`` (Bouma 2009; Röder et al. 2015): mean over the word pairs of a topic of
      ``log(p(a,b) / (p(a) p(b))) / -log p(a,b)``; a pair never seen together scores -1.
      In [-1, 1], higher is better.
    - ``"umass"`` (Mimno et al. 2011): mean over pairs (w_i ranked above w_j) of
      ``log((D(w_i, w_j) + 1) / D(w_i))``. At most 0-ish, higher is better.

    Top words are matched to the corpus by word; a top word that never occurs in the
    corpus is skipped (its pairs are left out; ``n_missing_words`` counts such words over
    all topics). A topic with no scorable pair gets NaN, and the mean ignores NaN.

    Examples
    --------
    >>> phi = np.array([[0.5, 0.4, 0.1], [0.1, 0.1, 0.8]])
    >>> ref = (np.array([0, 1, 0, 1, 2]), np.array([0, 2, 4, 5]), np.array(["a", "b", "c"]))
    >>> s = coherence(phi, np.array(["a", "b", "c"]), ref, top_n=2)
    >>> [round(float(x), 3) for x in s.per_topic]
    [1.0, -1.0]
    """
    if measure not in ("npmi", "umass"):
        raise ConfigError(f"unknown coherence measure {measure!r} (npmi, umass)")
    if window is not None and int(window) < 2:
        raise ConfigError("a coherence window must hold at least 2 tokens")
    phi = np.asarray(phi, dtype=np.float64)
    vocab = str_array(vocab)
    if phi.ndim != 2 or phi.shape[1] != len(vocab):
        raise ConfigError(f"phi is {phi.shape} but vocab has {len(vocab)} words")
    tokens, doc_ptr, corpus_vocab, _ = corpus_arrays(corpus)
    top = top_word_ids(phi, top_n)
    n_top = top.shape[1]
    to_corpus = vocab_map(vocab[top.ravel()], corpus_vocab).reshape(top.shape)
    n_missing = int((to_corpus < 0).sum())
    # Pairs (i < j by rank) of every topic, in corpus ids; skipped where a word is missing.
    ii, jj = np.triu_indices(n_top, k=1)
    a = to_corpus[:, ii]  # higher-ranked word
    b = to_corpus[:, jj]
    ok = (a >= 0) & (b >= 0) & (a != b)
    keys = np.stack([np.minimum(a, b)[ok], np.maximum(a, b)[ok]], axis=1)
    per_topic = np.full(len(top), np.nan)
    if len(keys) == 0:
        return CoherenceScore(per_topic, measure, n_top, window, 0, n_missing)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    words, word_counts, pair_counts, n_windows = count_cooccurrence(
        tokens, doc_ptr, len(corpus_vocab), uniq, window)
    count_of = dict(zip(words.tolist(), word_counts.tolist(), strict=True))
    n_missing = sum(count_of.get(x, 0) == 0 for x in to_corpus.ravel().tolist())
    joint = pair_counts[inverse.ravel()].astype(np.float64)
    ca = np.array([count_of[x] for x in a[ok].tolist()], dtype=np.float64)
    cb = np.array([count_of[x] for x in b[ok].tolist()], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if measure == "npmi":
            p_ab = joint / n_windows
            pmi = np.log(joint * n_windows / (ca * cb))
            score = np.where(joint == 0, -1.0,
                             np.where(p_ab >= 1.0, 1.0, pmi / -np.log(p_ab)))
            valid = (ca > 0) & (cb > 0)
        else:
            score = np.log((joint + 1.0) / ca)
            valid = ca > 0
    topic_of_pair = np.broadcast_to(np.arange(len(top))[:, None], a.shape)[ok]
    sums = np.bincount(topic_of_pair[valid], weights=score[valid], minlength=len(top))
    counts = np.bincount(topic_of_pair[valid], minlength=len(top))
    with np.errstate(invalid="ignore", divide="ignore"):
        per_topic = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return CoherenceScore(per_topic, measure, n_top, None if window is None else int(window),
                          n_windows, n_missing)


def diversity(phi: np.ndarray, top_n: int = 25) -> float:
    """Topic diversity (Dieng et al. 2020): share of distinct words among the top words.

    The share is over all topics' ``top_n`` words (1 = no word shared between topics).
    ``top_n`` is clipped to V.

    Examples
    --------
    >>> diversity(np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]]), top_n=2)
    0.75
    """
    top = top_word_ids(phi, top_n)
    return float(len(np.unique(top)) / top.size)
