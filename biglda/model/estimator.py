"""``biglda.LDA``: a scikit-learn estimator around the Dask trainer.

The constructor only stores parameters; :meth:`LDA.fit` writes the input as a
temporary ``corpus.zarr``, trains with :func:`biglda.model.training.train_to_store`, and sets the
fitted attributes (ending in ``_``). scikit-learn is optional: when it is installed,
``LDA`` is a real scikit-learn transformer (``BaseEstimator``, ``TransformerMixin``: tags,
``set_output``, input validation, ``clone``, pipelines, grid search); without it, a small
stand-in base keeps ``get_params`` / ``set_params`` / ``get_feature_names_out`` working.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
import tempfile
import weakref
from typing import Any

import numpy as np

from biglda.errors import ConfigError, InputError
from biglda.model._data import (
    CorpusDocs,
    Docs,
    docs_from_corpus,
    docs_from_sparse,
    row_keys,
    str_array,
)
from biglda.model.topic_model import TopicModel

log = logging.getLogger(__name__)


class NotFittedError(ConfigError, ValueError, AttributeError):
    """``transform``/``score`` before ``fit``.

    A ValueError and an AttributeError, like scikit-learn's ``NotFittedError``.
    """


class _ParamsBase:
    _n_features_out: int  # the fitted estimator's K (a property of LDA)

    """scikit-learn's parameter protocol (clone, grid search) without depending on it."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def set_params(self, **params: Any) -> Any:
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise ConfigError(f"{type(self).__name__} has no parameter {k!r}")
            setattr(self, k, v)
        return self

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the K output columns: ``lda0, lda1, ...`` (as scikit-learn names them)."""
        self._check_fitted()  # type: ignore[attr-defined]
        prefix = type(self).__name__.lower()
        return np.array([f"{prefix}{k}" for k in range(self._n_features_out)], dtype=object)


try:  # scikit-learn is optional: use its bases when it is there
    from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
except ImportError:  # pragma: no cover - exercised by test_import_without_sklearn
    _BASES: tuple[type, ...] = (_ParamsBase,)
    _SKLEARN = False
else:
    _BASES = (ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator)
    _SKLEARN = True


def _is_matrix(x: Any) -> bool:
    """Tell whether ``x`` is an array-like document-term matrix (not a Corpus, URL or texts)."""
    import scipy.sparse as sp  # ~0.4 s to import; only matrix inputs need it

    if sp.issparse(x) or isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        return True
    if isinstance(x, list | tuple) and len(x) and isinstance(x[0], list | tuple | np.ndarray):
        first = x[0]
        return len(first) == 0 or not isinstance(first[0], str)
    return False


def _one_topic(url: str, alpha: Any, beta: float) -> TopicModel:
    """K = 1 needs no sampling: every token is in the one topic (the exact posterior)."""
    from biglda.corpus import Corpus

    c = Corpus.open(url)
    return TopicModel.from_counts(np.asarray(c.word_count)[:, None],
                                  np.asarray(c.doc_lengths)[:, None], c.vocab, alpha=alpha,
                                  beta=beta, doc_ids=c.doc_ids)


class LDA(*_BASES):  # type: ignore[misc]
    """Latent Dirichlet allocation trained on Dask, with the scikit-learn estimator API.

    Parameters
    ----------
    n_components : int
        Number of topics K.
    iterations : int
        Training sweeps.
    sampler : {"auto", "cgs", "lightlda", "warplda"}
        ``"auto"`` (default): chosen from K, the data and the backend (docs/samplers.md);
        the choice is in ``model_.attrs["sampler_choice"]``.
    alpha : float or sequence of float, optional
        Doc-topic prior (default ``1 / n_components``, scikit-learn's default); K numbers
        give an asymmetric prior.
    beta : float
        Topic-word prior.
    workers : int, optional
        Size of the embedded LocalCluster (ignored with ``scheduler``).
    scheduler : str or distributed.Client, optional
        Train on this cluster instead of an embedded one.
    transform_iterations : int
        Fold-in sweeps of :meth:`transform`.
    random_state : int
        Seed of training and inference.
    vocabulary : sequence of str, optional
        Word of each column of ``X``; default ``"w0", "w1", ...``.
    max_seconds : float, optional
        Stop training after this wall time.
    backend : {"cpu", "gpu", "auto"}
        Sampler backend, chosen on each worker ("auto": the GPU where one works). No
        throughput balancing here: it restarts from a checkpoint and ``fit`` writes none.

    Attributes
    ----------
    model_ : TopicModel
    components_ : float64[K, n_features]
        Topic-word pseudo-counts ``n_wk + beta`` in the columns of ``X`` (a word that never
        occurs in ``X`` has ``beta``); normalise rows for probabilities.
    n_features_in_ : int
    vocabulary_ : str[n_features]
        Word of each column of ``X`` (``vocabulary``, a DataFrame's columns, or ``w0, ...``).
    n_iter_ : int
        Iterations run.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.random(100, 50, density=0.2, format="csr", random_state=0)
    >>> X.data[:] = 1
    >>> lda = LDA(n_components=5, iterations=20, workers=1).fit(X)  # doctest: +SKIP
    >>> lda.transform(X[:3]).shape  # doctest: +SKIP
    (3, 5)
    """

    def __init__(self, n_components: int = 10, *, iterations: int = 100,
                 sampler: str = "auto", alpha: float | None = None, beta: float = 0.01,
                 workers: int | None = None, scheduler: Any = None,
                 transform_iterations: int = 50, random_state: int = 0,
                 vocabulary: Any = None, max_seconds: float | None = None,
                 backend: str = "cpu") -> None:
        self.n_components = n_components
        self.iterations = iterations
        self.sampler = sampler
        self.alpha = alpha
        self.beta = beta
        self.workers = workers
        self.scheduler = scheduler
        self.transform_iterations = transform_iterations
        self.random_state = random_state
        self.vocabulary = vocabulary
        self.max_seconds = max_seconds
        self.backend = backend

    if not _SKLEARN:
        def __repr__(self) -> str:
            """Show the main parameters (scikit-learn's repr when it is installed)."""
            return f"LDA(n_components={self.n_components}, iterations={self.iterations})"

    def __sklearn_tags__(self) -> Any:
        """Count data: non-negative, sparse accepted; the output is a float64 mixture."""
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the model in memory: the temporary store goes away with this instance."""
        state = dict(self.__dict__)
        state.pop("_cleanup", None)
        if "model_" in state:
            m = state["model_"]
            state["model_"] = TopicModel.from_counts(
                m.topic_word_counts.T, np.asarray(m.doc_topic_counts), m.vocab, alpha=m.alpha,
                beta=m.beta, doc_ids=m.doc_ids, attrs=m.attrs)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore the attributes (the model in memory, no temporary store)."""
        self.__dict__.update(state)

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components)

    # ------------------------------------------------------------------ fit

    def _counts(self, X: Any, *, reset: bool) -> Any:
        """Return ``X`` as a CSR count matrix, validated and rounded to whole counts.

        Validated by scikit-learn when installed: finite, non-negative, 2-D, the fitted
        number of columns.
        """
        import scipy.sparse as sp  # ~0.4 s to import; only matrix inputs need it

        if _SKLEARN:
            from sklearn.utils.validation import validate_data  # optional, slow to import

            X = validate_data(self, X, reset=reset, accept_sparse=("csr", "csc", "coo"),
                              ensure_non_negative=True)
        x = sp.csr_matrix(X, dtype=np.float64)
        if not _SKLEARN:
            if x.nnz and (not np.all(np.isfinite(x.data)) or x.data.min() < 0):
                raise InputError("X must hold finite, non-negative counts")
            if reset:
                self.n_features_in_ = x.shape[1]
            elif x.shape[1] != self.n_features_in_:
                raise InputError(f"X has {x.shape[1]} features, but LDA is expecting "
                                 f"{self.n_features_in_} features as input")
        # Gibbs sampling needs whole tokens: weights such as tf-idf are rounded.
        x.data = np.rint(x.data)
        x.eliminate_zeros()
        return x

    def _alpha(self) -> float | list[float]:
        """Return the doc-topic prior for the trainer: a float, or K floats (asymmetric)."""
        k = int(self.n_components)
        if self.alpha is None:
            return 1.0 / k
        a = np.asarray(self.alpha, dtype=np.float64)
        if a.ndim > 1 or (a.ndim == 1 and len(a) != k):
            raise ConfigError(f"alpha must be a number or {k} numbers (one per topic), got "
                              f"shape {a.shape}")
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ConfigError("alpha must be positive")
        if a.ndim == 0 or np.all(a == a.flat[0]):
            return float(a.flat[0])
        return [float(v) for v in a]

    def _write_corpus(self, x: Any, workdir: str) -> tuple[str, np.ndarray, np.ndarray]:
        """Corpus URL, feature names, and column -> model id map (-1: dropped)."""
        if _is_matrix(x):
            from biglda.corpus import write_corpus

            x = self._counts(x, reset=True)
            n_features = x.shape[1]
            if self.vocabulary is not None:
                names = str_array(list(self.vocabulary))
                if len(names) != n_features:
                    raise InputError(f"vocabulary has {len(names)} words, X has "
                                     f"{n_features} columns")
            elif hasattr(self, "feature_names_in_"):  # a DataFrame's column names
                names = str_array(list(self.feature_names_in_))
            else:
                names = np.array([f"w{j}" for j in range(n_features)])
            docs = docs_from_sparse(x, n_features)
            url = os.path.join(workdir, "corpus.zarr")
            id_map = write_corpus(url, docs.tokens, docs.doc_ptr, names)
            return url, names, np.asarray(id_map, dtype=np.int64)
        from biglda.model._data import open_corpus

        corpus = open_corpus(x)
        names = str_array(corpus.vocab)
        self.n_features_in_ = len(names)
        return str(corpus.url), names, np.arange(len(names), dtype=np.int64)

    def fit(self, X: Any, y: Any = None) -> LDA:
        """Train on ``X`` and return ``self``.

        ``X`` is a SciPy sparse (or dense) document-term count matrix, a
        :class:`biglda.corpus.Corpus` or a corpus URL.

        Non-integer weights (tf-idf) are rounded to whole counts: the sampler draws one
        topic per token.
        """
        # the Dask trainer (distributed, numba) loads only when fitting
        from biglda.model.training import train_to_store as driver_train

        if int(self.n_components) < 1:
            raise ConfigError(f"n_components must be at least 1, got {self.n_components}")
        alpha = self._alpha()
        for attr in ("feature_names_in_", "n_features_in_"):  # a refit starts afresh
            self.__dict__.pop(attr, None)
        workdir = tempfile.mkdtemp(prefix="biglda-lda-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, workdir, True)
        url, names, id_map = self._write_corpus(X, workdir)
        if int(self.n_components) == 1:
            self.model_ = _one_topic(url, alpha, float(self.beta))
        else:
            out = driver_train(url, out=os.path.join(workdir, "model.zarr"),
                               n_topics=int(self.n_components),
                               iterations=int(self.iterations), sampler=self.sampler,
                               alpha=alpha, beta=float(self.beta), workers=self.workers,
                               scheduler=self.scheduler, seed=int(self.random_state),
                               max_seconds=self.max_seconds, checkpoint_every=0,
                               backend=self.backend)
            self.model_ = TopicModel.load(out)
        self._id_map = id_map
        self.vocabulary_ = names
        counts = self.model_.topic_word_counts  # [K, V_model]
        comp = np.full((self.model_.n_topics, len(names)), self.model_.beta)
        kept = id_map >= 0
        comp[:, kept] += counts[:, id_map[kept]]
        self.components_ = comp
        self.n_iter_ = len(self.model_.history) or int(self.iterations)
        log.info("fit: %r", self.model_)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("this LDA instance is not fitted yet; call fit(X) first")

    def _docs(self, X: Any) -> Docs | CorpusDocs:
        if _is_matrix(X):
            x = self._counts(X, reset=False)
            docs = docs_from_sparse(x, self.model_.n_words, id_map=self._id_map)
            # Each row's random stream keyed by the row itself: its mixture does not
            # depend on the rows around it (subsets, reordering, batches).
            docs.doc_keys = row_keys(x)
            return docs
        if isinstance(X, list | tuple) and all(isinstance(d, list | tuple) for d in X):
            return self.model_._docs(X)  # pre-tokenized documents: lists of words
        return docs_from_corpus(X, self.model_.vocab)

    def transform(self, X: Any) -> np.ndarray:
        """Doc-topic mixtures [n_docs, K] of ``X`` by fold-in Gibbs (rows sum to 1).

        ``X``: a count matrix like the one fitted, a Corpus or corpus URL, or
        pre-tokenized documents (lists of words, mapped to the fitted vocabulary).
        """
        self._check_fitted()
        return self.model_.transform(self._docs(X), iterations=int(self.transform_iterations),
                                     seed=int(self.random_state))

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit, then :meth:`transform` the training documents.

        The same fold-in as ``transform``, so ``fit(X).transform(X)`` gives the same rows.
        """
        return self.fit(X).transform(X)

    def perplexity(self, X: Any) -> float:
        """Held-out perplexity of ``X`` by document completion (see ``TopicModel.perplexity``)."""
        self._check_fitted()
        return self.model_.perplexity(self._docs(X))

    def score(self, X: Any, y: Any = None) -> float:
        """Held-out log-likelihood of ``X`` (document completion; higher is better)."""
        self._check_fitted()
        return self.model_.heldout_loglik(self._docs(X)).loglik
