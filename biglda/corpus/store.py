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

Shards and chunk boundaries
---------------------------
Training splits the corpus into shards: contiguous document ranges of about equal
token counts. Documents almost never end exactly on a chunk boundary of ``tokens``,
and Zarr v3 has no irregular chunk grid, so a shard cannot be made of whole chunks
without padding ``tokens`` (which would break the simple ``doc_ptr`` semantics).
The design instead is:

* a shard boundary is the document boundary *nearest to a chunk boundary*, so each
  shard reads its own chunks plus at most part of a document in each neighbouring
  chunk. Reads of a shared chunk are harmless: the corpus is immutable after ingest.
* balance comes first, though (with BSP every clock waits for the slowest shard):
  a boundary moves to the chunk boundary nearest its balanced position only when
  that is within ``tolerance`` (default 5%) of a shard's ideal token count;
  otherwise it is the document boundary nearest to the balanced position. Corpora
  with >= 10 chunks per shard are therefore fully chunk-aligned; small corpora
  (one chunk, like the demo) are simply balanced.
* nothing ever writes into ``tokens``. Per-token training state (the topic
  assignments ``z``) is checkpointed **per shard** (one array per shard, chunked on
  its own), so no two writers ever share a chunk, whatever the boundaries.

A shard's token count differs from ``n_tokens / n_shards`` by at most
``2 * tolerance * n_tokens / n_shards`` plus one document.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import zarr

from biglda.errors import ConfigError, FormatError
from biglda.io import atomic_output, split_url

log = logging.getLogger(__name__)

CORPUS_FORMAT = "biglda-corpus"
CORPUS_FORMAT_VERSION = 1
#: Default tokens per chunk of ``tokens`` (8 MiB of int32 before compression).
DEFAULT_CHUNK_TOKENS = 2**21
#: Rows per chunk of the per-document arrays (``doc_ptr``, ``truth/theta``).
DOC_CHUNK = 2**18
#: Rows per chunk of ``doc_ids``: variable-length strings cost ~100 bytes each while
#: a chunk is encoded, so their chunks are smaller (memory stays flat with input size).
DOC_ID_CHUNK = 2**16
_STR = np.dtypes.StringDType()

_REQUIRED = ("tokens", "doc_ptr", "doc_ids", "vocab", "word_count", "doc_freq")


@dataclass(frozen=True)
class Shard:
    """A contiguous range of documents, and the tokens they span.

    ``doc_start:doc_stop`` index documents, ``token_start:token_stop`` index ``tokens``
    (``token_start == doc_ptr[doc_start]``, ``token_stop == doc_ptr[doc_stop]``).

    Examples
    --------
    >>> s = Shard(0, 0, 10, 0, 1234)
    >>> s.n_docs, s.n_tokens
    (10, 1234)
    """

    index: int
    doc_start: int
    doc_stop: int
    token_start: int
    token_stop: int

    @property
    def n_docs(self) -> int:
        """Number of documents in the shard."""
        return self.doc_stop - self.doc_start

    @property
    def n_tokens(self) -> int:
        """Number of tokens in the shard."""
        return self.token_stop - self.token_start


def _nearest_boundary(doc_ptr: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Index of the document boundary nearest to each target token offset."""
    n_docs = len(doc_ptr) - 1
    right = np.clip(np.searchsorted(doc_ptr, targets, side="left"), 1, n_docs)
    left = right - 1
    return np.where((targets - doc_ptr[left]) <= (doc_ptr[right] - targets), left, right)


def plan_shard_bounds(doc_ptr: np.ndarray, n_shards: int, chunk_tokens: int,
                      tolerance: float = 0.05) -> np.ndarray:
    """Document indices where shards start, plus ``n_docs`` at the end (see module doc).

    Returns int64 ``[n + 1]`` strictly increasing from 0 to ``n_docs``, with
    ``n <= n_shards`` (fewer when there are too few documents, or documents longer
    than a shard, to make ``n_shards`` non-empty shards). A boundary snaps to a
    chunk boundary when that moves it by at most ``tolerance`` of a shard's ideal
    token count.

    Examples
    --------
    >>> plan_shard_bounds(np.array([0, 3, 6, 9, 12]), 2, 6).tolist()
    [0, 2, 4]
    """
    if n_shards < 1:
        raise ConfigError(f"the number of shards must be at least 1, got {n_shards}")
    doc_ptr = np.asarray(doc_ptr, dtype=np.int64)
    n_docs = len(doc_ptr) - 1
    n_tokens = int(doc_ptr[-1])
    n = min(n_shards, n_docs)
    if n <= 1:
        return np.array([0, n_docs] if n_docs else [0], dtype=np.int64)
    balanced = np.arange(1, n, dtype=np.float64) * n_tokens / n
    snapped = np.minimum(np.round(balanced / chunk_tokens) * chunk_tokens, n_tokens)
    near = np.abs(snapped - balanced) <= tolerance * n_tokens / n
    cuts = _nearest_boundary(doc_ptr, np.where(near, snapped, balanced))
    return np.unique(np.concatenate([[0], cuts, [n_docs]]).astype(np.int64))


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
        # Pickle by URL: a worker re-opens the store instead of receiving arrays.
        return (Corpus.open, (self.url,))

    def __repr__(self) -> str:
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
        """The words of document ``i`` (as stored, after tokenizing and filtering)."""
        return [str(w) for w in self.vocab[self.doc(i)]]

    # ---------------------------------------------------------------- shards
    def plan_shards(self, n_shards: int, tolerance: float = 0.05) -> list[Shard]:
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
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
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


# -------------------------------------------------------------------- writing


def unique_sorted(keys: np.ndarray) -> np.ndarray:
    """Sorted unique values of an integer array (sort-based).

    numpy 2.x's default hash-based ``np.unique`` was measured ~100x slower than a
    sort on the int64 (document, word) keys counted here.

    Examples
    --------
    >>> unique_sorted(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    keys = np.sort(keys)
    if len(keys) < 2:
        return keys
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))]


class ChunkedAppender:
    """Fill a Zarr array of known length front to back, one whole chunk per write.

    Appended pieces are buffered until a chunk is full, so every chunk is written
    exactly once (no read-modify-write) and memory stays at about one chunk.

    Examples
    --------
    >>> a = zarr.open_array("memory://doc/app.zarr", mode="w", shape=(5,), chunks=(2,),
    ...                     dtype="int32")
    >>> w = ChunkedAppender(a)
    >>> w.append(np.arange(3)); w.append(np.arange(2)); w.close()
    >>> a[:].tolist()
    [0, 1, 2, 0, 1]
    """

    def __init__(self, array: zarr.Array) -> None:
        self.array = array
        self.rows = int(array.chunks[0])
        self.pos = 0  # rows written to the array
        self._buf: list[np.ndarray] = []
        self._n = 0  # rows buffered

    def append(self, values: np.ndarray) -> None:
        """Append rows; writes every chunk that becomes full."""
        if len(values) == 0:
            return
        self._buf.append(values)
        self._n += len(values)
        if self._n >= self.rows:
            data = np.concatenate(self._buf)
            full = (len(data) // self.rows) * self.rows
            self._write(data[:full])
            rest = data[full:]
            self._buf = [rest] if len(rest) else []
            self._n = len(rest)

    def _write(self, data: np.ndarray) -> None:
        end = self.pos + len(data)
        if end > self.array.shape[0]:
            raise ValueError(f"{self.array.path}: more than {self.array.shape[0]} rows appended")
        self.array[self.pos:end] = data
        self.pos = end

    def close(self) -> None:
        """Write the last partial chunk and check the array is exactly full."""
        if self._buf:
            self._write(np.concatenate(self._buf))
            self._buf, self._n = [], 0
        if self.pos != self.array.shape[0]:
            raise ValueError(
                f"{self.array.path}: {self.pos} rows written, expected {self.array.shape[0]}"
            )


class CorpusWriter:
    """Write a corpus store whose sizes are known up front, streaming tokens and documents.

    Used inside :func:`biglda.io.atomic_output` by every corpus writer:
    ``ingest``, :func:`write_corpus` and the synthetic generator. Token ids must
    already be final (ordered by descending frequency). ``mode="a"`` adds the corpus
    arrays to a group that already holds other arrays (the synthetic ``truth/``).

    Examples
    --------
    >>> w = CorpusWriter("memory://doc/w.zarr", n_docs=1, n_tokens=2, vocab=["a"],
    ...                  word_count=[2], doc_freq=[1])
    >>> w.append_docs(np.array([0, 0], np.int32), np.array([2]), ["d0"])
    >>> w.close()
    >>> Corpus.open("memory://doc/w.zarr").n_tokens
    2
    """

    def __init__(
        self,
        url: str,
        *,
        n_docs: int,
        n_tokens: int,
        vocab: Iterable[str] | np.ndarray,
        word_count: np.ndarray | Iterable[int],
        doc_freq: np.ndarray | Iterable[int],
        attrs: dict[str, Any] | None = None,
        chunk_tokens: int | None = None,
        mode: str = "w",
    ) -> None:
        chunk_tokens = int(chunk_tokens or DEFAULT_CHUNK_TOKENS)
        if chunk_tokens < 1:
            raise ConfigError(f"chunk_tokens must be positive, got {chunk_tokens}")
        vocab = np.asarray(list(vocab), dtype=object).astype(_STR)
        # mode "a" adds the corpus arrays to a group that already holds others (the
        # synthetic truth); "w" starts from an empty group.
        self.group = zarr.open_group(url, mode=mode)
        g = self.group
        self.n_docs, self.n_tokens = int(n_docs), int(n_tokens)
        g.create_array("vocab", shape=(len(vocab),), dtype=str,
                       chunks=(max(1, min(len(vocab), 2**20)),))
        if len(vocab):
            g["vocab"][:] = vocab
        g.create_array("word_count", data=np.asarray(word_count, dtype=np.int64).reshape(-1))
        g.create_array("doc_freq", data=np.asarray(doc_freq, dtype=np.int64).reshape(-1))
        tokens = g.create_array("tokens", shape=(self.n_tokens,), dtype=np.int32,
                                chunks=(chunk_tokens,), fill_value=0)
        doc_ptr = g.create_array("doc_ptr", shape=(self.n_docs + 1,), dtype=np.int64,
                                 chunks=(DOC_CHUNK,), fill_value=0)
        doc_ids = g.create_array("doc_ids", shape=(self.n_docs,), dtype=str,
                                 chunks=(DOC_ID_CHUNK,))
        self._tokens = ChunkedAppender(tokens)
        self._doc_ptr = ChunkedAppender(doc_ptr)
        self._doc_ids = ChunkedAppender(doc_ids)
        self._doc_ptr.append(np.zeros(1, dtype=np.int64))
        self._offset = 0
        self._attrs = {
            "format": CORPUS_FORMAT,
            "format_version": CORPUS_FORMAT_VERSION,
            "n_docs": self.n_docs,
            "n_tokens": self.n_tokens,
            "n_words": len(vocab),
            "chunk_tokens": chunk_tokens,
            "tokenizer": {},
            "filters": {},
            "source": {},
            "created_by": "biglda",
            **(attrs or {}),
        }

    def append_docs(self, tokens: np.ndarray, lengths: np.ndarray, doc_ids: Iterable[str]) -> None:
        """Append documents: their concatenated ``tokens``, their ``lengths`` and ids."""
        lengths = np.asarray(lengths, dtype=np.int64)
        ptr = self._offset + np.cumsum(lengths)
        if len(ptr) and ptr[-1] - self._offset != len(tokens):
            raise ValueError(f"{len(tokens)} tokens but lengths sum to {ptr[-1] - self._offset}")
        # StringDType, not fixed-width '<U' (4 bytes x the longest id, for every id).
        ids = np.asarray(doc_ids if isinstance(doc_ids, np.ndarray) else list(doc_ids))
        ids = ids.astype(_STR) if len(ids) else np.zeros(0, dtype=_STR)
        if len(ids) != len(lengths):
            raise ValueError(f"{len(ids)} doc ids for {len(lengths)} documents")
        self._tokens.append(np.asarray(tokens, dtype=np.int32))
        self._doc_ptr.append(ptr)
        self._doc_ids.append(ids)
        if len(ptr):
            self._offset = int(ptr[-1])

    def close(self) -> None:
        """Flush the last chunks, check the sizes, then write the attributes.

        The attributes (which make the store open as a corpus) are written last.
        """
        self._tokens.close()
        self._doc_ptr.close()
        self._doc_ids.close()
        self.group.attrs.update(self._attrs)


def write_corpus(
    url: str,
    tokens: np.ndarray,
    doc_ptr: np.ndarray,
    vocab: Iterable[str] | np.ndarray,
    doc_ids: Iterable[str] | np.ndarray | None = None,
    attrs: dict[str, Any] | None = None,
    overwrite: bool = False,
    chunk_tokens: int | None = None,
) -> np.ndarray:
    """Write a small in-memory corpus atomically, re-numbering words by descending frequency.

    Words that never occur are dropped. Ties keep the input order.

    Parameters
    ----------
    url : str
        Where to write (any fsspec URL).
    tokens : int array [N]
        Word ids (indices into ``vocab``) in document order.
    doc_ptr : int array [D+1]
        Document offsets into ``tokens``.
    vocab : sequence of str [V_in]
        Word of each input id.
    doc_ids : sequence, optional
        Document ids (default ``"0".."D-1"``).
    attrs : dict, optional
        Extra store attributes (tokenizer, source...).
    overwrite : bool
        Replace an existing store.
    chunk_tokens : int, optional
        Tokens per chunk (default :data:`DEFAULT_CHUNK_TOKENS`).

    Returns
    -------
    numpy.ndarray
        int64 [V_in]: the new id of each input id, ``-1`` for dropped words.

    Examples
    --------
    >>> write_corpus("memory://doc/wc.zarr", np.array([2, 2, 0], np.int32),
    ...              np.array([0, 3]), ["x", "unused", "z"], overwrite=True).tolist()
    [1, -1, 0]
    """
    tokens = np.asarray(tokens)
    doc_ptr = np.asarray(doc_ptr, dtype=np.int64)
    vocab = np.asarray(list(vocab), dtype=object)
    n_in = len(vocab)
    if doc_ptr.ndim != 1 or len(doc_ptr) < 1 or doc_ptr[0] != 0 or doc_ptr[-1] != len(tokens):
        raise ValueError("doc_ptr must run from 0 to len(tokens)")
    if np.any(np.diff(doc_ptr) < 0):
        raise ValueError("doc_ptr must be non-decreasing")
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= n_in):
        raise ValueError(f"token ids must lie in [0, {n_in})")
    n_docs = len(doc_ptr) - 1
    counts = np.bincount(tokens, minlength=n_in).astype(np.int64)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(doc_ptr))
    pairs = unique_sorted(doc_of * max(n_in, 1) + tokens.astype(np.int64))
    dfreq = np.bincount(pairs % max(n_in, 1), minlength=n_in).astype(np.int64)
    order = np.argsort(-counts, kind="stable")
    order = order[counts[order] > 0]
    remap = np.full(n_in, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    new_tokens = remap[tokens].astype(np.int32) if len(tokens) else tokens.astype(np.int32)
    ids = (np.arange(n_docs).astype(str) if doc_ids is None
           else np.asarray(list(doc_ids), dtype=object).astype(str))
    with atomic_output(url, overwrite=overwrite) as tmp:
        w = CorpusWriter(tmp, n_docs=n_docs, n_tokens=len(tokens), vocab=vocab[order],
                         word_count=counts[order], doc_freq=dfreq[order], attrs=attrs,
                         chunk_tokens=chunk_tokens)
        w.append_docs(new_tokens, np.diff(doc_ptr), ids)
        w.close()
    return remap


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
