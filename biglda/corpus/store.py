"""The ``corpus.zarr`` format: layout, the :class:`Corpus` reader, writers, shard planning.

Layout (a Zarr v3 group; every path is any fsspec URL: local, ``memory://``, ``s3://``)::

    attrs       format="biglda-corpus", format_version=1, n_docs, n_tokens, n_words,
                chunk_tokens, tokenizer (settings dict), filters (vocabulary filters),
                source (what it was made from), created_by
    tokens      int32 [N]     word ids in document order, chunks of ``chunk_tokens``, zstd
    doc_ptr     int64 [D+1]   document i is ``tokens[doc_ptr[i]:doc_ptr[i+1]]``
    doc_ids     str   [D]     id of each document (for joining results back)
    vocab       str   [V]     word of each id; ids are ordered by descending ``word_count``
    word_count  int64 [V]     occurrences of each word in ``tokens``
    doc_freq    int64 [V]     documents containing each word
    truth/      (synthetic corpora only) phi float64 [K, V], theta float32 [D, K]

Shard planning is :mod:`biglda.corpus.shards`, writing :mod:`biglda.corpus.writer`; this
module is the format's identity and the :class:`Corpus` reader.
"""

from __future__ import annotations

import itertools
from functools import cached_property
from typing import Any

import numpy as np
import zarr

from biglda.corpus.shards import TOLERANCE, Shard, plan_shard_bounds
from biglda.errors import FormatError
from biglda.io import split_url

CORPUS_FORMAT = "biglda-corpus"
CORPUS_FORMAT_VERSION = 1

_REQUIRED = ("tokens", "doc_ptr", "doc_ids", "vocab", "word_count", "doc_freq")


def _open_group(url: str) -> zarr.Group:
    try:
        return zarr.open_group(url, mode="r")
    except FileNotFoundError:
        raise FormatError(f"{url} does not exist or is not a Zarr group") from None
    except Exception as exc:  # zarr raises several types for "not a group"
        raise FormatError(
            f"{url} is not a biglda corpus (cannot open as a Zarr group: {exc})".splitlines()[0]
        ) from None


class Corpus:
    """A read-only ``corpus.zarr`` (see the module docstring for the layout).

    Open with :meth:`Corpus.open`; the constructor is private. ``doc_ptr`` is held in
    memory (8 bytes a document); ``vocab``, ``doc_ids`` and the counts load on first
    use; tokens are read on demand by range, document or shard.

    Examples
    --------
    >>> from biglda.corpus.writer import write_corpus
    >>> url = "memory://doc/corpus-example.zarr"
    >>> _ = write_corpus(url, np.array([0, 1, 1, 2], np.int32), np.array([0, 2, 4]),
    ...                  ["a", "b", "c"], overwrite=True)
    >>> c = Corpus.open(url)
    >>> c.n_docs, c.n_tokens, c.n_words, list(c.vocab)
    (2, 4, 3, ['b', 'a', 'c'])
    >>> c.doc(1).tolist()
    [0, 2]
    """

    def __init__(self, url: str, group: zarr.Group) -> None:
        self.url = url
        self._group = group
        self.attrs: dict[str, Any] = dict(group.attrs)
        self._tokens = group["tokens"]
        self.doc_ptr: np.ndarray = np.asarray(group["doc_ptr"][:], dtype=np.int64)
        self.n_docs = len(self.doc_ptr) - 1
        self.n_tokens = int(self._tokens.shape[0])
        self.n_words = int(group["vocab"].shape[0])
        self.chunk_tokens = int(self._tokens.chunks[0])
        self.tokenizer: dict[str, Any] = dict(self.attrs.get("tokenizer") or {})

    # ---------------------------------------------------------------- opening
    @classmethod
    def open(cls, url: str) -> Corpus:
        """Open and validate a corpus store at any fsspec URL.

        Raises
        ------
        FormatError
            The store is missing, not a biglda corpus, of another format version, or
            its arrays disagree in shape (one line that says which).

        Examples
        --------
        >>> Corpus.open("memory://doc/corpus-example.zarr").n_docs
        2
        """
        url = str(url).rstrip("/")
        group = _open_group(url)
        attrs = dict(group.attrs)
        fmt = attrs.get("format")
        if fmt != CORPUS_FORMAT:
            what = f"format={fmt!r}" if fmt else "no 'format' attribute"
            raise FormatError(f"{url} is not a biglda corpus ({what})")
        version = attrs.get("format_version")
        if version != CORPUS_FORMAT_VERSION:
            raise FormatError(
                f"{url} is a biglda corpus of format version {version!r}; this biglda "
                f"reads version {CORPUS_FORMAT_VERSION} (re-run `biglda ingest`)"
            )
        names = set(group.array_keys())
        missing = [n for n in _REQUIRED if n not in names]
        if missing:
            raise FormatError(f"{url} is a damaged biglda corpus: missing {', '.join(missing)}")
        corpus = cls(url, group)
        corpus._validate()
        return corpus

    def _validate(self) -> None:
        g, url = self._group, self.url
        ptr = self.doc_ptr
        problems = []
        if len(ptr) < 1 or ptr[0] != 0 or ptr[-1] != self.n_tokens:
            problems.append(f"doc_ptr must run from 0 to n_tokens={self.n_tokens}")
        elif np.any(np.diff(ptr) < 0):
            problems.append("doc_ptr is not non-decreasing")
        if g["doc_ids"].shape[0] != self.n_docs:
            problems.append(f"doc_ids has {g['doc_ids'].shape[0]} entries for {self.n_docs} docs")
        for name in ("word_count", "doc_freq"):
            if g[name].shape[0] != self.n_words:
                problems.append(f"{name} has {g[name].shape[0]} entries for {self.n_words} words")
        if g["tokens"].dtype != np.int32:
            problems.append(f"tokens has dtype {g['tokens'].dtype}, expected int32")
        for key, value in (("n_docs", self.n_docs), ("n_tokens", self.n_tokens),
                           ("n_words", self.n_words)):
            if key in self.attrs and self.attrs[key] != value:
                problems.append(f"attrs {key}={self.attrs[key]} but the arrays hold {value}")
        if problems:
            raise FormatError(f"{url} is a damaged biglda corpus: {problems[0]}")

    def __reduce__(self):
        """Pickle by URL: a worker re-opens the store instead of receiving arrays."""
        return (Corpus.open, (self.url,))

    def __repr__(self) -> str:
        """Show the URL and the sizes."""
        return (f"Corpus({self.url!r}, n_docs={self.n_docs}, n_tokens={self.n_tokens}, "
                f"n_words={self.n_words})")

    # ---------------------------------------------------------------- lazily loaded arrays
    @cached_property
    def vocab(self) -> np.ndarray:
        """Word of each id (numpy string array, id order)."""
        return self._group["vocab"][:]

    @cached_property
    def word_count(self) -> np.ndarray:
        """int64 [V]: occurrences of each word."""
        return np.asarray(self._group["word_count"][:], dtype=np.int64)

    @cached_property
    def doc_freq(self) -> np.ndarray:
        """int64 [V]: number of documents containing each word."""
        return np.asarray(self._group["doc_freq"][:], dtype=np.int64)

    @cached_property
    def doc_ids(self) -> np.ndarray:
        """Id of each document (numpy string array)."""
        return self._group["doc_ids"][:]

    @property
    def doc_lengths(self) -> np.ndarray:
        """int64 [D]: tokens of each document."""
        return np.diff(self.doc_ptr)

    def has_truth(self) -> bool:
        """Whether the store carries synthetic ground truth (``truth/``)."""
        return "truth" in set(self._group.group_keys())

    # ---------------------------------------------------------------- tokens
    def read_tokens(self, start: int, stop: int) -> np.ndarray:
        """Word ids ``tokens[start:stop]`` as int32.

        Examples
        --------
        >>> Corpus.open("memory://doc/corpus-example.zarr").read_tokens(0, 3).tolist()
        [1, 0, 0]
        """
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.n_tokens:
            raise IndexError(f"token range {start}:{stop} outside 0:{self.n_tokens}")
        if start == stop:
            return np.zeros(0, dtype=np.int32)
        return np.asarray(self._tokens[start:stop], dtype=np.int32)

    def doc(self, i: int) -> np.ndarray:
        """Word ids of document ``i`` (int32).

        Examples
        --------
        >>> Corpus.open("memory://doc/corpus-example.zarr").doc(0).tolist()
        [1, 0]
        """
        if not -self.n_docs <= i < self.n_docs:
            raise IndexError(f"document {i} outside 0:{self.n_docs}")
        i = i % self.n_docs
        return self.read_tokens(self.doc_ptr[i], self.doc_ptr[i + 1])

    def words(self, i: int) -> list[str]:
        """Return the words of document ``i`` (as stored, after tokenizing and filtering)."""
        return [str(w) for w in self.vocab[self.doc(i)]]

    # ---------------------------------------------------------------- shards
    def plan_shards(self, n_shards: int, tolerance: float = TOLERANCE) -> list[Shard]:
        """Split the documents into at most ``n_shards`` contiguous shards of about equal tokens.

        Boundaries fall at the document boundaries nearest to chunk boundaries of
        ``tokens`` when that keeps each boundary within ``tolerance`` of a shard's
        ideal size, else nearest to the balanced position (see the module
        docstring); every shard is non-empty, shards are in document order and
        cover every document exactly once.

        Examples
        --------
        >>> c = Corpus.open("memory://doc/corpus-example.zarr")
        >>> [(s.doc_start, s.doc_stop) for s in c.plan_shards(2)]
        [(0, 1), (1, 2)]
        """
        bounds = plan_shard_bounds(self.doc_ptr, n_shards, self.chunk_tokens, tolerance)
        return [
            Shard(i, int(a), int(b), int(self.doc_ptr[a]), int(self.doc_ptr[b]))
            for i, (a, b) in enumerate(itertools.pairwise(bounds))
        ]

    def read_shard(self, shard: Shard) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens int32, doc_ptr int64 starting at 0)`` of one shard.

        Examples
        --------
        >>> c = Corpus.open("memory://doc/corpus-example.zarr")
        >>> tokens, ptr = c.read_shard(c.plan_shards(1)[0])
        >>> ptr.tolist(), len(tokens)
        ([0, 2, 4], 4)
        """
        tokens = self.read_tokens(shard.token_start, shard.token_stop)
        ptr = self.doc_ptr[shard.doc_start:shard.doc_stop + 1] - shard.token_start
        return tokens, ptr


def is_corpus(url: str) -> bool:
    """Whether ``url`` opens as a biglda corpus of this format version."""
    fs, path = split_url(url)
    if not fs.exists(path):
        return False
    try:
        Corpus.open(url)
    except FormatError:
        return False
    return True
