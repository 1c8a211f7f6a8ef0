"""The ``model.zarr`` format: what training writes and ``biglda.model`` reads.

Layout (a Zarr v3 group)::

    attrs   format="biglda-model", format_version, n_topics, n_words, n_docs, n_tokens,
            alpha (list of K floats), beta, sampler, tokenizer (the corpus's settings),
            config (the training settings), history (one metrics record per iteration),
            corpus (where it was trained), evaluation (filled in by `biglda evaluate`)
    n_wk    int32 [V, K]   word-topic counts (the posterior sample's counts)
    n_k     int64 [K]      topic totals; equals n_wk.sum(0)
    n_dk    int32 [D, K]   doc-topic counts of the training documents
    vocab   str   [V]      word of each id
    doc_ids str   [D]      id of each training document

The store is written with :func:`biglda.io.atomic_output`, so a failed
or interrupted save never leaves a store that opens as a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import zarr

from biglda.errors import FormatError
from biglda.io import atomic_output, exists, update_attributes

MODEL_FORMAT = "biglda-model"
MODEL_FORMAT_VERSION = 1


def save_model(
    url: str,
    *,
    n_wk: np.ndarray,
    n_dk: np.ndarray | Iterable[np.ndarray],
    vocab: np.ndarray,
    doc_ids: np.ndarray,
    alpha: np.ndarray,
    beta: float,
    attrs: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> None:
    """Write a model store atomically.

    ``n_dk`` is a [D, K] array or an iterable of [d_i, K] row blocks in document
    order (so a large training set never needs its doc-topic table in one piece).
    ``attrs`` adds or overrides attributes (sampler, config, history, tokenizer...).
    """
    n_wk = np.ascontiguousarray(n_wk, dtype=np.int32)
    n_words, n_topics = n_wk.shape
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_topics,))
    doc_ids = np.asarray(doc_ids).astype(np.dtypes.StringDType())
    n_docs = len(doc_ids)
    if len(vocab) != n_words:
        raise ValueError(f"vocab has {len(vocab)} words but n_wk has {n_words} rows")
    with atomic_output(url, overwrite=overwrite) as tmp:
        g = zarr.open_group(tmp, mode="w")
        g.create_array("n_wk", data=n_wk,
                       chunks=(min(n_words, max(1, 2**22 // n_topics)), n_topics))
        g.create_array("n_k", data=n_wk.sum(axis=0, dtype=np.int64))
        _write_strings(g, "vocab", np.asarray(vocab).astype(np.dtypes.StringDType()))
        _write_strings(g, "doc_ids", doc_ids)
        rows = max(1, min(n_docs, 2**22 // n_topics))
        dk = g.create_array("n_dk", shape=(n_docs, n_topics), dtype=np.int32,
                            chunks=(rows, n_topics), fill_value=0)
        n_tokens = 0
        if isinstance(n_dk, np.ndarray):
            dk[:] = n_dk
            n_tokens = int(n_dk.sum())
        else:
            start = 0
            for block in n_dk:
                block = np.asarray(block, dtype=np.int32)
                dk[start:start + len(block)] = block
                start += len(block)
                n_tokens += int(block.sum())
            if start != n_docs:
                raise ValueError(f"n_dk blocks cover {start} documents, expected {n_docs}")
        meta: dict[str, Any] = {
            "format": MODEL_FORMAT,
            "format_version": MODEL_FORMAT_VERSION,
            "n_topics": int(n_topics),
            "n_words": int(n_words),
            "n_docs": int(n_docs),
            "n_tokens": int(n_tokens),
            "alpha": [float(a) for a in alpha],
            "beta": float(beta),
            "history": [],
            "config": {},
            "tokenizer": {},
            "evaluation": {},
        }
        meta.update(attrs or {})
        update_attributes(g, meta)


def _write_strings(g: zarr.Group, name: str, values: np.ndarray) -> None:
    # Variable-length strings (zarr's "string" dtype), like the corpus store: numpy's
    # fixed-width "<U" arrays have no Zarr v3 spec and zarr warns on every write.
    arr = g.create_array(name, shape=(len(values),), dtype=str,
                         chunks=(max(1, min(len(values), 2**20)),))
    if len(values):
        arr[:] = values


def open_model_group(url: str) -> zarr.Group:
    """Open a model store read-only, checking that it is a biglda model of this version."""
    if not exists(url):
        raise FormatError(f"{url}: no such model")
    try:
        g = zarr.open_group(url, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        raise FormatError(f"{url}: not a biglda model ({type(exc).__name__})") from None
    fmt = g.attrs.get("format")
    if fmt != MODEL_FORMAT:
        raise FormatError(f"{url}: not a biglda model (format attribute is {fmt!r})")
    version = g.attrs.get("format_version")
    if version != MODEL_FORMAT_VERSION:
        raise FormatError(
            f"{url}: biglda model format version {version}, this biglda reads version "
            f"{MODEL_FORMAT_VERSION}"
        )
    for name in ("n_wk", "n_k", "n_dk", "vocab", "doc_ids"):
        if name not in g:
            raise FormatError(f"{url}: biglda model is missing the array {name!r}")
    return g
