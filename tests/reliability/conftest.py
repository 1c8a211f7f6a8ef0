"""Fixtures of the reliability tests: a corpus on disk, a 3-worker cluster with nannies, kills.

Killing worker processes makes ``distributed`` log errors (lost connections, a restarted
worker); those are log records, not warnings. The warnings it does emit on such paths are
filtered here, narrowly, by message.
"""

from __future__ import annotations

import pytest

# distributed warns while a killed worker's comms are torn down / its nanny restarts it
KILL_WARNINGS = [
    "ignore:Restarting worker:UserWarning",
    "ignore:Worker is at .* memory usage:RuntimeWarning",
    "ignore:.*Event loop was unresponsive.*",
    "ignore::ResourceWarning",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/reliability" in str(item.fspath):
            for f in KILL_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(f))


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
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                           dashboard_address="127.0.0.1:0", host="127.0.0.1")
    client = Client(cluster, direct_to_workers=True)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


