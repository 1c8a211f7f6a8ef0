"""biglda: distributed LDA topic modeling on Dask.

Public API
----------
train(corpus, n_topics, *, out=None, iterations=100, **kw) -> TopicModel
    Train LDA on a corpus (a Corpus or a corpus.zarr URL) with the Dask trainer.
load(path) -> TopicModel
    Open a model.zarr.
TopicModel
    A trained model: top_words, topics, transform (infer new documents),
    heldout_loglik / perplexity, coherence, diversity, summary, save.
LDA(n_components=10, ...)
    A scikit-learn estimator (fit / transform / score; Pipeline, GridSearchCV).
Corpus
    A corpus.zarr made by ``biglda ingest``: Corpus.open(url).
BigLDAError
    The base of every error caused by input (one-line messages).
__version__

The command line: ``biglda --help``. Importing biglda is cheap: heavy modules (numba
kernels, dask.distributed, CUDA) load on first use, and CUDA is never touched unless a
GPU backend is asked for.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["LDA", "BigLDAError", "Corpus", "TopicModel", "__version__", "load", "train"]

_LAZY = {
    "Corpus": ("biglda.corpus", "Corpus"),
    "TopicModel": ("biglda.model", "TopicModel"),
    "load": ("biglda.model", "load"),
    "train": ("biglda.model.training", "train"),
    "LDA": ("biglda.model", "LDA"),
    "BigLDAError": ("biglda.errors", "BigLDAError"),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'biglda' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # The public API, lazily loaded names included, without importing anything; not the
    # helpers this module happens to hold (Any, annotations).
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
