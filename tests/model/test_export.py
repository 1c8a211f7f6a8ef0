"""Exports: contents read back, atomic failure, missing optional libraries."""

from __future__ import annotations

import csv
import json
import sys

import numpy as np
import pytest

from biglda.errors import ConfigError, OutputExistsError
from biglda.model.export import ExportError, export_model


def test_csv_and_json_top_words(small_model, tmp_path):
    out = tmp_path / "t.csv"
    export_model(small_model, "csv", str(out), top_n=2)
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and rows[0] == {"topic": "0", "rank": "1", "word": "apple",
                                          "prob": f"{small_model.topic_word[0, 0]:.6g}"}
    export_model(small_model, "json", str(tmp_path / "t.json"), top_n=100)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["n_topics"] == 3 and len(doc["topics"][0]["words"]) == 6  # clipped to V
    assert doc["topics"][2]["words"][0]["word"] == "rain"


def test_npy_is_the_doc_topic_matrix(small_model, tmp_path):
    export_model(small_model, "npy", str(tmp_path / "dt.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "dt.npy"), small_model.doc_topic)


def test_pyldavis_prepared_data(small_model, tmp_path):
    written = export_model(small_model, "pyldavis", str(tmp_path / "vis.json"))
    data = json.loads((tmp_path / "vis.json").read_text())
    assert set(data) == {"topic_term_dists", "doc_topic_dists", "doc_lengths", "vocab",
                         "term_frequency"}
    np.testing.assert_allclose(np.sum(data["topic_term_dists"], axis=1), 1.0)
    assert data["doc_lengths"] == [11, 5, 19, 10]
    assert sum(data["term_frequency"]) == small_model.n_tokens
    try:
        import pyLDAvis  # noqa: F401
    except ImportError:
        assert written == [str(tmp_path / "vis.json")]
    else:
        assert (tmp_path / "vis.html").exists()


def test_parquet_without_pyarrow_says_what_to_install(small_model, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import fails as if not installed
    with pytest.raises(ExportError, match=r"pip install 'biglda\[parquet\]'"):
        export_model(small_model, "parquet", str(tmp_path / "x.parquet"))
    assert not (tmp_path / "x.parquet").exists()


def test_parquet_roundtrip(small_model, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    export_model(small_model, "parquet", str(tmp_path / "x.parquet"))
    table = pq.read_table(tmp_path / "x.parquet")
    assert table.column("doc_id").to_pylist() == ["a", "b", "c", "d"]
    np.testing.assert_allclose(table.column("topic_1").to_numpy(), small_model.doc_topic[:, 1])


def test_unwritable_path_and_existing_output(small_model, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ExportError, match="cannot write") as info:
        export_model(small_model, "csv", str(blocker / "sub" / "t.csv"))
    assert "\n" not in str(info.value)
    out = tmp_path / "t.csv"
    out.write_text("old")
    with pytest.raises(OutputExistsError):
        export_model(small_model, "csv", str(out))
    assert out.read_text() == "old"
    export_model(small_model, "csv", str(out), overwrite=True)
    assert out.read_text().startswith("topic,rank,word,prob")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "t.csv"]  # no temp files
    with pytest.raises(ConfigError):
        export_model(small_model, "xml", str(tmp_path / "t.xml"))


def test_failed_write_leaves_nothing(small_model, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(np, "save", boom)
    with pytest.raises(RuntimeError):
        export_model(small_model, "npy", str(tmp_path / "dt.npy"))
    assert list(tmp_path.iterdir()) == []


def test_topic_word_and_doc_topic_matrices_as_csv(small_model, tmp_path):
    export_model(small_model, "csv", str(tmp_path / "tw.csv"), what="topic-word")
    with (tmp_path / "tw.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["word", "topic_0", "topic_1", "topic_2"] and len(rows) == 1 + 6
    assert [r[0] for r in rows[1:]] == small_model.vocab.tolist()
    tw = np.array([[float(x) for x in r[1:]] for r in rows[1:]])
    np.testing.assert_allclose(tw, small_model.topic_word.T, rtol=1e-5)
    np.testing.assert_allclose(tw.sum(axis=0), 1.0, rtol=1e-5)  # columns are p(w | k)
    export_model(small_model, "csv", str(tmp_path / "dt.csv"), what="doc-topic")
    with (tmp_path / "dt.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0][0] == "doc_id" and [r[0] for r in rows[1:]] == ["a", "b", "c", "d"]
    np.testing.assert_allclose([[float(x) for x in r[1:]] for r in rows[1:]],
                               small_model.doc_topic, rtol=1e-5)
    export_model(small_model, "npy", str(tmp_path / "tw.npy"), what="topic-word")
    np.testing.assert_array_equal(np.load(tmp_path / "tw.npy"), small_model.topic_word)
    with pytest.raises(ConfigError, match="does not hold"):
        export_model(small_model, "json", str(tmp_path / "x.json"), what="doc-topic")


def test_topic_word_parquet(small_model, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    export_model(small_model, "parquet", str(tmp_path / "tw.parquet"), what="topic-word")
    table = pq.read_table(tmp_path / "tw.parquet")
    assert table.column("word").to_pylist() == small_model.vocab.tolist()
    np.testing.assert_allclose(table.column("topic_2").to_numpy(), small_model.topic_word[2])


def test_pyldavis_html_is_self_contained(small_model, tmp_path):
    pytest.importorskip("pyLDAvis")
    written = export_model(small_model, "pyldavis", str(tmp_path / "vis.json"))
    assert written[1] == str(tmp_path / "vis.html")
    page = (tmp_path / "vis.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "new LDAvis(" in page
    import re

    # opens offline: nothing is loaded from elsewhere (d3's licence comment names its site)
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", page)
    assert "cdn.jsdelivr" not in page
