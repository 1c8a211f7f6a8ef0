"""TopicModel: load/save, probabilities from counts, inspection, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import biglda
from biglda.errors import BigLDAError, ConfigError, FormatError, OutputExistsError
from biglda.model import TopicModel, UnknownDocumentError, UnknownWordError


def test_probabilities_are_posterior_means(small_model):
    m = small_model
    n_wk = m.topic_word_counts.T
    want = (n_wk.T + 0.01) / (n_wk.sum(0) + 6 * 0.01)[:, None]
    np.testing.assert_allclose(m.topic_word, want)
    np.testing.assert_allclose(m.topic_word.sum(axis=1), 1.0)
    n_dk = m.doc_topic_counts
    np.testing.assert_allclose(m.doc_topic, (n_dk + m.alpha) / (n_dk.sum(1, keepdims=True) + 0.6))
    np.testing.assert_allclose(m.doc_topic_of("c"), m.doc_topic[2])
    np.testing.assert_array_equal(m.topic_sizes, n_wk.sum(0))
    assert (m.n_topics, m.n_words, m.n_docs, m.n_tokens) == (3, 6, 4, n_wk.sum())


@pytest.mark.parametrize("where", ["memory", "local"])
def test_save_load_roundtrip(small_model, tmp_path, where):
    url = "memory://model-tests/rt.zarr" if where == "memory" else str(tmp_path / "m.zarr")
    small_model.save(url, overwrite=True)
    m = biglda.load(url)
    assert isinstance(m, TopicModel) and m.url == url
    np.testing.assert_array_equal(m.topic_word_counts, small_model.topic_word_counts)
    np.testing.assert_array_equal(m.doc_topic_counts, small_model.doc_topic_counts)
    np.testing.assert_array_equal(m.vocab, small_model.vocab)
    np.testing.assert_array_equal(m.doc_ids, small_model.doc_ids)
    np.testing.assert_allclose(m.alpha, [0.1, 0.2, 0.3])
    assert m.beta == 0.01 and m.history == [{"iteration": 1}]
    # Save again from a loaded (lazy) model to a new place: identical content.
    m.save(url + "2", overwrite=True)
    np.testing.assert_array_equal(biglda.load(url + "2").doc_topic, small_model.doc_topic)
    with pytest.raises(OutputExistsError):
        small_model.save(url)


def test_load_refuses_non_models(small_model, tmp_path):
    with pytest.raises(FormatError, match="no such model"):
        biglda.load(str(tmp_path / "missing.zarr"))
    g = zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    g.attrs["format"] = "biglda-corpus"
    with pytest.raises(FormatError, match="not a biglda model"):
        biglda.load(str(tmp_path / "other.zarr"))
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(FormatError):
        biglda.load(str(tmp_path / "file.txt"))
    url = str(tmp_path / "v99.zarr")
    small_model.save(url)
    zarr.open_group(url, mode="r+").attrs["format_version"] = 99
    with pytest.raises(FormatError, match="version 99") as info:
        biglda.load(url)
    assert "\n" not in str(info.value)


def test_top_words_topics_table_and_clipping(small_model):
    m = small_model
    top = m.top_words(0, n=2)
    assert [w for w, _ in top] == ["apple", "pear"]
    assert top[0][1] == pytest.approx(m.topic_word[0, 0])
    assert len(m.top_words(1, n=100)) == 6  # clipped to V
    probs = [p for _, p in m.top_words(1, n=100)]
    assert probs == sorted(probs, reverse=True)
    table = m.topics(n=3)
    assert [r["topic"] for r in table] == [0, 1, 2]
    assert sum(r["share"] for r in table) == pytest.approx(1.0)
    assert table[2]["words"][:2] == ["rain", "sun"]
    with pytest.raises(ConfigError):
        m.top_words(3)
    with pytest.raises(ConfigError):
        m.top_words(0, n=0)


def test_word_topics_and_unknown_word(small_model):
    m = small_model
    wt = m.word_topics("car")
    assert wt[0][0] == 1 and sum(p for _, p in wt) == pytest.approx(1.0)
    # Bayes' rule oracle
    p = m.topic_word[:, 2] * (m.topic_sizes + m.alpha)
    assert dict(wt)[0] == pytest.approx(p[0] / p.sum())
    with pytest.raises(KeyError) as info:
        m.word_topics("zebra")
    assert isinstance(info.value, UnknownWordError) and isinstance(info.value, BigLDAError)
    assert str(info.value) == "word 'zebra' is not in the model's vocabulary"
    with pytest.raises(UnknownDocumentError):
        m.doc_topic_of("nope")


def test_similar_topics_is_one_minus_js(small_model):
    m = small_model
    sims = m.similar_topics(0, n=5)
    assert [k for k, _ in sims] != [] and 0 not in [k for k, _ in sims]
    p, q = m.topic_word[0], m.topic_word[sims[0][0]]
    mix = (p + q) / 2
    js = 0.5 * (p * np.log2(p / mix)).sum() + 0.5 * (q * np.log2(q / mix)).sum()
    assert sims[0][1] == pytest.approx(1 - js)
    assert all(0 <= s <= 1 for _, s in sims)


def test_summary_and_repr(small_model):
    text = small_model.summary()
    assert "TopicModel(n_topics=3" in repr(small_model)
    assert "topic   0" in text and "apple" in text and "alpha: asymmetric" in text


def test_record_evaluation_writes_the_store_or_says_why(small_model, tmp_path, monkeypatch):
    url = str(tmp_path / "ev.zarr")
    small_model.save(url)
    m = biglda.load(url)
    m.record_evaluation({"perplexity": 12.5})
    stored = biglda.load(url).attrs
    assert stored["evaluation"]["perplexity"] == 12.5 and "saved_at" in stored["evaluation"]
    assert list(stored["evaluations"]) == ["default"]

    def read_only(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(zarr, "open_group", read_only)
    with pytest.raises(BigLDAError, match=r"cannot store the evaluation.*Permission denied"):
        m.record_evaluation({"npmi": 0.1})
    ev = m.attrs["evaluation"]  # kept in memory
    assert ev["perplexity"] == 12.5 and ev["npmi"] == 0.1


def test_record_evaluation_keeps_a_history_keyed_by_test_set(small_model, tmp_path):
    url = str(tmp_path / "hist.zarr")
    small_model.save(url)
    m = biglda.load(url)
    m.record_evaluation({"test_corpus": "a.zarr", "perplexity": 10.0})
    m.record_evaluation({"test_corpus": "b.zarr", "perplexity": 20.0})
    m.record_evaluation({"test_corpus": "a.zarr", "perplexity": 11.0})
    stored = biglda.load(url).attrs
    assert list(stored["evaluations"]) == ["b.zarr", "a.zarr"]  # the latest last
    assert stored["evaluations"]["b.zarr"]["perplexity"] == 20.0
    assert stored["evaluation"]["perplexity"] == 11.0
