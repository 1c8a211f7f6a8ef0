"""The corpus layer: the ``corpus.zarr`` format, ingest, tokenizer, vocabulary, shards.

Modules, one job each:

* :mod:`~biglda.corpus.store` — the format: :class:`Corpus` (reader, shard planning),
  :class:`CorpusWriter`, :func:`write_corpus`.
* :mod:`~biglda.corpus.ingest` — :func:`~biglda.corpus.ingest.ingest`: text / UCI input
  to a corpus, streaming.
* :mod:`~biglda.corpus.readers` — input formats and their error messages.
* :mod:`~biglda.corpus.tokenizer` — :class:`Tokenizer`, the built-in stopword list.
* :mod:`~biglda.corpus.vocab` — vocabulary filters and frequency ordering.
* :mod:`~biglda.corpus.synth` — synthetic LDA corpora with ground truth.

Examples
--------
>>> from biglda.corpus import Corpus, write_corpus
>>> import numpy as np
>>> _ = write_corpus("memory://doc/init.zarr", np.array([0, 1], np.int32), np.array([0, 2]),
...                  ["a", "b"], overwrite=True)
>>> Corpus.open("memory://doc/init.zarr").n_tokens
2
"""

from biglda.corpus.ingest import IngestStats
from biglda.corpus.store import (
    CORPUS_FORMAT,
    CORPUS_FORMAT_VERSION,
    Corpus,
    CorpusWriter,
    Shard,
    is_corpus,
    plan_shard_bounds,
    write_corpus,
)
from biglda.corpus.synth import SynthSpec, generate, iter_batches, load_truth, write_synthetic
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, ENGLISH_STOPWORDS, Tokenizer

__all__ = [
    "CORPUS_FORMAT",
    "CORPUS_FORMAT_VERSION",
    "DEFAULT_TOKEN_PATTERN",
    "ENGLISH_STOPWORDS",
    "Corpus",
    "CorpusWriter",
    "IngestStats",
    "Shard",
    "SynthSpec",
    "Tokenizer",
    "generate",
    "is_corpus",
    "iter_batches",
    "load_truth",
    "plan_shard_bounds",
    "write_corpus",
    "write_synthetic",
]
