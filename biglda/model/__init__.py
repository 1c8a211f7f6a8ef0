"""The trained model: ``TopicModel`` (inspect, infer, evaluate, save), ``load``, ``train``,
the scikit-learn-style ``LDA`` estimator, and scoring of any topic-word matrix
(:mod:`biglda.model.evaluate`).
"""

from __future__ import annotations

from typing import Any

from biglda.model.topic_model import (
    TopicModel,
    UnknownDocumentError,
    UnknownWordError,
    load,
)

__all__ = ["TopicModel", "load", "train", "LDA", "UnknownWordError", "UnknownDocumentError"]


def __getattr__(name: str) -> Any:
    # train / LDA pull in the Dask trainer: import them on first use only.
    if name == "train":
        from biglda.model.training import train

        return train
    if name == "LDA":
        from biglda.model.estimator import LDA

        return LDA
    raise AttributeError(f"module 'biglda.model' has no attribute {name!r}")
