"""Shard planning: contiguous document ranges of about equal tokens, near chunk boundaries.

Shards and chunk boundaries
---------------------------
Training splits the corpus into shards: contiguous document ranges of about equal
token counts. Documents almost never end exactly on a chunk boundary of ``tokens``,
and Zarr v3 has no irregular chunk grid, so a shard cannot be made of whole chunks
without padding ``tokens`` (which would break the simple ``doc_ptr`` semantics).
The design instead is:

* a shard boundary is the document boundary *nearest to a chunk boundary*, so each
  shard reads its own chunks plus at most part of a document in each neighbouring
  chunk. Reads of a shared chunk are harmless: the corpus is immutable after ingest.
* balance comes first, though (with BSP every clock waits for the slowest shard):
  a boundary moves to the chunk boundary nearest its balanced position only when
  that is within ``tolerance`` (default :data:`TOLERANCE`, 0.5%) of a shard's ideal
  token count; otherwise it is the document boundary nearest to the balanced
  position. Corpora with >= 100 chunks per shard are therefore fully chunk-aligned;
  smaller ones (the demo, the benchmarks' corpora of 2-10 chunks) are balanced. The
  default was 5% until the ninth session: two shards of synth4m (two 2 M-token
  chunks) were then 2.10 M and 1.91 M tokens, and synth20m's 10.49 M and 9.52 M, so
  a 2-process BSP clock waited ~5% for the bigger one every clock, to save each
  shard reading part of one more chunk once, at load.
* nothing ever writes into ``tokens``. Per-token training state (the topic
  assignments ``z``) is checkpointed **per shard** (one array per shard, chunked on
  its own), so no two writers ever share a chunk, whatever the boundaries.

A shard's token count differs from ``n_tokens / n_shards`` by at most
``2 * tolerance * n_tokens / n_shards`` plus one document.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from biglda.errors import ConfigError


@dataclass(frozen=True)
class Shard:
    """A contiguous range of documents, and the tokens they span.

    ``doc_start:doc_stop`` index documents, ``token_start:token_stop`` index ``tokens``
    (``token_start == doc_ptr[doc_start]``, ``token_stop == doc_ptr[doc_stop]``).

    Examples
    --------
    >>> s = Shard(0, 0, 10, 0, 1234)
    >>> s.n_docs, s.n_tokens
    (10, 1234)
    """

    index: int
    doc_start: int
    doc_stop: int
    token_start: int
    token_stop: int

    @property
    def n_docs(self) -> int:
        """Number of documents in the shard."""
        return self.doc_stop - self.doc_start

    @property
    def n_tokens(self) -> int:
        """Number of tokens in the shard."""
        return self.token_stop - self.token_start


#: How far (a share of a shard's ideal tokens) a boundary may move to meet a chunk boundary.
TOLERANCE = 0.005


def _nearest_boundary(doc_ptr: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Index of the document boundary nearest to each target token offset."""
    n_docs = len(doc_ptr) - 1
    right = np.clip(np.searchsorted(doc_ptr, targets, side="left"), 1, n_docs)
    left = right - 1
    return np.where((targets - doc_ptr[left]) <= (doc_ptr[right] - targets), left, right)


def plan_shard_bounds(doc_ptr: np.ndarray, n_shards: int, chunk_tokens: int,
                      tolerance: float = TOLERANCE) -> np.ndarray:
    """Document indices where shards start, plus ``n_docs`` at the end (see module doc).

    Returns int64 ``[n + 1]`` strictly increasing from 0 to ``n_docs``, with
    ``n <= n_shards`` (fewer when there are too few documents, or documents longer
    than a shard, to make ``n_shards`` non-empty shards). A boundary snaps to a
    chunk boundary when that moves it by at most ``tolerance`` of a shard's ideal
    token count.

    Examples
    --------
    >>> plan_shard_bounds(np.array([0, 3, 6, 9, 12]), 2, 6).tolist()
    [0, 2, 4]
    """
    if n_shards < 1:
        raise ConfigError(f"the number of shards must be at least 1, got {n_shards}")
    doc_ptr = np.asarray(doc_ptr, dtype=np.int64)
    n_docs = len(doc_ptr) - 1
    n_tokens = int(doc_ptr[-1])
    n = min(n_shards, n_docs)
    if n <= 1:
        return np.array([0, n_docs] if n_docs else [0], dtype=np.int64)
    balanced = np.arange(1, n, dtype=np.float64) * n_tokens / n
    snapped = np.minimum(np.round(balanced / chunk_tokens) * chunk_tokens, n_tokens)
    near = np.abs(snapped - balanced) <= tolerance * n_tokens / n
    cuts = _nearest_boundary(doc_ptr, np.where(near, snapped, balanced))
    return np.unique(np.concatenate([[0], cuts, [n_docs]]).astype(np.int64))
