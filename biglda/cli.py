"""The ``biglda`` command: the only module that prints for people.

Every sub-command is a pair ``_add_<name>(subparsers)`` / ``_cmd_<name>(args)``.
User errors (:class:`biglda.errors.BigLDAError`) become one line on stderr and a
non-zero exit; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from biglda.errors import BigLDAError

log = logging.getLogger("biglda")


def _err(msg: str) -> None:
    print(f"biglda: error: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- corpus commands
# ingest, info, datasets synth  (issue: Foundation)


def _add_ingest(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="turn text into a corpus.zarr")
    p.set_defaults(func=_cmd_ingest)


def _cmd_ingest(args: argparse.Namespace) -> int:
    raise BigLDAError("ingest is not implemented yet")


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="summarize a corpus.zarr")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args: argparse.Namespace) -> int:
    raise BigLDAError("info is not implemented yet")


def _add_datasets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="make corpora: synthetic LDA corpora with ground truth")
    p.set_defaults(func=_cmd_datasets)


def _cmd_datasets(args: argparse.Namespace) -> int:
    raise BigLDAError("datasets is not implemented yet")


# --------------------------------------------------------------------------- training
# train  (issue: Distributed training)


def _staleness(text: str) -> float:
    if text.strip().lower() in ("inf", "infinity", "async"):
        return float("inf")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of clocks or 'inf', got {text!r}") from None
    return float(value)


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train an LDA model on Dask",
                       description="Train an LDA model on a corpus.zarr with an embedded "
                                   "LocalCluster (default) or a Dask scheduler (--scheduler).")
    p.add_argument("corpus", metavar="CORPUS.zarr", help="corpus made by `biglda ingest`")
    p.add_argument("--out", required=True, metavar="MODEL.zarr", help="where to write the model")
    p.add_argument("-k", "--topics", type=int, required=True, help="number of topics K")
    p.add_argument("--iterations", type=int, default=100, help="sweeps in total (default 100)")
    p.add_argument("--sampler", choices=("lightlda", "cgs"), default="lightlda",
                   help="lightlda: Metropolis-Hastings, O(1)/token (default); cgs: exact Gibbs")
    p.add_argument("--alpha", type=float, default=0.1, help="doc-topic prior (default 0.1)")
    p.add_argument("--beta", type=float, default=0.01, help="topic-word prior (default 0.01)")
    p.add_argument("--workers", type=int, default=None,
                   help="workers of the embedded cluster (default: one per core)")
    p.add_argument("--threads-per-worker", type=int, default=1,
                   help="sampling threads per worker (default 1)")
    p.add_argument("--staleness", type=_staleness, default=0.0, metavar="S",
                   help="SSP staleness in clocks: 0 = BSP (default), N, or inf (asynchronous)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="N",
                   help="write z every N iterations next to --out (0 = never; default 10)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="Dask scheduler address (tcp://host:port); default: embedded cluster")
    p.add_argument("--max-seconds", type=float, default=None, help="stop after this wall time")
    p.add_argument("--tol", type=float, default=None,
                   help="stop when the relative log-likelihood change is below this")
    p.add_argument("--shards", type=int, default=None,
                   help="document shards (default: one per worker thread)")
    p.add_argument("--metrics", default=None, metavar="metrics.jsonl",
                   help="write every metrics record as a JSON line here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_cmd_train)


class _TrainProgress:
    """Receives metrics records: the progress bar, the prints, and metrics.jsonl."""

    def __init__(self, total: int, quiet: bool, metrics: str | None) -> None:
        self.total, self.quiet, self.metrics_path = total, quiet, metrics
        self._metrics = None
        self._progress = None
        self._task = None

    def __call__(self, rec: dict) -> None:
        import json

        if self.metrics_path:
            if self._metrics is None:
                self._metrics = open(self.metrics_path, "w")  # closed in close()
            self._metrics.write(json.dumps(rec, default=str) + "\n")
            self._metrics.flush()
        if self.quiet:
            return
        kind = rec.get("type")
        if kind == "start":
            print(f"dashboard: {rec.get('dashboard')}", flush=True)
            for url in rec.get("pages") or []:
                print(f"biglda page: {url}", flush=True)
            self._start_bar()
        elif kind == "iteration" and self._progress is not None:
            self._progress.update(
                self._task, completed=rec["iteration"],
                ll=f"{rec['ll_per_token']:.4f}", tps=_si(rec["tokens_per_s"]),
                eta=f"{rec['eta_s']:.0f}s")

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("iteration"), MofNCompleteColumn(), BarColumn(),
            TextColumn("LL/token {task.fields[ll]}"), TextColumn("{task.fields[tps]} tokens/s"),
            TextColumn("ETA {task.fields[eta]}"), console=Console(stderr=True), transient=False)
        self._task = self._progress.add_task("train", total=self.total, ll="-", tps="-", eta="-")
        self._progress.start()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._metrics is not None:
            self._metrics.close()


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _cmd_train(args: argparse.Namespace) -> int:
    from biglda.train.driver import train

    progress = _TrainProgress(args.iterations, args.quiet, args.metrics)
    try:
        out = train(args.corpus, args.out, n_topics=args.topics, iterations=args.iterations,
                    sampler=args.sampler, alpha=args.alpha, beta=args.beta,
                    workers=args.workers, threads_per_worker=args.threads_per_worker,
                    staleness=args.staleness, seed=args.seed,
                    checkpoint_every=args.checkpoint_every, resume=args.resume,
                    scheduler=args.scheduler, max_seconds=args.max_seconds, tol=args.tol,
                    n_shards=args.shards, overwrite=args.overwrite, on_record=progress)
    finally:
        progress.close()
    if not args.quiet:
        print(f"model written to {out}")
    return 0


# --------------------------------------------------------------------------- model commands
# topics, infer, evaluate, export  (issue: TopicModel)


def _add_model_commands(sub: argparse._SubParsersAction) -> None:
    pass


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
                   help="HTML file to write (default: report.html)")
    p.add_argument("--top-n", type=int, default=15, metavar="N",
                   help="words shown per topic (default: 15)")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    import os
    from importlib.metadata import entry_points

    if args.top_n < 1:
        raise BigLDAError(f"--top-n must be >= 1, got {args.top_n}")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise BigLDAError(f"{args.out}: directory {out_dir} does not exist")
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


# --------------------------------------------------------------------------- entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="biglda", description="Distributed LDA topic modeling on Dask."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_ingest(sub)
    _add_info(sub)
    _add_datasets(sub)
    _add_train(sub)
    _add_model_commands(sub)
    _add_report(sub)
    return parser


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else
                                         logging.INFO if verbose == 1 else logging.WARNING)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    # distributed is chatty at INFO; keep it at WARNING unless -vv.
    if verbose < 2:
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
