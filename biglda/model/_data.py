"""Turning user inputs (texts, corpora, arrays, sparse matrices) into model word ids.

Every input ends up as ``Docs``: ``tokens`` int32 ids into the *model's* vocabulary,
``doc_ptr`` int64[D+1], plus how many input tokens were dropped because the model does
not know their word. Unknown words are dropped before anything else happens (fold-in,
the even/odd split of document completion), and counted. A stored corpus becomes
``CorpusDocs`` instead: the word map is built up front, and each batch is read from the
store and mapped where it is processed (bounded memory; on Dask, on the worker).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.errors import ConfigError, InputError


@dataclass
class Docs:
    """Documents as model word ids."""

    tokens: np.ndarray  # int32[N] ids into the model vocabulary
    doc_ptr: np.ndarray  # int64[D+1]
    n_unknown: int = 0  # input tokens dropped: word not in the model's vocabulary
    doc_ids: np.ndarray | None = None
    # int64[D], optional: keys of the documents' random streams (default: their position),
    # e.g. a hash of each row, so a document's result does not depend on its neighbours.
    doc_keys: np.ndarray | None = None

    @property
    def n_docs(self) -> int:
        return len(self.doc_ptr) - 1

    @property
    def n_tokens(self) -> int:
        return int(self.doc_ptr[-1])

    id_map = None  # already in model ids

    def slice(self, start: int, stop: int) -> Docs:
        a, b = int(self.doc_ptr[start]), int(self.doc_ptr[stop])
        return Docs(self.tokens[a:b], self.doc_ptr[start:stop + 1] - a, 0,
                    None if self.doc_ids is None else self.doc_ids[start:stop],
                    None if self.doc_keys is None else self.doc_keys[start:stop])

    def batches(self, batch_tokens: int) -> Iterator[tuple[int, int]]:
        """Document ranges ``(start, stop)`` of about ``batch_tokens`` tokens each."""
        return _batches(self.doc_ptr, batch_tokens)

    def part(self, start: int, stop: int) -> Docs:
        """Documents ``start:stop``, ready to send to a task (see :meth:`load`)."""
        return self.slice(start, stop)

    def load(self, id_map: np.ndarray | None = None) -> Docs:
        return self


def _batches(doc_ptr: np.ndarray, batch_tokens: int) -> Iterator[tuple[int, int]]:
    n = len(doc_ptr) - 1
    start = 0
    while start < n:
        target = doc_ptr[start] + max(1, batch_tokens)
        stop = int(np.searchsorted(doc_ptr, target, side="left"))
        stop = min(max(stop, start + 1), n)
        yield start, stop
        start = stop


@dataclass
class CorpusPart:
    """A token range of a stored corpus; a task reads it and maps it to model ids."""

    corpus: Any  # a Corpus (pickles by URL: a Dask worker re-opens the store)
    token_start: int
    token_stop: int
    doc_ptr: np.ndarray  # int64, local offsets of the part's documents

    def load(self, id_map: np.ndarray | None) -> Docs:
        tokens = self.corpus.read_tokens(self.token_start, self.token_stop)
        if id_map is None:  # the corpus has the model's vocabulary
            ptr = np.asarray(self.doc_ptr, dtype=np.int64)
            return Docs(np.asarray(tokens, dtype=np.int32), ptr - ptr[0], 0)
        return remap(tokens, self.doc_ptr, id_map)


@dataclass
class CorpusDocs:
    """A stored corpus read batch by batch, so memory is bounded by a batch.

    On Dask each worker reads its own batches from the store (``memory://`` stores
    excepted).
    """

    corpus: Any
    doc_ptr: np.ndarray  # int64[D+1], offsets in the corpus (unknown words included)
    id_map: np.ndarray  # int64[V_corpus]: model id of each corpus word, -1 if unknown
    doc_ids: np.ndarray | None = None
    n_unknown: int = 0  # counted per batch by the readers

    @property
    def n_docs(self) -> int:
        return len(self.doc_ptr) - 1

    @property
    def url(self) -> str:
        return str(self.corpus.url)

    def batches(self, batch_tokens: int) -> Iterator[tuple[int, int]]:
        return _batches(self.doc_ptr, batch_tokens)

    def part(self, start: int, stop: int) -> CorpusPart:
        a, b = int(self.doc_ptr[start]), int(self.doc_ptr[stop])
        return CorpusPart(self.corpus, a, b, self.doc_ptr[start:stop + 1] - a)


def str_array(values: Any) -> np.ndarray:
    """Return ``values`` as a numpy ``<U`` array.

    Also from zarr/NumPy ``StringDType`` arrays, which ``astype(str)`` refuses.
    """
    arr = np.asarray(values)
    if arr.dtype.kind == "U":
        return arr
    return np.array([str(v) for v in arr.tolist()], dtype=str) if arr.size else np.zeros(0, str)


def vocab_map(source_vocab: np.ndarray, model_vocab: np.ndarray) -> np.ndarray:
    """Model id of each source word (int64[V_source]), -1 where the model lacks the word.

    Examples
    --------
    >>> vocab_map(np.array(["b", "x", "a"]), np.array(["a", "b", "c"])).tolist()
    [1, -1, 0]
    """
    model_vocab = str_array(model_vocab)
    source_vocab = str_array(source_vocab)
    order = np.argsort(model_vocab, kind="stable")
    sorted_vocab = model_vocab[order]
    if len(sorted_vocab) == 0:
        return np.full(len(source_vocab), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_vocab, source_vocab)
    pos = np.minimum(pos, len(sorted_vocab) - 1)
    found = sorted_vocab[pos] == source_vocab
    return np.where(found, order[pos], -1).astype(np.int64)


def remap(tokens: np.ndarray, doc_ptr: np.ndarray, id_map: np.ndarray) -> Docs:
    """Apply ``id_map`` to tokens, dropping (and counting) those mapped to -1."""
    tokens = np.asarray(tokens)
    doc_ptr = np.asarray(doc_ptr, dtype=np.int64)
    new = id_map[tokens] if len(tokens) else np.zeros(0, dtype=np.int64)
    keep = new >= 0
    kept_before = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(keep, out=kept_before[1:])
    return Docs(new[keep].astype(np.int32), kept_before[doc_ptr], int((~keep).sum()))


def _is_corpus(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("doc_ptr", "vocab", "read_tokens"))


def open_corpus(source: Any) -> Any:
    """Open a :class:`biglda.corpus.Corpus` from a URL (a Corpus is returned as it is)."""
    if _is_corpus(source):
        return source
    if isinstance(source, str | bytes) or hasattr(source, "__fspath__"):
        from biglda.corpus import Corpus

        return Corpus.open(str(source))
    raise InputError(f"expected a corpus or a corpus URL, got {type(source).__name__}")


def corpus_arrays(source: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Return ``(tokens, doc_ptr, vocab, doc_ids)`` of a corpus, in its own word ids.

    The source is a Corpus, a URL, or a ``(tokens, doc_ptr, vocab)`` tuple.
    """
    if isinstance(source, tuple):
        if len(source) != 3:
            raise InputError("a corpus tuple must be (tokens, doc_ptr, vocab)")
        tokens, doc_ptr, vocab = source
        tokens, doc_ptr, vocab = np.asarray(tokens), np.asarray(doc_ptr, np.int64), str_array(vocab)
        if (doc_ptr.ndim != 1 or len(doc_ptr) < 1 or doc_ptr[0] != 0
                or doc_ptr[-1] != len(tokens) or np.any(np.diff(doc_ptr) < 0)):
            raise InputError("doc_ptr must be non-decreasing from 0 to len(tokens)")
        if len(tokens) and (tokens.min() < 0 or tokens.max() >= len(vocab)):
            raise InputError(f"token ids must lie in [0, {len(vocab)}) (the vocab size)")
        return tokens, doc_ptr, vocab, None
    corpus = open_corpus(source)
    doc_ptr = np.asarray(corpus.doc_ptr, dtype=np.int64)
    tokens = np.asarray(corpus.read_tokens(0, int(doc_ptr[-1])))
    return tokens, doc_ptr, str_array(corpus.vocab), str_array(corpus.doc_ids)


def docs_from_corpus(source: Any, model_vocab: np.ndarray) -> Docs | CorpusDocs:
    """Map a corpus onto the model's words.

    A ``(tokens, doc_ptr, vocab)`` tuple is mapped now (:class:`Docs`); a Corpus or URL is
    read batch by batch later (:class:`CorpusDocs`).
    """
    if isinstance(source, tuple):
        tokens, doc_ptr, vocab, doc_ids = corpus_arrays(source)
        docs = remap(tokens, doc_ptr, vocab_map(vocab, model_vocab))
        docs.doc_ids = doc_ids
        return docs
    corpus = open_corpus(source)
    return CorpusDocs(corpus, np.asarray(corpus.doc_ptr, dtype=np.int64),
                      vocab_map(corpus.vocab, model_vocab))


def docs_from_sparse(x: Any, n_words: int, id_map: np.ndarray | None = None) -> Docs:
    """Rows of a document-term count matrix (columns mapped by ``id_map`` if given)."""
    import scipy.sparse as sp  # ~0.4 s to import; only matrix inputs need it

    x = sp.csr_matrix(x)
    if id_map is None and x.shape[1] != n_words:
        raise InputError(f"matrix has {x.shape[1]} columns, the model has {n_words} words")
    x.sum_duplicates()
    counts = x.data
    if counts.size and (np.any(counts < 0) or np.any(counts != np.round(counts))):
        raise InputError("a document-term matrix must hold non-negative integer counts")
    counts = counts.astype(np.int64)
    cols = np.repeat(x.indices.astype(np.int64), counts)
    rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
    row_tokens = np.bincount(rows, weights=counts, minlength=x.shape[0]).astype(np.int64)
    doc_ptr = np.zeros(x.shape[0] + 1, dtype=np.int64)
    np.cumsum(row_tokens, out=doc_ptr[1:])
    if id_map is None:
        return Docs(cols.astype(np.int32), doc_ptr)
    return remap(cols, doc_ptr, id_map)


def row_keys(x: Any) -> np.ndarray:
    """Hash each CSR row's (columns, counts): int64 [n_rows].

    The hash keys the row's random stream, so the stream depends on the row alone.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> k = row_keys(sp.csr_matrix(np.array([[1, 0, 2], [0, 1, 0], [1, 0, 2]])))
    >>> bool(k[0] == k[2] and k[0] != k[1] and (k >= 0).all())
    True
    """
    import hashlib

    keys = np.empty(x.shape[0], dtype=np.int64)
    indptr, indices = x.indptr, x.indices.astype(np.int64)
    data = np.rint(x.data).astype(np.int64)
    for r in range(x.shape[0]):
        a, b = indptr[r], indptr[r + 1]
        h = hashlib.blake2b(indices[a:b].tobytes() + b"|" + data[a:b].tobytes(), digest_size=8)
        keys[r] = int.from_bytes(h.digest(), "little") >> 1  # non-negative int64
    return keys


def docs_from_texts(texts: Iterable[str], tokenizer_settings: dict,
                    model_vocab: np.ndarray) -> Docs:
    """Tokenize raw texts like the training corpus was tokenized, then map to model ids.

    A document given as a list of words is taken as it is.
    """
    from biglda.corpus import Tokenizer

    tokenizer = Tokenizer.from_settings(dict(tokenizer_settings or {}))
    index = {w: i for i, w in enumerate(str_array(model_vocab).tolist())}
    ids: list[int] = []
    doc_ptr = [0]
    n_unknown = 0
    for text in texts:
        if isinstance(text, str):
            words = tokenizer.tokenize(text)
        elif isinstance(text, list | tuple) and all(isinstance(w, str) for w in text):
            words = text  # pre-tokenized: the words as given
        else:
            raise InputError("expected documents as strings or lists of words, got "
                             f"{type(text).__name__}")
        for word in words:
            i = index.get(word)
            if i is None:
                n_unknown += 1
            else:
                ids.append(i)
        doc_ptr.append(len(ids))
    return Docs(np.asarray(ids, dtype=np.int32), np.asarray(doc_ptr, dtype=np.int64), n_unknown)


def as_docs(docs: Any, model_vocab: np.ndarray,
            tokenizer_settings: dict) -> Docs | CorpusDocs:
    """Any supported input to :class:`Docs` (see ``TopicModel.transform``)."""
    import scipy.sparse as sp  # ~0.4 s to import; only matrix inputs need it

    if isinstance(docs, Docs | CorpusDocs):
        return docs
    if isinstance(docs, str):
        return docs_from_texts([docs], tokenizer_settings, model_vocab)
    if sp.issparse(docs):
        return docs_from_sparse(docs, len(model_vocab))
    if isinstance(docs, tuple) or _is_corpus(docs):
        return docs_from_corpus(docs, model_vocab)
    if isinstance(docs, Iterable):
        return docs_from_texts(docs, tokenizer_settings, model_vocab)
    raise ConfigError(f"cannot infer topics for a {type(docs).__name__}: pass strings, "
                      "a Corpus, a (tokens, doc_ptr, vocab) tuple or a sparse matrix")
