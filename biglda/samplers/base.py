"""The sampler contract: :class:`SweepResult`, :class:`Sampler` and argument checks.

A sampler sweeps one shard: given its tokens (local word ids), ``doc_ptr``, ``z`` and the
cached ``n_wk`` rows / ``n_k`` totals, it resamples every token, updates ``z``, ``n_wk``
and ``n_k`` in place and returns the aggregated sparse delta of ``n_wk`` and ``n_k``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from biglda.errors import ConfigError
from biglda.samplers._kernels import _dense_delta, _scan_ranges, _sweep_delta
from biglda.samplers.rng import RandomKey

# Sampler.sweep (and a sweep on several threads, biglda.samplers.partition) takes the delta
# from a snapshot of n_wk when the rows hold at most this many entries per token of the shard
# (a copy of <= 64 bytes a token), else by comparing z with a copy. On Debian at K = 100 (0.8
# entries a token) the snapshot and diff take 5-7 ms a sweep against 70-100 ms for bucketing
# 50-97% moved tokens by word (pipelines/README.md, "cgs's start"); at 5 entries a token
# (synth4m, K = 1,000) one-thread sweeps were still 16% (lightlda) and 7% (cgs) faster with
# it ("Sixth session"). It was 8 until the thirteenth session: two processes of synth4m at
# K = 1,000 hold 10 entries a token each, and there the snapshot was faster a sweep by 4-6%
# (lightlda, one thread and two) and 5-14% (cgs); at 20 entries a token by 6-8% and 0-6%
# (pipelines/bench_snapshot.py; "Thirteenth session"). Not higher: the copy is kept from
# one sweep to the next (Sampler._snapshot, the partitioned sweeps' layouts), a second
# table.
SNAPSHOT_ENTRIES_PER_TOKEN = 16


def buffer_like(buf: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    """Return ``buf`` where it has ``like``'s shape and dtype, else a new empty array.

    For copies made every sweep: pages kept from the sweep before cost no faults.
    """
    if buf is None or buf.shape != like.shape or buf.dtype != like.dtype:
        return np.empty_like(like)
    return buf


@dataclass(frozen=True)
class SweepResult:
    """What one sweep changed, for the parameter server and the metrics.

    ``delta_words/delta_topics/delta_counts`` (int32 [M]) are the change of ``n_wk`` as COO
    with unique (word, topic) pairs in local word ids, sorted by (word, topic); ``delta_k``
    (int64 [K]) the change of ``n_k``. ``accept_rate`` is the Metropolis-Hastings acceptance
    rate (None for Gibbs). ``cpu_seconds`` is the CPU time of every thread that swept, where
    the sampler used several (None: only the calling thread's, which the caller measures).
    """

    delta_words: np.ndarray
    delta_topics: np.ndarray
    delta_counts: np.ndarray
    delta_k: np.ndarray
    n_tokens: int
    accept_rate: float | None
    seconds: float
    cpu_seconds: float | None = None


def mean_accept_rate(parts: list[SweepResult]) -> float | None:
    """Return the token-weighted mean acceptance rate of sweeps (None where none has one)."""
    rates = [(p.accept_rate, p.n_tokens) for p in parts if p.accept_rate is not None]
    n = sum(t for _, t in rates)
    return sum(a * t for a, t in rates) / n if rates and n else None


def combine_sweeps(tokens: np.ndarray, z_old: np.ndarray, z: np.ndarray, n_rows: int,
                   n_topics: int, parts: list[SweepResult]) -> SweepResult:
    """One SweepResult for a range swept in parts (rounds of documents, each its own sweep).

    The delta is that of all moves ``z_old -> z`` (so it is unique and sorted, as a sweep's);
    tokens and seconds add up, the acceptance rate is the token-weighted mean.
    """
    words, topics, counts, delta_k = _sweep_delta(tokens, z_old, z, n_rows, n_topics)
    cpu = [p.cpu_seconds for p in parts]
    return SweepResult(words, topics, counts, delta_k, sum(p.n_tokens for p in parts),
                       mean_accept_rate(parts),
                       sum(p.seconds for p in parts),
                       None if any(c is None for c in cpu) else sum(c or 0.0 for c in cpu))


def as_alpha(alpha, n_topics: int) -> np.ndarray:
    """``alpha`` (a scalar or K values) as a positive float64 [K] array; ConfigError otherwise."""
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(n_topics, float(a))
    if a.shape != (n_topics,):
        raise ConfigError(f"alpha has shape {a.shape}, expected a scalar or ({n_topics},)")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ConfigError("alpha must be finite and > 0")
    return np.ascontiguousarray(a)


def _need(arr, name: str, dtypes: tuple, ndim: int, writable: bool = False) -> None:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(arr).__name__}")
    if arr.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {arr.dtype}, expected one of "
                        f"{', '.join(str(np.dtype(d)) for d in dtypes)}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if writable and not arr.flags.writeable:
        raise ValueError(f"{name} must be writable (it is updated in place)")


def check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key, *,
                     scan: bool = True) -> np.ndarray:
    """Validate the arguments of :meth:`Sampler.sweep`; returns alpha as float64 [K].

    ``scan=False`` leaves out the two checks that read every token (word ids in range, topics
    in range): a sampler that does them itself on its threads (warplda) says so, and must
    raise what :func:`token_errors` gives before it changes anything.
    """
    _need(tokens, "tokens", (np.dtype(np.int32),), 1)
    _need(doc_ptr, "doc_ptr", (np.dtype(np.int64),), 1)
    _need(z, "z", (np.dtype(np.uint16), np.dtype(np.int32)), 1, writable=True)
    _need(n_wk, "n_wk", (np.dtype(np.int32),), 2, writable=True)
    _need(n_k, "n_k", (np.dtype(np.int64),), 1, writable=True)
    n_rows, n_topics = n_wk.shape
    if n_topics < 2:
        raise ConfigError(f"need at least 2 topics, got {n_topics}")
    if n_k.shape[0] != n_topics:
        raise ValueError(f"n_k has {n_k.shape[0]} topics, n_wk has {n_topics}")
    if z.shape[0] != tokens.shape[0]:
        raise ValueError(f"z has {z.shape[0]} entries for {tokens.shape[0]} tokens")
    if doc_ptr.shape[0] < 1 or doc_ptr[0] != 0 or doc_ptr[-1] != tokens.shape[0]:
        raise ValueError("doc_ptr must start at 0 and end at len(tokens)")
    if doc_ptr.shape[0] > 1 and np.any(np.diff(doc_ptr) < 0):
        raise ValueError("doc_ptr must be non-decreasing")
    bad_t, bad_z, _ = (scan_part(tokens, z, 0, tokens.shape[0], n_rows, n_topics, tokens[:0])
                       if scan else (-1, -1, False))
    if bad_t >= 0:
        raise token_errors(z, n_rows, n_topics, bad_t, -1)
    if z.dtype == np.uint16 and n_topics > 65536:
        raise ValueError(f"uint16 z cannot hold {n_topics} topics; use int32")
    if bad_z >= 0:
        raise token_errors(z, n_rows, n_topics, -1, bad_z)
    return check_sweep_settings(alpha, beta, n_words, key, n_rows, n_topics)


def token_errors(z, n_rows: int, n_topics: int, bad_token: int, bad_z: int) -> ValueError:
    """Return the error of a word id out of range (``bad_token >= 0``), else of ``z[bad_z]``."""
    if bad_token >= 0:
        return ValueError(f"tokens must be local word ids in [0, {n_rows})")
    return ValueError(f"z[{bad_z}] = {z[bad_z]} is not a topic in [0, {n_topics})")


def scan_part(tokens, z, lo: int, hi: int, n_rows: int, n_topics: int,
              cached) -> tuple[int, int, bool]:
    """Check tokens ``[lo, hi)``: ``(first bad word id, first bad topic, equal to cached)``.

    The indexes are -1 where there is none; ``cached`` of another length: nothing to compare
    (False). A part of the O(N) checks of :func:`check_sweep_args` and of the test that a
    sampler's kept layout is still that of ``tokens``, for a sweep's threads (nogil).

    Examples
    --------
    >>> t = np.array([0, 1, 2], np.int32)
    >>> scan_part(t, np.array([0, 3, 1], np.uint16), 0, 3, 3, 3, t)
    (-1, 1, True)
    """
    t_lo, t_hi, z_lo, z_hi, same = _scan_ranges(tokens, z, lo, hi, cached)
    bad_t = bad_z = -1
    if t_lo < 0 or t_hi >= n_rows:  # (rare: find the first, with a second read)
        t = tokens[lo:hi]
        bad_t = lo + int(np.flatnonzero((t < 0) | (t >= n_rows))[0])
    if z_lo < 0 or z_hi >= n_topics:
        zz = z[lo:hi]
        bad_z = lo + int(np.flatnonzero((zz < 0) | (zz >= n_topics))[0])
    return bad_t, bad_z, bool(same)


def check_sweep_settings(alpha, beta, n_words, key, n_rows: int, n_topics: int) -> np.ndarray:
    """Check the host-side settings of a sweep (any backend); return alpha as float64 [K]."""
    if not (np.isfinite(beta) and beta > 0):
        raise ConfigError(f"beta must be finite and > 0, got {beta}")
    if int(n_words) < n_rows:
        raise ValueError(f"n_words = {n_words} is smaller than the {n_rows} cached rows")
    if not isinstance(key, RandomKey):
        raise TypeError(f"key must be a RandomKey, got {type(key).__name__}")
    return as_alpha(alpha, n_topics)


class Sampler:
    """One (algorithm, backend) sampler. Subclasses implement :meth:`_run`.

    Constructors only store settings; :meth:`sweep` does the work. A sampler runs one
    sweep at a time (it keeps buffers from one to the next): threads take one each.
    """

    algorithm: str = ""
    backend: str = "cpu"
    #: what a word's n_w tokens cost a sweep, n_w ** this, for cutting the vocabulary into
    #: ranges (threads) and windows (processes taking turns) of equal cost
    word_cost_power: float = 1.0
    _snapshot_rows: np.ndarray | None = None  # (the buffer of the last snapshot)

    def warm_variants(self) -> list[Sampler]:
        """Return fresh samplers, one per kernel this one may first call after a first sweep.

        For :func:`biglda.samplers.warm.warm_kernels`: a sampler whose kernel depends on
        the chain's state returns one fixed on each kernel it may choose; one whose first
        sweep calls every kernel it will call returns none (the default).
        """
        return []

    def sweep(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key) -> SweepResult:
        """Resample every token of one shard once.

        Parameters
        ----------
        tokens : int32 [N]
            Local word ids (rows of ``n_wk``), documents one after another.
        doc_ptr : int64 [D + 1]
            Document offsets into ``tokens``, from 0 to N.
        z : uint16 or int32 [N]
            Topic of each token, updated in place.
        n_wk : int32 [V_local, K]
            The cached word-topic rows, updated in place with this sweep's moves.
        n_k : int64 [K]
            Topic totals, updated in place.
        alpha : float or float64 [K]
            Dirichlet prior of the doc-topic mixtures (symmetric or not).
        beta : float
            Dirichlet prior of the topic-word distributions.
        n_words : int
            The global vocabulary size V (for the ``V * beta`` denominators).
        key : RandomKey
            The random stream of this (seed, iteration, shard).

        Returns
        -------
        SweepResult
            The sparse delta of ``n_wk`` / ``n_k`` this sweep made, tokens and timing.

        Examples
        --------
        >>> import numpy as np
        >>> from biglda.samplers import get_sampler, init_z, count_from_z, RandomKey
        >>> tokens = np.array([0, 1, 1, 0], dtype=np.int32)
        >>> doc_ptr = np.array([0, 2, 4])
        >>> z = init_z(4, 2, RandomKey(0, 0))
        >>> n_wk, n_k = count_from_z(tokens, doc_ptr, z, 2, 2)
        >>> r = get_sampler("cgs").sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, 2,
        ...                              RandomKey(0, 1))
        >>> r.n_tokens
        4
        """
        alpha = check_sweep_args(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, key)
        t0 = time.perf_counter()
        if n_wk.size <= SNAPSHOT_ENTRIES_PER_TOKEN * tokens.shape[0]:
            # small cached rows: diff a snapshot (sequential, O(V_local K)) rather than
            # bucket the moves by word (scattered, O(moves)); the same COO either way, as
            # nothing but the sweep's own moves changes n_wk while it runs (the trainer
            # touches a thread's table only between sweeps)
            n_wk_old, n_k_old = self._snapshot(n_wk), n_k.copy()
            accept_rate = self._run(tokens, doc_ptr, z, n_wk, n_k, alpha, float(beta),
                                    float(n_words), key.state())
            words, topics, counts = _dense_delta(n_wk_old, n_wk)
            delta_k = n_k - n_k_old
        else:
            z_old = z.copy()
            accept_rate = self._run(tokens, doc_ptr, z, n_wk, n_k, alpha, float(beta),
                                    float(n_words), key.state())
            words, topics, counts, delta_k = _sweep_delta(tokens, z_old, z, n_wk.shape[0],
                                                          n_wk.shape[1])
        return SweepResult(words, topics, counts, delta_k, int(tokens.shape[0]), accept_rate,
                           time.perf_counter() - t0)

    def _snapshot(self, n_wk: np.ndarray) -> np.ndarray:
        """Copy ``n_wk`` into this sampler's buffer of its last snapshot, where it fits.

        A fresh copy of a table of 80 MB took 54-193 ms where its pages were new (each
        faults), 4-7 ms into pages kept from the sweep before (the VM, synth4m at
        K = 1,000; pipelines/README.md, "Thirteenth session"). The trainer keeps a sampler
        per thread, so no two sweeps share the buffer.
        """
        self._snapshot_rows = buf = buffer_like(self._snapshot_rows, n_wk)
        np.copyto(buf, n_wk)
        return buf

    def _run(self, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state):
        raise NotImplementedError

    def __repr__(self) -> str:
        """Show the class, algorithm and backend."""
        return f"{type(self).__name__}(algorithm={self.algorithm!r}, backend={self.backend!r})"
