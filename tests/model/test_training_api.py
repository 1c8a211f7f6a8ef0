"""``biglda.train`` as the Python API: texts in, no empty temporary model folders on a failure,
the kept model named, and the progress bar of a notebook.

Oracles: the model's vocabulary is the texts' words; the temporary folders present after a call.
"""

from __future__ import annotations

import logging

import pytest

from biglda.errors import BigLDAError
from biglda.model import training

TEXTS = ["cats purr and cats sleep", "dogs bark and dogs run", "cats and dogs play",
         "the dogs run fast", "the cats sleep long"] * 4


def _biglda_folders(root):
    """The names of biglda's temporary folders under ``root`` (Dask keeps its own there)."""
    return sorted(p.name for p in root.iterdir() if p.name.startswith("biglda-"))


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    """``tempfile``'s folder, for this test alone."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_texts_are_ingested_behind_the_scenes_and_the_kept_model_is_named(tmp_root, caplog,
                                                                          local_cluster):
    with caplog.at_level(logging.WARNING, logger="biglda.train"):
        model = training.train(TEXTS, n_topics=2, iterations=2, scheduler=local_cluster,
                               progress=True, ingest={"min_df": 1, "stopwords": "none"})
    assert set(model.vocab) == {w for t in TEXTS for w in t.split()}
    assert len(model.doc_ids) == len(TEXTS)
    kept = _biglda_folders(tmp_root)
    assert len(kept) == 1 and kept[0].startswith("biglda-model-")  # the corpus is gone
    assert f"model kept at {tmp_root / kept[0] / 'model.zarr'}" in caplog.text


def test_a_failed_call_leaves_no_temporary_folder(tmp_root):
    with pytest.raises(BigLDAError):
        training.train(str(tmp_root / "missing.zarr"), n_topics=2, iterations=1)
    with pytest.raises(BigLDAError, match="texts must be strings"):
        training.train(["a text", 3], n_topics=2)
    with pytest.raises(BigLDAError):  # min_df 5 leaves no words
        training.train(["one text only"], n_topics=2, iterations=1, workers=1)
    assert _biglda_folders(tmp_root) == []


def test_progress_bar_defaults_to_notebooks_only(monkeypatch):
    assert training._progress_bar(None) is None  # not a notebook
    assert training._progress_bar(False) is None
    monkeypatch.setattr(training, "_in_notebook", lambda: True)
    bar = training._progress_bar(None)
    assert bar is not None
    bar({"type": "start", "config": {"iterations": 3}})
    bar({"type": "iteration", "iteration": 1, "ll_per_token": -7.0, "tokens_per_s": 1e5})
    bar.close()
