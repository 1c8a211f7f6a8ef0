"""The corpus layer: the ``corpus.zarr`` format, ingest, tokenizer, vocabulary, shards.

Modules, one job each:

* :mod:`~biglda.corpus.store` — the format (layout, version) and its reader :class:`Corpus`.
* :mod:`~biglda.corpus.shards` — shard planning: :class:`Shard`, :func:`plan_shard_bounds`.
* :mod:`~biglda.corpus.writer` — :class:`CorpusWriter` (streaming), :func:`write_corpus`.
* :mod:`~biglda.corpus.split` — :func:`~biglda.corpus.split.split_corpus`, a seeded
  train/test split of a stored corpus.
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
from biglda.corpus.shards import Shard, plan_shard_bounds
from biglda.corpus.store import CORPUS_FORMAT, CORPUS_FORMAT_VERSION, Corpus, is_corpus
from biglda.corpus.synth import SynthSpec, generate, iter_batches, load_truth, write_synthetic
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, ENGLISH_STOPWORDS, Tokenizer
from biglda.corpus.writer import CorpusWriter, write_corpus

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
