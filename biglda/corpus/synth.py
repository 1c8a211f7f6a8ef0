"""Synthetic corpora drawn from the LDA generative process, with their ground truth.

Topics are Zipf-like: topic k is a Dirichlet draw whose base measure gives the
word of rank r (in a random per-topic order) weight proportional to 1/(r+1)^s, so
each topic has a few frequent words and a long tail, as real topics do. Documents
draw theta ~ Dir(alpha), a Poisson length, and then the LDA generative process.

Generation is batched and keyed by (seed, batch): the same seed and batch size give
the same corpus, and memory is bounded by one batch whatever the corpus size.
:func:`write_synthetic` stores a corpus with its truth (``truth/`` inside the
corpus group); :func:`load_truth` reads the truth back in the corpus's word ids.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import zarr

from biglda.corpus.store import Corpus
from biglda.corpus.writer import DOC_CHUNK, ChunkedAppender, CorpusWriter, unique_sorted
from biglda.errors import FormatError
from biglda.io import atomic_output

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SynthSpec:
    """Parameters of a synthetic LDA corpus (stored in the corpus attrs)."""

    n_docs: int = 1000
    n_words: int = 1000
    n_topics: int = 10
    mean_doc_length: float = 100.0
    alpha: float = 0.1
    beta: float = 0.01
    zipf_s: float = 1.0
    seed: int = 0
    batch_docs: int = 20_000


def _rng(seed: int, *key: int) -> np.random.Generator:
    # Counter-based (Philox) stream keyed by (seed, *key): batches are independent
    # and reproducible whatever order they are generated in.
    return np.random.Generator(np.random.Philox(np.random.SeedSequence([seed, *key])))


def topic_word_truth(spec: SynthSpec) -> np.ndarray:
    """Return the true topic-word matrix phi, float64 [K, V], rows summing to 1 (raw word ids)."""
    rng = _rng(spec.seed, 0xF1)
    ranks = np.arange(spec.n_words, dtype=np.float64)
    zipf = 1.0 / (ranks + 1.0) ** spec.zipf_s
    zipf /= zipf.sum()
    phi = np.empty((spec.n_topics, spec.n_words))
    for k in range(spec.n_topics):
        base = zipf[rng.permutation(spec.n_words)]
        conc = np.maximum(spec.beta * spec.n_words * base, 1e-6)
        g = rng.gamma(conc)
        if g.sum() <= 0:  # every draw underflowed: fall back to the base measure
            g = base
        phi[k] = g / g.sum()
    return phi


def iter_batches(
    spec: SynthSpec, phi: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(tokens int32[n], doc_len int64[d], theta float32[d, K])`` per batch of documents.

    Token ids are the raw ids of ``phi``'s columns; documents have length >= 1.
    """
    cdf = np.cumsum(phi, axis=1)
    cdf[:, -1] = 1.0
    for b, start in enumerate(range(0, spec.n_docs, spec.batch_docs)):
        d = min(spec.batch_docs, spec.n_docs - start)
        rng = _rng(spec.seed, 0xD0C, b)
        theta = rng.dirichlet(np.full(spec.n_topics, spec.alpha), size=d)
        theta = np.nan_to_num(theta, nan=1.0 / spec.n_topics)
        lengths = np.maximum(rng.poisson(spec.mean_doc_length, size=d), 1).astype(np.int64)
        # Topic counts per document, then topic of each token in document order.
        counts = np.stack([rng.multinomial(n, t / t.sum())
                           for n, t in zip(lengths, theta, strict=True)])
        topics = np.repeat(np.tile(np.arange(spec.n_topics), d), counts.ravel())
        tokens = np.empty(len(topics), dtype=np.int32)
        order = np.argsort(topics, kind="stable")
        bounds = np.searchsorted(topics[order], np.arange(spec.n_topics + 1))
        for k in range(spec.n_topics):
            idx = order[bounds[k]:bounds[k + 1]]
            if len(idx):
                tokens[idx] = np.searchsorted(cdf[k], rng.random(len(idx)), side="right")
        np.minimum(tokens, spec.n_words - 1, out=tokens)
        # Shuffle tokens within each document so topics are not in blocks.
        key = np.repeat(np.arange(d), lengths) * 2.0 + rng.random(len(tokens))
        tokens = tokens[np.argsort(key, kind="stable")]
        yield tokens, lengths, theta.astype(np.float32)


def generate(spec: SynthSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Whole small corpus in memory: ``(tokens, doc_ptr, phi [K,V], theta [D,K])``.

    For tests and small experiments; large corpora stream through :func:`iter_batches`.

    Examples
    --------
    >>> tokens, doc_ptr, phi, theta = generate(SynthSpec(n_docs=10, n_words=50, n_topics=3))
    >>> int(doc_ptr[-1]) == len(tokens)
    True
    """
    phi = topic_word_truth(spec)
    toks, lens, thetas = [], [], []
    for t, n, th in iter_batches(spec, phi):
        toks.append(t)
        lens.append(n)
        thetas.append(th)
    lengths = np.concatenate(lens)
    doc_ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_ptr[1:])
    return np.concatenate(toks), doc_ptr, phi, np.concatenate(thetas)


# --------------------------------------------------------------------------- corpus stores


def write_synthetic(url: str, spec: SynthSpec, overwrite: bool = False,
                    chunk_tokens: int | None = None, tmp_dir: str | None = None) -> dict:
    """Write a synthetic corpus and its ground truth (``truth/phi``, ``truth/theta``).

    Streams, in bounded memory whatever ``spec.n_docs``: the batches of
    :func:`iter_batches` are generated once; ``theta`` goes straight into the store
    and the raw tokens to a local spill file (4 bytes a token) while the words are
    counted; then the spill is read back, renumbered by descending frequency and
    written. (Generating twice instead was measured ~40% slower.) Words that never
    occur are left out of the vocabulary; ``truth/phi`` keeps the columns of the
    stored words, in corpus ids, with rows renormalized to sum to 1.

    Parameters
    ----------
    url : str
        Output store (any fsspec URL), written atomically.
    spec : SynthSpec
        The generative parameters (stored in ``attrs["synthetic"]``).
    overwrite : bool
        Replace an existing store.
    chunk_tokens : int, optional
        Tokens per chunk of ``tokens``.
    tmp_dir : str, optional
        Where to spill the raw tokens (default: the system temp directory).

    Returns
    -------
    dict
        ``n_docs``, ``n_tokens``, ``n_words`` of the stored corpus.

    Examples
    --------
    >>> spec = SynthSpec(n_docs=20, n_words=30, n_topics=3, mean_doc_length=10)
    >>> write_synthetic("memory://doc/synth.zarr", spec, overwrite=True)["n_docs"]
    20
    >>> phi, theta = load_truth("memory://doc/synth.zarr")
    >>> theta.shape
    (20, 3)
    """
    phi = topic_word_truth(spec)
    attrs = {"synthetic": asdict(spec),
             "source": {"synthetic": "biglda.corpus.synth", "seed": spec.seed},
             "tokenizer": {"lowercase": False, "pretokenized": True}}
    with atomic_output(url, overwrite=overwrite) as tmp, \
            tempfile.TemporaryDirectory(prefix="biglda-synth-", dir=tmp_dir) as spill_dir:
        truth = zarr.open_group(tmp, mode="w").require_group("truth")
        word_count, doc_freq, blocks = _generate_pass(spec, phi, truth, spill_dir)
        n_docs = sum(b[0] for b in blocks)
        n_tokens = sum(b[1] for b in blocks)
        order = np.argsort(-word_count, kind="stable")
        order = order[word_count[order] > 0]
        width = len(str(spec.n_words - 1))
        vocab = [f"w{i:0{width}d}" for i in order]
        phi_kept = phi[:, order]
        phi_kept /= phi_kept.sum(axis=1, keepdims=True)
        truth.create_array("phi", data=phi_kept)
        writer = CorpusWriter(tmp, n_docs=n_docs, n_tokens=n_tokens, vocab=vocab,
                              word_count=word_count[order], doc_freq=doc_freq[order],
                              attrs=attrs, chunk_tokens=chunk_tokens, mode="a")
        _write_pass(writer, order, spec.n_words, blocks, spill_dir)
    log.info("synthetic corpus: %d docs, %d tokens, %d words -> %s",
             n_docs, n_tokens, len(order), url)
    return {"n_docs": n_docs, "n_tokens": n_tokens, "n_words": len(order)}


def _generate_pass(spec: SynthSpec, phi: np.ndarray, truth: zarr.Group,
                   spill_dir: str) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Generate every batch once: ``theta`` into ``truth``, raw tokens and lengths to the spill.

    Returns the word counts, document frequencies and ``(n_docs, n_tokens)`` of each batch.
    """
    v = spec.n_words
    word_count = np.zeros(v, dtype=np.int64)
    doc_freq = np.zeros(v, dtype=np.int64)
    blocks: list[tuple[int, int]] = []
    rows = max(1, min(DOC_CHUNK, 2**22 // spec.n_topics))
    theta_out = ChunkedAppender(truth.create_array(
        "theta", shape=(spec.n_docs, spec.n_topics), dtype=np.float32,
        chunks=(rows, spec.n_topics), fill_value=0.0))
    with open(os.path.join(spill_dir, "tokens.i32"), "wb") as tok_f, \
            open(os.path.join(spill_dir, "lengths.i64"), "wb") as len_f:
        for tokens, lengths, theta in iter_batches(spec, phi):
            word_count += np.bincount(tokens, minlength=v)
            doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
            doc_freq += np.bincount(unique_sorted(doc * v + tokens) % v, minlength=v)
            tokens.tofile(tok_f)
            lengths.tofile(len_f)
            theta_out.append(theta)
            blocks.append((len(lengths), len(tokens)))
    theta_out.close()
    return word_count, doc_freq, blocks


def _write_pass(writer: CorpusWriter, order: np.ndarray, n_words: int,
                blocks: list[tuple[int, int]], spill_dir: str) -> None:
    """Read the spill back and write it with words renumbered in ``order``."""
    remap = np.full(n_words, -1, dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    start = 0
    with open(os.path.join(spill_dir, "tokens.i32"), "rb") as tok_f, \
            open(os.path.join(spill_dir, "lengths.i64"), "rb") as len_f:
        for nd, nt in blocks:
            lengths = np.fromfile(len_f, dtype=np.int64, count=nd)
            tokens = np.fromfile(tok_f, dtype=np.int32, count=nt)
            ids = np.arange(start, start + nd).astype(str)
            writer.append_docs(remap[tokens], lengths, ids)
            start += nd
    writer.close()


def load_truth(url: str) -> tuple[np.ndarray, np.ndarray]:
    """Ground truth of a synthetic corpus: ``(phi float64 [K, V], theta float32 [D, K])``.

    ``phi``'s columns are the corpus's word ids. Raises
    :class:`~biglda.errors.FormatError` when the store is not a corpus or has no truth.

    Examples
    --------
    >>> spec = SynthSpec(n_docs=5, n_words=20, n_topics=2, mean_doc_length=8)
    >>> _ = write_synthetic("memory://doc/truth.zarr", spec, overwrite=True)
    >>> phi, theta = load_truth("memory://doc/truth.zarr")
    >>> phi.shape[0], bool(np.allclose(phi.sum(axis=1), 1.0))
    (2, True)
    """
    corpus = Corpus.open(url)
    if not corpus.has_truth():
        raise FormatError(f"{corpus.url} has no ground truth (not made by `datasets synth`)")
    truth = zarr.open_group(corpus.url, mode="r")["truth"]
    phi = np.asarray(truth["phi"][:], dtype=np.float64)
    theta = np.asarray(truth["theta"][:], dtype=np.float32)
    if phi.shape[1] != corpus.n_words or theta.shape[0] != corpus.n_docs:
        raise FormatError(f"{corpus.url} has ground truth of the wrong shape")
    return phi, theta
