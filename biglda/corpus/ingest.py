"""``ingest``: text or bag-of-words input to a ``corpus.zarr``, in bounded memory.

Memory does not grow with the number of documents or tokens; only the vocabulary, which
grows much more slowly, is held. Three passes, each a function here:

1. **Count** (:func:`_count_pass`, the vocabulary pass): read every input once as raw
   blocks, tokenize them (in worker processes when ``jobs > 1``), count words, and spill
   provisional word ids to a temporary directory (:mod:`biglda.corpus.ingest_blocks`).
2. **Choose the vocabulary** (:func:`_vocabulary_pass`): filter the words by their
   counts (:class:`~biglda.corpus.vocab.VocabFilter`, or keep a fixed vocabulary), then
   read the spill once with NumPy to find the documents that become shorter than
   ``min_doc_length`` and take their tokens out of the counts, so the stored
   ``word_count``/``doc_freq`` equal a recount of the stored tokens. Final ids:
   descending count, ties by word.
3. **Write the tokens** (:func:`_token_pass`) from the spill, one chunk at a time, under
   :func:`~biglda.io.atomic_output`: a failed or interrupted ingest leaves nothing at the
   output path.

Passes 2 and 3 are NumPy over the spill and take a small share of the time; tokenizing
and the per-token dict lookup dominate (ASCII documents take a ``str.translate`` +
``split`` fast path; others ``re.findall``). Throughput and peak memory are measured by
``pipelines/bench_ingest.py`` (``pipelines/README.md``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from biglda.corpus.ingest_blocks import Counts, Spill, counted_blocks, doc_freq_of, kept_lengths
from biglda.corpus.readers import BLOCK_BYTES, Source, resolve_sources
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, Tokenizer, load_stopwords
from biglda.corpus.vocab import DEFAULT_MIN_DF, VocabFilter, frequency_order
from biglda.corpus.writer import CorpusWriter
from biglda.errors import BigLDAError, ConfigError, InputError
from biglda.io import atomic_output, check_output, check_writable

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


@dataclass
class _Settings:
    """What the passes need to know besides the input: the tokenizer and the filters."""

    tokenizer: Tokenizer
    vfilter: VocabFilter
    stop_set: frozenset[str]
    stop_desc: str
    fixed: bool  # a fixed vocabulary: the word filters do not apply


@dataclass
class _Vocabulary:
    """The outcome of the vocabulary pass: final words, ids and exact counts."""

    words: list[str]  # final vocabulary, in id order
    remap: np.ndarray  # int32 [provisional V]: final id, or -1 for a dropped word
    word_count: np.ndarray  # int64 [V]
    doc_freq: np.ndarray  # int64 [V]
    n_docs: int
    n_tokens: int


def _resolve_jobs(jobs: int | None, sources: list[Source]) -> int:
    """Tokenizing processes: ``jobs`` if given, else 1 on small inputs or <= 2 cores.

    On two cores the main process (reading, merging block vocabularies, spilling) and the
    workers compete for the same cores, and workers did not pay (``pipelines/README.md``,
    "Ingest"); with more cores they do, and one core is kept for the main process.
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
    format: str = "auto",  # shadows the builtin: the CLI option's name
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
    r"""Build a ``corpus.zarr`` at ``out`` from text or UCI bag-of-words inputs.

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
        Where to spill the first pass's output (default: the system temp directory).
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
    >>> _ = (d / "docs.tsv").write_text("a\tred fish blue fish\nb\ttwo fish\n")
    >>> stats = ingest([str(d / "docs.tsv")], str(d / "c.zarr"), min_df=1)
    >>> stats.n_docs, stats.n_tokens, stats.n_words
    (2, 6, 4)
    """
    t_start = time.perf_counter()
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    out = str(out).rstrip("/")
    check_output(out, overwrite=overwrite)
    sources = resolve_sources(inputs, format)
    check_writable(out)
    settings = _settings(sources, lowercase=lowercase, token_pattern=token_pattern,
                         pretokenized=pretokenized, stopwords=stopwords, min_df=min_df,
                         max_df=max_df, max_vocab=max_vocab, min_doc_length=min_doc_length,
                         ngrams=ngrams, fixed=vocabulary is not None)
    stats = IngestStats(out=out, jobs=_resolve_jobs(jobs, sources))
    with tempfile.TemporaryDirectory(prefix="biglda-ingest-", dir=tmp_dir) as spill_dir:
        spill = Spill(spill_dir)
        try:
            # the counts go out of scope with the vocabulary pass: its word index is freed
            vocab = _vocabulary_pass(
                _count_pass(sources, settings, spill, stats, text_field=text_field,
                            id_field=id_field, block_bytes=block_bytes),
                spill, settings, stats, vocabulary)
            _token_pass(out, spill, vocab, settings, sources, stats, overwrite=overwrite,
                        chunk_tokens=chunk_tokens)
        finally:
            spill.close()
    stats.n_docs, stats.n_tokens, stats.n_words = vocab.n_docs, vocab.n_tokens, len(vocab.words)
    log.info("ingest: %d docs, %d tokens, %d words -> %s in %.1fs (%.2f M words/s)",
             stats.n_docs, stats.n_tokens, stats.n_words, out, time.perf_counter() - t_start,
             stats.words_per_s / 1e6)
    return stats


def _settings(sources: list[Source], *, lowercase: bool, token_pattern: str,
              pretokenized: bool, stopwords: str | list[str] | None, min_df: int | None,
              max_df: float, max_vocab: int | None, min_doc_length: int, ngrams: int,
              fixed: bool) -> _Settings:
    """Build the tokenizer and filters; pre-tokenized and UCI input get other defaults."""
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
    return _Settings(tokenizer, vfilter, stop_set, stop_desc, fixed)


def _count_pass(sources: list[Source], settings: _Settings, spill: Spill, stats: IngestStats,
                *, text_field: str, id_field: str | None, block_bytes: int) -> Counts:
    """Pass 1: tokenize every input once, count the words, spill provisional ids."""
    t0 = time.perf_counter()
    counts, blocks = counted_blocks(sources, settings.tokenizer, text_field, id_field,
                                    block_bytes, stats.jobs)
    for block in blocks:
        ids = counts.add(block)
        spill.write(ids, block.lengths, block.doc_ids)
        stats.input_docs += len(block.lengths)
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
             stats.seconds["tokenize"], stats.jobs)
    return counts


def _vocabulary_pass(counts: Counts, spill: Spill, settings: _Settings, stats: IngestStats,
                     vocabulary: Iterable[str] | None) -> _Vocabulary:
    """Pass 2: choose the words, drop documents left too short, number words by count."""
    t0 = time.perf_counter()
    words, word_count, doc_freq = counts.finish()
    keep = _kept_words(words, word_count, doc_freq, settings, stats, vocabulary)
    word_count = np.where(keep, word_count, 0)
    doc_freq = np.where(keep, doc_freq, 0)
    n_docs, n_tokens = _drop_short_docs(spill, keep, word_count, doc_freq,
                                        settings.vfilter.min_doc_length)
    stats.dropped_docs = stats.input_docs - n_docs
    if n_docs == 0:
        raise InputError(
            f"no documents left: all have fewer than {settings.vfilter.min_doc_length} tokens "
            "after filtering (lower --min-doc-length or --min-df)"
        )
    keep &= word_count > 0
    idx = np.flatnonzero(keep)
    order = idx[frequency_order([words[i] for i in idx], word_count[idx])]
    remap = np.full(len(words), -1, dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    stats.seconds["vocabulary"] = time.perf_counter() - t0
    log.info("pass 2: %d words kept, %d docs dropped", len(order), stats.dropped_docs)
    return _Vocabulary([words[i] for i in order], remap, word_count[order], doc_freq[order],
                       n_docs, n_tokens)


def _kept_words(words: list[str], word_count: np.ndarray, doc_freq: np.ndarray,
                settings: _Settings, stats: IngestStats,
                vocabulary: Iterable[str] | None) -> np.ndarray:
    """Mark the words that pass the filters (or are in ``vocabulary``): bool [provisional V]."""
    if vocabulary is not None:
        fixed = set(vocabulary)
        keep = np.fromiter((w in fixed for w in words), bool, len(words))
        stats.unknown_tokens = int(word_count[~keep].sum())
        if not keep.any():
            raise InputError(f"none of the {len(words):,} words of the input is in "
                             f"the fixed vocabulary ({len(fixed):,} words)")
    else:
        vf = settings.vfilter
        keep = vf.keep(words, word_count, doc_freq, stats.input_docs, settings.stop_set)
    if not keep.any():
        raise InputError(
            f"the vocabulary is empty after filtering ({len(words)} words; "
            f"min_df={settings.vfilter.min_df}, max_df={settings.vfilter.max_df}, "
            f"stopwords={settings.stop_desc}); lower --min-df"
        )
    return keep


def _drop_short_docs(spill: Spill, keep: np.ndarray, word_count: np.ndarray,
                     doc_freq: np.ndarray, min_doc_length: int) -> tuple[int, int]:
    """Drop documents shorter than ``min_doc_length`` from the counts; count what stays.

    The dropped documents' tokens are taken out of the counts in place; returns the
    documents and tokens that stay.
    """
    n_docs = n_tokens = 0
    for tokens, lengths, _ in spill.read():
        tk = keep[tokens]
        kl = kept_lengths(tk, lengths)
        short = kl < min_doc_length
        n_docs += int((~short).sum())
        n_tokens += int(kl[~short].sum())
        if short.any() and kl[short].sum():
            sel = tk & np.repeat(short, lengths)
            gone = tokens[sel].astype(np.int64)
            word_count -= np.bincount(gone, minlength=len(keep))
            doc_freq -= doc_freq_of(gone, kl[short], len(keep))
    return n_docs, n_tokens


def _token_pass(out: str, spill: Spill, vocab: _Vocabulary, settings: _Settings,
                sources: list[Source], stats: IngestStats, *, overwrite: bool,
                chunk_tokens: int | None) -> None:
    """Pass 3: write the corpus from the spill, one chunk at a time, atomically."""
    t0 = time.perf_counter()
    min_len = settings.vfilter.min_doc_length
    try:
        with atomic_output(out, overwrite=overwrite) as tmp:
            writer = CorpusWriter(tmp, n_docs=vocab.n_docs, n_tokens=vocab.n_tokens,
                                  vocab=vocab.words, word_count=vocab.word_count,
                                  doc_freq=vocab.doc_freq,
                                  attrs=_attrs(settings, sources, stats),
                                  chunk_tokens=chunk_tokens)
            for tokens, lengths, doc_ids in spill.read():
                new = vocab.remap[tokens]
                tk = new >= 0
                kl = kept_lengths(tk, lengths)
                doc_keep = kl >= min_len
                sel = tk & np.repeat(doc_keep, lengths)
                ids = [d for d, k in zip(doc_ids, doc_keep.tolist(), strict=True) if k]
                writer.append_docs(new[sel], kl[doc_keep], ids)
            writer.close()
    except OSError as exc:  # full disk, lost permission...: atomic_output cleaned up
        raise BigLDAError(f"cannot write {out}: "
                          f"{exc.strerror or type(exc).__name__}") from None
    stats.seconds["write"] = time.perf_counter() - t0


def _attrs(settings: _Settings, sources: list[Source], stats: IngestStats) -> dict:
    """Return the store attributes: tokenizer, filters and source (what it was made from)."""
    vf = settings.vfilter
    return {
        "tokenizer": settings.tokenizer.settings,
        "filters": ({**vf.settings, "stopwords": settings.stop_desc} if not settings.fixed
                    else {"vocabulary": "fixed", "min_doc_length": vf.min_doc_length,
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
