"""The first topics (``init``): sequential draws against a NumPy reference, the anchor's
alignment of shards against known topics, and what the trainer records."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.corpus.synth import SynthSpec, generate
from biglda.samplers import RandomKey, count_from_z, init_z
from biglda.samplers.counts import joint_loglik
from biglda.samplers.init import anchor_counts, anchor_documents, sequential_z
from biglda.samplers.rng import _next_float


def _reference(tokens, doc_ptr, n_topics, n_words, alpha, beta, key, base_wk=None,
               base_k=None):
    """Slow NumPy Griffiths & Steyvers draws over global word rows, the kernel's stream."""
    n_wk = np.zeros((n_words, n_topics)) if base_wk is None else base_wk.astype(float)
    n_k = np.zeros(n_topics) if base_k is None else base_k.astype(float)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (n_topics,))
    state, z = key.state(), np.empty(len(tokens), dtype=np.int64)
    for d in range(len(doc_ptr) - 1):
        n_dk = np.zeros(n_topics)
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = tokens[i]
            cdf = np.cumsum((n_dk + alpha) * (n_wk[w] + beta) * (1.0 / (n_k + n_words * beta)))
            state, u = _next_float(np.uint64(state))
            k = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
            z[i] = k
            n_dk[k] += 1
            n_wk[w, k] += 1
            n_k[k] += 1
    return z, n_wk, n_k


@pytest.fixture(scope="module")
def corpus():
    tokens, doc_ptr, phi, _ = generate(SynthSpec(n_docs=300, n_words=120, n_topics=6,
                                                 mean_doc_length=40, alpha=0.1, beta=0.05,
                                                 seed=11))
    return np.asarray(tokens, dtype=np.int32), np.asarray(doc_ptr, dtype=np.int64), phi


def test_sequential_draws_equal_the_numpy_reference(corpus):
    tokens, doc_ptr, phi = corpus
    n_words, k = phi.shape[1], 6
    alpha = np.linspace(0.05, 0.3, k)  # asymmetric, so a wrong alpha index shows
    key = RandomKey(3, -1, 2)
    z = sequential_z(tokens, doc_ptr, k, n_words, alpha, 0.02, key)
    ref, _, _ = _reference(tokens, doc_ptr, k, n_words, alpha, 0.02, key)
    np.testing.assert_array_equal(z.astype(np.int64), ref)


def test_the_anchor_counts_are_where_a_shard_starts(corpus):
    """A shard drawn on the anchor equals the reference started from the anchor's counts."""
    tokens, doc_ptr, phi = corpus
    n_words, k = phi.shape[1], 6
    n_docs = 40
    stop = doc_ptr[n_docs]
    anchor = anchor_counts(tokens[:stop], doc_ptr[:n_docs + 1], k, n_words, 0.1, 0.02, seed=5)
    _, a_wk, a_k = _reference(tokens[:stop], doc_ptr[:n_docs + 1], k, n_words, 0.1, 0.02,
                              RandomKey(5, -2))
    np.testing.assert_array_equal(anchor.n_wk, a_wk[anchor.words])
    np.testing.assert_array_equal(anchor.n_k, a_k)
    assert set(anchor.words) == set(tokens[:stop])
    shard = slice(doc_ptr[100], doc_ptr[200])
    ptr = doc_ptr[100:201] - doc_ptr[100]
    key = RandomKey(5, -1, 1)
    z = sequential_z(tokens[shard], ptr, k, n_words, 0.1, 0.02, key, anchor)
    ref, _, _ = _reference(tokens[shard], ptr, k, n_words, 0.1, 0.02, key, a_wk, a_k)
    np.testing.assert_array_equal(z.astype(np.int64), ref)


def _topic_cosines(tokens, z, n_words, k):
    """Cosine of each topic's word distribution in two halves of the documents."""
    halves = []
    for part in (slice(0, len(tokens) // 2), slice(len(tokens) // 2, None)):
        n_wk = np.zeros((k, n_words))
        np.add.at(n_wk, (z[part].astype(np.int64), tokens[part]), 1)
        halves.append(n_wk / np.maximum(np.linalg.norm(n_wk, axis=1, keepdims=True), 1e-12))
    return np.sum(halves[0] * halves[1], axis=1)


def test_the_anchor_aligns_topic_names_across_shards(corpus):
    """Two shards drawn apart name the same topic alike only when they share the anchor.

    Ground truth: the corpus has 6 known topics; the same topic index in the two shards
    then has nearly the same word distribution (high cosine), which separate draws without
    a common start do not give.
    """
    tokens, doc_ptr, phi = corpus
    n_words, k = phi.shape[1], 6
    half = (len(doc_ptr) - 1) // 2
    cut = doc_ptr[half]
    n_docs = anchor_documents(doc_ptr, k)
    anchor = anchor_counts(tokens[:doc_ptr[n_docs]], doc_ptr[:n_docs + 1], k, n_words,
                           0.1, 0.02, seed=0)
    cos = {}
    for name, a in (("anchor", anchor), ("apart", None)):
        z = np.concatenate([
            sequential_z(tokens[:cut], doc_ptr[:half + 1], k, n_words, 0.1, 0.02,
                         RandomKey(0, -1, 0), a),
            sequential_z(tokens[cut:], doc_ptr[half:] - cut, k, n_words, 0.1, 0.02,
                         RandomKey(0, -1, 1), a)])
        cos[name] = _topic_cosines(tokens, z, n_words, k)
    assert cos["anchor"].mean() > 0.6, cos  # 0.80 here, against 0.20 without the anchor
    assert cos["anchor"].mean() > cos["apart"].mean() + 0.3, cos


def test_sequential_starts_far_above_random(corpus):
    tokens, doc_ptr, phi = corpus
    n_words, k = phi.shape[1], 6
    alpha = np.full(k, 0.1)
    ll = {}
    for name, z in (("random", init_z(len(tokens), k, RandomKey(0, -1))),
                    ("sequential", sequential_z(tokens, doc_ptr, k, n_words, alpha, 0.02,
                                                RandomKey(0, -1)))):
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
        ll[name] = joint_loglik(doc_ptr, z, n_wk, n_k, alpha, 0.02, n_words) / len(tokens)
    assert ll["sequential"] > ll["random"] + 0.5, ll


def test_the_anchor_is_a_share_of_the_corpus_with_a_floor_per_topic():
    doc_ptr = np.arange(0, 100_001, 10)  # 10,000 docs of 10 tokens
    assert doc_ptr[anchor_documents(doc_ptr, 2)] == 100_000 // 50  # the share
    assert doc_ptr[anchor_documents(doc_ptr, 1000)] == 50 * 1000  # the floor per topic
    assert anchor_documents(doc_ptr, 10**6) == 10_000  # never past the corpus


def test_a_doc_ptr_that_does_not_cover_the_tokens_is_refused(corpus):
    """The kernel does not check bounds: the wrapper does (a short doc_ptr or one past N)."""
    tokens, doc_ptr, phi = corpus
    for bad in (doc_ptr[:3], np.array([0, len(tokens) + 5]), np.array([1, len(tokens)])):
        with pytest.raises(AssertionError, match="doc_ptr"):
            sequential_z(tokens[:100] if bad is doc_ptr[:3] else tokens, bad, 4,
                         phi.shape[1], 0.1, 0.01, RandomKey(0, -1))
