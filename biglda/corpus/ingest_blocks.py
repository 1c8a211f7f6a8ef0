"""The first pass of ``ingest``: raw blocks to counted, spilled provisional word ids.

Inputs are read as raw blocks of whole lines (a few MiB). Each block is parsed and
tokenized (in worker processes when ``jobs > 1``), giving the block's own small
vocabulary, its tokens as block-local ids, and per-word counts and document frequencies
(:func:`tokenize_block`). The main process maps block words to provisional global ids
(first seen, first numbered) and adds the counts (:class:`Counts`), and spills the ids
(int32), document lengths (int64) and document ids to a temporary directory
(:class:`Spill`): ~4 bytes a token on disk, nothing in memory.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import itertools
import multiprocessing
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.corpus.readers import (
    Block,
    Source,
    UciHeader,
    iter_blocks,
    iter_uci,
    parse_block,
    read_uci_vocab,
)
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, Tokenizer
from biglda.corpus.writer import unique_sorted


@dataclass
class BlockCounts:
    """Pass-1 result of one block (what a worker sends back)."""

    doc_ids: list[str]
    lengths: np.ndarray  # int64 [d]
    words: list[str] | None  # block vocabulary; None: ids are already global (UCI)
    ids: np.ndarray  # int32 [n] block-local (or global) word ids
    word_count: np.ndarray  # int64 [len(words)]
    doc_freq: np.ndarray  # int64 [len(words)]


@functools.lru_cache(maxsize=8)
def _tokenizer(lowercase: bool, pattern: str, pretokenized: bool, ngrams: int = 1) -> Tokenizer:
    return Tokenizer(lowercase=lowercase, token_pattern=pattern, pretokenized=pretokenized,
                     ngrams=ngrams)


def doc_freq_of(ids: np.ndarray, lengths: np.ndarray, n_words: int) -> np.ndarray:
    """Documents containing each word: unique (doc, word) pairs, counted per word."""
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return np.bincount(unique_sorted(doc * max(n_words, 1) + ids) % max(n_words, 1),
                       minlength=n_words).astype(np.int64)


def _ascii_table(lowercase: bool) -> dict[int, int]:
    r"""Build the ``str.translate`` table that maps ASCII non-word characters to a space.

    Word characters are kept (or lowercased). For ASCII text, ``\w`` is exactly
    ``[A-Za-z0-9_]``.
    """
    table = {}
    for code in range(128):
        ch = chr(code)
        if ch.isalnum() or ch == "_":
            table[code] = ord(ch.lower()) if lowercase else code
        else:
            table[code] = 32
    return table


_ASCII = {True: _ascii_table(True), False: _ascii_table(False)}


def tokenize_block(block: Block, tok: tuple[bool, str, bool, int], text_field: str,
                    id_field: str | None) -> BlockCounts:
    """Parse and tokenize one raw block (runs in a worker process when jobs > 1)."""
    doc_ids, texts = parse_block(block, text_field, id_field)
    tokenizer = _tokenizer(*tok)
    tokenize = tokenizer.tokenize
    # Fast path for the default pattern on ASCII documents (most of them, in English
    # corpora): translate + split is ~2x faster than re.findall and finds the same
    # maximal runs of word characters, but also the 1-character ones, which the
    # pattern (2+ characters) excludes: they are dropped below, per distinct word.
    fast = (tokenizer.token_pattern == DEFAULT_TOKEN_PATTERN and not tokenizer.pretokenized
            and tokenizer.ngrams == 1)  # n-grams must not span the dropped 1-letter words
    table = _ASCII[tokenizer.lowercase]
    lengths = np.empty(len(texts), dtype=np.int64)
    tokens: list[str] = []
    for i, text in enumerate(texts):
        words = text.translate(table).split() if fast and text.isascii() else tokenize(text)
        lengths[i] = len(words)
        tokens.extend(words)
    # One dict pass: each token maps to the position of its word's first occurrence
    # (setdefault with a running counter, all in C); positions are then made dense.
    first_seen: dict[str, int] = {}
    first = np.fromiter(map(first_seen.setdefault, tokens, itertools.count()), dtype=np.int64,
                        count=len(tokens))
    vocab = list(first_seen)  # block vocabulary, first-seen order
    dense = np.zeros(len(tokens), dtype=np.int32)
    dense[np.fromiter(first_seen.values(), dtype=np.int64, count=len(vocab))] = np.arange(
        len(vocab), dtype=np.int32)
    ids = dense[first]
    if fast:
        short = np.fromiter((len(w) < 2 for w in vocab), dtype=bool, count=len(vocab))
        if short.any():
            keep = ~short[ids]
            lengths = kept_lengths(keep, lengths)
            ids = (np.cumsum(~short, dtype=np.int64) - 1).astype(np.int32)[ids[keep]]
            vocab = [w for w, s in zip(vocab, short.tolist(), strict=True) if not s]
    wc = np.bincount(ids, minlength=len(vocab)).astype(np.int64)
    return BlockCounts(doc_ids, lengths, vocab, ids, wc, doc_freq_of(ids, lengths, len(vocab)))


def map_ordered(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int) -> Iterator[Any]:
    """``map(fn, items)`` in order, over ``jobs`` processes, with at most 2*jobs in flight."""
    if jobs <= 1:
        yield from map(fn, items)
        return
    ctx = multiprocessing.get_context("forkserver")
    ex = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
    try:
        pending: deque[cf.Future] = deque()
        for item in items:
            pending.append(ex.submit(fn, item))
            if len(pending) >= 2 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


class Spill:
    """Pass-1 output on local disk: provisional ids, doc lengths and doc ids, per block."""

    def __init__(self, folder: str) -> None:
        self.tokens = open(os.path.join(folder, "tokens.i32"), "w+b")  # noqa: SIM115
        self.lengths = open(os.path.join(folder, "lengths.i64"), "w+b")  # noqa: SIM115
        self.ids = open(os.path.join(folder, "doc_ids.pkl"), "w+b")  # noqa: SIM115
        self.blocks: list[tuple[int, int]] = []  # (n_docs, n_tokens) of each block

    def write(self, tokens: np.ndarray, lengths: np.ndarray, doc_ids: list[str]) -> None:
        """Append one block's tokens, document lengths and ids to the spill files."""
        if not len(lengths):
            return
        tokens.astype(np.int32, copy=False).tofile(self.tokens)
        lengths.astype(np.int64, copy=False).tofile(self.lengths)
        pickle.dump(doc_ids, self.ids, protocol=pickle.HIGHEST_PROTOCOL)
        self.blocks.append((len(lengths), len(tokens)))

    def read(self) -> Iterator[tuple[np.ndarray, np.ndarray, list[str]]]:
        """Yield ``(tokens, lengths, doc_ids)`` of each written block, in order."""
        for f in (self.tokens, self.lengths, self.ids):
            f.flush()
            f.seek(0)
        for n_docs, n_tokens in self.blocks:
            lengths = np.fromfile(self.lengths, dtype=np.int64, count=n_docs)
            tokens = np.fromfile(self.tokens, dtype=np.int32, count=n_tokens)
            yield tokens, lengths, pickle.load(self.ids)

    def close(self) -> None:
        """Close (and so delete) the spill files."""
        for f in (self.tokens, self.lengths, self.ids):
            f.close()


class Counts:
    """Global provisional vocabulary and its counts, grown as blocks arrive."""

    def __init__(self, words: list[str] | None = None) -> None:
        self.index: dict[str, int] = {}
        self.words: list[str] = []
        self.word_count = np.zeros(1024, dtype=np.int64)
        self.doc_freq = np.zeros(1024, dtype=np.int64)
        if words is not None:
            self._add_words(words)

    def _add_words(self, words: list[str]) -> None:
        n = len(self.words)
        self.index.update(zip(words, range(n, n + len(words)), strict=True))
        self.words.extend(words)
        if len(self.words) > len(self.word_count):
            cap = max(2 * len(self.word_count), len(self.words))
            for name in ("word_count", "doc_freq"):
                old = getattr(self, name)
                new = np.zeros(cap, dtype=np.int64)
                new[: len(old)] = old
                setattr(self, name, new)

    def add(self, block: BlockCounts) -> np.ndarray:
        """Add a block's counts; return its tokens as provisional global ids (int32)."""
        if block.words is None:  # ids are already global
            n = len(self.words)
            self.word_count[:n] += block.word_count
            self.doc_freq[:n] += block.doc_freq
            return block.ids
        index = self.index
        new = [w for w in block.words if w not in index]
        if new:
            self._add_words(new)
        gid = np.fromiter(map(index.__getitem__, block.words), dtype=np.int64,
                          count=len(block.words))
        self.word_count[gid] += block.word_count  # gid is unique: fancy += is exact
        self.doc_freq[gid] += block.doc_freq
        return gid.astype(np.int32)[block.ids]

    def finish(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Return the words and their counts; drop the word index (nothing is added after)."""
        n = len(self.words)
        self.index = {}
        return self.words, self.word_count[:n].copy(), self.doc_freq[:n].copy()


def uci_blocks(source: Source, vocab_holder: list) -> Iterator[BlockCounts]:
    """Pass-1 blocks of a UCI docword file (ids are global word ids)."""
    it = iter_uci(source)
    header = next(it)
    assert isinstance(header, UciHeader)
    words = read_uci_vocab(source.vocab_path or "", header.n_words)
    vocab_holder.append(words)
    n_words = header.n_words
    next_doc = 0  # first document not yet emitted
    carry: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def emit(doc: np.ndarray, word: np.ndarray, count: np.ndarray, stop: int) -> BlockCounts:
        nonlocal next_doc
        lengths = np.bincount(doc - next_doc, weights=count, minlength=stop - next_doc)
        lengths = lengths.astype(np.int64)
        ids = np.repeat(word, count).astype(np.int32)
        doc_ids = [str(d + 1) for d in range(next_doc, stop)]
        wc = np.bincount(word, weights=count, minlength=n_words).astype(np.int64)
        next_doc = stop
        return BlockCounts(doc_ids, lengths, None, ids, wc, doc_freq_of(ids, lengths, n_words))

    for part in it:
        assert not isinstance(part, UciHeader)
        if carry:
            part = tuple(np.concatenate([c[i] for c in carry] + [part[i]]) for i in range(3))
            carry = []
        doc, word, count = part
        last = int(doc[-1])
        done = doc < last  # the last document may continue in the next block
        if (~done).any():
            carry = [(doc[~done], word[~done], count[~done])]
        if done.any():
            yield emit(doc[done], word[done], count[done], last)
    if carry:
        doc, word, count = carry[0]
        yield emit(doc, word, count, int(doc[-1]) + 1)
    if next_doc < header.n_docs:  # trailing documents with no entries
        empty = np.zeros(0, dtype=np.int64)
        yield emit(empty, empty, empty, header.n_docs)


def kept_lengths(tokens_keep: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per document, how many of its tokens are kept (int64 [d])."""
    cs = np.zeros(len(tokens_keep) + 1, dtype=np.int64)
    np.cumsum(tokens_keep, out=cs[1:])
    ends = np.cumsum(lengths)
    return cs[ends] - cs[ends - lengths]


def counted_blocks(sources: list[Source], tokenizer: Tokenizer, text_field: str,
                   id_field: str | None, block_bytes: int,
                   jobs: int) -> tuple[Counts, Iterable[BlockCounts]]:
    """Return the global counts to add blocks to, and the blocks of every input in order.

    UCI input carries its vocabulary and global ids and is read in-process; text is
    tokenized by :func:`tokenize_block`, over ``jobs`` processes.
    """
    if sources[0].fmt == "uci":
        holder: list[list[str]] = []
        blocks = uci_blocks(sources[0], holder)
        first = next(blocks, None)  # reads the header and the vocabulary into holder
        counts = Counts(holder[0] if holder else [])
        return counts, itertools.chain([first], blocks) if first else []
    tok = (tokenizer.lowercase, tokenizer.token_pattern, tokenizer.pretokenized,
           tokenizer.ngrams)
    work = functools.partial(tokenize_block, tok=tok, text_field=text_field, id_field=id_field)
    raw = (b for s in sources for b in iter_blocks(s, block_bytes))
    return Counts(), map_ordered(work, raw, jobs)
