"""The ``biglda`` command: the only module that prints for people.

Every sub-command is a pair ``_add_<name>(subparsers)`` / ``_cmd_<name>(args)``.
User errors (:class:`biglda.errors.BigLDAError`) become one line on stderr and a
non-zero exit; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from biglda.errors import BigLDAError

log = logging.getLogger("biglda")


def _err(msg: str) -> None:
    print(f"biglda: error: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- corpus commands
# ingest, info, datasets synth  (issue: Foundation)


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
    p.add_argument("--id-field", default=None, help="JSONL: field of the id (default id if present)")
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


def _vocab_source(url: str) -> tuple[list[str], dict]:
    """The vocabulary and tokenizer settings of a corpus.zarr or a model.zarr."""
    from biglda.corpus.store import Corpus, is_corpus

    if is_corpus(url):
        c = Corpus.open(url)
        return [str(w) for w in c.vocab.tolist()], dict(c.tokenizer or {})
    from biglda.model import load

    try:
        m = load(url)
    except BigLDAError:
        raise BigLDAError(f"--vocab-from {url}: neither a biglda corpus nor a model") from None
    return [str(w) for w in m.vocab.tolist()], dict(m.tokenizer_settings or {})


def _cmd_ingest(args: argparse.Namespace) -> int:
    from biglda.corpus.ingest import ingest
    from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN

    vocabulary = None
    lowercase, pattern = args.lowercase, args.token_pattern or DEFAULT_TOKEN_PATTERN
    pretokenized, ngrams = args.pretokenized, args.ngrams
    if args.vocab_from:
        # The source's words and tokenizer: the same text must give the same words.
        vocabulary, tok = _vocab_source(args.vocab_from)
        lowercase = bool(tok.get("lowercase", lowercase))
        pattern = tok.get("token_pattern") or pattern
        pretokenized = bool(tok.get("pretokenized", pretokenized))
        ngrams = int(tok.get("ngrams", 1))
    stats = ingest(
        args.inputs, args.out, format=args.format, lowercase=lowercase,
        token_pattern=pattern, pretokenized=pretokenized, stopwords=args.stopwords,
        min_df=args.min_df, max_df=args.max_df, max_vocab=args.max_vocab,
        min_doc_length=args.min_doc_length, text_field=args.text_field,
        id_field=args.id_field, overwrite=args.overwrite, chunk_tokens=args.chunk_tokens,
        jobs=args.jobs, vocabulary=vocabulary, ngrams=ngrams,
    )
    if not args.quiet:
        seconds = sum(stats.seconds.values())
        print(f"wrote {stats.out}: {stats.n_docs:,} documents, {stats.n_tokens:,} tokens, "
              f"{stats.n_words:,} words ({stats.input_tokens:,} input tokens in {seconds:.1f}s, "
              f"{stats.words_per_s / 1e6:.2f} M/s; {stats.dropped_docs:,} documents dropped)")
        if vocabulary is not None:
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
    from biglda.corpus.split import split_corpus

    n_train, n_test = split_corpus(args.corpus, args.train, args.test, args.test_fraction,
                                   args.seed, overwrite=args.overwrite)
    if not args.quiet:
        print(f"wrote {args.train} ({n_train:,} documents) and {args.test} ({n_test:,} "
              f"documents; test fraction {args.test_fraction}, seed {args.seed})")
    return 0


def _aligned(rows: list[tuple[str, ...]], right: Sequence[int] = ()) -> list[str]:
    """Rows of cells as lines of columns padded to a common width."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in rows]


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="summarize a corpus.zarr")
    p.add_argument("corpus", metavar="CORPUS.zarr", help="corpus store (any URL)")
    p.add_argument("--top", type=int, default=20, metavar="N",
                   help="most frequent words to list (default 20)")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args: argparse.Namespace) -> int:
    import numpy as np

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
        summary.append(("source", f"{', '.join(source['inputs'])} ({source.get('input_docs', '?'):,}"
                                  f" docs, {source.get('input_tokens', '?'):,} tokens read)"))
    if "synthetic" in c.attrs:
        s = c.attrs["synthetic"]
        summary.append(("synthetic", f"K={s['n_topics']}, alpha={s['alpha']}, beta={s['beta']}, "
                                     f"seed={s['seed']}; ground truth in truth/"))
    for line in _aligned([(k + ":", v) for k, v in summary]):
        print(line)
    top = min(max(args.top, 0), c.n_words)
    if top:
        share = c.word_count[:top] / max(c.n_tokens, 1)
        rows = [("rank", "word", "count", "share", "docs")]
        rows += [(str(i), str(c.vocab[i]), f"{c.word_count[i]:,}", f"{share[i]:.2%}",
                  f"{c.doc_freq[i]:,}") for i in range(top)]
        print(f"\nmost frequent words (ids 0..{top - 1}):")
        for line in _aligned(rows, right=(0, 2, 3, 4)):
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
    import time

    from biglda.corpus.synth import SynthSpec, write_synthetic
    from biglda.errors import ConfigError, OutputExistsError
    from biglda.io import exists

    for name in ("docs", "vocab", "topics"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.doc_length <= 0 or args.alpha <= 0 or args.beta <= 0:
        raise ConfigError("--doc-length, --alpha and --beta must be positive")
    if exists(args.out) and not args.overwrite:
        raise OutputExistsError(f"output {args.out} already exists (use --overwrite to replace it)")
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


# --------------------------------------------------------------------------- training


def _add_train(sub: argparse._SubParsersAction) -> None:
    """The flags of ``biglda train``: one per setting of :class:`TrainConfig`, from it.

    Every value is taken as text and converted by the setting itself (:func:`_train_settings`),
    so a bad one is the same one-line error, with the flag's name, whatever its kind.
    """
    from biglda.trainer.config import settings

    p = sub.add_parser("train", help="train an LDA model on Dask",
                       description="Train an LDA model on a corpus.zarr with an embedded "
                                   "LocalCluster (default) or a Dask scheduler (--scheduler). "
                                   "The checkpoint next to --out (MODEL.checkpoint.zarr) is "
                                   "kept: the same command with --resume continues a stopped "
                                   "run, and with --resume --overwrite and a larger "
                                   "--iterations it continues a finished model.")
    p.add_argument("corpus", metavar="CORPUS.zarr", help="corpus made by `biglda ingest`")
    p.add_argument("--out", required=True, metavar="MODEL.zarr", help="where to write the model")
    p.add_argument("--metrics", default=None, metavar="metrics.jsonl",
                   help="write every metrics record as a JSON line here")
    for name, s in settings().items():
        flags = [s.short, s.flag] if s.short else [s.flag]
        if s.kind == "switch":
            p.add_argument(*flags, dest=name, action="store_const", const="true", default=None,
                           help=s.help)
        else:
            choices = s.choice_list() if not callable(s.choices) else ()
            metavar = s.metavar or ("{" + ",".join(choices) + "}" if choices else None)
            p.add_argument(*flags, dest=name, default=None, metavar=metavar, help=s.help,
                           action="append" if s.kind == "pairs" else "store")
    p.set_defaults(func=_cmd_train)


def _train_settings(args: argparse.Namespace) -> dict:
    """The settings given on the command line, converted and checked by their declaration."""
    from biglda.trainer.config import parse_pairs, settings

    given = {}
    for name, s in settings().items():
        value = getattr(args, name, None)
        if value is None:
            continue
        given[name] = parse_pairs(name, value) if s.kind == "pairs" else value
    return given


def _flag_message(exc: Any) -> str:
    """A :class:`SettingError` as the CLI says it: the flag in place of the setting's name."""
    from biglda.trainer.config import setting_of

    sep = "" if exc.problem.startswith(":") else " "
    return f"{setting_of(exc.name).flag}{sep}{exc.problem}"


class _TrainProgress:
    """Receives metrics records: the progress bar, the prints, and metrics.jsonl."""

    def __init__(self, total: int, quiet: bool, metrics: str | None, append: bool = False,
                 tty: bool | None = None, every_s: float = 5.0) -> None:
        from biglda.trainer.metrics import JsonlSink

        self.total, self.quiet = total, quiet
        self.iterations: list[dict] = []
        self.rebalances: list[dict] = []
        # a resumed run adds to the metrics of the run it continues
        self._metrics = JsonlSink(metrics, append=append)
        self._progress = None
        self._task = None
        # outside a terminal (nohup, a batch job's log, CI) a bar is invisible until the end:
        # a plain line every ``every_s`` seconds instead
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.every_s = every_s
        self._last_line = 0.0

    def __call__(self, rec: dict) -> None:
        self._metrics(rec)
        kind = rec.get("type")
        if kind == "iteration":
            self.iterations.append(rec)
        elif kind == "rebalance":
            self.rebalances.append(rec)
        if self.quiet:
            return
        if kind == "start":
            print(f"dashboard: {rec.get('dashboard')}", flush=True)
            choice = rec.get("sampler_choice")
            if choice:
                print(f"sampler auto: {choice['sampler']} ({choice['reason']})", flush=True)
            for url in rec.get("pages") or []:
                print(f"biglda page: {url}", flush=True)
            backends = rec.get("backends") or {}
            if backends:
                counts = {b: sum(v == b for v in backends.values())
                          for b in sorted(set(backends.values()))}
                requested = (rec.get("config") or {}).get("backend", "cpu")
                print(f"backend {requested}: " + ", ".join(
                    f"{b} on {n} worker{'s' if n != 1 else ''}" for b, n in counts.items())
                    + ("; shards balanced by measured throughput" if rec.get("balance")
                       else ""), flush=True)
        elif kind == "iteration" and not self.tty:
            self._line(rec)
        elif kind == "iteration":
            if self._progress is None:
                self._start_bar()
            self._progress.update(
                self._task, completed=rec["iteration"],
                ll=f"{rec['ll_per_token']:.4f}", tps=_si(rec["tokens_per_s"]),
                eta=f"{rec['eta_s']:.0f}s")

    def _line(self, rec: dict) -> None:
        """One progress line on stderr, at most every ``every_s`` s (and the last one)."""
        import time

        now = time.monotonic()
        if now - self._last_line < self.every_s and rec["iteration"] < self.total:
            return
        self._last_line = now
        print(f"iteration {rec['iteration']}/{self.total}  LL/token {rec['ll_per_token']:.4f}  "
              f"{_si(rec['tokens_per_s'])} tokens/s  ETA {rec['eta_s']:.0f}s",
              file=sys.stderr, flush=True)

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("iteration"), MofNCompleteColumn(), BarColumn(),
            TextColumn("LL/token {task.fields[ll]}"), TextColumn("{task.fields[tps]} tokens/s"),
            TextColumn("ETA {task.fields[eta]}"), console=Console(stderr=True), transient=False)
        self._task = self._progress.add_task("train", total=self.total, ll="-", tps="-", eta="-")
        self._progress.start()

    def summary(self) -> list[str]:
        """Lines for the end of a run: clock spread, tokens per worker, rebalances."""
        if not self.iterations:
            return []
        spreads = [r["clock_spread_s"] for r in self.iterations if "clock_spread_s" in r]
        last = self.iterations[-1]
        lines = []
        if spreads:
            lines.append(f"clock spread (slowest minus fastest worker's busy time per "
                         f"iteration): mean {sum(spreads) / len(spreads):.3f} s, last "
                         f"{spreads[-1]:.3f} s")
        tokens = last.get("tokens_per_worker") or {}
        backends = last.get("backends") or {}
        if tokens:
            lines.append("tokens per worker: " + ", ".join(
                f"{w} ({backends.get(w, '?')}) {n:,}" for w, n in sorted(tokens.items())))
        for r in self.rebalances:
            lines.append(f"rebalanced at iteration {r['clock']} ({r.get('reason', 'straggler')}): "
                         + ", ".join(f"{w} {len(r['shards_before'].get(w, []))}->"
                                     f"{len(r['shards_after'].get(w, []))} shards"
                                     for w in sorted(r["shards_before"])))
        return lines

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._metrics.close()


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _cmd_train(args: argparse.Namespace) -> int:
    import distributed  # noqa: F401 - its import sets the "distributed" loggers to INFO

    from biglda.errors import SettingError
    from biglda.model.training import train_to_store
    from biglda.trainer.config import TrainConfig

    if args.verbose < 2:  # keep the scheduler of the embedded cluster as quiet as asked
        logging.getLogger("distributed").setLevel(
            max(logging.getLogger().getEffectiveLevel(), logging.WARNING))
    try:
        cfg = TrainConfig.from_settings(**_train_settings(args))
        progress = _TrainProgress(cfg.iterations, args.quiet, args.metrics, append=cfg.resume)
        try:
            out = train_to_store(args.corpus, args.out, cfg, on_record=progress)
        finally:
            progress.close()
    except SettingError as exc:
        raise _CliError(_flag_message(exc), exc.exit_code) from None
    if not args.quiet:
        for line in progress.summary():
            print(line)
        print(f"model written to {out}")
        for line in _stop_lines(args, out, cfg):
            print(line)
    return 0


def _stop_lines(args: argparse.Namespace, out: str, cfg: Any) -> list[str]:
    """Why training stopped, and what the leftover checkpoint is for."""
    from biglda.io import exists
    from biglda.model.store import open_model_group
    from biglda.trainer import checkpoint as ckpt

    attrs = open_model_group(out).attrs
    history = attrs.get("history") or []
    last = int(history[-1]["iteration"]) if history else 0
    reason = attrs.get("stop_reason", "iterations")
    if reason == "tol":
        lines = [f"stopped: --tol {cfg.tol:g} reached at iteration {last} (LL/token changed "
                 f"by less than that fraction)"]
    elif reason == "max_seconds":
        lines = [f"stopped: --max-seconds {cfg.max_seconds:g} reached at iteration {last}"]
    else:
        lines = [f"stopped: all {last} iterations done"]
    url = ckpt.checkpoint_url(out) if cfg.checkpoint_every else None
    if url is not None and exists(url):
        lines.append(f"checkpoint {url} kept: to continue this model, run the same command "
                     f"with --resume --overwrite --iterations N (N > {last}); delete it when "
                     f"no more iterations are wanted")
    return lines


class _CliError(BigLDAError):
    """A library error reworded for the command line (flags instead of setting names)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- model commands
# topics, infer, evaluate, export  (issue: TopicModel)


def _add_model_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="print the top words of every topic of a model.zarr")
    p.add_argument("model", help="model.zarr path or URL")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="words per topic (clipped to the vocabulary size; default 10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_topics)

    p = sub.add_parser("infer", help="topic mixtures of new documents (fold-in Gibbs)")
    p.add_argument("model", help="model.zarr path or URL")
    p.add_argument("input", help="documents: a text file (one per line), a TSV (id<TAB>text), "
                   "JSONL, or a directory of .txt files, as ingest reads them")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="output: .npy (float64 [D, K]) or .csv (doc_id, topic_0, ...)")
    p.add_argument("--format", default="auto", dest="input_format",
                   help="input format: auto, text, tsv, jsonl, dir (default auto)")
    p.add_argument("--iterations", type=int, default=50, help="fold-in sweeps (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="threads (default 1)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_cmd_infer)

    p = sub.add_parser(
        "evaluate", help="held-out likelihood, coherence and diversity (reads only; --save keeps it)",
        description="Score a model on held-out documents: document-completion likelihood, "
                    "NPMI/UMass coherence, topic diversity. Only reads the model unless --save "
                    "is given. Make the test set with the training vocabulary: `biglda split` "
                    "before training, or `biglda ingest --vocab-from MODEL` for new text.")
    p.add_argument("model", help="model.zarr path or URL")
    p.add_argument("--test", required=True, metavar="CORPUS",
                   help="held-out corpus.zarr (words mapped to the model's by spelling; words "
                        "the model does not know are dropped, and a warning gives their share)")
    p.add_argument("--save", action="store_true",
                   help="also store the result in the model (a history keyed by the test "
                        "corpus, shown by `biglda report`); the only way evaluate writes")
    p.add_argument("--coherence-corpus", metavar="CORPUS",
                   help="reference corpus for NPMI/UMass coherence (default: --test)")
    p.add_argument("--top-n", type=int, default=10, help="top words per topic for coherence")
    p.add_argument("--window", type=int, default=None,
                   help="sliding-window size for coherence (default: whole documents)")
    p.add_argument("--burn-in", type=int, default=20, help="document-completion burn-in sweeps")
    p.add_argument("--samples", type=int, default=30, help="document-completion averaged sweeps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="threads (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "export", help="export top words, the topic-word or doc-topic matrix, or pyLDAvis",
        description="csv: --what top-words (default), topic-word (one row per word, a column "
                    "per topic: p(word | topic)) or doc-topic (one row per training document "
                    "with its id). parquet and npy: doc-topic (default) or topic-word; parquet "
                    "needs pyarrow (pip install 'biglda[parquet]'). json: top words. pyldavis: "
                    "pyLDAvis's prepared data, plus a self-contained HTML page when pyLDAvis is "
                    "installed (pip install 'biglda[viz]').")
    p.add_argument("model", help="model.zarr path or URL")
    p.add_argument("--format", required=True, dest="export_format",
                   choices=["csv", "json", "npy", "parquet", "pyldavis"])
    p.add_argument("--what", default=None, choices=["top-words", "topic-word", "doc-topic"],
                   help="which table (default: top-words for csv/json, doc-topic for "
                        "npy/parquet)")
    p.add_argument("--out", required=True, metavar="PATH")
    p.add_argument("--top", type=int, default=10, metavar="N", help="words per topic (csv, json)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_cmd_export)


def _check_writable_dir(out: str) -> None:
    """Create the folder of a local output ``out`` and check that it can be written, before
    any work starts (URLs are left to the writer)."""
    if "://" in out:
        return
    folder = os.path.dirname(os.path.abspath(out))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise BigLDAError(f"cannot write {out}: {exc.strerror or type(exc).__name__}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BigLDAError(f"cannot write {out}: Permission denied")


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise BigLDAError(f"{name} must be at least 1, got {value}")


def _cmd_topics(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from biglda.model import load

    _check_positive("--top", args.top)
    model = load(args.model)
    rows = model.topics(args.top)
    for r in rows:
        r["alpha"] = float(model.alpha[r["topic"]])
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    alpha = model.alpha
    symmetric = bool(np.allclose(alpha, alpha[0]))
    print(f"{model.n_topics} topics, {model.n_words} words, {model.n_docs} documents, "
          f"{model.n_tokens} tokens; alpha "
          + (f"{alpha[0]:.4g} (symmetric)" if symmetric else
             f"asymmetric (learned: min {alpha.min():.4g}, max {alpha.max():.4g}, "
             f"sum {alpha.sum():.4g})") + f", beta {model.beta:.4g}")
    if symmetric:
        for r in rows:
            print(f"{r['topic']:>4} {100 * r['share']:6.2f}%  {' '.join(r['words'])}")
        return 0
    print("topic   share   alpha  top words")
    for r in rows:
        print(f"{r['topic']:>5} {100 * r['share']:6.2f}%  {alpha[r['topic']]:6.4f}  "
              f"{' '.join(r['words'])}")
    return 0


def _read_documents(path: str, fmt: str) -> tuple[list[str], list[str]]:
    from biglda.corpus.readers import iter_blocks, parse_block, resolve_sources

    ids: list[str] = []
    texts: list[str] = []
    for source in resolve_sources([path], fmt):
        if source.fmt == "uci":
            raise BigLDAError(f"{path}: infer reads raw text (text, tsv, jsonl, dir), not UCI")
        for block in iter_blocks(source):
            block_ids, block_texts = parse_block(block)
            ids += block_ids
            texts += block_texts
    return ids, texts


def _cmd_infer(args: argparse.Namespace) -> int:
    import numpy as np

    from biglda.model import load
    from biglda.model.export import write_atomic

    _check_positive("--iterations", args.iterations)
    suffix = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
    if suffix not in ("npy", "csv"):
        raise BigLDAError(f"--out must end in .npy or .csv, got {args.out}")
    model = load(args.model)
    ids, texts = _read_documents(args.input, args.input_format)
    theta = model.transform(texts, iterations=args.iterations, seed=args.seed, n_jobs=args.jobs)
    stats = model.last_transform_stats_ or {}
    if suffix == "npy":
        write_atomic(args.out, lambda f: np.save(f, theta), overwrite=args.overwrite)
    else:
        header = "doc_id," + ",".join(f"topic_{k}" for k in range(model.n_topics)) + "\n"
        lines = [header] + [
            f"{_csv_field(i)}," + ",".join(f"{x:.6g}" for x in row) + "\n"
            for i, row in zip(ids, theta, strict=True)
        ]
        data = "".join(lines).encode("utf-8")
        write_atomic(args.out, lambda f: f.write(data), overwrite=args.overwrite)
    print(f"inferred {len(ids)} documents ({stats.get('n_tokens', 0)} tokens; "
          f"{stats.get('n_unknown', 0)} unknown tokens ignored; {stats.get('n_empty', 0)} "
          f"documents with no known word got the prior) -> {args.out}")
    return 0


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _cmd_evaluate(args: argparse.Namespace) -> int:
    import json
    import math

    from biglda.corpus import Corpus
    from biglda.model import load

    _check_positive("--top-n", args.top_n)
    model = load(args.model)
    test = Corpus.open(args.test)
    held = model.heldout_loglik(test, burn_in=args.burn_in, samples=args.samples,
                                seed=args.seed, n_jobs=args.jobs)
    ref = Corpus.open(args.coherence_corpus) if args.coherence_corpus else test
    npmi = model.coherence(ref, measure="npmi", top_n=args.top_n, window=args.window)
    umass = model.coherence(ref, measure="umass", top_n=args.top_n, window=args.window)
    # Tokens an `ingest --vocab-from` already dropped count as unknown too: the share is
    # of the test text as read, not of what survived.
    dropped = int((test.attrs.get("filters") or {}).get("unknown_tokens") or 0)
    n_unknown, n_input = held.n_unknown + dropped, test.n_tokens + dropped
    unknown_share = n_unknown / max(n_input, 1)
    results = {
        "test_corpus": _resolved(args.test),
        "heldout_loglik_per_token": held.loglik_per_token,
        "perplexity": held.perplexity,
        "heldout_tokens_scored": held.n_tokens,
        "heldout_docs": held.n_docs,
        "heldout_unknown_tokens": held.n_unknown,
        "heldout_dropped_at_ingest": dropped,
        "heldout_unknown_share": unknown_share,
        "heldout_method": "document completion: even positions observed, odd scored; "
                          f"{args.burn_in} burn-in + {args.samples} averaged sweeps",
        "coherence_corpus": _resolved(args.coherence_corpus or args.test),
        "coherence_window": args.window,
        "coherence_top_n": args.top_n,
        "npmi": npmi.mean,
        "umass": umass.mean,
        "diversity": model.diversity(25),
        "npmi_per_topic": [float(v) if math.isfinite(v) else None for v in npmi.per_topic],
    }
    if unknown_share > UNKNOWN_WARN_SHARE:
        advice = ("the test text shares little vocabulary with the training corpus" if dropped
                  else "make the test set with `biglda split` or `biglda ingest --vocab-from "
                       "MODEL`")
        print(f"biglda: warning: {unknown_share:.1%} of the held-out tokens ({n_unknown:,} "
              f"of {n_input:,}{', counting those ingest --vocab-from dropped' if dropped else ''}"
              f") are words the model does not know and were not scored; {advice}",
              file=sys.stderr)
    if args.save:
        model.record_evaluation(results, key=results["test_corpus"])
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"held-out log-likelihood/token {held.loglik_per_token:.4f}  perplexity "
          f"{held.perplexity:.1f}  ({held.n_tokens} tokens scored in {held.n_docs} documents; "
          f"{n_unknown} unknown tokens dropped, {unknown_share:.1%})")
    print(f"coherence NPMI {npmi.mean:.4f}  UMass {umass.mean:.4f}  (top {args.top_n} words, "
          f"{'documents' if args.window is None else f'windows of {args.window}'})")
    print(f"topic diversity (top 25) {results['diversity']:.3f}")
    if args.save:
        print(f"saved in {args.model} (evaluations of {results['test_corpus']})")
    return 0


# A share of unknown held-out tokens above this is worth a warning: the score then
# describes a different, smaller test set.
UNKNOWN_WARN_SHARE = 0.05


def _resolved(url: str) -> str:
    """A local path made absolute (the key of an evaluation); URLs as given."""
    return url if "://" in url else os.path.abspath(url)


def _cmd_export(args: argparse.Namespace) -> int:
    from biglda.model import load
    from biglda.model.export import export_model

    _check_positive("--top", args.top)
    model = load(args.model)
    written = export_model(model, args.export_format, args.out, top_n=args.top,
                           overwrite=args.overwrite, what=args.what)
    for path in written:
        print(f"wrote {path}")
    return 0


# --------------------------------------------------------------------------- monitoring
# report  (issue: Watching training)


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of a trained model",
        description="Convergence plots, throughput per worker, topic sizes and top words, "
                    "configuration and evaluation of a model.zarr, in one HTML file that "
                    "opens offline (no server, no CDN).")
    p.add_argument("model", metavar="MODEL", help="model.zarr written by biglda train")
    p.add_argument("-o", "--out", default="report.html",
                   help="HTML file to write (default: report.html; folders are created)")
    p.add_argument("--top-n", type=int, default=15, metavar="N",
                   help="words shown per topic (default: 15)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    import os
    from importlib.metadata import entry_points

    if args.top_n < 1:
        raise BigLDAError(f"--top-n must be >= 1, got {args.top_n}")
    from biglda.errors import OutputExistsError

    if os.path.exists(args.out) and not args.overwrite:
        raise OutputExistsError(f"output {args.out} already exists (use --overwrite to "
                                "replace it)")
    _check_writable_dir(args.out)
    # The report lives in the dashboards package, which biglda never imports directly.
    found = entry_points(group="biglda.reports", name="html")
    if not found:
        raise BigLDAError("no report plugin installed (entry point biglda.reports:html from the "
                          "dashboards package); reinstall biglda with `pip install -e .`")
    write_report = next(iter(found)).load()
    path = write_report(args.model, args.out, top_n=args.top_n)
    if not args.quiet:
        print(f"report written to {path}")
    return 0


# --------------------------------------------------------------------------- pipelines


def _add_pipeline(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pipeline", help="run a declared pipeline of stages (pipelines/*.toml)",
        description="A pipeline is a sequence of stages (synth, ingest, split, train, evaluate, "
                    "report, compare) declared in one TOML file, with outputs in one run "
                    "directory. A stage whose parameters and inputs are unchanged is skipped.")
    psub = p.add_subparsers(dest="pipeline_command", metavar="ACTION", required=True)
    r = psub.add_parser("run", help="run the stages that are not up to date")
    r.add_argument("file", metavar="PIPELINE.toml")
    r.add_argument("--run-dir", default=None, metavar="DIR",
                   help="where outputs go (default: the file's run_dir, else runs/NAME)")
    r.add_argument("--force", action="store_true", help="rerun the selected stages")
    r.add_argument("--stages", default=None, metavar="A,B",
                   help="run only these stages (and what they need, if not up to date)")
    r.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE",
                   dest="overrides", help="override a parameter (a TOML value); repeatable")
    r.set_defaults(func=_cmd_pipeline)
    s = psub.add_parser("show", help="the stages, their parameters and whether they are done")
    s.add_argument("file", metavar="PIPELINE.toml")
    s.add_argument("--run-dir", default=None, metavar="DIR")
    s.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE",
                   dest="overrides")
    s.set_defaults(func=_cmd_pipeline)
    ls = psub.add_parser("list", help="the pipeline files in a folder")
    ls.add_argument("folder", nargs="?", default="pipelines")
    ls.set_defaults(func=_cmd_pipeline)


def _cmd_pipeline(args: argparse.Namespace) -> int:
    import json

    from biglda import pipeline as pl

    if args.pipeline_command == "list":
        found = pl.list_pipelines(args.folder)
        if not found:
            raise BigLDAError(f"no *.toml pipelines in {args.folder}")
        for line in _aligned([(path, desc) for path, desc in found]):
            print(line)
        return 0
    p = pl.load_pipeline(args.file, run_dir=args.run_dir, overrides=args.overrides)
    if args.pipeline_command == "show":
        print(f"pipeline {p.name}: {p.description}".rstrip(": "))
        print(f"run directory: {p.run_dir}")
        for st, ok, why in pl.plan(p):
            params = ", ".join(f"{k}={json.dumps(v)}" for k, v in st.params.items())
            print(f"  {st.name} ({st.kind}) [{'done' if ok else 'to run: ' + why}]  {params}")
        return 0

    def on_event(what: str, st: pl.Stage, info: dict) -> None:
        if args.quiet:
            return
        if what == "skip":
            print(f"[{st.name}] skipped: up to date", flush=True)
        elif what == "start":
            print(f"[{st.name}] running {st.kind} ({info['reason']})", flush=True)
        elif what == "progress":
            print(f"[{st.name}] {info['text']}", flush=True)
        elif what == "done":
            print(f"[{st.name}] done in {info['seconds']:.1f}s: {info['summary']}", flush=True)

    stages = [s.strip() for s in args.stages.split(",") if s.strip()] if args.stages else None
    results = pl.run_pipeline(p, force=args.force, stages=stages, on_event=on_event)
    if not args.quiet:
        ran = sum(r.status == "ran" for r in results)
        print(f"pipeline {p.name}: {ran} stage{'' if ran == 1 else 's'} run, "
              f"{len(results) - ran} up to date; outputs in {p.run_dir}")
    return 0


# --------------------------------------------------------------------------- entry point


def _version() -> str:
    from biglda import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="biglda", description="Distributed LDA topic modeling on Dask."
    )
    parser.add_argument("--version", action="version", version=f"biglda {_version()}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_ingest(sub)
    _add_split(sub)
    _add_info(sub)
    _add_datasets(sub)
    _add_train(sub)
    _add_model_commands(sub)
    _add_report(sub)
    _add_pipeline(sub)
    return parser


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else
                                         logging.INFO if verbose == 1 else logging.WARNING)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    # distributed is chatty at INFO; keep it at WARNING unless -vv. Its import sets its
    # loggers from dask's config, so say it there too (the environment also reaches the
    # worker processes of an embedded cluster); the setLevel covers an already-imported one.
    if verbose < 2:
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
        logging.getLogger("distributed").setLevel(max(level, logging.WARNING))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose, args.quiet)
    try:
        return int(args.func(args) or 0)
    except BigLDAError as exc:
        _err(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
