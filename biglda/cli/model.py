"""The model commands: ``topics``, ``infer``, ``evaluate`` and ``export``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

from biglda.cli._common import check_positive
from biglda.errors import BigLDAError


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``topics``, ``infer``, ``evaluate`` and ``export`` to ``sub``, in that order."""
    _add_topics(sub)
    _add_infer(sub)
    _add_evaluate(sub)
    _add_export(sub)


def _add_topics(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="print the top words of every topic of a model.zarr")
    p.add_argument("model", help="model.zarr path or URL")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="words per topic (clipped to the vocabulary size; default 10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_topics)


def _add_infer(sub: argparse._SubParsersAction) -> None:
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


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="held-out likelihood, coherence and diversity (reads only; --save keeps it)",
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


def _add_export(sub: argparse._SubParsersAction) -> None:
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


def _cmd_topics(args: argparse.Namespace) -> int:
    # the model stack (numba) loads when a command runs, not for --help
    from biglda.model import load

    check_positive("--top", args.top)
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
    # the corpus stack (zarr, fsspec) loads when a command runs, not for --help
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
    # the model stack (numba) loads when a command runs, not for --help
    from biglda.model import load
    from biglda.model.export import write_atomic

    check_positive("--iterations", args.iterations)
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


# A share of unknown held-out tokens above this is worth a warning: the score then
# describes a different, smaller test set.
UNKNOWN_WARN_SHARE = 0.05


def _cmd_evaluate(args: argparse.Namespace) -> int:
    # the corpus and model stacks (zarr, numba) load when a command runs, not for --help
    from biglda.corpus import Corpus
    from biglda.model import load

    check_positive("--top-n", args.top_n)
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


def _resolved(url: str) -> str:
    """Return a local path made absolute (the key of an evaluation); URLs as given."""
    return url if "://" in url else os.path.abspath(url)


def _cmd_export(args: argparse.Namespace) -> int:
    # the model stack (numba) loads when a command runs, not for --help
    from biglda.model import load
    from biglda.model.export import export_model

    check_positive("--top", args.top)
    model = load(args.model)
    written = export_model(model, args.export_format, args.out, top_n=args.top,
                           overwrite=args.overwrite, what=args.what)
    for path in written:
        print(f"wrote {path}")
    return 0
