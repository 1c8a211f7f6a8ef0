"""Shared fixtures: a tiny corpus, a synthetic corpus with known topics, a LocalCluster.

Layer-specific fixtures live in ``tests/<layer>/conftest.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from biglda.corpus.synth import SynthSpec, generate


@pytest.fixture(scope="session")
def tiny_docs() -> tuple[np.ndarray, np.ndarray, int, int]:
    """3 documents, 5 tokens, V = 3: small enough to enumerate every assignment.

    Returns ``(tokens int32, doc_ptr int64, n_words, n_topics)``.
    """
    tokens = np.array([0, 1, 1, 2, 0], dtype=np.int32)
    doc_ptr = np.array([0, 2, 4, 5], dtype=np.int64)
    return tokens, doc_ptr, 3, 2


@pytest.fixture(scope="session")
def synthetic_spec() -> SynthSpec:
    """A synthetic corpus small enough for unit tests, big enough to recover its topics."""
    return SynthSpec(n_docs=1000, n_words=400, n_topics=8, mean_doc_length=120,
                     alpha=0.1, beta=0.05, seed=7)


@pytest.fixture(scope="session")
def synthetic(synthetic_spec):
    """``(tokens, doc_ptr, phi [K, V], theta [D, K])`` of :func:`synthetic_spec`."""
    return generate(synthetic_spec)


@pytest.fixture(scope="module")
def local_cluster():
    """A real 2-process LocalCluster (dashboard on a free port), shared by a test module."""
    from biglda.trainer.cluster import connect

    with connect(workers=2) as client:  # the embedded cluster `biglda train` starts
        yield client
