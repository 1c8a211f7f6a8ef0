"""Fixtures of the reliability tests: a corpus on disk, a 3-worker cluster with nannies, kills.

Killing worker processes makes ``distributed`` log errors (lost connections, a restarted
worker, cancelled actor futures); those are log records, not warnings, so no warning filter is
needed (the suite passes with warnings as errors).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def synth_url(tmp_path_factory, synthetic):
    """The shared synthetic corpus written as a corpus.zarr (small chunks: several shards)."""
    from biglda.corpus import write_corpus

    tokens, doc_ptr, phi, _theta = synthetic
    url = str(tmp_path_factory.mktemp("reliability") / "synth.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(phi.shape[1])],
                 chunk_tokens=8192)
    return url


@pytest.fixture(scope="session")
def cluster3():
    """A real 3-process LocalCluster with nannies (a killed worker is replaced, so the cluster
    stays usable after a test killed one)."""
    from biglda.trainer.cluster import connect

    with connect(workers=3) as client:  # the embedded cluster `biglda train` starts
        yield client


