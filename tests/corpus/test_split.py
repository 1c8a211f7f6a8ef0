"""split_corpus: a seeded, document-level partition that keeps every document's words."""

from __future__ import annotations

import numpy as np

from biglda.corpus import Corpus, write_corpus
from biglda.corpus.split import split_corpus


def test_split_is_a_seeded_partition(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 6, size=50)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 12, size=doc_ptr[-1]).astype(np.int32)
    vocab = [f"w{i}" for i in range(12)]
    src = str(tmp_path / "c.zarr")
    write_corpus(src, tokens, doc_ptr, vocab, doc_ids=[f"d{i}" for i in range(50)])
    c = Corpus.open(src)
    words = {str(c.doc_ids[i]): c.words(i) for i in range(c.n_docs)}
    split_corpus(src, str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr"), 0.3, seed=5)
    tr, te = Corpus.open(str(tmp_path / "a.zarr")), Corpus.open(str(tmp_path / "b.zarr"))
    expect_test = np.random.default_rng(5).random(50) < 0.3  # the documented rule
    assert sorted(map(str, te.doc_ids)) == sorted(str(c.doc_ids[i])
                                                  for i in np.flatnonzero(expect_test))
    assert tr.n_docs + te.n_docs == 50
    for part in (tr, te):
        for i in range(part.n_docs):
            assert part.words(i) == words[str(part.doc_ids[i])]
