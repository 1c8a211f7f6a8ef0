"""The ``biglda`` command: the only package that prints for people.

A module per command family — :mod:`~biglda.cli.corpus` (ingest, split, info, datasets),
:mod:`~biglda.cli.train`, :mod:`~biglda.cli.model` (topics, infer, evaluate, export) and
:mod:`~biglda.cli.report` (report, pipeline) — each adding its sub-commands with
``add_commands(subparsers)``; every sub-command is a pair ``_add_<name>(subparsers)`` /
``_cmd_<name>(args)``. User errors (:class:`biglda.errors.BigLDAError`) become one line on
stderr and a non-zero exit; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from biglda import __version__
from biglda.cli import corpus, model, report, train
from biglda.cli._common import err
from biglda.errors import BigLDAError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of ``biglda`` and all its sub-commands."""
    parser = argparse.ArgumentParser(
        prog="biglda", description="Distributed LDA topic modeling on Dask."
    )
    parser.add_argument("--version", action="version", version=f"biglda {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for family in (corpus, train, model, report):  # the order of `biglda --help`
        family.add_commands(sub)
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
    """Run ``biglda`` with ``argv`` (default: the process's); return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose, args.quiet)
    try:
        return int(args.func(args) or 0)
    except BigLDAError as exc:
        err(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return exc.exit_code
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    except BrokenPipeError:
        return 1
