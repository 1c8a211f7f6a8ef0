"""Vocabulary filters (stopwords, document-frequency cuts, size cap) and frequency ordering.

Defaults and why:

* ``min_df=5`` for tokenized text: a word seen in fewer than five documents carries
  almost no co-occurrence evidence for a topic, yet such words are typically most
  of the vocabulary (Zipf) and a few percent of the tokens; dropping them shrinks
  the word-topic table (memory and parameter-server traffic grow with V x K) at
  little cost. Five is also gensim's ``filter_extremes(no_below=5)``.
  Pre-tokenized and UCI inputs default to ``min_df=1``: their vocabulary is kept as given.
* ``max_df=1.0`` (no cut): the stopword list removes the function words; a
  corpus-specific cut such as ``--max-df 0.5`` is the user's call.
* stopwords ``english`` for tokenized text, ``none`` for pre-tokenized and UCI input.
  A token is a stopword when its lowercase form is in the list. An n-gram (``--ngrams``)
  is dropped when its first or last word is a stopword ("of the", "the bank"), and kept
  with a stopword inside ("bank of america"): gensim ``Phrases``' connector-word rule.

Word ids are assigned by descending corpus frequency, ties broken by the word
itself, so the ids do not depend on input order or on how ingest was parallelized.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from biglda.errors import ConfigError

DEFAULT_MIN_DF = 5


@dataclass(frozen=True)
class VocabFilter:
    """Which words to keep (all settings are stored in the corpus attrs, ``filters``).

    Examples
    --------
    >>> f = VocabFilter(min_df=2)
    >>> f.keep(["a", "b", "the"], np.array([5, 1, 9]), np.array([3, 1, 4]), 4,
    ...        frozenset({"the"})).tolist()
    [True, False, False]
    """

    min_df: int = DEFAULT_MIN_DF
    max_df: float = 1.0
    max_vocab: int | None = None
    min_doc_length: int = 1
    stopwords: str | tuple[str, ...] = "english"

    def __post_init__(self) -> None:
        """Check the bounds; a bad one is a :class:`ConfigError` naming the flag."""
        if self.min_df < 1:
            raise ConfigError(f"--min-df must be at least 1, got {self.min_df}")
        if not 0.0 < self.max_df <= 1.0:
            raise ConfigError(f"--max-df is a fraction of documents in (0, 1], got {self.max_df}")
        if self.max_vocab is not None and self.max_vocab < 1:
            raise ConfigError(f"--max-vocab must be at least 1, got {self.max_vocab}")
        if self.min_doc_length < 0:
            raise ConfigError(f"--min-doc-length must be >= 0, got {self.min_doc_length}")

    @property
    def settings(self) -> dict:
        """JSON-serializable settings."""
        return asdict(self)

    def keep(self, words: Sequence[str], word_count: np.ndarray, doc_freq: np.ndarray,
             n_docs: int, stopwords: frozenset[str]) -> np.ndarray:
        """Boolean mask [V] of the words that pass every filter."""
        doc_freq = np.asarray(doc_freq)
        word_count = np.asarray(word_count)
        keep = doc_freq >= self.min_df
        if self.max_df < 1.0:
            keep &= doc_freq <= self.max_df * n_docs
        keep &= word_count > 0
        if stopwords:
            keep &= np.fromiter((not _is_stop(w.lower(), stopwords) for w in words), bool,
                                len(words))
        if self.max_vocab is not None and keep.sum() > self.max_vocab:
            idx = np.flatnonzero(keep)
            top = frequency_order([words[i] for i in idx], word_count[idx])[: self.max_vocab]
            keep[:] = False
            keep[idx[top]] = True
        return keep


def _is_stop(word: str, stopwords: frozenset[str]) -> bool:
    if word in stopwords:
        return True
    if " " in word:  # an n-gram: by its first and last word
        first, _, rest = word.partition(" ")
        return first in stopwords or rest.rpartition(" ")[2] in stopwords
    return False


def frequency_order(words: Sequence[str], word_count: np.ndarray) -> np.ndarray:
    """Return the indices of ``words`` by descending count, ties by the word (int64).

    Examples
    --------
    >>> frequency_order(["b", "a", "c"], np.array([1, 1, 5])).tolist()
    [2, 1, 0]
    """
    counts = np.asarray(word_count).tolist()
    order = sorted(range(len(counts)), key=lambda i: (-counts[i], words[i]))
    return np.asarray(order, dtype=np.int64)
