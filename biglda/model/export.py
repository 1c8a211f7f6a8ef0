"""Exporting a model: top words, topic-word and doc-topic matrices, pyLDAvis.

Top words go to CSV or JSON; the matrices to CSV, Parquet or .npy; pyLDAvis gets its
prepared data, and a self-contained page with pyLDAvis.

Every export is written to a temporary sibling file and moved into place when complete,
so a failed export (unwritable path, missing library, interrupted) leaves nothing at
the output path. Paths may be local or any fsspec URL.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from biglda.errors import ConfigError, ExportError
from biglda.io import write_atomic as io_write_atomic

log = logging.getLogger(__name__)

FORMATS = ("csv", "json", "npy", "parquet", "pyldavis")
#: What a table export holds: top words per topic, p(word | topic) [V rows, one column per
#: topic], or the training documents' mixtures [D rows, with their ids].
TABLES = ("top-words", "topic-word", "doc-topic")


def write_atomic(out: str, write: Callable[[IO[bytes]], None], *, overwrite: bool) -> str:
    """Write ``out`` atomically (:func:`biglda.io.write_atomic`); an OSError is one line."""
    try:
        io_write_atomic(out, write, overwrite=overwrite)
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or type(exc).__name__}") from None
    log.info("wrote %s", out)
    return os.fspath(out)


def _text(write_text: Callable[[IO[str]], object]) -> Callable[[IO[bytes]], None]:
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
    """Return the inputs of ``pyLDAvis.prepare`` for the training documents.

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


def _matrix(model: Any, what: str) -> tuple[str, list[str], np.ndarray]:
    """(id column name, row ids, float64 [rows, K]) of a matrix export."""
    if what == "topic-word":
        return "word", model.vocab.tolist(), model.topic_word.T
    return "doc_id", [str(d) for d in model.doc_ids.tolist()], model.doc_topic


def _parquet_writer(model: Any, what: str) -> Callable[[IO[bytes]], None]:
    try:
        import pyarrow as pa  # optional, and slow to import: only for parquet
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("parquet export needs pyarrow: pip install 'biglda[parquet]' "
                          "(or pip install pyarrow)") from None
    id_name, ids, values = _matrix(model, what)
    columns = {id_name: pa.array(ids, type=pa.string())}
    for k in range(model.n_topics):
        columns[f"topic_{k}"] = pa.array(values[:, k])
    table = pa.table(columns)
    return lambda f: pq.write_table(table, f)


def _csv_matrix_writer(model: Any, what: str) -> Callable[[IO[str]], None]:
    id_name, ids, values = _matrix(model, what)

    def write_csv(f: IO[str]) -> None:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([id_name] + [f"topic_{k}" for k in range(model.n_topics)])
        for i, row in zip(ids, values, strict=True):
            w.writerow([i] + [f"{x:.6g}" for x in row])
    return write_csv


def _inline_pyldavis_html(prepared: Any) -> str:
    """Render pyLDAvis's view as a whole HTML page with d3, LDAvis and its CSS inlined.

    pyLDAvis links them from a CDN by default; inlined, the page opens offline.
    """
    import importlib.resources

    import pyLDAvis  # optional, slow to import: only for the pyLDAvis page

    js = importlib.resources.files("pyLDAvis") / "js"
    marks = {"d3_url": "BIGLDA-D3", "ldavis_url": "BIGLDA-LDAVIS",
             "ldavis_css_url": "BIGLDA-CSS"}
    fragment = pyLDAvis.prepared_data_to_html(prepared, template_type="simple", **marks)
    inline = {
        f'<script type="text/javascript" src="{marks["d3_url"]}"></script>':
            f"<script>{(js / 'd3.v5.min.js').read_text(encoding='utf-8')}</script>",
        f'<script type="text/javascript" src="{marks["ldavis_url"]}"></script>':
            f"<script>{(js / 'ldavis.v3.0.0.js').read_text(encoding='utf-8')}</script>",
        f'<link rel="stylesheet" type="text/css" href="{marks["ldavis_css_url"]}">':
            f"<style>{(js / 'ldavis.v1.0.0.css').read_text(encoding='utf-8')}</style>",
    }
    for tag, body in inline.items():
        if tag not in fragment:
            raise ExportError("this pyLDAvis version lays out its page differently; "
                              "use the prepared-data JSON")
        fragment = fragment.replace(tag, body)
    return ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>biglda topics "
            f"(pyLDAvis)</title></head><body>{fragment}</body></html>\n")


def export_model(model: Any, fmt: str, out: str, *, top_n: int = 10,
                 overwrite: bool = False, what: str | None = None) -> list[str]:
    """Write ``model`` in format ``fmt`` to ``out``; returns the paths written.

    Formats
    -------
    csv
        ``what="top-words"`` (default): top ``top_n`` words of every topic, columns
        ``topic, rank, word, prob``. ``what="topic-word"``: the whole topic-word matrix,
        one row per word (``word, topic_0, ..., topic_{K-1}``: p(word | topic)).
        ``what="doc-topic"``: the training documents' mixtures with their ids (``doc_id,
        topic_0, ...``).
    json
        The top words as a document: ``{"n_topics", "alpha", "beta", "topics": [{"topic",
        "share", "size", "words": [{"word", "prob"}]}]}``.
    npy
        ``what="doc-topic"`` (default): float64 [D, K], rows in the order of
        ``model.doc_ids``; ``what="topic-word"``: float64 [K, V].
    parquet
        The doc-topic (default) or topic-word matrix as a table with a ``doc_id`` / ``word``
        column and ``topic_<k>`` columns (needs pyarrow; without it a one-line error says
        what to install).
    pyldavis
        A JSON of pyLDAvis's ``prepare`` inputs (``topic_term_dists``, ``doc_topic_dists``,
        ``doc_lengths``, ``vocab``, ``term_frequency``); when pyLDAvis is importable
        (``pip install 'biglda[viz]'``), also the interactive page next to it (``out`` with
        suffix ``.html``), its JavaScript inlined so it opens offline.

    Examples
    --------
    >>> from biglda.model import TopicModel
    >>> m = TopicModel.from_counts([[5, 0], [0, 6]], [[5, 6]], ["a", "b"])
    >>> export_model(m, "csv", "memory://doc/topics.csv", overwrite=True)
    ['memory://doc/topics.csv']
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    if what is not None and what not in TABLES:
        raise ConfigError(f"unknown export table {what!r} (choose from {', '.join(TABLES)})")
    what = what or ("top-words" if fmt in ("csv", "json") else "doc-topic")
    if (fmt == "json" and what != "top-words") or (fmt in ("npy", "parquet")
                                                   and what == "top-words"):
        raise ConfigError(f"--format {fmt} does not hold {what} (csv holds all three; json "
                          "the top words; npy and parquet the matrices)")
    if fmt == "csv" and what != "top-words":
        return [write_atomic(out, _text(_csv_matrix_writer(model, what)), overwrite=overwrite)]
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
        matrix = model.doc_topic if what == "doc-topic" else model.topic_word
        return [write_atomic(out, lambda f: np.save(f, matrix), overwrite=overwrite)]
    if fmt == "parquet":
        return [write_atomic(out, _parquet_writer(model, what), overwrite=overwrite)]
    # pyldavis
    data = pyldavis_data(model)
    written = [write_atomic(out, _text(lambda f: json.dump(data, f)), overwrite=overwrite)]
    try:
        import pyLDAvis  # optional: only for the pyLDAvis page
    except ImportError:
        log.info("pyLDAvis is not installed: wrote the prepared-data JSON only")
        return written
    html_out = os.path.splitext(out)[0] + ".html"
    prepared = pyLDAvis.prepare(**{k: np.asarray(v) if k != "vocab" else v
                                   for k, v in data.items()}, sort_topics=False)
    html = _inline_pyldavis_html(prepared)
    written.append(write_atomic(html_out, _text(lambda f: f.write(html)), overwrite=overwrite))
    return written
