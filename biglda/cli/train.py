"""``biglda train``: flags made from the training settings' declaration, progress, stop lines."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from biglda.errors import ConfigError, SettingError
from biglda.trainer.config import TrainConfig, parse_pairs, setting_of, settings


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``train`` and ``layout`` to ``sub``."""
    _add_train(sub)
    _add_layout(sub)


def _add_layout(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("layout", help="the embedded cluster's processes x threads: show or "
                                      "measure",
                       description="Say which layout (worker processes x sampling threads) "
                                   "`biglda train` starts its embedded cluster with, and why. "
                                   "--measure trains a short run on a synthetic corpus under "
                                   "each candidate layout (about a minute) and keeps the "
                                   "fastest for this machine.")
    p.add_argument("--measure", action="store_true", help="measure the candidates and keep "
                                                          "the fastest")
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="runs per layout, round by round (default 1)")
    p.set_defaults(func=_cmd_layout)


def _cmd_layout(args: argparse.Namespace) -> int:
    from biglda.cli._common import check_positive
    from biglda.trainer.layout import (
        MEASURE_SAMPLERS,
        choose_layout,
        layout_file,
        measure_layouts,
    )

    check_positive("--repeats", args.repeats)
    if args.measure:
        print("measuring: a short training per layout on a synthetic corpus ...", flush=True)
        res = measure_layouts(repeats=args.repeats)
        for sampler, got in res["samplers"].items():
            for name, rate in got["tokens_per_s"].items():
                print(f"  {sampler}, K={got['topics']}, {name} (processes x threads): "
                      f"{rate / 1e6:.2f} M tokens/s, to LL/token {got['target_ll']:.3f} in "
                      f"{got['seconds_to_ll'][name]:.2f} s", flush=True)
        print(f"kept in {layout_file()}")
    for sampler in MEASURE_SAMPLERS:
        choice = choose_layout(None, None, sampler=sampler)
        assert choice is not None, "a CPU layout is always chosen"
        print(f"layout with {sampler}: {choice.label()} ({choice.reason})")
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    """Add the flags of ``biglda train``: one per setting of :class:`TrainConfig`, from it.

    Every value is taken as text and converted by the setting itself (:func:`_train_settings`),
    so a bad one is the same one-line error, with the flag's name, whatever its kind.
    """
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
    """Return the settings given on the command line, converted and checked by their declaration."""
    given = {}
    for name, s in settings().items():
        value = getattr(args, name, None)
        if value is None:
            continue
        given[name] = parse_pairs(name, value) if s.kind == "pairs" else value
    return given


def _flag_message(exc: SettingError) -> str:
    """Word a :class:`SettingError` as the CLI says it: the flag in place of the setting's name."""
    sep = "" if exc.problem.startswith(":") else " "
    return f"{setting_of(exc.name).flag}{sep}{exc.problem}"


class _TrainProgress:
    """Receives metrics records: the progress bar, the prints, and metrics.jsonl."""

    def __init__(self, total: int, quiet: bool, metrics: str | None, append: bool = False,
                 tty: bool | None = None, every_s: float = 5.0) -> None:
        # the metrics records load with the trainer, when a run starts, not for --help
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
            layout = rec.get("layout")
            if layout:
                from biglda.trainer.layout import LayoutChoice

                print(f"layout: {LayoutChoice(**layout).label()} ({layout['reason']})",
                      flush=True)
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
                eta=self._eta(rec))

    def _line(self, rec: dict) -> None:
        """One progress line on stderr, at most every ``every_s`` s (and the last one)."""
        now = time.monotonic()
        if now - self._last_line < self.every_s and rec["iteration"] < self.total:
            return
        self._last_line = now
        print(f"iteration {rec['iteration']}/{self.total}  LL/token {rec['ll_per_token']:.4f}  "
              f"{_si(rec['tokens_per_s'])} tokens/s  ETA {self._eta(rec)}",
              file=sys.stderr, flush=True)

    def _eta(self, rec: dict) -> str:
        """Return the record's ETA: "-" at the run's first clock (it compiles kernels)."""
        if len(self.iterations) <= 1 and rec["iteration"] < self.total:
            return "-"
        return f"{rec['eta_s']:.0f}s"

    def _start_bar(self) -> None:
        # rich is needed only when a terminal shows a bar
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
    # Dask and the trainer load when a run starts, not for --help; distributed is imported
    # first because its import sets the "distributed" loggers to INFO, reset just below
    import distributed  # noqa: F401

    from biglda.model.training import train_to_store

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
        raise ConfigError(_flag_message(exc)) from None
    if not args.quiet:
        for line in progress.summary():
            print(line)
        print(f"model written to {out}")
        for line in _stop_lines(args, out, cfg):
            print(line)
    return 0


def _stop_lines(args: argparse.Namespace, out: str, cfg: TrainConfig) -> list[str]:
    """Why training stopped, and what the leftover checkpoint is for."""
    # fsspec and the model stack load when a command runs, not for --help
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
