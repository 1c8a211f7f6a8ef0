"""Fixtures of the training tests: the synthetic corpus as a corpus.zarr, with its true topics."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def synth_corpus(tmp_path_factory, synthetic):
    """``(url, phi [K, V] in the corpus's word ids)`` of the shared synthetic corpus.

    Small token chunks so the corpus can be cut into several shards.
    """
    from biglda.corpus import write_corpus

    tokens, doc_ptr, phi, _theta = synthetic
    url = str(tmp_path_factory.mktemp("train") / "synth.zarr")
    remap = write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(phi.shape[1])],
                         chunk_tokens=8192)
    keep = remap >= 0
    phi_new = np.zeros((phi.shape[0], int(keep.sum())))
    phi_new[:, remap[keep]] = phi[:, keep]
    return url, phi_new


@pytest.fixture(scope="session")
def recount():
    """``recount(corpus_url, result) -> (n_wk, n_k, z)`` from the final z of every shard."""
    return _recount


def _recount(corpus_url: str, result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n_wk, n_k, z)`` recounted from the final z of every shard (the oracle of the table)."""
    from biglda.corpus import Corpus
    from biglda.samplers import count_from_z

    corpus = Corpus.open(corpus_url)
    z = np.concatenate([result.z[s.index] for s in result.shards])
    tokens = corpus.read_tokens(0, corpus.n_tokens)
    n_wk, n_k = count_from_z(tokens, corpus.doc_ptr, z, corpus.n_words, result.n_wk.shape[1])
    return n_wk, n_k, z
