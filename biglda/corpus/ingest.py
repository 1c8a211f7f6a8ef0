"""``ingest``: text or bag-of-words input to a ``corpus.zarr``, in bounded memory.

How it streams (memory does not grow with the number of documents or tokens;
only the vocabulary, which grows much more slowly, is held):

1. **Tokenize once.** Inputs are read as raw blocks of whole lines (a few MiB).
   Each block is parsed and tokenized (in worker processes when ``jobs > 1``),
   giving the block's own small vocabulary, its tokens as block-local ids, and
   per-word counts and document frequencies. The main process maps block words to
   provisional global ids (first seen, first numbered), adds the counts, and spills
   the provisional ids (int32), document lengths (int64) and ids to a temporary
   directory. The spill is ~4 bytes a token on disk, nothing in memory.
2. **Choose the vocabulary** from the counts (:class:`~biglda.corpus.vocab.VocabFilter`),
   then read the spill once with NumPy to find the documents that become shorter
   than ``min_doc_length`` and take their tokens out of the counts, so the stored
   ``word_count``/``doc_freq`` equal a recount of the stored tokens. Final ids:
   descending count, ties by word.
3. **Write** the corpus from the spill, one chunk at a time, under
   :func:`~biglda.io.atomic_output`: a failed or interrupted ingest
   leaves nothing at the output path.

Passes 2 and 3 are NumPy over the spill and take a small share of the time;
tokenizing and the per-token dict lookup dominate. Measured on debian descriptions
(3.8 M words): ~2.7 M input words per CPU-second in one process (ASCII documents
take a ``str.translate`` + ``split`` fast path; others ``re.findall``). Worker
processes (``jobs``) did not pay on the 2-core development machine; see
:func:`_resolve_jobs`.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import itertools
import logging
import multiprocessing
import os
import pickle
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from biglda.corpus.readers import (
    BLOCK_BYTES,
    Block,
    Source,
    UciHeader,
    iter_blocks,
    iter_uci,
    parse_block,
    read_uci_vocab,
    resolve_sources,
)
from biglda.corpus.store import CorpusWriter, unique_sorted
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, Tokenizer, load_stopwords
from biglda.corpus.vocab import DEFAULT_MIN_DF, VocabFilter, frequency_order
from biglda.errors import BigLDAError, ConfigError, InputError, OutputExistsError
from biglda.io import atomic_output, exists

log = logging.getLogger(__name__)

#: Inputs smaller than this are tokenized in-process (worker start-up would not pay).
PARALLEL_MIN_BYTES = 64 << 20


@dataclass
class IngestStats:
    """What an ingest read and wrote, and how fast (returned by :func:`ingest`)."""

    out: str
    n_docs: int = 0
    n_tokens: int = 0
    n_words: int = 0
    input_docs: int = 0
    input_tokens: int = 0
    input_words: int = 0
    dropped_docs: int = 0
    unknown_tokens: int = 0  # with a fixed vocabulary: input tokens of words outside it
    jobs: int = 1
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def words_per_s(self) -> float:
        """Input tokens per second of wall time (all passes)."""
        total = sum(self.seconds.values())
        return self.input_tokens / total if total > 0 else 0.0


# --------------------------------------------------------------------------- pass 1 (tokenize)


@dataclass
class _BlockCounts:
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


def _doc_freq(ids: np.ndarray, lengths: np.ndarray, n_words: int) -> np.ndarray:
    """Documents containing each word: unique (doc, word) pairs, counted per word."""
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return np.bincount(unique_sorted(doc * max(n_words, 1) + ids) % max(n_words, 1),
                       minlength=n_words).astype(np.int64)


def _ascii_table(lowercase: bool) -> dict[int, int]:
    """``str.translate`` table for ASCII text: word characters kept (or lowercased), others
    to a space. For ASCII text, ``\\w`` is exactly ``[A-Za-z0-9_]``."""
    table = {}
    for code in range(128):
        ch = chr(code)
        if ch.isalnum() or ch == "_":
            table[code] = ord(ch.lower()) if lowercase else code
        else:
            table[code] = 32
    return table


_ASCII = {True: _ascii_table(True), False: _ascii_table(False)}


def _tokenize_block(block: Block, tok: tuple[bool, str, bool, int], text_field: str,
                    id_field: str | None) -> _BlockCounts:
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
            lengths = _kept_lengths(keep, lengths)
            ids = (np.cumsum(~short, dtype=np.int64) - 1).astype(np.int32)[ids[keep]]
            vocab = [w for w, s in zip(vocab, short.tolist(), strict=True) if not s]
    wc = np.bincount(ids, minlength=len(vocab)).astype(np.int64)
    return _BlockCounts(doc_ids, lengths, vocab, ids, wc, _doc_freq(ids, lengths, len(vocab)))


def _map_ordered(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int) -> Iterator[Any]:
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


class _Spill:
    """Pass-1 output on local disk: provisional ids, doc lengths and doc ids, per block."""

    def __init__(self, folder: str) -> None:
        self.tokens = open(os.path.join(folder, "tokens.i32"), "w+b")  # noqa: SIM115
        self.lengths = open(os.path.join(folder, "lengths.i64"), "w+b")  # noqa: SIM115
        self.ids = open(os.path.join(folder, "doc_ids.pkl"), "w+b")  # noqa: SIM115
        self.blocks: list[tuple[int, int]] = []  # (n_docs, n_tokens) of each block

    def write(self, tokens: np.ndarray, lengths: np.ndarray, doc_ids: list[str]) -> None:
        if not len(lengths):
            return
        tokens.astype(np.int32, copy=False).tofile(self.tokens)
        lengths.astype(np.int64, copy=False).tofile(self.lengths)
        pickle.dump(doc_ids, self.ids, protocol=pickle.HIGHEST_PROTOCOL)
        self.blocks.append((len(lengths), len(tokens)))

    def read(self) -> Iterator[tuple[np.ndarray, np.ndarray, list[str]]]:
        for f in (self.tokens, self.lengths, self.ids):
            f.flush()
            f.seek(0)
        for n_docs, n_tokens in self.blocks:
            lengths = np.fromfile(self.lengths, dtype=np.int64, count=n_docs)
            tokens = np.fromfile(self.tokens, dtype=np.int32, count=n_tokens)
            yield tokens, lengths, pickle.load(self.ids)

    def close(self) -> None:
        for f in (self.tokens, self.lengths, self.ids):
            f.close()


class _Counts:
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

    def add(self, block: _BlockCounts) -> np.ndarray:
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

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.words)
        return self.word_count[:n].copy(), self.doc_freq[:n].copy()


def _uci_blocks(source: Source, vocab_holder: list) -> Iterator[_BlockCounts]:
    """Pass-1 blocks of a UCI docword file (ids are global word ids)."""
    it = iter_uci(source)
    header = next(it)
    assert isinstance(header, UciHeader)
    words = read_uci_vocab(source.vocab_path or "", header.n_words)
    vocab_holder.append(words)
    n_words = header.n_words
    next_doc = 0  # first document not yet emitted
    carry: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def emit(doc: np.ndarray, word: np.ndarray, count: np.ndarray, stop: int) -> _BlockCounts:
        nonlocal next_doc
        lengths = np.bincount(doc - next_doc, weights=count, minlength=stop - next_doc)
        lengths = lengths.astype(np.int64)
        ids = np.repeat(word, count).astype(np.int32)
        doc_ids = [str(d + 1) for d in range(next_doc, stop)]
        wc = np.bincount(word, weights=count, minlength=n_words).astype(np.int64)
        next_doc = stop
        return _BlockCounts(doc_ids, lengths, None, ids, wc, _doc_freq(ids, lengths, n_words))

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


# --------------------------------------------------------------------------- driver


def _kept_lengths(tokens_keep: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per document, how many of its tokens are kept (int64 [d])."""
    cs = np.zeros(len(tokens_keep) + 1, dtype=np.int64)
    np.cumsum(tokens_keep, out=cs[1:])
    ends = np.cumsum(lengths)
    return cs[ends] - cs[ends - lengths]


def _check_writable(out: str) -> None:
    """Fail before any work when a local ``out`` cannot be written (its folder is made)."""
    if "://" in out and not out.startswith("file://"):
        return  # remote stores: the first write says
    path = out.removeprefix("file://")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise BigLDAError(f"cannot write {out}: {exc.strerror or type(exc).__name__}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BigLDAError(f"cannot write {out}: Permission denied")


def _resolve_jobs(jobs: int | None, sources: list[Source]) -> int:
    """Tokenizing processes: ``jobs`` if given, else 1 on small inputs or <= 2 cores.

    Measured on the 2-core development machine shared with other jobs (10x debian):
    at load ~3, 2 workers were slower than 1 process (0.73 vs 1.35 M words/s: the
    main process -- reading, merging block vocabularies, spilling -- and the workers
    compete for the same two cores); at load ~11, 2 workers gave 0.91 vs 0.71 M
    words/s only by taking a larger share of a saturated machine. So the default
    stays 1 process on <= 2 cores; with more cores the workers pay, and one core is
    kept for the main process.
    """
    if jobs is not None:
        if jobs < 1:
            raise ConfigError(f"--jobs must be at least 1, got {jobs}")
        return jobs
    cores = os.cpu_count() or 1
    if cores <= 2 or any(s.fmt == "uci" for s in sources):
        return 1
    size = 0
    for s in sources:
        if os.path.isfile(s.path):
            size += os.path.getsize(s.path) * (4 if s.path.endswith(".gz") else 1)
        else:
            size += PARALLEL_MIN_BYTES  # a directory: assume it is worth it
    if size < PARALLEL_MIN_BYTES:
        return 1
    return min(cores - 1, 8)


def ingest(
    inputs: str | list[str],
    out: str,
    *,
    format: str = "auto",  # noqa: A002 - the CLI option's name
    lowercase: bool = True,
    token_pattern: str = DEFAULT_TOKEN_PATTERN,
    pretokenized: bool = False,
    stopwords: str | list[str] | None = None,
    min_df: int | None = None,
    max_df: float = 1.0,
    max_vocab: int | None = None,
    min_doc_length: int = 1,
    text_field: str = "text",
    id_field: str | None = None,
    overwrite: bool = False,
    chunk_tokens: int | None = None,
    jobs: int | None = None,
    block_bytes: int = BLOCK_BYTES,
    tmp_dir: str | None = None,
    vocabulary: Iterable[str] | None = None,
    ngrams: int = 1,
) -> IngestStats:
    """Build a ``corpus.zarr`` at ``out`` from text or UCI bag-of-words inputs.

    Parameters
    ----------
    inputs : str or list of str
        Files or directories (see :mod:`biglda.corpus.readers` for the formats).
    out : str
        Output store (any fsspec URL); written atomically.
    format : {"auto", "tsv", "text", "jsonl", "dir", "uci"}
        Input format; ``auto`` picks by name, then content.
    lowercase, token_pattern, pretokenized
        Tokenizer settings (:class:`~biglda.corpus.tokenizer.Tokenizer`).
        ``pretokenized`` also turns the default filters off.
    stopwords : {"english", "none"}, a path, or a list of these, optional
        Default ``english``; ``none`` for pre-tokenized and UCI input. A list is the
        union (``["english", "extra.txt"]``).
    min_df, max_df, max_vocab, min_doc_length
        Vocabulary and document filters (:class:`~biglda.corpus.vocab.VocabFilter`);
        ``min_df`` defaults to 5 (1 for pre-tokenized and UCI input).
    text_field, id_field : str
        JSONL fields of the text and the id (default ``text``; ``id`` when present).
    overwrite : bool
        Replace an existing store at ``out``.
    chunk_tokens : int, optional
        Tokens per chunk of ``tokens``.
    jobs : int, optional
        Tokenizing processes (UCI input is always read in-process); default: 1 on
        small inputs or machines with <= 2 cores, else CPU count - 1 (at most 8).
    block_bytes : int
        Raw input block size.
    tmp_dir : str, optional
        Where to spill pass-1 output (default: the system temp directory).
    vocabulary : iterable of str, optional
        A fixed vocabulary (a model's or a training corpus's, see ``biglda ingest
        --vocab-from``): only these words are kept, the word filters (``min_df``,
        ``max_df``, ``max_vocab``, stopwords) do not apply, and the tokens of other words
        are dropped and counted in ``IngestStats.unknown_tokens``.
    ngrams : int
        Also count the 2..``ngrams``-word sequences as words (scikit-learn's
        ``ngram_range=(1, ngrams)``; see :class:`~biglda.corpus.tokenizer.Tokenizer`).

    Returns
    -------
    IngestStats

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "docs.tsv").write_text("a\\tred fish blue fish\\nb\\ttwo fish\\n")
    >>> stats = ingest([str(d / "docs.tsv")], str(d / "c.zarr"), min_df=1)
    >>> stats.n_docs, stats.n_tokens, stats.n_words
    (2, 6, 4)
    """
    t_start = time.perf_counter()
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    out = str(out).rstrip("/")
    if exists(out) and not overwrite:
        raise OutputExistsError(f"output {out} already exists (use --overwrite to replace it)")
    sources = resolve_sources(inputs, format)
    _check_writable(out)
    is_uci = sources[0].fmt == "uci"
    raw = pretokenized or is_uci
    vfilter = VocabFilter(
        min_df=(1 if raw else DEFAULT_MIN_DF) if min_df is None else min_df,
        max_df=max_df, max_vocab=max_vocab, min_doc_length=min_doc_length,
        stopwords=(tuple(stopwords) if isinstance(stopwords, list | tuple) else stopwords)
        or ("none" if raw else "english"),
    )
    stop_set, stop_desc = load_stopwords(vfilter.stopwords)
    tokenizer = Tokenizer(lowercase=lowercase and not pretokenized, token_pattern=token_pattern,
                          pretokenized=pretokenized, ngrams=ngrams)
    if is_uci:
        if ngrams > 1:
            raise ConfigError("--ngrams needs text: UCI bag-of-words input has no word order")
        tokenizer = Tokenizer(lowercase=False, pretokenized=True)
    n_jobs = _resolve_jobs(jobs, sources)
    stats = IngestStats(out=out, jobs=n_jobs)

    with tempfile.TemporaryDirectory(prefix="biglda-ingest-", dir=tmp_dir) as spill_dir:
        spill = _Spill(spill_dir)
        try:
            # ---- pass 1: tokenize, count, spill provisional ids
            t0 = time.perf_counter()
            if is_uci:
                holder: list[list[str]] = []
                blocks = _uci_blocks(sources[0], holder)
                first = next(blocks, None)
                counts = _Counts(holder[0] if holder else [])
                results: Iterable[_BlockCounts] = [first, *blocks] if first else []
            else:
                counts = _Counts()
                tok = (tokenizer.lowercase, tokenizer.token_pattern, tokenizer.pretokenized,
                       tokenizer.ngrams)
                work = functools.partial(_tokenize_block, tok=tok, text_field=text_field,
                                         id_field=id_field)
                raw_blocks = (b for s in sources for b in iter_blocks(s, block_bytes))
                results = _map_ordered(work, raw_blocks, n_jobs)
            for res in results:
                ids = counts.add(res)
                spill.write(ids, res.lengths, res.doc_ids)
                stats.input_docs += len(res.lengths)
                stats.input_tokens += len(ids)
            stats.seconds["tokenize"] = time.perf_counter() - t0
            names = ", ".join(s.path for s in sources)
            if stats.input_docs == 0:
                raise InputError(f"no documents in {names} (empty input)")
            if stats.input_tokens == 0:
                raise InputError(f"no tokens in {names} (check --format and --token-pattern)")
            stats.input_words = len(counts.words)
            log.info("pass 1: %d docs, %d tokens, %d distinct words in %.1fs (%d jobs)",
                     stats.input_docs, stats.input_tokens, stats.input_words,
                     stats.seconds["tokenize"], n_jobs)

            # ---- pass 2: choose words, drop short documents, exact final counts
            t0 = time.perf_counter()
            word_count, doc_freq = counts.arrays()
            words = counts.words
            del counts
            if vocabulary is not None:
                fixed = set(vocabulary)
                keep = np.fromiter((w in fixed for w in words), bool, len(words))
                stats.unknown_tokens = int(word_count[~keep].sum())
                if not keep.any():
                    raise InputError(f"none of the {len(words):,} words of the input is in "
                                     f"the fixed vocabulary ({len(fixed):,} words)")
            else:
                keep = vfilter.keep(words, word_count, doc_freq, stats.input_docs, stop_set)
            if not keep.any():
                raise InputError(
                    f"the vocabulary is empty after filtering ({len(words)} words; "
                    f"min_df={vfilter.min_df}, max_df={vfilter.max_df}, "
                    f"stopwords={stop_desc}); lower --min-df"
                )
            word_count = np.where(keep, word_count, 0)
            doc_freq = np.where(keep, doc_freq, 0)
            n_docs = n_tokens = 0
            for tokens, lengths, _ in spill.read():
                tk = keep[tokens]
                kl = _kept_lengths(tk, lengths)
                short = kl < vfilter.min_doc_length
                n_docs += int((~short).sum())
                n_tokens += int(kl[~short].sum())
                if short.any() and kl[short].sum():
                    sel = tk & np.repeat(short, lengths)
                    gone = tokens[sel].astype(np.int64)
                    word_count -= np.bincount(gone, minlength=len(words))
                    doc_freq -= _doc_freq(gone, kl[short], len(words))
            stats.dropped_docs = stats.input_docs - n_docs
            if n_docs == 0:
                raise InputError(
                    f"no documents left: all have fewer than {vfilter.min_doc_length} tokens "
                    "after filtering (lower --min-doc-length or --min-df)"
                )
            keep &= word_count > 0
            idx = np.flatnonzero(keep)
            order = idx[frequency_order([words[i] for i in idx], word_count[idx])]
            remap = np.full(len(words), -1, dtype=np.int32)
            remap[order] = np.arange(len(order), dtype=np.int32)
            vocab = [words[i] for i in order]
            del words
            stats.seconds["vocabulary"] = time.perf_counter() - t0
            log.info("pass 2: %d words kept, %d docs dropped", len(order), stats.dropped_docs)

            # ---- pass 3: write the corpus
            t0 = time.perf_counter()
            attrs = {
                "tokenizer": tokenizer.settings,
                "filters": ({**vfilter.settings, "stopwords": stop_desc} if vocabulary is None
                            else {"vocabulary": "fixed",
                                  "min_doc_length": vfilter.min_doc_length,
                                  "unknown_tokens": stats.unknown_tokens}),
                "source": {
                    "inputs": [os.path.abspath(s.path) for s in sources],
                    "format": sorted({s.fmt for s in sources}),
                    "input_docs": stats.input_docs,
                    "input_tokens": stats.input_tokens,
                    "input_words": stats.input_words,
                    "dropped_docs": stats.dropped_docs,
                },
            }
            try:
                with atomic_output(out, overwrite=overwrite) as tmp:
                    writer = CorpusWriter(tmp, n_docs=n_docs, n_tokens=n_tokens, vocab=vocab,
                                          word_count=word_count[order],
                                          doc_freq=doc_freq[order], attrs=attrs,
                                          chunk_tokens=chunk_tokens)
                    for tokens, lengths, doc_ids in spill.read():
                        new = remap[tokens]
                        tk = new >= 0
                        kl = _kept_lengths(tk, lengths)
                        doc_keep = kl >= vfilter.min_doc_length
                        sel = tk & np.repeat(doc_keep, lengths)
                        ids = [d for d, k in zip(doc_ids, doc_keep.tolist(), strict=True) if k]
                        writer.append_docs(new[sel], kl[doc_keep], ids)
                    writer.close()
            except OSError as exc:  # full disk, lost permission...: atomic_output cleaned up
                raise BigLDAError(f"cannot write {out}: "
                                  f"{exc.strerror or type(exc).__name__}") from None
            stats.seconds["write"] = time.perf_counter() - t0
        finally:
            spill.close()
    stats.n_docs, stats.n_tokens, stats.n_words = n_docs, n_tokens, len(vocab)
    log.info("ingest: %d docs, %d tokens, %d words -> %s in %.1fs (%.2f M words/s)",
             n_docs, n_tokens, len(vocab), out, time.perf_counter() - t_start,
             stats.words_per_s / 1e6)
    return stats
