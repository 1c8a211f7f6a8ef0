"""biglda: distributed LDA topic modeling on Dask.

Importing biglda is cheap: heavy modules (numba kernels, dask.distributed, CUDA)
load on first use, and CUDA is never touched unless a GPU backend is asked for.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Corpus", "TopicModel", "load", "train", "LDA", "BigLDAError", "__version__"]

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
