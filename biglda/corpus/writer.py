"""Writing a ``corpus.zarr`` (layout: :mod:`biglda.corpus.store`): streaming and in memory.

:class:`CorpusWriter` fills a store whose sizes are known up front, one whole chunk per
write (:class:`ChunkedAppender`), and writes the attributes that make it a corpus last;
every corpus writer (``ingest``, :func:`write_corpus`, the synthetic generator) uses it
inside :func:`biglda.io.atomic_output`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import zarr

from biglda.corpus.store import CORPUS_FORMAT, CORPUS_FORMAT_VERSION
from biglda.errors import ConfigError
from biglda.io import atomic_output, update_attributes

#: Default tokens per chunk of ``tokens`` (8 MiB of int32 before compression).
DEFAULT_CHUNK_TOKENS = 2**21
#: Rows per chunk of the per-document arrays (``doc_ptr``, ``truth/theta``).
DOC_CHUNK = 2**18
#: Rows per chunk of ``doc_ids``: variable-length strings cost ~100 bytes each while
#: a chunk is encoded, so their chunks are smaller (memory stays flat with input size).
DOC_ID_CHUNK = 2**16
_STR = np.dtypes.StringDType()


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
    >>> from biglda.corpus.store import Corpus
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
        update_attributes(self.group, self._attrs)


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
