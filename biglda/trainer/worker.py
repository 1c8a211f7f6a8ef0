"""What runs on a worker: one long-running task per worker process that sweeps its shards.

Design: a task per worker process holds all its document shards — tokens, ``z`` — and one
table cache over the union of their vocabularies (:class:`biglda.ps.ProcessCache`) in local
variables for the whole run and loops over all clocks: wait for the SSP clock (every shard),
pull once, sweep with its threads (a ``ThreadPoolExecutor`` of numba ``nogil`` sweeps: for
a sampler with ``threads_per_sweep`` one sweep of all the process's shards that all its
threads share, on the one table: warplda's, the chain of one thread, and cgs's and
lightlda's, partitioned by documents and words so that only ``n_k`` lags; for the others
(cgs's plain kernel) one sweep per thread over its shards' documents concatenated, threads
other than the first on a copy of the cache, their deltas added after, or after each round:
AD-LDA within the process), push once
(the doc LL meanwhile), checkpoint, tick every shard. Pulls, pushes and per-word tables are
made once per process (per thread for the tables) per clock, not once per shard. The
alternative, one task per shard per clock with the state in a worker-held object, pays a
scheduler round trip per shard per clock (about ten actor calls' worth) and gains nothing:
the state never moves, and a lost worker is recovered by recounting ``z`` from a checkpoint
either way (measurements in pipelines/README.md). The driver submits
:func:`run_group_failfast`, which secedes from the worker's thread pool (so a task stuck on
a dead actor does not hold the thread a recovered run needs). Each worker runs its actors'
sync methods in a separate actor thread and ``async`` ones (the clock) on its event loop, so
a task waiting on a clock never blocks an actor. A GPU worker runs one thread. In rounds
(``--rounds``; by default with several parts and cgs, or with
``--comm-budget``: :func:`rounds_of`) each thread sweeps a clock in runs of documents; after
each round the threads add each other's moves, and with a budget the process sends and
receives early updates (:mod:`biglda.ps.managed`, :func:`_sweep_threads`).

Every parameter-server call goes through the client (:class:`biglda.ps.PSClient`) and has a
timeout; a clock wait is a sequence of short server-side waits, so a lost clock actor surfaces
as a :class:`biglda.errors.ClusterError`.
"""

from __future__ import annotations

import itertools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from biglda.ps import ALL_CLOCKS, ClockAnswer, PSClient
from biglda.ps.calls import call_all
from biglda.ps.managed import STEP_WAIT
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.alpha import alpha_due
from biglda.trainer.config import TrainConfig
from biglda.trainer.metrics import ShardClockStats, shard_clock_stats

log = logging.getLogger("biglda.train")

_EMPTY32 = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True)
class GroupSpec:
    """Everything a worker task needs: the run's settings and where this attempt stands.

    Picklable: actors pickle as handles.
    """

    cfg: TrainConfig                 # the run's settings (TrainConfig.for_workers)
    corpus_url: str
    shards: tuple[Any, ...]          # biglda.corpus Shard objects
    ps: PSClient                     # the parameter server's tables, clock, alpha, mailbox
    n_words: int
    alpha: np.ndarray                # in force at start_clock (optimized, or symmetric)
    start_clock: int
    stop_clock: int
    checkpoint_url: str | None = None
    checkpoint_every: int = 0         # 0 when this attempt writes no checkpoints
    checkpoint_slot: int = 0          # slot the first write goes to
    resume_attrs: dict | None = None  # committed checkpoint to start from
    wait_chunk: float = 2.0
    checkpoint_at: tuple[int, ...] = ()  # extra checkpoint clocks (the throughput balance)
    thread_sizes: tuple[int, ...] = ()   # shards per sampling thread, in ``shards`` order
    process_rank: int = 0                # this process's place among the attempt's processes
    n_processes: int = 1                 # (the steps of --process-partition)


@dataclass(frozen=True)
class Turns:
    """The schedule of ``n_processes`` processes taking turns on ``n_windows`` windows.

    A clock is W steps; in step ``s`` process ``p`` resamples window ``(p m + s) mod W``
    (``m`` windows a process, ``--turn-windows``, W = m P), so no window is in two processes
    in one step, and every process has every window once a clock. A step waits for the
    process that had its window ``m`` steps before (with ``m`` = 1, the step before: the
    difference between the processes' steps was lost every step).

    Examples
    --------
    >>> t = Turns(2, 2)
    >>> [t.window(0, s) for s in range(4)], [t.window(1, s) for s in range(4)]
    ([0, 1, 2, 3], [2, 3, 0, 1])
    >>> t.since(0, 5, 1, first_clock=0), t.since(0, 5, 3, first_clock=0)
    ([(4, 3)], [(5, 1)])
    >>> t.since(0, 0, 1, first_clock=0)
    []
    """

    n_processes: int
    per_process: int = 2  # (--turn-windows)

    @property
    def n_windows(self) -> int:
        """W: the windows (and steps) of a clock."""
        return self.n_processes * self.per_process

    def window(self, rank: int, step: int) -> int:
        """Return the window process ``rank`` resamples in ``step``."""
        return (rank * self.per_process + step) % self.n_windows

    def since(self, rank: int, clock: int, step: int, first_clock: int
              ) -> list[tuple[int, int]]:
        """Return the steps ``(clock, step)`` that moved ``rank``'s window since it had it.

        The other processes' steps on it after ``step`` in the clock before (none at the
        attempt's ``first_clock``: the attach brought them) and before ``step`` in this one,
        in order: one each.
        """
        w, m, n = self.window(rank, step), self.per_process, self.n_windows
        held = sorted((w - q * m) % n for q in range(self.n_processes) if q != rank)
        before = [] if clock == first_clock else [(clock - 1, t) for t in held if t > step]
        return before + [(clock, t) for t in held if t < step]


def processes_take_turns(cfg: TrainConfig, n_processes: int) -> bool:
    """Whether the attempt's ``n_processes`` processes take turns on the vocabulary.

    (``--process-partition``, resolved by :meth:`TrainConfig.with_sampler_chosen`.)
    """
    return cfg.process_partition == "on" and n_processes > 1


def gpu_probe() -> dict[str, Any]:
    """Return the process's :func:`biglda.samplers.backends.gpu_status` as a dict.

    Called on every worker by ``client.run``.
    """
    from biglda.samplers.backends import gpu_status

    s = gpu_status()
    return {"usable": s.usable, "simulator": s.simulator, "reason": s.reason,
            "n_devices": s.n_devices}


def worker_backend(spec: GroupSpec, worker: str) -> str:
    """Return the backend this worker runs: its override, else the run's request, resolved here.

    ``gpu`` on a worker without a usable GPU is a ConfigError naming the worker and the cause.
    """
    from biglda.errors import ConfigError
    from biglda.samplers.backends import gpu_status, pick_backend

    try:
        return pick_backend(spec.cfg.worker_backends.get(worker, spec.cfg.backend), gpu_status())
    except ConfigError as exc:
        raise ConfigError(f"worker {worker}: {exc}") from None


def _make_sampler(spec: GroupSpec, backend: str) -> Any:
    from biglda.samplers import get_sampler

    params = spec.cfg.gpu_sampler_params if backend == "gpu" else spec.cfg.sampler_params
    return get_sampler(spec.cfg.sampler, backend, **params)


def _hist_stats(doc_ptr: np.ndarray, z: np.ndarray, n_topics: int) -> list[np.ndarray]:
    """Return the shard's ``[count_hist, length_hist]`` trimmed to the last non-zero column."""
    from biglda.samplers.hyper import histograms_from_z

    ch, lh = histograms_from_z(doc_ptr, z, n_topics)
    cols = np.flatnonzero(ch[:, 1:].any(axis=0))
    ch = ch[:, :int(cols[-1]) + 2] if len(cols) else ch[:, :1]
    small = np.int32 if len(doc_ptr) < 2**31 else np.int64
    return [ch.astype(small), lh.astype(small)]


def _alpha(spec: GroupSpec, shard: int, clock: int, alpha: np.ndarray
           ) -> np.ndarray | ClockAnswer:
    """Return the alpha to sweep ``clock`` with: the newest published one.

    Under BSP, at the clock right after an optimization, wait until the driver published
    exactly that one (so a seed and layout give the same run). ``ABORT`` / ``STOP``: the run
    was aborted / stops.
    """
    need = (spec.cfg.staleness == 0 and clock > spec.start_clock
            and alpha_due(clock, spec.cfg.optimize_alpha_every, spec.cfg.alpha_burn_in))
    answer, got = spec.ps.alpha.lookup(shard, clock, need, spec.wait_chunk,
                                       spec.cfg.call_timeout)
    if answer is not ClockAnswer.GO:
        return answer
    if got is None:
        return alpha
    return np.asarray(got[1], dtype=np.float64)


#: Tokens per run of documents of the doc LL (runs are shared out to the threads): small
#: enough that 16 threads get several each (20 runs of 2^20 on 16 threads take at least two
#: runs' time), large enough that a run's call costs nothing beside it.
LL_RUN_TOKENS = 1 << 18


class _ShardState:
    """One shard of the process.

    Where its tokens sit in the process's arrays, its ``z`` (a view of the process's) and
    documents.
    """

    def __init__(self, shard: Any, lo: int, doc_ptr: np.ndarray) -> None:
        self.index = int(shard.index)
        self.shard = shard
        self.lo, self.hi = int(lo), int(lo + doc_ptr[-1])
        self.doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
        self.z: np.ndarray = np.zeros(0)


class FirstTopics:
    """A run's first topics, shard by shard, by the run's ``init`` (:mod:`biglda.samplers.init`).

    A shard's topics depend only on the seed, its index, the corpus and the priors (not on
    the worker holding it), so a recovery that starts over draws the same ones.
    """

    def __init__(self, cfg: TrainConfig, corpus: Any) -> None:
        from biglda.samplers.init import anchor_counts, anchor_documents

        self.cfg = cfg
        self.n_words = int(corpus.n_words)
        self.method = cfg.init
        self.anchor = None
        if self.method == "sequential":
            doc_ptr = np.asarray(corpus.doc_ptr, dtype=np.int64)
            n_docs = anchor_documents(doc_ptr, cfg.n_topics)
            self.anchor = anchor_counts(np.asarray(corpus.read_tokens(0, int(doc_ptr[n_docs]))),
                                        doc_ptr[:n_docs + 1], cfg.n_topics, self.n_words,
                                        cfg.alpha, cfg.beta, cfg.seed)

    def draw(self, tokens: np.ndarray, doc_ptr: np.ndarray, shard: int) -> np.ndarray:
        """Topics of one shard (``tokens``: global word ids; ``doc_ptr`` from 0)."""
        from biglda.samplers import RandomKey, init_z
        from biglda.samplers.init import sequential_z

        # the init stream: iteration -1 never collides with a sweep's (seed, iteration, shard)
        key = RandomKey(self.cfg.seed, -1, shard)
        if self.method == "random":
            return init_z(len(tokens), self.cfg.n_topics, key)
        return sequential_z(tokens, doc_ptr, self.cfg.n_topics, self.n_words, self.cfg.alpha,
                            self.cfg.beta, key, self.anchor)


class _ProcessState:
    """Every shard this worker process holds and one :class:`biglda.ps.ProcessCache` over them.

    Also the parts the sampling threads sweep (one sweep per part per clock over its shards'
    documents, concatenated): a part per thread, or with ``one_part`` (a sampler whose sweep
    takes the process's threads itself, ``threads_per_sweep``) one part of every shard.
    """

    def __init__(self, spec: GroupSpec, corpus: Any, n_threads: int, one_part: bool) -> None:
        from biglda.ps import ProcessCache
        from biglda.samplers import z_dtype

        sizes = list(spec.thread_sizes) or [len(spec.shards)]
        if (n_threads == 1 or one_part) and len(sizes) > 1:
            sizes = [sum(sizes)]
        self.n_threads = n_threads  # sampling threads (one part may use them all)
        # the sampler takes all the threads into its one sweep of the process's shards
        self.shared_sweep = one_part and n_threads > 1
        # the clock of this attempt's last checkpoint write (None: none yet)
        self.last_write: int | None = None
        self.shards: list[_ShardState] = []
        parts, lo = [], 0
        # one part: the shards in corpus order, so the part is the same on any thread count
        order = sorted(spec.shards, key=lambda s: s.index) if len(sizes) == 1 else spec.shards
        for shard in order:
            tokens, doc_ptr = corpus.read_shard(shard)
            parts.append(np.asarray(tokens))
            self.shards.append(_ShardState(shard, lo, doc_ptr))
            lo += len(parts[-1])
        self.z = np.zeros(lo, dtype=z_dtype(spec.cfg.n_topics))
        drawn = FirstTopics(spec.cfg, corpus) if spec.resume_attrs is None else None
        for st, tokens in zip(self.shards, parts, strict=True):
            if drawn is not None:
                self.z[st.lo:st.hi] = drawn.draw(tokens, st.doc_ptr, st.index)
            elif spec.checkpoint_url is None or spec.resume_attrs is None:
                raise AssertionError("resume_attrs come from a checkpoint: it has a URL")
            else:
                self.z[st.lo:st.hi] = ckpt.read_z(spec.checkpoint_url, spec.resume_attrs,
                                                  st.shard.token_start, st.shard.token_stop)
            st.z = self.z[st.lo:st.hi]
        index = [st.index for st in self.shards]
        self.cache = ProcessCache(index[0], index, np.concatenate(parts), spec.ps.bounds,
                                  spec.cfg.n_topics)
        del parts
        self.threads: list[_ThreadPart] = []
        first = 0
        for n in sizes:
            self.threads.append(_ThreadPart(self.shards[first:first + n]))
            first += n
        self.attached = False
        self.early: Any = None  # EarlyUpdates once attached, with --comm-budget or steps
        # --process-partition: the cache's rows of each range of words (_process_windows)
        self.windows: list[tuple[int, int]] = []
        # ... n_k after every process's clock before the current one (the clocks' totals),
        # and the questions for the next clock's first step asked at the end of a clock
        self.n_k_before: np.ndarray | None = None
        self.asked_next: tuple[Any, Any] | None = None
        self.step_wait = 0.0  # seconds the last clock's steps waited for other processes
        self._copies: list[tuple[np.ndarray, np.ndarray]] = []
        self._ll_runs: list[tuple[_ShardState, int, int]] = []

    def ll_runs(self) -> list[tuple[_ShardState, int, int]]:
        """Return runs of documents ``(shard, first doc, end doc)`` for the doc LL.

        About :data:`LL_RUN_TOKENS` each, whatever the threads (so the sums do not depend
        on them); kept from clock to clock (the documents do not change).
        """
        if not self._ll_runs:
            for st in self.shards:
                n = max(1, round((st.hi - st.lo) / LL_RUN_TOKENS))
                cuts = np.searchsorted(st.doc_ptr, np.linspace(0, st.doc_ptr[-1], n + 1))
                cuts[0], cuts[-1] = 0, len(st.doc_ptr) - 1
                self._ll_runs += [(st, int(a), int(b)) for a, b in itertools.pairwise(cuts)
                                  if b > a]
        return self._ll_runs

    def thread_tables(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(n_wk, n_k)`` for each sampling thread: the cache itself, then copies of it.

        The copies' arrays are kept from clock to clock and overwritten: fresh ones were
        fresh pages (200 MB at V = 50 k, K = 1000), faulted in every clock.
        """
        n_wk, n_k = self.cache.n_wk, self.cache.n_k
        if len(self._copies) != len(self.threads) - 1 or any(
                a.shape != n_wk.shape or b.shape != n_k.shape for a, b in self._copies):
            self._copies = [(np.empty_like(n_wk), np.empty_like(n_k))
                            for _ in self.threads[1:]]
        for a, b in self._copies:
            np.copyto(a, n_wk)
            np.copyto(b, n_k)
        return [(n_wk, n_k), *self._copies]


class _ThreadPart:
    """What one sampling thread sweeps: consecutive shards of the process, as one range."""

    def __init__(self, shards: list[_ShardState]) -> None:
        self.shards = shards
        self.key_shard = shards[0].index  # its random stream (fixed by the layout)
        self.lo, self.hi = shards[0].lo, shards[-1].hi
        self.doc_ptr = np.concatenate([[0]] + [st.doc_ptr[1:] + (st.lo - self.lo)
                                               for st in shards]).astype(np.int64)
        self._rounds: list[tuple[int, int, np.ndarray]] = []

    def rounds(self, n: int) -> list[tuple[int, int, np.ndarray]]:
        """``n`` runs of whole documents with about equal tokens: ``(lo, hi, doc_ptr)``.

        ``lo``/``hi`` are token offsets in the thread's range, ``doc_ptr`` from 0 (a clock
        swept in rounds, :func:`_sweep_threads`).
        """
        if len(self._rounds) != n:
            ptr = self.doc_ptr
            cuts = np.searchsorted(ptr, np.linspace(0, ptr[-1], n + 1)[1:-1])
            docs = np.concatenate([[0], cuts, [len(ptr) - 1]]).astype(np.int64)
            self._rounds = [(int(ptr[a]), int(ptr[b]), ptr[a:b + 1] - ptr[a])
                            for a, b in itertools.pairwise(docs)]
        return self._rounds


def run_group(spec: GroupSpec) -> dict[int, np.ndarray]:
    """Sweep this worker process's shards from ``start_clock`` to the stop clock.

    Its threads do the sweeps; returns the shards' final ``z``.
    """
    from distributed import get_worker

    from biglda.corpus import Corpus

    me = get_worker()
    worker = me.address
    # the table shards and the clock this process holds are called without the comm
    spec = replace(spec, ps=spec.ps.in_this_process())
    corpus = Corpus.open(spec.corpus_url)
    backend = worker_backend(spec, worker)
    # a GPU worker runs one thread, as before
    n_threads = 1 if backend == "gpu" else max(1, len(spec.thread_sizes))
    first = _make_sampler(spec, backend)
    # a sampler whose sweep takes the threads itself (warplda) sweeps all the process's
    # shards as one part on all its threads: no table copies, no AD-LDA lag between threads
    proc = _ProcessState(spec, corpus, n_threads, getattr(first, "threads_per_sweep", False))
    samplers = [first] + [_make_sampler(spec, backend) for _ in proc.threads[1:]]
    if processes_take_turns(spec.cfg, spec.n_processes):
        proc.windows = _process_windows(spec, corpus, proc.cache.vocab, first)
    _push_recounts(spec, proc, worker, backend)
    clock = spec.start_clock
    alpha = np.asarray(spec.alpha, dtype=np.float64)
    lead = proc.shards[0].index
    shards = [st.index for st in proc.shards]
    t0, cpu0 = time.time(), time.process_time()
    answer = None  # (between two clocks the tick's call brings the next clock's answer)
    with ThreadPoolExecutor(max(1, n_threads - 1)) as pool:
        if backend == "cpu":  # (the kernels a state-dependent choice first calls mid-run)
            _warm(proc, first, pool)
        while clock < spec.stop_clock:
            if answer is None:
                answer = spec.ps.clock.wait_many(shards, clock, spec.wait_chunk,
                                                 spec.cfg.call_timeout)
            if answer is ClockAnswer.ABORT:  # the driver restarts every shard: write nothing
                return {}
            if answer is ClockAnswer.STOP:
                break
            if spec.cfg.optimize_alpha_every > 0:
                new = _alpha(spec, lead, clock, alpha)
                if isinstance(new, ClockAnswer):
                    if new is ClockAnswer.ABORT:
                        return {}
                    break
                alpha = new
            try:
                stats = _sweep_clock(spec, proc, samplers, pool, clock, alpha, worker, backend,
                                     t0, cpu0)
            except _GivenUp:  # (as ABORT: the driver restarts every shard)
                return {}
            done = {st.index: stats[st.index] for st in proc.shards}
            t0, cpu0 = time.time(), time.process_time()
            if clock + 1 < spec.stop_clock:
                answer = spec.ps.clock.tick_wait(clock + 1, done, spec.wait_chunk,
                                                 spec.cfg.call_timeout)
            else:
                spec.ps.clock.tick_many(clock + 1, done, spec.cfg.call_timeout)
            clock += 1
    proc.cache.settle(spec.cfg.call_timeout)  # (the last push's answers)
    _final_checkpoint(spec, proc, clock)
    return {st.index: st.z for st in proc.shards}


def _warm(proc: _ProcessState, sampler: Any, pool: Any) -> None:
    """Compile the sampler's later kernels now, in the mode the clocks sweep in.

    :mod:`biglda.samplers.warm`: windows where the processes take turns, all the process's
    threads on one sweep where the sampler takes them, else one thread a sweep.
    """
    from biglda.samplers.warm import warm_kernels

    one_sweep = bool(proc.windows) or proc.shared_sweep
    warm_kernels(sampler, proc.cache.tokens, proc.threads[0].doc_ptr, proc.z,
                 proc.cache.n_wk, proc.cache.n_k, pool=pool,
                 n_threads=proc.n_threads if one_sweep else 1, windowed=bool(proc.windows))


def _process_windows(spec: GroupSpec, corpus: Any, vocab: np.ndarray, sampler: Any
                     ) -> list[tuple[int, int]]:
    """Return the rows of the cache each step of ``--process-partition`` resamples, by range.

    The vocabulary is cut into :class:`Turns`' W windows of about equal cost by the
    corpus's counts, as the sampler weighs a word's tokens (``n_w ** word_cost_power``:
    lightlda's rare words cost more a token, and windows of equal tokens kept a process
    waiting for the other's window of rare words, pipelines/README.md, "Twenty-eighth
    session"; cgs's, power 1, are of equal tokens). Every process cuts the same from the
    corpus alone, so a seed and layout still make one chain. Window ``r`` as rows ``[lo,
    hi)`` of the cache (its local ids are the global ones, sorted).
    """
    from biglda.errors import ConfigError
    from biglda.samplers.partition import word_windows

    if not getattr(sampler, "word_windows", False):
        raise ConfigError(f"--process-partition needs a sampler whose sweep takes a window "
                          f"of words (cgs's sparse or dense kernel, lightlda), not {sampler!r}")
    cost = np.asarray(corpus.word_count, dtype=np.float64) ** float(sampler.word_cost_power)
    windows = word_windows(cost, Turns(spec.n_processes, spec.cfg.turn_windows).n_windows)
    return [(int(np.searchsorted(vocab, lo)), int(np.searchsorted(vocab, hi)))
            for lo, hi in windows]


def _push_recounts(spec: GroupSpec, proc: _ProcessState, worker: str, backend: str) -> None:
    """Push the counts of the process's starting ``z`` and tick every shard's start clock."""
    from biglda.samplers import count_from_z

    t_init = time.time()
    cache = proc.cache
    doc_ptr = np.asarray([0, len(cache.tokens)], dtype=np.int64)
    n_wk, _ = count_from_z(cache.tokens, doc_ptr, proc.z, cache.n_local, spec.cfg.n_topics)
    cache.push_counts(spec.ps.tables, spec.start_clock - 1, n_wk, spec.cfg.call_timeout)
    del n_wk
    cache.push_members(spec.ps.tables, spec.start_clock - 1, spec.cfg.call_timeout, log=False)
    init_s = time.time() - t_init
    spec.ps.clock.tick_many(spec.start_clock, {
        st.index: {"shard": st.index, "worker": worker, "backend": backend, "init_s": init_s}
        for st in proc.shards}, spec.cfg.call_timeout)


#: Samplers whose chains lose by the threads' one-clock lag (AD-LDA) and gain from rounds, when
#: their threads sweep copies of the table: cgs (its plain kernel; its others, lightlda and
#: warplda sweep the one table on all the threads, ``threads_per_sweep``, so a process has
#: one part and one round). warplda delays its own count updates to the end of a pass anyway,
#: and cutting its passes into rounds made its chain worse (pipelines/README.md, "Rounds").
ROUND_SAMPLERS = ("cgs",)


def rounds_of(cfg: TrainConfig, n_threads: int, algorithm: str) -> int:
    """Return the rounds a clock is swept in.

    ``--rounds`` if given; else 4 with a ``--comm-budget``, or with several parts
    (``n_threads``: threads that sweep parts of their own) and a sampler of
    :data:`ROUND_SAMPLERS`; else 1.
    """
    from biglda.ps.managed import ROUNDS

    if cfg.rounds is not None:
        return int(cfg.rounds)
    if cfg.comm_budget > 0 or (n_threads > 1 and algorithm in ROUND_SAMPLERS):
        return ROUNDS
    return 1


def _sweep_threads(spec: GroupSpec, proc: _ProcessState, samplers: list[Any], pool: Any,
                   clock: int, alpha: np.ndarray, slow: float, n_rounds: int
                   ) -> tuple[list[tuple[Any, float]], tuple[int, int]]:
    """Sweep the process's threads concurrently, in ``n_rounds`` rounds of documents.

    The first thread sweeps the process cache itself, the others copies of it taken before
    any starts. Each thread sweeps its range in ``n_rounds`` runs of documents, the threads
    round by round (round ``r`` draws from the stream ``(seed, clock, shard, r)``; with one
    round, one sweep per thread). After each round every thread's moves are added to the
    cache and, unless it was the last, to the other threads' copies: a thread lags the others
    by a round (AD-LDA within the process with one round), at a barrier, so BSP stays
    deterministic. With a budget the process also sends the largest of its changes so far and
    folds in what the others sent (:mod:`biglda.ps.managed`). ``slow`` (the debug slowdown)
    is spread over the rounds. Returns each thread's ``(SweepResult of the clock, CPU s)``
    and the early bytes ``(sent, received)``.
    """
    from biglda.ps.process_cache import add_deltas
    from biglda.samplers import RandomKey, SweepResult, combine_sweeps

    cfg, cache, early = spec.cfg, proc.cache, proc.early
    tables = proc.thread_tables()
    z_old = ([proc.z[part.lo:part.hi].copy() for part in proc.threads] if n_rounds > 1
             else [])
    if early is not None:
        sent0, got0 = early.bytes_sent, early.bytes_received
        early.start_clock(time.time())
    parts: list[list[Any]] = [[] for _ in proc.threads]
    cpu = [0.0] * len(proc.threads)

    # one part on all the process's threads: the sampler spreads its sweep over the pool
    shared = {"pool": pool, "n_threads": proc.n_threads} if proc.shared_sweep else {}

    def sweep(i: int, r: int) -> tuple[Any, float]:
        part, (n_wk, n_k) = proc.threads[i], tables[i]
        lo, hi, doc_ptr = part.rounds(n_rounds)[r]
        if hi == lo:  # (a range of fewer documents than rounds)
            return SweepResult(_EMPTY32, _EMPTY32, _EMPTY32, np.zeros(cfg.n_topics, np.int64),
                               0, None, 0.0), 0.0
        c0 = time.thread_time()
        res = samplers[i].sweep(cache.tokens[part.lo + lo:part.lo + hi], doc_ptr,
                                proc.z[part.lo + lo:part.lo + hi], n_wk, n_k, alpha, cfg.beta,
                                spec.n_words, RandomKey(cfg.seed, clock, part.key_shard, r),
                                **shared)
        cpu = res.cpu_seconds if res.cpu_seconds is not None else time.thread_time() - c0
        return res, cpu

    for r in range(n_rounds):
        futs = [pool.submit(sweep, i, r) for i in range(1, len(proc.threads))]
        out = [sweep(0, r)] + [f.result() for f in futs]
        if slow:
            time.sleep(slow / n_rounds)
        for i, (res, c) in enumerate(out):
            parts[i].append(res)
            cpu[i] += c
        deltas = [(res.delta_words, res.delta_topics, res.delta_counts, res.delta_k)
                  for res, _ in out]
        last = r + 1 == n_rounds
        # the copies are dropped after the last round: then only the cache takes the others'
        for j, (n_wk, n_k) in enumerate(tables[:1] if last else tables):
            add_deltas(n_wk, n_k, deltas[:j] + deltas[j + 1:])
        if early is not None and not last:  # (the push sends everything anyway)
            early.add(deltas)
            early.send(spec.ps.tables, clock, time.time(), cfg.call_timeout)
            early.receive(spec.ps.tables, tables, cfg.call_timeout)
    if n_rounds == 1:
        results = [(p[0], c) for p, c in zip(parts, cpu, strict=True)]
    else:
        results = [(combine_sweeps(cache.tokens[part.lo:part.hi], z_old[i],
                                   proc.z[part.lo:part.hi], cache.n_local, cfg.n_topics,
                                   parts[i]), cpu[i])
                   for i, part in enumerate(proc.threads)]
    if early is None:
        return results, (0, 0)
    return results, (early.bytes_sent - sent0, early.bytes_received - got0)


class _GivenUp(Exception):
    """The driver gave the attempt up while this process waited in a clock (run_group ends)."""


def _alive(spec: GroupSpec, proc: _ProcessState, clock: int) -> bool:
    """Say whether the attempt goes on: its clock still answers for ``clock``, not ABORT."""
    answer = spec.ps.clock.wait_many([st.index for st in proc.shards], clock, spec.wait_chunk,
                                     spec.cfg.call_timeout)
    return answer is not ClockAnswer.ABORT


def _sweep_steps(spec: GroupSpec, proc: _ProcessState, sampler: Any, pool: Any, clock: int,
                 alpha: np.ndarray, slow: float
                 ) -> tuple[list[tuple[Any, float]], tuple[int, int]]:
    """Sweep the process's clock in W steps, one window of words each (--process-partition).

    In step ``s`` the process resamples, on all its threads, the tokens of its documents
    whose words are in window ``w`` (:class:`Turns`: ``w = (rank m + s) mod W``;
    :func:`_process_windows`; step ``s`` draws from the stream ``(seed, clock, lead
    shard, s)``); no other process resamples ``w`` then, so no row of ``n_wk`` moves in two
    processes at once. Before the step it folds the moves on ``w`` of every step since it
    last had ``w`` (:meth:`Turns.since`: the other processes' of the clock before after
    ``s``, and of this clock before ``s``; :meth:`biglda.ps.managed.EarlyUpdates.wait_window`),
    so it starts from the rows as their last holder left them; after it, it posts its own
    for the processes that have ``w`` next. No pull, no barrier: the cache's rows are exact
    from the posts (the clock's push advances the reader to ``c - 2``, which trims the
    table's log: :meth:`biglda.ps.ShardCache.push`),
    and a clock starts once the process that had its first window last in the clock
    before has posted it (the clock admits a process a clock ahead, ``ClockRules.ahead``).
    ``n_k`` is as under BSP: at the first step it is set to the table's after every
    process's clock before, from their posted totals (:class:`biglda.ps.rules.TotalsBoard`),
    and each later step adds the moves it folds of this clock (on this cache's rows), so
    it lags only by the other windows' moves of the clock. The chain is that of the steps
    between BSP clocks (a pull of clock ``c - 1`` at ``c``'s start), bit for bit: BSP stays
    deterministic.

    Neither the folds nor the posts wait for a round trip: a step asks for the next step's
    posts before it sweeps (the last step for the next clock's first, and for the totals),
    and sends its own without waiting for the answer (all are answered before the clock's
    push). A later step ``follows`` the one before (the sampler keeps its documents' state
    through the clock's steps instead of rebuilding it from ``z`` each step). The clock's
    push still holds every step's moves (the table's record). Returns one ``(SweepResult
    of the clock, CPU s)`` and the posted bytes ``(sent, received)``.
    """
    from biglda.samplers import RandomKey, SweepResult
    from biglda.samplers.base import mean_accept_rate

    cfg, cache, early, tables = spec.cfg, proc.cache, proc.early, spec.ps.tables
    if len(proc.threads) != 1:
        raise AssertionError("the steps sweep one part of the process's shards")
    part = proc.threads[0]
    turns = Turns(spec.n_processes, cfg.turn_windows)
    n, rank, lead = turns.n_windows, spec.process_rank, proc.shards[0].index
    first = clock == spec.start_clock  # (attached at the clock before: nothing of it to fold)
    sent0, got0 = early.bytes_sent, early.bytes_received
    parts, cpu, posts = [], 0.0, []
    asked, asked_totals = proc.asked_next or (None, None)
    proc.asked_next, proc.step_wait = None, 0.0
    for s in range(n):
        w = turns.window(rank, s)
        steps = turns.since(rank, clock, s, spec.start_clock)
        t_wait = time.time()
        if steps and early.wait_window(tables, w, steps, [(cache.n_wk, cache.n_k)],
                                       cfg.call_timeout, alive=lambda: _alive(spec, proc, clock),
                                       asked=asked, k_from=clock) is None:
            raise _GivenUp(clock)
        if s == 0:
            if first:
                proc.n_k_before = cache.n_k.copy()
            else:
                totals = _wait_totals(spec, proc, clock - 1, asked_totals)
                assert proc.n_k_before is not None
                proc.n_k_before += totals
                cache.n_k[:] = proc.n_k_before
        proc.step_wait += time.time() - t_wait
        # the next step's posts are asked for now: they come while this step sweeps
        asked = (early.ask_window(tables, turns.window(rank, s + 1),
                                  turns.since(rank, clock, s + 1, spec.start_clock))
                 if s + 1 < n else None)
        c0 = time.thread_time()
        res = sampler.sweep(cache.tokens, part.doc_ptr, proc.z, cache.n_wk, cache.n_k, alpha,
                            cfg.beta, spec.n_words, RandomKey(cfg.seed, clock, part.key_shard, s),
                            pool=pool, n_threads=proc.n_threads, window=proc.windows[w],
                            follows=s > 0)
        cpu += res.cpu_seconds if res.cpu_seconds is not None else time.thread_time() - c0
        parts.append(res)
        if slow and s + 1 == n:  # (debug: a slow process's clock reaches the others late)
            time.sleep(slow)
        posts.append(early.send_step(tables, clock, w, s, res.delta_words, res.delta_topics,
                                     res.delta_counts))
    dk = np.sum([p.delta_k for p in parts], axis=0).astype(np.int64)
    if clock + 1 < spec.stop_clock:  # the next clock's first step: asked now, comes meanwhile
        # (the totals are posted and asked for in one call: its answer is the next clock's)
        proc.asked_next = (early.ask_window(tables, turns.window(rank, 0),
                                            turns.since(rank, clock + 1, 0, spec.start_clock)),
                           spec.ps.clock.send_ask_totals(clock, lead, dk, spec.n_processes,
                                                         STEP_WAIT))
    else:
        posts.append(spec.ps.clock.send_totals(clock, lead, dk))
    # the posts went out without waiting for their answers: all of them arrived
    call_all(posts, cfg.call_timeout, f"shards {lead}..: steps of clock {clock}")
    # the steps' rows are disjoint ranges: their deltas in the ranges' order are the clock's
    # (sorted and unique, as a sweep's)
    order = [parts[s] for s in sorted(range(n), key=lambda s: turns.window(rank, s))]
    res = SweepResult(np.concatenate([p.delta_words for p in order]),
                      np.concatenate([p.delta_topics for p in order]),
                      np.concatenate([p.delta_counts for p in order]),
                      dk, sum(p.n_tokens for p in parts), mean_accept_rate(parts),
                      sum(p.seconds for p in parts), cpu)
    return [(res, cpu)], (early.bytes_sent - sent0, early.bytes_received - got0)


def _wait_totals(spec: GroupSpec, proc: _ProcessState, clock: int, asked: Any) -> np.ndarray:
    """Every process's change of ``n_k`` in ``clock``, summed, once all posted it."""
    start = time.monotonic()
    while True:
        got = spec.ps.clock.totals(clock, spec.n_processes, STEP_WAIT, spec.cfg.call_timeout,
                                   asked=asked)
        asked = None
        if got is not None:
            return got
        if time.monotonic() - start > spec.cfg.call_timeout:
            raise TimeoutError(f"shards {proc.shards[0].index}..: the changes of n_k in clock "
                               f"{clock} did not all come within {spec.cfg.call_timeout:g} s")
        if not _alive(spec, proc, clock + 1):
            raise _GivenUp(clock + 1)


def _sweep_clock(spec: GroupSpec, proc: _ProcessState, samplers: list[Any], pool: Any,
                 clock: int, alpha: np.ndarray, worker: str, backend: str, t0: float,
                 cpu0: float) -> dict[int, ShardClockStats]:
    """Pull, sweep, log-likelihood, push and checkpoint the process's ``clock``.

    The wait is done (it began at ``t0``). Returns the stats of every shard.
    """
    from biglda.samplers import doc_loglik
    from biglda.samplers.parts import PartQueue

    cfg, cache = spec.cfg, proc.cache
    t_wait = time.time()
    # BSP: exactly the deltas of the clocks before this one (all arrived, by the wait), so a
    # seed and layout give the same run. SSP: whatever has arrived (at least up to
    # clock - 1 - s, by the wait) — fresher reads than the bound are allowed.
    upto = clock - 1 if cfg.staleness == 0 else ALL_CLOCKS
    if not proc.attached:
        pulled = cache.attach(spec.ps.tables, upto, cfg.call_timeout)
    elif proc.windows:  # (the turns' posts brought every move: the push advances, below)
        pulled = 0
    else:
        pulled = cache.refresh(spec.ps.tables, upto, cfg.call_timeout)
    if cfg.comm_budget > 0 or proc.windows:
        if proc.early is None:
            from biglda.ps.managed import EarlyUpdates

            n_shards = len(cache.received[0]) if cache.received[0] is not None else 0
            proc.early = EarlyUpdates(cache, cfg.comm_budget * 1e6 or None, n_shards)
        proc.early.settle()  # the clocks just pulled replace what their offers previewed
    proc.attached = True
    t_pull = time.time()
    # debug: artificially slow shards, and a worker slow per shard it sweeps (as if each
    # thread slept after each of its shards)
    per_shard = float(cfg.slow_workers.get(worker, 0.0))
    slow = max(sum(float(cfg.slow_shards.get(st.index, 0.0)) + per_shard for st in part.shards)
               for part in proc.threads)
    if proc.windows:
        results, early_bytes = _sweep_steps(spec, proc, samplers[0], pool, clock, alpha, slow)
    else:
        results, early_bytes = _sweep_threads(spec, proc, samplers, pool, clock, alpha, slow,
                                              rounds_of(cfg, len(proc.threads),
                                                        samplers[0].algorithm))
    t_sweep = time.time()
    # the doc part of the LL in runs of documents, on the pool's threads (nogil) and, once
    # its push is sent (the push mostly waits for the table actor), on this one
    runs = proc.ll_runs()

    def run_ll(i: int) -> float:
        st, a, b = runs[i]
        ptr = st.doc_ptr[a:b + 1]
        return float(doc_loglik(ptr - ptr[0], st.z[ptr[0]:ptr[-1]], alpha, cfg.n_topics))

    lls = PartQueue(len(runs), run_ll)
    futs = [pool.submit(lls.drain) for _ in range(max(1, proc.n_threads - 1))]
    # processes taking turns: the push also advances to c - 2, which every process had pushed
    # when this clock was admitted (a pull would bring nothing: the posts brought every move).
    # Its answers are waited for at the next clock's push (or the task's end), not here:
    # nothing reads the table before then but the driver's snapshot, which waits for it
    advance = clock - 2 if proc.windows and clock - 2 >= spec.start_clock else None
    pushed = cache.push_all(spec.ps.tables, clock,
                            [(r.delta_words, r.delta_topics, r.delta_counts, r.delta_k)
                             for r, _ in results], cfg.call_timeout, advance=advance,
                            wait=advance is None)
    t_push = time.time()
    lls.drain()
    for fut in futs:
        fut.result()
    t_ll = max(lls.ended, default=t_sweep)
    doc_ll = dict.fromkeys((st.index for st in proc.shards), 0.0)
    for (st, _, _), ll in zip(runs, lls.results, strict=True):  # in run order: the same sums
        doc_ll[st.index] += ll
    # phases in order: the LL's own time, then what the push took beyond it
    t_push = max(t_push, t_ll)
    done = clock + 1
    wrote = None
    if spec.checkpoint_url and ((spec.checkpoint_every > 0 and (
            done % spec.checkpoint_every == 0 or done == spec.stop_clock))
            or done in spec.checkpoint_at):
        slot = _checkpoint_slot(spec, proc, done)
        if slot is not None:
            for st in proc.shards:
                ckpt.write_shard_z(spec.checkpoint_url, slot, st.index, st.z)
            wrote = [done, slot]
    times = {"start": t0, "waited": t_wait, "pull": t_pull, "sweep": t_sweep, "ll": t_ll,
             "push": t_push, "end": time.time(),
             "step_wait": proc.step_wait if proc.windows else 0.0}
    stats = _shard_stats(proc, results, times, worker, backend, clock, doc_ll,
                         (pulled, pushed), wrote, time.process_time() - cpu0)
    if proc.early is not None:
        lead = stats[proc.shards[0].index]
        lead["bytes_early_sent"], lead["bytes_early_received"] = early_bytes
    if done < spec.stop_clock and alpha_due(done, cfg.optimize_alpha_every, cfg.alpha_burn_in):
        for st in proc.shards:
            stats[st.index]["alpha_hist"] = _hist_stats(st.doc_ptr, st.z, cfg.n_topics)
    return stats


def _shard_stats(proc: _ProcessState, results: list[tuple[Any, float]], times: dict,
                 worker: str, backend: str, clock: int, doc_ll: dict[int, float],
                 moved: tuple[int, int], wrote: list[int] | None,
                 process_cpu: float) -> dict[int, ShardClockStats]:
    """Return each shard's share of its thread's clock, by tokens.

    Its busy time ends when the process's does, and its wait is its share of the process's,
    so sums over a worker's shards are its threads' times (until the fifteenth session each
    shard reported the whole wait: a process of 16 shards summed 16 of them); the bytes
    moved and the process's CPU go to the lead shard.
    """
    out = {}
    for part, (res, kcpu) in zip(proc.threads, results, strict=True):
        n = max(1, part.hi - part.lo)
        for st in part.shards:
            f = (st.hi - st.lo) / n
            t = times
            waited = t["end"] - f * (t["end"] - t["waited"])
            shifted = {"start": waited - f * (t["waited"] - t["start"]), "waited": waited,
                       "end": t["end"]}
            for k in ("pull", "sweep", "ll", "push"):
                shifted[k] = waited + f * (t[k] - t["waited"])
            shifted["step_wait"] = f * t.get("step_wait", 0.0)
            lead = st is proc.shards[0]
            share = SimpleNamespace(n_tokens=st.hi - st.lo, seconds=res.seconds * f,
                                    accept_rate=res.accept_rate)
            out[st.index] = shard_clock_stats(
                shard=st.index, worker=worker, backend=backend, clock=clock, res=share,
                times=shifted, pulled=moved[0] if lead else 0, pushed=moved[1] if lead else 0,
                doc_ll=doc_ll[st.index], wrote=wrote, kernel_cpu_s=kcpu * f,
                process_cpu_s=process_cpu if lead else 0.0)
    return out


def _checkpoint_slot(spec: GroupSpec, proc: _ProcessState, done: int) -> int | None:
    """Return the slot the checkpoint of clock ``done`` goes to, or None to skip it.

    The first write of an attempt goes to the slot the driver named (not the committed
    one). A later one waits until the driver has decided the previous write (committed or
    not: :func:`biglda.trainer.checkpoint.wait_decided`) and goes to the slot not committed
    then, so a worker ahead of a lagging driver never writes into the committed slot, and
    every process, reading the same decision, picks the same slot. Not decided within
    ``call_timeout``: this checkpoint is skipped (logged).
    """
    assert spec.checkpoint_url is not None
    if proc.last_write is None:
        slot = int(spec.checkpoint_slot)
    else:
        attrs = ckpt.wait_decided(spec.checkpoint_url, proc.last_write, spec.cfg.call_timeout,
                                  alive=lambda: _alive(spec, proc, done - 1))
        if attrs is None:
            log.warning(
                "checkpoint of clock %d skipped: the driver has not decided the one of clock "
                "%d (within %g s, or it gave the attempt up)", done, proc.last_write,
                spec.cfg.call_timeout)
            return None
        slot = 1 - int(attrs["slot"])
    proc.last_write = done
    return slot


def _final_checkpoint(spec: GroupSpec, proc: _ProcessState, clock: int) -> None:
    """Make the last state resumable too when stopped early (the driver's stop rule)."""
    if (spec.checkpoint_url and spec.checkpoint_every > 0 and clock < spec.stop_clock
            and clock % spec.checkpoint_every):
        slot = _checkpoint_slot(spec, proc, clock)
        if slot is None:
            return
        for st in proc.shards:
            ckpt.write_shard_z(spec.checkpoint_url, slot, st.index, st.z)
            spec.ps.mailbox.note(st.index, {"final_checkpoint": [clock, slot]},
                                 spec.cfg.call_timeout)



def run_group_failfast(spec: GroupSpec, connect_timeout: float) -> dict[int, np.ndarray]:
    """:func:`run_group`, seceded from the worker's thread pool.

    A call to an actor on a dead worker fails only once Dask gives up connecting (up to
    ``distributed.comm.timeouts.connect``, 30 s by default) or the call times out. An aborted
    task blocked in such a call would hold its worker's only thread, and the recovered run's
    task for that worker could not start until it returns. Seceded, it blocks only its own
    thread; it ends with an error at the latest after ``call_timeout`` and can no longer write
    a checkpoint (its next step needs the dead actor, or gets ``ABORT`` from the live clock).
    The connect timeout is shortened while the task runs (process-wide: kept well above a
    healthy connect on a cluster network).
    """
    import dask
    from distributed import secede

    secede()
    with dask.config.set({"distributed.comm.timeouts.connect": f"{float(connect_timeout)}s"}):
        return run_group(spec)
