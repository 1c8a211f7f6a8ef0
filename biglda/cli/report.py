"""``report`` (one offline HTML file of a model) and ``pipeline`` (a declared run of stages)."""

from __future__ import annotations

import argparse
import json

from biglda.cli._common import aligned
from biglda.errors import BigLDAError
from biglda.io import check_writable


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``report`` and ``pipeline`` to ``sub``, in that order."""
    _add_report(sub)
    _add_pipeline(sub)


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
    # the plugin lookup (importlib.metadata) and fsspec load for this command, not for --help
    from importlib.metadata import entry_points

    from biglda.io import check_output

    if args.top_n < 1:
        raise BigLDAError(f"--top-n must be >= 1, got {args.top_n}")
    check_output(args.out, overwrite=args.overwrite)
    check_writable(args.out)
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
    # the pipeline package loads the corpus stack (zarr, fsspec): not for --help
    from biglda import pipeline as pl

    if args.pipeline_command == "list":
        found = pl.list_pipelines(args.folder)
        if not found:
            raise BigLDAError(f"no *.toml pipelines in {args.folder}")
        for line in aligned([(path, desc) for path, desc in found]):
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
