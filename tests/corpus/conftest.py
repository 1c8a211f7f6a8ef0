"""Fixtures and oracles for the corpus layer's tests."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.corpus.store import Corpus


def _check_counts(corpus: Corpus) -> None:
    """The stored counts equal a recount of the tokens, and ids are ordered by frequency."""
    tokens = corpus.read_tokens(0, corpus.n_tokens)
    wc = np.bincount(tokens, minlength=corpus.n_words)
    doc = np.repeat(np.arange(corpus.n_docs), corpus.doc_lengths)
    pairs = np.unique(doc.astype(np.int64) * corpus.n_words + tokens)
    df = np.bincount(pairs % corpus.n_words, minlength=corpus.n_words)
    np.testing.assert_array_equal(corpus.word_count, wc)
    np.testing.assert_array_equal(corpus.doc_freq, df)
    assert np.all(np.diff(corpus.word_count) <= 0), "ids must be by descending frequency"
    assert np.all(corpus.word_count > 0)
    assert len(set(corpus.vocab.tolist())) == corpus.n_words


@pytest.fixture
def check_counts():
    """The oracle above, as a fixture (test modules cannot import each other's conftest)."""
    return _check_counts


@pytest.fixture
def memory_url(request):
    """A fresh memory:// URL for one test."""
    name = request.node.name.replace("[", "_").replace("]", "_")
    return f"memory://tests/{name}/corpus.zarr"
