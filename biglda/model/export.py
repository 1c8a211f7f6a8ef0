"""Exporting a model: top words (CSV, JSON), doc-topic mixtures (.npy, Parquet), pyLDAvis.

Every export is written to a temporary sibling file and moved into place when complete,
so a failed export (unwritable path, missing library, interrupted) leaves nothing at
the output path. Paths may be local or any fsspec URL.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import uuid
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from biglda.errors import BigLDAError, ConfigError, OutputExistsError
from biglda.io import split_url

log = logging.getLogger(__name__)

FORMATS = ("csv", "json", "npy", "parquet", "pyldavis")


class ExportError(BigLDAError):
    """An export that cannot be written (unwritable path, missing optional library)."""


def write_atomic(out: str, write: Callable[[IO[bytes]], None], *, overwrite: bool) -> str:
    """Call ``write(file)`` on a temporary sibling of ``out``, then move it to ``out``."""
    out = os.fspath(out)
    fs, path = split_url(out)
    if fs.exists(path) and not overwrite:
        raise OutputExistsError(f"output {out} already exists (use --overwrite to replace it)")
    parent, _, name = path.rstrip("/").rpartition("/")
    tmp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:8]}" if parent else f".{name}.tmp"
    try:
        if parent:
            fs.makedirs(parent, exist_ok=True)
        with fs.open(tmp, "wb") as f:
            write(f)
        fs.mv(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            if fs.exists(tmp):
                fs.rm(tmp)
        if isinstance(exc, OSError):
            reason = exc.strerror or type(exc).__name__
            raise ExportError(f"cannot write {out}: {reason}") from None
        raise
    log.info("wrote %s", out)
    return out


def _text(write_text: Callable[[IO[str]], None]) -> Callable[[IO[bytes]], None]:
    def write(f: IO[bytes]) -> None:
        buf = io.StringIO()
        write_text(buf)
        f.write(buf.getvalue().encode("utf-8"))
    return write


def topics_json(model: Any, top_n: int = 10) -> dict:
    """Top words of every topic as a JSON-ready dict (``top_n`` clipped to V)."""
    return {
        "n_topics": model.n_topics,
        "n_words": model.n_words,
        "alpha": [float(a) for a in model.alpha],
        "beta": model.beta,
        "topics": [{"topic": r["topic"], "share": r["share"], "size": r["size"],
                    "words": [{"word": w, "prob": p} for w, p in zip(r["words"], r["probs"],
                                                                     strict=True)]}
                   for r in model.topics(top_n)],
    }


def pyldavis_data(model: Any) -> dict:
    """The inputs of ``pyLDAvis.prepare`` for the training documents.

    ``topic_term_dists`` [K, V], ``doc_topic_dists`` [D, K], ``doc_lengths`` [D] (training
    tokens per document), ``vocab`` [V] and ``term_frequency`` [V] (training tokens per word).
    """
    counts = model.doc_topic_counts
    return {
        "topic_term_dists": model.topic_word.tolist(),
        "doc_topic_dists": model.doc_topic.tolist(),
        "doc_lengths": counts.sum(axis=1).astype(int).tolist(),
        "vocab": model.vocab.tolist(),
        "term_frequency": model.topic_word_counts.sum(axis=0).astype(int).tolist(),
    }


def _parquet_writer(model: Any) -> Callable[[IO[bytes]], None]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("parquet export needs pyarrow: pip install pyarrow") from None
    theta = model.doc_topic
    columns = {"doc_id": pa.array(model.doc_ids.tolist(), type=pa.string())}
    for k in range(model.n_topics):
        columns[f"topic_{k}"] = pa.array(theta[:, k])
    table = pa.table(columns)
    return lambda f: pq.write_table(table, f)


def export_model(model: Any, fmt: str, out: str, *, top_n: int = 10,
                 overwrite: bool = False) -> list[str]:
    """Write ``model`` in format ``fmt`` to ``out``; returns the paths written.

    Formats
    -------
    csv
        Top ``top_n`` words of every topic: columns ``topic, rank, word, prob``.
    json
        The same as a document: ``{"n_topics", "alpha", "beta", "topics": [{"topic",
        "share", "size", "words": [{"word", "prob"}]}]}``.
    npy
        The training documents' doc-topic matrix float64 [D, K] (rows in the order of
        ``model.doc_ids``).
    parquet
        The same matrix as a table with a ``doc_id`` column and ``topic_<k>`` columns
        (needs pyarrow; without it a one-line error says to install it).
    pyldavis
        A JSON of pyLDAvis's ``prepare`` inputs (``topic_term_dists``, ``doc_topic_dists``,
        ``doc_lengths``, ``vocab``, ``term_frequency``); when pyLDAvis is importable, also
        the interactive page next to it (``out`` with suffix ``.html``).

    Examples
    --------
    >>> from biglda.model import TopicModel
    >>> m = TopicModel.from_counts([[5, 0], [0, 6]], [[5, 6]], ["a", "b"])
    >>> export_model(m, "csv", "memory://doc/topics.csv", overwrite=True)
    ['memory://doc/topics.csv']
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "csv":
        def write_csv(f: IO[str]) -> None:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["topic", "rank", "word", "prob"])
            for r in model.topics(top_n):
                for rank, (word, p) in enumerate(zip(r["words"], r["probs"], strict=True)):
                    w.writerow([r["topic"], rank + 1, word, f"{p:.6g}"])
        return [write_atomic(out, _text(write_csv), overwrite=overwrite)]
    if fmt == "json":
        doc = topics_json(model, top_n)
        return [write_atomic(out, _text(lambda f: json.dump(doc, f, indent=1)),
                              overwrite=overwrite)]
    if fmt == "npy":
        theta = model.doc_topic
        return [write_atomic(out, lambda f: np.save(f, theta), overwrite=overwrite)]
    if fmt == "parquet":
        return [write_atomic(out, _parquet_writer(model), overwrite=overwrite)]
    # pyldavis
    data = pyldavis_data(model)
    written = [write_atomic(out, _text(lambda f: json.dump(data, f)), overwrite=overwrite)]
    try:
        import pyLDAvis
    except ImportError:
        log.info("pyLDAvis is not installed: wrote the prepared-data JSON only")
        return written
    html_out = os.path.splitext(out)[0] + ".html"
    prepared = pyLDAvis.prepare(**{k: np.asarray(v) if k != "vocab" else v
                                   for k, v in data.items()}, sort_topics=False)
    html = pyLDAvis.prepared_data_to_html(prepared)
    written.append(write_atomic(html_out, _text(lambda f: f.write(html)), overwrite=overwrite))
    return written
