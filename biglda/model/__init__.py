"""The trained model: ``TopicModel``, ``load``, ``train`` and the ``LDA`` estimator.

``TopicModel`` is inspected, infers, evaluates and saves; ``LDA`` is scikit-learn-style;
:mod:`biglda.model.evaluate` scores any topic-word matrix.
"""

from __future__ import annotations

from typing import Any

from biglda.model.topic_model import (
    TopicModel,
    UnknownDocumentError,
    UnknownWordError,
    load,
)

__all__ = ["LDA", "TopicModel", "UnknownDocumentError", "UnknownWordError", "load", "train"]


def __getattr__(name: str) -> Any:
    # train / LDA pull in the Dask trainer: import them on first use only.
    if name == "train":
        from biglda.model.training import train

        return train
    if name == "LDA":
        from biglda.model.estimator import LDA

        return LDA
    raise AttributeError(f"module 'biglda.model' has no attribute {name!r}")
