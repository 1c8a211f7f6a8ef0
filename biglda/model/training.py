"""``biglda.train``: train on Dask and get a :class:`TopicModel` back."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

from biglda.model.topic_model import TopicModel

log = logging.getLogger(__name__)


def _corpus_url(corpus: Any) -> str:
    url = getattr(corpus, "url", None)
    if url is not None:
        return str(url)
    if isinstance(corpus, str | os.PathLike):
        return os.fspath(corpus)
    from biglda.errors import InputError

    raise InputError(f"expected a Corpus or a corpus URL, got {type(corpus).__name__}")


def train(corpus: Any, n_topics: int, *, out: str | None = None, iterations: int = 100,
          **kw: Any) -> TopicModel:
    """Train LDA on a corpus with the Dask trainer and return the model.

    Parameters
    ----------
    corpus : Corpus or str
        A :class:`biglda.corpus.Corpus` or the URL of a ``corpus.zarr``.
    n_topics : int
        Number of topics K.
    out : str, optional
        Where to write ``model.zarr`` (any fsspec URL). Default: a new temporary
        directory (kept: the model reads its doc-topic table from it lazily).
    iterations : int
        Training sweeps.
    **kw
        Passed to :func:`biglda.train.driver.train`: ``sampler``, ``alpha``, ``beta``,
        ``workers``, ``staleness``, ``seed``, ``scheduler`` (an address or a ``Client``),
        ``max_seconds``, ``overwrite``, ``on_record``, ``backend`` ("cpu" | "gpu" | "auto"),
        ``balance`` ("auto" | "throughput" | "none")...

    Examples
    --------
    >>> model = biglda.train("runs/demo/corpus.zarr", n_topics=20)  # doctest: +SKIP
    >>> model.top_words(0)  # doctest: +SKIP
    """
    from biglda.train.driver import train as driver_train

    url = _corpus_url(corpus)
    if out is None:
        out = os.path.join(tempfile.mkdtemp(prefix="biglda-model-"), "model.zarr")
    log.info("training K=%d on %s -> %s", n_topics, url, out)
    path = driver_train(url, out=out, n_topics=int(n_topics), iterations=int(iterations), **kw)
    return TopicModel.load(path)
