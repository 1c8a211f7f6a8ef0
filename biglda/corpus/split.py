"""``split_corpus``: a seeded, document-level train/test split of a stored corpus.

Both parts keep the words by spelling, so a model trained on the train part scores the
test part with the training vocabulary (the right held-out setup: an independent ingest
of the test documents would drop rare words with its own ``--min-df`` and flatter the
model). The split is all or nothing: both outputs are checked before anything is written,
each is written atomically, and a failure writing the second removes the first.
"""

from __future__ import annotations

import contextlib

import numpy as np

from biglda.corpus.store import Corpus, write_corpus
from biglda.errors import ConfigError, OutputExistsError
from biglda.io import exists, remove


def split_corpus(url: str, train_url: str, test_url: str, test_fraction: float,
                 seed: int, *, overwrite: bool = False) -> tuple[int, int]:
    """Split documents at random into a train and a test corpus; return their sizes.

    Document d goes to the test corpus when ``default_rng(seed).random(D)[d] < test_fraction``
    (the split of ``pipelines/bench_quality.py`` for the same seed). Words keep their
    spelling; each part keeps only the words it uses, ordered by its own frequency.

    Examples
    --------
    >>> _ = write_corpus("memory://doc/s.zarr", np.arange(8, dtype=np.int32) % 3,
    ...                  np.arange(0, 9, 2), ["a", "b", "c"], overwrite=True)
    >>> split_corpus("memory://doc/s.zarr", "memory://doc/tr.zarr", "memory://doc/te.zarr",
    ...              0.5, seed=1, overwrite=True)
    (3, 1)
    """
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    if str(train_url).rstrip("/") == str(test_url).rstrip("/"):
        raise ConfigError("--train and --test must be different paths")
    for dest in (train_url, test_url):
        if exists(dest) and not overwrite:
            raise OutputExistsError(f"output {dest} already exists (use --overwrite to "
                                    "replace it)")
    c = Corpus.open(url)
    doc_ptr = np.asarray(c.doc_ptr, dtype=np.int64)
    lengths = np.diff(doc_ptr)
    is_test = np.random.default_rng(seed).random(c.n_docs) < test_fraction
    for part, mask in (("train", ~is_test), ("test", is_test)):
        if not mask.any():
            raise ConfigError(f"--test-fraction {test_fraction} leaves an empty {part} part "
                              f"of {c.n_docs} documents")
    tokens = c.read_tokens(0, c.n_tokens)
    vocab = np.array(c.vocab.tolist(), dtype=object)
    doc_ids = np.array(c.doc_ids.tolist(), dtype=object)
    sizes = []
    written: list[str] = []
    try:
        for dest, mask, part in ((train_url, ~is_test, "train"), (test_url, is_test, "test")):
            ptr = np.zeros(int(mask.sum()) + 1, dtype=np.int64)
            np.cumsum(lengths[mask], out=ptr[1:])
            attrs = {"tokenizer": c.tokenizer,
                     "split": {"source": c.url, "test_fraction": test_fraction, "seed": seed,
                               "part": part}}
            write_corpus(dest, tokens[np.repeat(mask, lengths)], ptr, vocab,
                         doc_ids=doc_ids[mask], attrs=attrs, chunk_tokens=c.chunk_tokens,
                         overwrite=overwrite)
            written.append(dest)
            sizes.append(int(mask.sum()))
    except BaseException:
        for dest in written:  # all or nothing
            with contextlib.suppress(Exception):
                remove(dest)
        raise
    return sizes[0], sizes[1]
