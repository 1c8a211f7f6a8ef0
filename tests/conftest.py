"""Shared fixtures: a tiny corpus, a synthetic corpus with known topics, embedded clusters.

Layer-specific fixtures live in ``tests/<layer>/conftest.py``.
"""

from __future__ import annotations

import contextlib

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


@pytest.fixture(scope="session")
def embedded_cluster():
    """``embedded_cluster(processes, threads=1)``: a client of a real embedded cluster of
    that layout (what ``biglda train`` starts: nanny processes, dashboard on a free port),
    started at the first call and shared by the rest of the session.

    Long-lived clusters serve run after run, as a user's does: each start, and each first
    training in fresh worker processes (imports, cached kernels loaded), cost 3-5 s, which
    once per module added up to about a minute of the suite. Tests that kill, pause or
    restart workers start their own cluster (``cluster3``, ``connect`` in the test); the
    dashboard tests, which read the runs a scheduler has seen, get one per module
    (tests/dashboards/conftest.py).
    """
    from biglda.trainer.cluster import connect

    with contextlib.ExitStack() as stack:
        clients = {}

        def get(processes: int, threads: int = 1):
            if (processes, threads) not in clients:
                clients[processes, threads] = stack.enter_context(
                    connect(workers=processes, threads_per_worker=threads))
            return clients[processes, threads]

        yield get


@pytest.fixture(scope="session")
def local_cluster(embedded_cluster):
    """A real 2-process LocalCluster (one thread each), shared by the session."""
    return embedded_cluster(2)
