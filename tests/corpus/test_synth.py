"""Synthetic corpora: stored shapes, truth in corpus word ids, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.corpus import Corpus, write_corpus
from biglda.corpus.synth import SynthSpec, generate, load_truth, topic_word_truth, write_synthetic
from biglda.errors import FormatError

SPEC = SynthSpec(n_docs=300, n_words=200, n_topics=5, mean_doc_length=40, alpha=0.1,
                 beta=0.05, seed=3, batch_docs=64)


def test_write_synthetic_matches_generate(memory_url, check_counts):
    sizes = write_synthetic(memory_url, SPEC, chunk_tokens=1000)
    tokens, doc_ptr, phi, theta = generate(SPEC)
    c = Corpus.open(memory_url)
    assert sizes == {"n_docs": c.n_docs, "n_tokens": c.n_tokens, "n_words": c.n_words}
    assert (c.n_docs, c.n_tokens) == (SPEC.n_docs, len(tokens))
    np.testing.assert_array_equal(c.doc_ptr, doc_ptr)
    check_counts(c)
    # Stored word ids map back to the raw ids of generate(): same token sequence.
    raw = np.array([int(str(w)[1:]) for w in c.vocab])
    np.testing.assert_array_equal(raw[c.read_tokens(0, c.n_tokens)], tokens)
    phi_c, theta_c = load_truth(memory_url)
    assert phi_c.shape == (SPEC.n_topics, c.n_words) and theta_c.shape == (SPEC.n_docs, 5)
    assert theta_c.dtype == np.float32
    np.testing.assert_allclose(theta_c, theta)
    kept = phi[:, raw]
    np.testing.assert_allclose(phi_c, kept / kept.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(phi_c.sum(axis=1), 1.0)
    assert c.attrs["synthetic"]["seed"] == 3 and c.has_truth()


def test_synthetic_is_deterministic(tmp_path):
    a, b = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    write_synthetic(a, SPEC)
    write_synthetic(b, SPEC)
    ca, cb = Corpus.open(a), Corpus.open(b)
    np.testing.assert_array_equal(ca.read_tokens(0, ca.n_tokens), cb.read_tokens(0, cb.n_tokens))
    np.testing.assert_array_equal(load_truth(a)[0], load_truth(b)[0])


def test_topic_word_truth_rows_are_distributions():
    phi = topic_word_truth(SPEC)
    assert phi.shape == (5, 200)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0)


def test_load_truth_refuses_corpus_without_truth(memory_url):
    write_corpus(memory_url, np.array([0], np.int32), np.array([0, 1]), ["a"])
    with pytest.raises(FormatError, match="no ground truth"):
        load_truth(memory_url)
