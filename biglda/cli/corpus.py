"""The corpus commands: ``ingest``, ``split``, ``info`` and ``datasets synth``."""

from __future__ import annotations

import argparse
import time

import numpy as np

from biglda.cli._common import aligned
from biglda.errors import ConfigError


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``ingest``, ``split``, ``info`` and ``datasets`` to ``sub``, in that order."""
    _add_ingest(sub)
    _add_split(sub)
    _add_info(sub)
    _add_datasets(sub)


def _add_ingest(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest", help="turn text into a corpus.zarr",
        description="Tokenize documents and write a corpus.zarr (streaming, bounded memory).")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files (.tsv, .txt, .jsonl, optionally .gz), a directory of .txt "
                        "files, or a UCI docword.NAME.txt[.gz]")
    p.add_argument("--out", required=True, metavar="CORPUS.zarr", help="output store (any URL)")
    p.add_argument("--format", default="auto",
                   choices=("auto", "tsv", "text", "jsonl", "dir", "uci"),
                   help="input format (default auto: by file name, then content)")
    p.add_argument("--no-lowercase", dest="lowercase", action="store_false",
                   help="keep the case of the text")
    p.add_argument("--token-pattern", default=None, metavar="REGEX",
                   help=r"regex of a token (default (?u)\b\w\w+\b: 2+ word characters)")
    p.add_argument("--pretokenized", action="store_true",
                   help="tokens are whitespace-separated; kept as given, no default filters")
    p.add_argument("--stopwords", action="append", default=None, metavar="english|none|FILE",
                   help="stopword list (default english; none with --pretokenized/UCI); "
                        "repeat to combine lists: --stopwords english --stopwords extra.txt")
    p.add_argument("--ngrams", type=int, default=1, metavar="N",
                   help="also count 2..N-word sequences as words, joined by a space (like "
                        "scikit-learn's ngram_range=(1, N)); --min-df keeps the frequent "
                        "ones, and those starting or ending with a stopword go (default 1)")
    p.add_argument("--min-df", type=int, default=None, metavar="N",
                   help="drop words in fewer than N documents (default 5; 1 with "
                        "--pretokenized/UCI)")
    p.add_argument("--max-df", type=float, default=1.0, metavar="FRACTION",
                   help="drop words in more than this fraction of documents (default 1.0)")
    p.add_argument("--max-vocab", type=int, default=None, metavar="N",
                   help="keep only the N most frequent words")
    p.add_argument("--min-doc-length", type=int, default=1, metavar="N",
                   help="drop documents with fewer than N tokens after filtering (default 1)")
    p.add_argument("--text-field", default="text", help="JSONL: field of the text (default text)")
    p.add_argument("--id-field", default=None,
                   help="JSONL: field of the id (default id if present)")
    p.add_argument("--chunk-tokens", type=int, default=None, metavar="N",
                   help="tokens per chunk of the stored tokens (default 2097152)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="tokenizing processes (default: 1 on <= 2 cores or small inputs)")
    p.add_argument("--vocab-from", default=None, metavar="MODEL_OR_CORPUS",
                   help="keep exactly the vocabulary (and tokenizer settings) of this model.zarr "
                        "or corpus.zarr: words outside it are dropped and counted, the word "
                        "filters do not apply (a held-out set for `biglda evaluate`)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_cmd_ingest)


def _cmd_ingest(args: argparse.Namespace) -> int:
    # the corpus stack (zarr, fsspec) loads when a command runs, not for --help
    from biglda.corpus.ingest import ingest
    from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN

    settings = dict(
        lowercase=args.lowercase, token_pattern=args.token_pattern or DEFAULT_TOKEN_PATTERN,
        pretokenized=args.pretokenized, ngrams=args.ngrams, vocabulary=None)
    if args.vocab_from:
        # the source's words and tokenizer: the same text must give the same words
        from biglda.model.vocab_source import ingest_settings_from

        settings = ingest_settings_from(args.vocab_from, **settings)
    stats = ingest(
        args.inputs, args.out, format=args.format, stopwords=args.stopwords,
        min_df=args.min_df, max_df=args.max_df, max_vocab=args.max_vocab,
        min_doc_length=args.min_doc_length, text_field=args.text_field,
        id_field=args.id_field, overwrite=args.overwrite, chunk_tokens=args.chunk_tokens,
        jobs=args.jobs, **settings,
    )
    if not args.quiet:
        seconds = sum(stats.seconds.values())
        print(f"wrote {stats.out}: {stats.n_docs:,} documents, {stats.n_tokens:,} tokens, "
              f"{stats.n_words:,} words ({stats.input_tokens:,} input tokens in {seconds:.1f}s, "
              f"{stats.words_per_s / 1e6:.2f} M/s; {stats.dropped_docs:,} documents dropped)")
        if settings["vocabulary"] is not None:
            share = stats.unknown_tokens / max(stats.input_tokens, 1)
            print(f"vocabulary of {args.vocab_from}: {stats.unknown_tokens:,} input tokens "
                  f"({share:.1%}) of words outside it dropped")
    return 0


def _add_split(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "split", help="split a corpus.zarr into train and test corpora (held-out evaluation)",
        description="Put each document of CORPUS at random (seeded) into a train or a test "
                    "corpus. Both keep the words by spelling, so `biglda evaluate MODEL --test "
                    "TEST` scores the test documents with the training vocabulary. Nothing is "
                    "written unless both parts are.")
    p.add_argument("corpus", metavar="CORPUS.zarr", help="corpus made by `biglda ingest`")
    p.add_argument("--train", required=True, metavar="TRAIN.zarr", help="training part")
    p.add_argument("--test", required=True, metavar="TEST.zarr", help="held-out part")
    p.add_argument("--test-fraction", type=float, default=0.1, metavar="F",
                   help="share of documents held out, in (0, 1) (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    p.set_defaults(func=_cmd_split)


def _cmd_split(args: argparse.Namespace) -> int:
    # the corpus stack (zarr, fsspec) loads when a command runs, not for --help
    from biglda.corpus.split import split_corpus

    n_train, n_test = split_corpus(args.corpus, args.train, args.test, args.test_fraction,
                                   args.seed, overwrite=args.overwrite)
    if not args.quiet:
        print(f"wrote {args.train} ({n_train:,} documents) and {args.test} ({n_test:,} "
              f"documents; test fraction {args.test_fraction}, seed {args.seed})")
    return 0


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="summarize a corpus.zarr")
    p.add_argument("corpus", metavar="CORPUS.zarr", help="corpus store (any URL)")
    p.add_argument("--top", type=int, default=20, metavar="N",
                   help="most frequent words to list (default 20)")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args: argparse.Namespace) -> int:
    # the corpus stack (zarr, fsspec) loads when a command runs, not for --help
    from biglda.corpus.store import Corpus

    c = Corpus.open(args.corpus)
    lengths = c.doc_lengths
    n_chunks = -(-c.n_tokens // c.chunk_tokens)
    filters = c.attrs.get("filters") or {}
    tok = c.tokenizer
    if tok.get("pretokenized"):
        tok_text = "whitespace (pre-tokenized)"
    else:
        tok_text = f"pattern {tok.get('token_pattern', '?')}"
    tok_text += ", lowercase" if tok.get("lowercase") else ", case kept"
    if int(tok.get("ngrams", 1)) > 1:
        tok_text += f", n-grams 1..{tok['ngrams']}"
    summary = [
        ("corpus", c.url),
        ("documents", f"{c.n_docs:,}"),
        ("tokens", f"{c.n_tokens:,}"),
        ("vocabulary", f"{c.n_words:,} words"),
        ("chunking", f"{c.chunk_tokens:,} tokens a chunk, {n_chunks:,} chunk"
                     f"{'' if n_chunks == 1 else 's'}"),
        ("doc length", (f"mean {lengths.mean():.1f}, median {np.median(lengths):.0f}, "
                        f"min {lengths.min()}, max {lengths.max()}") if c.n_docs else "-"),
        ("tokenizer", tok_text),
    ]
    if filters:
        summary.append(("filters", ", ".join(f"{k}={v}" for k, v in filters.items())))
    source = c.attrs.get("source") or {}
    if "inputs" in source:
        summary.append(("source", f"{', '.join(source['inputs'])} "
                                  f"({source.get('input_docs', '?'):,}"
                                  f" docs, {source.get('input_tokens', '?'):,} tokens read)"))
    if "synthetic" in c.attrs:
        s = c.attrs["synthetic"]
        summary.append(("synthetic", f"K={s['n_topics']}, alpha={s['alpha']}, beta={s['beta']}, "
                                     f"seed={s['seed']}; ground truth in truth/"))
    for line in aligned([(k + ":", v) for k, v in summary]):
        print(line)
    top = min(max(args.top, 0), c.n_words)
    if top:
        share = c.word_count[:top] / max(c.n_tokens, 1)
        rows = [("rank", "word", "count", "share", "docs")]
        rows += [(str(i), str(c.vocab[i]), f"{c.word_count[i]:,}", f"{share[i]:.2%}",
                  f"{c.doc_freq[i]:,}") for i in range(top)]
        print(f"\nmost frequent words (ids 0..{top - 1}):")
        for line in aligned(rows, right=(0, 2, 3, 4)):
            print("  " + line)
    return 0


def _add_datasets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="make corpora: synthetic LDA corpora with ground truth")
    dsub = p.add_subparsers(dest="dataset_command", metavar="KIND", required=True)
    s = dsub.add_parser(
        "synth", help="a synthetic LDA corpus with its true topics",
        description="Draw a corpus from the LDA generative process (Zipf-like topics) and "
                    "store it with its ground truth (truth/phi, truth/theta).")
    s.add_argument("--out", required=True, metavar="CORPUS.zarr", help="output store (any URL)")
    s.add_argument("--docs", type=int, default=10_000, help="documents (default 10000)")
    s.add_argument("--vocab", type=int, default=5_000, help="vocabulary size V (default 5000)")
    s.add_argument("--topics", type=int, default=20, help="topics K (default 20)")
    s.add_argument("--doc-length", type=float, default=100.0,
                   help="mean document length, Poisson (default 100)")
    s.add_argument("--alpha", type=float, default=0.1, help="doc-topic prior (default 0.1)")
    s.add_argument("--beta", type=float, default=0.01, help="topic-word prior (default 0.01)")
    s.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of topics (default 1)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--chunk-tokens", type=int, default=None, metavar="N",
                   help="tokens per chunk of the stored tokens (default 2097152)")
    s.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    s.set_defaults(func=_cmd_datasets)


def _cmd_datasets(args: argparse.Namespace) -> int:
    # the corpus stack (zarr, fsspec) loads when a command runs, not for --help
    from biglda.corpus.synth import SynthSpec, write_synthetic
    from biglda.io import check_output

    for name in ("docs", "vocab", "topics"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.doc_length <= 0 or args.alpha <= 0 or args.beta <= 0:
        raise ConfigError("--doc-length, --alpha and --beta must be positive")
    check_output(args.out, overwrite=args.overwrite)
    spec = SynthSpec(n_docs=args.docs, n_words=args.vocab, n_topics=args.topics,
                     mean_doc_length=args.doc_length, alpha=args.alpha, beta=args.beta,
                     zipf_s=args.zipf, seed=args.seed)
    t0 = time.perf_counter()
    sizes = write_synthetic(args.out, spec, overwrite=args.overwrite,
                            chunk_tokens=args.chunk_tokens)
    if not args.quiet:
        print(f"wrote {args.out}: {sizes['n_docs']:,} documents, {sizes['n_tokens']:,} tokens, "
              f"{sizes['n_words']:,} words, {spec.n_topics} topics (ground truth in truth/) "
              f"in {time.perf_counter() - t0:.1f}s")
    return 0
