"""TopicModel.transform: fold-in inference on new documents."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from biglda.errors import BigLDAError, ConfigError
from biglda.model import TopicModel


@pytest.fixture(scope="module")
def truth_model(split, synthetic_spec):
    """The generating topics as a model (counts = 10^6 * phi, so topic_word ≈ phi)."""
    n_wk = np.round(split["phi"].T * 1e6).astype(np.int32)
    return TopicModel.from_counts(n_wk, np.zeros((0, synthetic_spec.n_topics)), split["vocab"],
                                  alpha=synthetic_spec.alpha, beta=1e-6)


def test_recovers_true_mixtures_of_test_documents(truth_model, split):
    tokens, doc_ptr = split["test"]
    theta = truth_model.transform((tokens, doc_ptr, split["vocab"]), iterations=40)
    true = split["theta"][-len(doc_ptr) + 1:]
    assert theta.shape == true.shape
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    # ~120 tokens a document: the fold-in posterior mean sits close to the truth.
    assert np.abs(theta - true).sum(axis=1).mean() < 0.25
    assert truth_model.last_transform_stats_ == {
        "n_docs": len(true), "n_tokens": len(tokens), "n_unknown": 0, "n_empty": 0}


def test_deterministic_and_same_for_any_batching(truth_model, split):
    tokens, doc_ptr = split["test"]
    docs = (tokens, doc_ptr, split["vocab"])
    a = truth_model.transform(docs, iterations=10, seed=3)
    b = truth_model.transform(docs, iterations=10, seed=3, batch_tokens=1000, n_jobs=2)
    c = truth_model.transform(docs, iterations=10, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_empty_and_unknown_only_documents_get_the_prior(small_model):
    docs = (np.array([0, 0, 1, 6, 6], np.int32), np.array([0, 0, 3, 5]),
            np.array(["apple", "pear", "zzz", "x", "y", "z", "unknown"]))
    theta = small_model.transform(docs, iterations=20)
    prior = small_model.alpha / small_model.alpha.sum()
    np.testing.assert_allclose(theta[0], prior)  # empty
    np.testing.assert_allclose(theta[2], prior)  # only unknown words
    assert theta[1].argmax() == 0
    assert small_model.last_transform_stats_ == {"n_docs": 3, "n_tokens": 3, "n_unknown": 2,
                                                 "n_empty": 2}


def test_sparse_matrix_input_equals_token_input(small_model):
    x = sp.csr_matrix(np.array([[2, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 1, 3, 0, 1]]))
    tokens = np.array([0, 0, 1, 2, 3, 3, 3, 5], np.int32)
    doc_ptr = np.array([0, 3, 3, 8])
    a = small_model.transform(x, iterations=15)
    b = small_model.transform((tokens, doc_ptr, small_model.vocab), iterations=15)
    np.testing.assert_array_equal(a, b)


def test_raw_texts_use_the_model_tokenizer(small_model):
    theta = small_model.transform(["Apple PEAR apple, zebra!", "", "car bus bus"],
                                  iterations=20)
    assert theta[0].argmax() == 0 and theta[2].argmax() == 1
    np.testing.assert_allclose(theta[1], small_model.alpha / small_model.alpha.sum())
    assert small_model.last_transform_stats_["n_unknown"] == 1
    one = small_model.transform("car bus bus", iterations=20)
    assert one.shape == (1, 3)


def test_bad_settings(small_model):
    with pytest.raises(ConfigError):
        small_model.transform(["apple"], iterations=0)
    with pytest.raises(ConfigError):
        small_model.transform(["apple"], iterations=5, burn_in=5)
    with pytest.raises(ConfigError):
        small_model.transform(3.5)


def test_dask_client_gives_the_same_result(truth_model, split, local_cluster):
    tokens, doc_ptr = split["test"]
    docs = (tokens[:doc_ptr[60]], doc_ptr[:61], split["vocab"])
    here = truth_model.transform(docs, iterations=10, seed=1)
    there = truth_model.transform(docs, iterations=10, seed=1, client=local_cluster,
                                  batch_tokens=2000)
    np.testing.assert_array_equal(here, there)


def test_inconsistent_arrays_are_refused(small_model):
    from biglda.errors import InputError

    with pytest.raises(InputError, match="doc_ptr"):
        small_model.transform((np.array([0, 1]), np.array([0, 5]), small_model.vocab))
    with pytest.raises(InputError, match="token ids"):
        small_model.transform((np.array([0, 9]), np.array([0, 2]), small_model.vocab))


@pytest.mark.parametrize("where", ["local", "memory"])
def test_stored_corpus_is_read_batch_by_batch_with_the_same_result(truth_model, split,
                                                                   tmp_path, local_cluster,
                                                                   where):
    from biglda.corpus import Corpus, write_corpus

    tokens, doc_ptr = split["test"]
    tokens, doc_ptr = tokens[:doc_ptr[50]], doc_ptr[:51]
    vocab = [*split["vocab"], "unknown-a", "unknown-b"]
    # every 7th token becomes a word the model does not know
    noisy = tokens.astype(np.int64).copy()
    noisy[::7] = len(vocab) - 1 - (np.arange(len(noisy[::7])) % 2)
    url = (str(tmp_path / "c.zarr") if where == "local"
           else f"memory://transform-tests/{tmp_path.name}.zarr")
    write_corpus(url, noisy, doc_ptr, vocab)
    corpus = Corpus.open(url)
    ref = truth_model.transform((noisy, doc_ptr, np.array(vocab)), iterations=10, seed=2)
    ref_stats = truth_model.last_transform_stats_
    assert ref_stats["n_unknown"] == len(noisy[::7])
    here = truth_model.transform(corpus, iterations=10, seed=2, batch_tokens=500)
    assert truth_model.last_transform_stats_ == ref_stats
    there = truth_model.transform(corpus, iterations=10, seed=2, batch_tokens=500,
                                  client=local_cluster)
    assert truth_model.last_transform_stats_ == ref_stats
    np.testing.assert_array_equal(here, ref)
    np.testing.assert_array_equal(there, ref)
    a = truth_model.heldout_loglik(corpus, batch_tokens=700, client=local_cluster)
    b = truth_model.heldout_loglik((noisy, doc_ptr, np.array(vocab)))
    assert (a.loglik, a.n_tokens, a.n_unknown) == (b.loglik, b.n_tokens, b.n_unknown)


def test_transform_takes_pretokenized_documents(small_model):
    """A document given as a list of words is used as it is (no tokenizer); the same words
    as a string give the same mixture."""
    as_lists = small_model.transform([["apple", "pear", "pear"], ["car", "Bus", "bus"]],
                                     iterations=20)
    as_text = small_model.transform(["apple pear pear", "car bus bus"], iterations=20)
    np.testing.assert_array_equal(as_lists[0], as_text[0])
    assert small_model.last_transform_stats_["n_unknown"] == 0
    small_model.transform([["car", "Bus", "bus"]], iterations=20)
    assert small_model.last_transform_stats_["n_unknown"] == 1  # "Bus" kept as given
    with pytest.raises(BigLDAError, match="strings or lists of words"):
        small_model.transform([["apple", 3]])
