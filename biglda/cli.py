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


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train an LDA model on Dask")
    p.set_defaults(func=_cmd_train)


def _cmd_train(args: argparse.Namespace) -> int:
    raise BigLDAError("train is not implemented yet")


# --------------------------------------------------------------------------- model commands
# topics, infer, evaluate, export  (issue: TopicModel)


def _add_model_commands(sub: argparse._SubParsersAction) -> None:
    pass


# --------------------------------------------------------------------------- monitoring
# report  (issue: Watching training)


def _add_report(sub: argparse._SubParsersAction) -> None:
    pass


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
