"""A fixed vocabulary for ingest: the words and tokenizer settings of a model or a corpus.

A held-out set must be tokenized like the training text and keep only the training words;
``biglda ingest --vocab-from`` and a pipeline's ``ingest`` stage (``vocab_from``) read both
from a ``model.zarr`` or a ``corpus.zarr`` here (the model layer knows both formats).
"""

from __future__ import annotations

from typing import Any

from biglda.corpus.store import Corpus, is_corpus
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN
from biglda.errors import BigLDAError
from biglda.model.topic_model import load


def vocabulary_of(url: str, what: str = "--vocab-from") -> tuple[list[str], dict]:
    """Return the vocabulary and tokenizer settings of a corpus.zarr or a model.zarr.

    ``what`` names the setting in the one-line error for a store that is neither.
    """
    if is_corpus(url):
        c = Corpus.open(url)
        return [str(w) for w in c.vocab.tolist()], dict(c.tokenizer or {})
    try:
        m = load(url)
    except BigLDAError:
        raise BigLDAError(f"{what} {url}: neither a biglda corpus nor a model") from None
    return [str(w) for w in m.vocab.tolist()], dict(m.tokenizer_settings or {})


def ingest_settings_from(url: str, what: str = "--vocab-from", **kw: Any) -> dict[str, Any]:
    """Return ``kw`` with the vocabulary and tokenizer settings of the store at ``url``.

    ``kw`` are keyword arguments of :func:`~biglda.corpus.ingest.ingest`; the same text
    must give the same words.
    """
    vocabulary, tok = vocabulary_of(url, what)
    return {**kw, "vocabulary": vocabulary,
            "lowercase": bool(tok.get("lowercase", kw.get("lowercase", True))),
            "token_pattern": (tok.get("token_pattern") or kw.get("token_pattern")
                              or DEFAULT_TOKEN_PATTERN),
            "pretokenized": bool(tok.get("pretokenized", kw.get("pretokenized", False))),
            "ngrams": int(tok.get("ngrams", 1))}
