"""``biglda.LDA``: a scikit-learn-style estimator around the Dask trainer.

The constructor only stores parameters; :meth:`LDA.fit` writes the input as a
temporary ``corpus.zarr``, trains with :func:`biglda.model.training.train_to_store`, and sets the
fitted attributes (ending in ``_``). scikit-learn is not required.
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
from biglda.model._data import CorpusDocs, Docs, docs_from_corpus, docs_from_sparse, str_array
from biglda.model.topic_model import TopicModel

log = logging.getLogger(__name__)


class LDA:
    """Latent Dirichlet allocation trained on Dask, with the scikit-learn estimator API.

    Parameters
    ----------
    n_components : int
        Number of topics K.
    iterations : int
        Training sweeps.
    sampler : {"lightlda", "cgs"}
    alpha : float, optional
        Doc-topic prior (default ``1 / n_components``, scikit-learn's default).
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
                 sampler: str = "lightlda", alpha: float | None = None, beta: float = 0.01,
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

    # scikit-learn's parameter protocol (clone, grid search) without depending on it.
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def set_params(self, **params: Any) -> LDA:
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise ConfigError(f"LDA has no parameter {k!r}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return f"LDA(n_components={self.n_components}, iterations={self.iterations})"

    # ------------------------------------------------------------------ fit

    def _write_corpus(self, x: Any, workdir: str) -> tuple[str, np.ndarray, np.ndarray]:
        """Corpus URL, feature names, and column -> model id map (-1: dropped)."""
        import scipy.sparse as sp

        if sp.issparse(x) or isinstance(x, np.ndarray):
            from biglda.corpus import write_corpus

            x = sp.csr_matrix(x)
            n_features = x.shape[1]
            if self.vocabulary is not None:
                names = str_array(list(self.vocabulary))
                if len(names) != n_features:
                    raise InputError(f"vocabulary has {len(names)} words, X has "
                                     f"{n_features} columns")
            else:
                names = np.array([f"w{j}" for j in range(n_features)])
            docs = docs_from_sparse(x, n_features)
            url = os.path.join(workdir, "corpus.zarr")
            id_map = write_corpus(url, docs.tokens, docs.doc_ptr, names)
            return url, names, np.asarray(id_map, dtype=np.int64)
        from biglda.model._data import open_corpus

        corpus = open_corpus(x)
        names = str_array(corpus.vocab)
        return str(corpus.url), names, np.arange(len(names), dtype=np.int64)

    def fit(self, X: Any, y: Any = None) -> LDA:
        """Train on ``X``: a SciPy sparse (or dense) document-term count matrix, a
        :class:`biglda.corpus.Corpus` or a corpus URL. Returns ``self``."""
        from biglda.model.training import train_to_store as driver_train

        if int(self.n_components) < 2:
            raise ConfigError(f"n_components must be at least 2, got {self.n_components}")
        workdir = tempfile.mkdtemp(prefix="biglda-lda-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, workdir, True)
        url, names, id_map = self._write_corpus(X, workdir)
        alpha = 1.0 / self.n_components if self.alpha is None else float(self.alpha)
        out = driver_train(url, out=os.path.join(workdir, "model.zarr"),
                           n_topics=int(self.n_components), iterations=int(self.iterations),
                           sampler=self.sampler, alpha=alpha, beta=float(self.beta),
                           workers=self.workers, scheduler=self.scheduler,
                           seed=int(self.random_state), max_seconds=self.max_seconds,
                           checkpoint_every=0, backend=self.backend)
        self.model_ = TopicModel.load(out)
        self._id_map = id_map
        self.feature_names_out_ = names
        self.n_features_in_ = len(names)
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
            raise ConfigError("this LDA instance is not fitted yet; call fit(X) first")

    def _docs(self, X: Any) -> Docs | CorpusDocs:
        import scipy.sparse as sp

        if sp.issparse(X) or isinstance(X, np.ndarray):
            x = sp.csr_matrix(X)
            if x.shape[1] != self.n_features_in_:
                raise InputError(f"X has {x.shape[1]} columns, the model was fitted on "
                                 f"{self.n_features_in_}")
            return docs_from_sparse(x, self.model_.n_words, id_map=self._id_map)
        return docs_from_corpus(X, self.model_.vocab)

    def transform(self, X: Any) -> np.ndarray:
        """Doc-topic mixtures [n_docs, K] of ``X`` by fold-in Gibbs (rows sum to 1)."""
        self._check_fitted()
        return self.model_.transform(self._docs(X), iterations=int(self.transform_iterations),
                                     seed=int(self.random_state))

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit, then return the training documents' posterior mixtures (from the sampler's
        final counts; no extra fold-in)."""
        return self.fit(X).model_.doc_topic

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Word of each column of ``X`` (the ``vocabulary`` given, or ``w0, w1, ...``)."""
        self._check_fitted()
        return self.feature_names_out_.astype(object)

    def perplexity(self, X: Any) -> float:
        """Held-out perplexity of ``X`` by document completion (see ``TopicModel.perplexity``)."""
        self._check_fitted()
        return self.model_.perplexity(self._docs(X))

    def score(self, X: Any, y: Any = None) -> float:
        """Held-out log-likelihood of ``X`` (document completion; higher is better)."""
        self._check_fitted()
        return self.model_.heldout_loglik(self._docs(X)).loglik
