"""``TopicModel``: a trained LDA model — inspect, infer, evaluate, save.

A model is the count tables of one posterior sample (``n_wk``, ``n_dk``) plus the
priors, read from a ``model.zarr`` store (format: :mod:`biglda.model.store`).
Every probability is a posterior mean given those counts:

- ``topic_word[k, w] = (n_wk[w, k] + beta) / (n_k[k] + V * beta)``
- ``doc_topic[d, k] = (n_dk[d, k] + alpha_k) / (N_d + sum(alpha))``
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from biglda.errors import BigLDAError, ConfigError, FormatError
from biglda.io import update_attributes
from biglda.model import evaluate as _eval
from biglda.model import infer as _infer
from biglda.model._data import CorpusDocs, Docs, as_docs, str_array
from biglda.samplers.foldin import prepare_phi

log = logging.getLogger(__name__)

# attrs that save_model computes itself; everything else is carried through a save.
_COMPUTED_ATTRS = {"format", "format_version", "n_topics", "n_words", "n_docs", "n_tokens",
                   "alpha", "beta"}


class UnknownWordError(BigLDAError, KeyError):
    """A word the model's vocabulary does not contain (a ``KeyError`` too)."""

    def __str__(self) -> str:
        """Return the message as it is (KeyError's own str would quote it)."""
        return str(self.args[0]) if self.args else ""


class UnknownDocumentError(BigLDAError, KeyError):
    """A document id that is not among the model's training documents."""

    def __str__(self) -> str:
        """Return the message as it is (KeyError's own str would quote it)."""
        return str(self.args[0]) if self.args else ""


class TopicModel:
    """A trained LDA topic model.

    Build one with :func:`biglda.load` (a ``model.zarr`` store), :func:`biglda.train`, or
    :meth:`TopicModel.from_counts` (arrays in memory).

    Attributes
    ----------
    n_topics, n_words, n_docs, n_tokens : int
    vocab : np.ndarray[str]
        Word of each id.
    alpha : float64[K]
        Doc-topic prior (asymmetric when it was optimised).
    beta : float
        Topic-word prior.
    topic_word : float64[K, V]
        Posterior mean topic-word distributions (rows sum to 1).
    topic_word_counts : int32[K, V]
        ``n_wk`` transposed.
    topic_sizes : int64[K]
        Tokens assigned to each topic (``n_k``).
    doc_topic : float64[D, K]
        Posterior mean doc-topic mixtures of the training documents (rows sum to 1).
    doc_ids : np.ndarray[str]
        Id of each training document (row order of ``doc_topic``).
    history : list[dict]
        One metrics record per training iteration.
    config : dict
        Training settings.
    attrs : dict
        Every stored attribute (tokenizer, sampler, evaluation, ...).
    url : str or None
        Where the model was loaded from or last saved to.

    Examples
    --------
    >>> m = TopicModel.from_counts(np.array([[5, 0], [4, 1], [0, 6]]), np.array([[9, 7]]),
    ...                            ["apple", "pear", "car"], alpha=0.1, beta=0.01)
    >>> [w for w, _ in m.top_words(1, n=1)]
    ['car']
    """

    def __init__(self, n_wk: np.ndarray, n_dk: Any, vocab: Any, doc_ids: Any,
                 alpha: Any, beta: float, attrs: dict | None = None,
                 url: str | None = None) -> None:
        n_wk = np.asarray(n_wk)
        if n_wk.ndim != 2:
            raise FormatError(f"n_wk must be [V, K], got shape {n_wk.shape}")
        n_words, n_topics = n_wk.shape
        self._n_wk = n_wk
        self._n_dk = n_dk  # ndarray or a lazy zarr array [D, K]
        self.vocab = str_array(vocab)
        self.doc_ids = str_array(doc_ids)
        if len(self.vocab) != n_words:
            raise FormatError(f"vocab has {len(self.vocab)} words but n_wk has {n_words} rows")
        if tuple(n_dk.shape) != (len(self.doc_ids), n_topics):
            raise FormatError(f"n_dk has shape {tuple(n_dk.shape)}, expected "
                              f"({len(self.doc_ids)}, {n_topics})")
        self.alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_topics,)).copy()
        self.beta = float(beta)
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.url = url
        self.last_transform_stats_: dict[str, int] | None = None
        self._topic_word: np.ndarray | None = None
        self._doc_topic: np.ndarray | None = None
        self._word_index: dict[str, int] | None = None
        self._doc_index: dict[str, int] | None = None
        self._phi_tables: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ construction, I/O

    @classmethod
    def from_counts(cls, n_wk: Any, n_dk: Any, vocab: Any, *, alpha: Any = 0.1,
                    beta: float = 0.01, doc_ids: Any = None,
                    attrs: dict | None = None) -> TopicModel:
        """Build a model from count arrays: ``n_wk`` int[V, K], ``n_dk`` int[D, K]."""
        n_wk = np.asarray(n_wk, dtype=np.int32)
        n_dk = np.asarray(n_dk, dtype=np.int32).reshape(-1, n_wk.shape[1])
        if doc_ids is None:
            doc_ids = np.arange(len(n_dk))
        return cls(n_wk, n_dk, vocab, doc_ids, alpha, beta, attrs)

    @classmethod
    def load(cls, path: str) -> TopicModel:
        """Open a ``model.zarr`` store (local path or any fsspec URL); see :func:`load`."""
        from biglda.model.store import open_model_group

        path = str(path)
        g: Any = open_model_group(path)  # zarr's types do not know the members are arrays
        attrs: dict[str, Any] = dict(g.attrs)
        n_wk = np.asarray(g["n_wk"][:])
        model = cls(n_wk, g["n_dk"], g["vocab"][:], g["doc_ids"][:], attrs.get("alpha"),
                    attrs["beta"], attrs, url=path)
        if attrs.get("n_topics") != model.n_topics or attrs.get("n_words") != model.n_words:
            raise FormatError(f"{path}: attrs say K={attrs.get('n_topics')}, "
                              f"V={attrs.get('n_words')} but n_wk is {n_wk.shape}")
        log.info("loaded %r", model)
        return model

    def save(self, path: str, overwrite: bool = False) -> str:
        """Write the model to ``path`` (any fsspec URL) atomically; returns the path.

        Raises :class:`biglda.errors.OutputExistsError` if ``path`` exists and
        ``overwrite`` is false; a failed save leaves nothing that opens as a model.
        """
        from biglda.model.store import save_model

        path = str(path)
        extra = {k: v for k, v in self.attrs.items() if k not in _COMPUTED_ATTRS}
        save_model(path, n_wk=self._n_wk, n_dk=self._iter_n_dk(), vocab=self.vocab,
                   doc_ids=self.doc_ids, alpha=self.alpha, beta=self.beta, attrs=extra,
                   overwrite=overwrite)
        self.url = path
        return path

    def _iter_n_dk(self, rows: int = 65536) -> Iterator[np.ndarray]:
        for start in range(0, self.n_docs, rows):
            yield np.asarray(self._n_dk[start:start + rows])

    def record_evaluation(self, results: dict, key: str | None = None) -> None:
        """Keep an evaluation in ``attrs["evaluations"][key]``, a history keyed by the test set.

        The default key is ``results["test_corpus"]``, else ``"default"``; an earlier
        evaluation of the same key is merged into. ``attrs["evaluation"]`` is the one saved
        last. A stored model's store is updated too (``biglda evaluate --save``).
        """
        import datetime

        key = str(key or results.get("test_corpus") or "default")
        history = {k: dict(v) for k, v in (self.attrs.get("evaluations") or {}).items()}
        entry = {**history.get(key, {}), **results,
                 "saved_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
        history.pop(key, None)
        history[key] = entry  # the latest last
        self.attrs["evaluations"] = history
        self.attrs["evaluation"] = entry
        if self.url is not None:
            import zarr

            try:
                update_attributes(zarr.open_group(self.url, mode="r+"),
                                  {"evaluations": history, "evaluation": entry})
            except (OSError, ValueError) as exc:  # read-only store or file system
                raise BigLDAError(f"cannot store the evaluation in {self.url}: "
                                  f"{getattr(exc, 'strerror', None) or type(exc).__name__}"
                                  ) from None

    # ------------------------------------------------------------------ basic attributes

    @property
    def n_topics(self) -> int:
        """Number of topics K."""
        return int(self._n_wk.shape[1])

    @property
    def n_words(self) -> int:
        """Vocabulary size V."""
        return int(self._n_wk.shape[0])

    @property
    def n_docs(self) -> int:
        """Number of training documents D."""
        return len(self.doc_ids)

    @property
    def n_tokens(self) -> int:
        """Number of training tokens."""
        return int(self.topic_sizes.sum())

    @property
    def history(self) -> list[dict]:
        """Training metrics as recorded during training (a list of dicts)."""
        return list(self.attrs.get("history") or [])

    @property
    def config(self) -> dict:
        """The training settings the model was made with."""
        return dict(self.attrs.get("config") or {})

    @property
    def tokenizer_settings(self) -> dict:
        """The tokenizer settings of the training corpus (to tokenize new text alike)."""
        return dict(self.attrs.get("tokenizer") or {})

    @property
    def topic_word_counts(self) -> np.ndarray:
        """Topic-word counts, int32 [K, V] (the transpose of ``n_wk``)."""
        return self._n_wk.T

    @property
    def topic_sizes(self) -> np.ndarray:
        """Training tokens per topic, int64 [K]."""
        return self._n_wk.sum(axis=0, dtype=np.int64)

    @property
    def topic_word(self) -> np.ndarray:
        """Topic-word distributions phi, float64 [K, V], smoothed by ``beta`` (cached)."""
        if self._topic_word is None:
            n_k = self.topic_sizes.astype(np.float64)
            self._topic_word = ((self._n_wk.T + self.beta)
                                / (n_k + self.n_words * self.beta)[:, None])
        return self._topic_word

    @property
    def doc_topic_counts(self) -> np.ndarray:
        """Doc-topic counts of the training documents, [D, K]."""
        return np.asarray(self._n_dk[:])

    @property
    def doc_topic(self) -> np.ndarray:
        """Doc-topic mixtures theta of the training documents, float64 [D, K] (cached)."""
        if self._doc_topic is None:
            n_dk = self.doc_topic_counts.astype(np.float64)
            self._doc_topic = ((n_dk + self.alpha)
                               / (n_dk.sum(axis=1, keepdims=True) + self.alpha.sum()))
        return self._doc_topic

    def doc_topic_of(self, doc_id: Any) -> np.ndarray:
        """Topic mixture float64[K] of the training document with id ``doc_id``."""
        if self._doc_index is None:
            self._doc_index = {d: i for i, d in enumerate(self.doc_ids.tolist())}
        i = self._doc_index.get(str(doc_id))
        if i is None:
            raise UnknownDocumentError(f"document {doc_id!r} is not a training document "
                                       "of this model")
        counts = np.asarray(self._n_dk[i], dtype=np.float64)
        return (counts + self.alpha) / (counts.sum() + self.alpha.sum())

    def word_id(self, word: str) -> int:
        """Id of ``word``; :class:`UnknownWordError` (a ``KeyError``) if not in the vocabulary."""
        if self._word_index is None:
            self._word_index = {w: i for i, w in enumerate(self.vocab.tolist())}
        i = self._word_index.get(word)
        if i is None:
            raise UnknownWordError(f"word {word!r} is not in the model's vocabulary")
        return i

    def _check_topic(self, topic: int) -> int:
        if not isinstance(topic, int | np.integer) or not 0 <= int(topic) < self.n_topics:
            raise ConfigError(f"topic must be an integer in [0, {self.n_topics}), got {topic!r}")
        return int(topic)

    # ------------------------------------------------------------------ inspection

    def top_words(self, topic: int, n: int = 10) -> list[tuple[str, float]]:
        """Return the ``n`` most probable words of ``topic`` with their probabilities.

        ``n`` larger than the vocabulary is clipped to V (every word is returned).

        Examples
        --------
        >>> m = TopicModel.from_counts([[5, 0], [4, 1], [0, 6]], [[9, 7]], ["a", "b", "c"])
        >>> [w for w, _ in m.top_words(0, n=5)]
        ['a', 'b', 'c']
        """
        k = self._check_topic(topic)
        if n < 1:
            raise ConfigError(f"n must be at least 1, got {n}")
        ids = _eval.top_word_ids(self.topic_word[k:k + 1], n)[0]
        return [(str(self.vocab[i]), float(self.topic_word[k, i])) for i in ids]

    def topics(self, n: int = 10) -> list[dict[str, Any]]:
        """Return a table of all topics, one row (dict) per topic.

        A row has ``topic``, ``share`` (fraction of training tokens), ``size`` (tokens),
        ``words`` and ``probs`` (top ``n``, clipped to V).
        """
        sizes = self.topic_sizes
        total = max(int(sizes.sum()), 1)
        ids = _eval.top_word_ids(self.topic_word, n)
        rows = []
        for k in range(self.n_topics):
            rows.append({"topic": k, "share": float(sizes[k] / total), "size": int(sizes[k]),
                         "words": [str(self.vocab[i]) for i in ids[k]],
                         "probs": [float(self.topic_word[k, i]) for i in ids[k]]})
        return rows

    def word_topics(self, word: str, n: int | None = None) -> list[tuple[int, float]]:
        """Topics of ``word``: ``p(topic | word)`` by Bayes' rule, most probable first.

        ``p(k | w) ∝ topic_word[k, w] * (n_k + alpha_k)`` (topic prior from its share of the
        training tokens). Raises :class:`UnknownWordError` (a ``KeyError`` and a
        ``BigLDAError``) for a word outside the vocabulary.
        """
        w = self.word_id(word)
        p = self.topic_word[:, w] * (self.topic_sizes + self.alpha)
        p = p / p.sum()
        order = np.argsort(-p, kind="stable")[: n or self.n_topics]
        return [(int(k), float(p[k])) for k in order]

    def similar_topics(self, topic: int, n: int = 5) -> list[tuple[int, float]]:
        """Return the ``n`` topics closest to ``topic``, most similar first.

        Similarity is 1 - Jensen-Shannon divergence (base 2, so in [0, 1]) between
        topic-word distributions.
        """
        k = self._check_topic(topic)
        phi = self.topic_word
        mix = 0.5 * (phi + phi[k])
        with np.errstate(divide="ignore", invalid="ignore"):
            kl_a = np.sum(phi[k] * np.log2(phi[k] / mix), axis=1)
            kl_b = np.sum(phi * np.log2(phi / mix), axis=1)
        sim = 1.0 - 0.5 * (kl_a + kl_b)
        order = [int(j) for j in np.argsort(-sim, kind="stable") if j != k][:max(0, n)]
        return [(j, float(sim[j])) for j in order]

    def summary(self, n_words: int = 8, max_topics: int | None = None) -> str:
        """Describe the model in a few lines: sizes, priors, last metrics, top words per topic."""
        lines = [repr(self)]
        a = self.alpha
        alpha_txt = (f"{a[0]:.4g}" if np.allclose(a, a[0])
                     else f"asymmetric (min {a.min():.4g}, mean {a.mean():.4g}, max {a.max():.4g})")
        lines.append(f"alpha: {alpha_txt}   beta: {self.beta:.4g}   "
                     f"sampler: {self.attrs.get('sampler', '?')}")
        hist = self.history
        if hist:
            last = hist[-1]
            ll = last.get("ll_per_token")
            ll_txt = f"{ll:.4f}" if isinstance(ll, int | float) else "?"
            lines.append(f"trained {len(hist)} iterations; last log-likelihood/token {ll_txt}")
        if self.attrs.get("evaluation"):
            ev = self.attrs["evaluation"]
            parts = [f"{k}={v:.4g}" for k, v in ev.items() if isinstance(v, int | float)]
            if parts:
                lines.append("evaluation: " + ", ".join(parts))
        rows = self.topics(n_words)
        if max_topics is not None:
            rows = sorted(rows, key=lambda r: -r["share"])[:max_topics]
        for r in rows:
            lines.append(f"topic {r['topic']:>3} ({100 * r['share']:5.2f}%): "
                         + " ".join(r["words"]))
        return "\n".join(lines)

    def __repr__(self) -> str:
        """Show the sizes and, for a stored model, its URL."""
        where = f", url={self.url!r}" if self.url else ""
        return (f"TopicModel(n_topics={self.n_topics}, n_words={self.n_words}, "
                f"n_docs={self.n_docs}, n_tokens={self.n_tokens}{where})")

    # ------------------------------------------------------------------ inference

    def _phi_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._phi_tables is None:
            self._phi_tables = prepare_phi(self.topic_word, self.alpha)
        return self._phi_tables

    def _docs(self, docs: Any) -> Docs | CorpusDocs:
        return as_docs(docs, self.vocab, self.tokenizer_settings)

    def transform(self, docs: Any, *, iterations: int = 50, burn_in: int | None = None,
                  seed: int = 0, client: Any = None, n_jobs: int = 1,
                  batch_tokens: int = _infer.DEFAULT_BATCH_TOKENS) -> np.ndarray:
        """Topic mixtures of new documents by fold-in Gibbs sampling with topics fixed.

        Parameters
        ----------
        docs : str, iterable of str, Corpus, corpus URL... see below
            Raw strings (one per document; a single string is one document) are tokenized
            with the training corpus's tokenizer settings. A :class:`biglda.corpus.Corpus`
            or a ``(tokens, doc_ptr, vocab)`` tuple is mapped to the model's vocabulary by
            word. A SciPy sparse matrix [D, V] holds counts over the model's own word ids.
            Words the model does not know are ignored and counted.
        iterations : int
            Gibbs sweeps per document; the first ``burn_in`` (default ``iterations // 2``)
            are discarded and the posterior mean of theta is averaged over the rest.
        seed : int
            With a fixed seed the result is identical, whatever the batching or workers.
        client : distributed.Client, optional
            Run batches of ``batch_tokens`` tokens as Dask tasks (large inputs); otherwise
            they run here on ``n_jobs`` threads. A stored Corpus is read batch by batch
            (memory bounded by a batch), on Dask by the workers themselves.

        Returns
        -------
        float64[D, K], rows summing to 1. A document with no known word (empty, or only
        unknown words) gets the prior mixture ``alpha / sum(alpha)``.

        After the call, ``last_transform_stats_`` holds ``n_docs``, ``n_tokens`` (known
        tokens used), ``n_unknown`` (tokens ignored) and ``n_empty`` (documents that got
        the prior mixture).

        Examples
        --------
        >>> m = TopicModel.from_counts([[50, 0], [40, 1], [0, 60]], [[90, 61]], ["a", "b", "c"])
        >>> theta = m.transform((np.array([2, 2, 2]), np.array([0, 3]), np.array(["a", "b", "c"])))
        >>> bool(theta[0, 1] > 0.8)
        True
        """
        if iterations < 1:
            raise ConfigError(f"iterations must be at least 1, got {iterations}")
        burn = iterations // 2 if burn_in is None else int(burn_in)
        if not 0 <= burn < iterations:
            raise ConfigError(f"burn_in must be in [0, iterations), got {burn}")
        d = self._docs(docs)
        phi_wk, prior_cdf = self._phi_arrays()
        theta, stats = _infer.foldin(d, phi_wk, prior_cdf, self.alpha, burn_in=burn,
                                     samples=iterations - burn, seed=seed, client=client,
                                     n_jobs=n_jobs, batch_tokens=batch_tokens)
        self.last_transform_stats_ = stats
        log.info("transform: %s", self.last_transform_stats_)
        return theta

    # ------------------------------------------------------------------ evaluation

    def heldout_loglik(self, test_corpus: Any, **kw: Any) -> _eval.HeldoutScore:
        """Held-out log-likelihood by document completion.

        See :func:`biglda.model.evaluate.heldout_loglik` for the split and sweeps (even token
        positions estimate theta with 20 burn-in + 30 averaged fold-in sweeps, odd ones are
        scored). ``test_corpus`` words are mapped to the model by word; the result's
        ``n_unknown`` counts test tokens the model does not know (dropped).
        """
        if "vocab" in kw:
            raise ConfigError("the model supplies its own vocab")
        return _eval.heldout_loglik(self.topic_word, self.alpha, test_corpus, vocab=self.vocab,
                                    **kw)

    def perplexity(self, test_corpus: Any, **kw: Any) -> float:
        """``exp(-held-out log-likelihood per scored token)`` (see :meth:`heldout_loglik`)."""
        return self.heldout_loglik(test_corpus, **kw).perplexity

    def coherence(self, corpus: Any, measure: str = "npmi", top_n: int = 10,
                  window: int | None = None) -> _eval.CoherenceScore:
        """Coherence of the topics' top words in ``corpus``.

        See :func:`biglda.model.evaluate.coherence` (``window=None``: document co-occurrence;
        an int: sliding windows of that many tokens).
        """
        return _eval.coherence(self.topic_word, self.vocab, corpus, measure=measure,
                               top_n=top_n, window=window)

    def diversity(self, top_n: int = 25) -> float:
        """Share of distinct words among all topics' ``top_n`` words (Dieng et al. 2020)."""
        return _eval.diversity(self.topic_word, top_n)


def load(path: str) -> TopicModel:
    """Open a trained model: a ``model.zarr`` store at a local path or any fsspec URL.

    Raises :class:`biglda.errors.FormatError` (one line) when ``path`` does not exist,
    is not a biglda model, or has another format version.

    Examples
    --------
    >>> m = TopicModel.from_counts([[5, 0], [0, 6]], [[5, 6]], ["a", "b"])
    >>> _ = m.save("memory://doc/load-example.zarr", overwrite=True)
    >>> load("memory://doc/load-example.zarr").n_topics
    2
    """
    return TopicModel.load(path)
