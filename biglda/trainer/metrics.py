"""The metrics records of a run: one typed definition and one builder each, and their sinks.

Records (``type`` field): ``start``, ``iteration`` (one per clock), ``recovery``, ``rebalance``,
``end`` — published with ``client.log_event("biglda", record)`` and passed to ``on_record``
callbacks (:class:`Emitter`); :class:`JsonlSink` writes them as ``metrics.jsonl`` for the CLI
and the pipeline. :class:`ShardClockStats` is what a worker task reports per shard and clock,
the input of :func:`iteration_record`. Field meanings: docs/contracts.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TypedDict

import numpy as np

log = logging.getLogger("biglda.train")

# any of the records below, as a sink or a callback sees it (TypedDicts are Mappings)
Record = Mapping[str, Any]
OnRecord = Callable[[Record], None]


class ShardClockStats(TypedDict, total=False):
    """One shard's report of one clock (sent with its tick; :func:`shard_clock_stats`)."""

    shard: int
    worker: str
    backend: str
    clock: int
    tokens: int
    kernel_s: float
    wait_s: float       # SSP wait: the symptom in *other* workers, not slowness
    pull_s: float
    sweep_s: float
    ll_s: float         # the doc LL (computed while the push is under way)
    push_s: float       # the push, beyond the doc LL's time
    checkpoint_s: float
    clock_s: float
    t_start: float
    t_end: float
    bytes_pulled: int
    bytes_pushed: int
    accept_rate: float | None
    doc_ll: float
    checkpoint: list[int] | None   # [clock, slot] when it wrote its z for a checkpoint
    kernel_cpu_s: float            # CPU s of the sweep (this thread)
    process_cpu_s: float           # CPU s of the worker process over the clock
    alpha_hist: list[np.ndarray]   # [count_hist, length_hist] when alpha is optimized next
    bytes_early_sent: int          # managed communication (--comm-budget): offers sent
    bytes_early_received: int      # and received over the clock


def shard_clock_stats(*, shard: int, worker: str, backend: str, clock: int, res: Any,
                      times: dict[str, float], pulled: int, pushed: int, doc_ll: float,
                      wrote: list[int] | None, kernel_cpu_s: float,
                      process_cpu_s: float) -> ShardClockStats:
    """Return the stats of one shard's clock.

    ``times``: the moments ``start``, ``waited`` (the SSP wait done), ``pull``, ``sweep``,
    ``ll``, ``push`` and ``end``, and optionally ``step_wait``, seconds of the sweep spent
    waiting for other processes (the steps of processes taking turns): they count as wait,
    not as sweep; ``res``: the sampler's SweepResult.
    """
    t = times
    step_wait = t.get("step_wait", 0.0)
    return ShardClockStats(
        shard=shard, worker=worker, backend=backend, clock=clock, tokens=res.n_tokens,
        kernel_s=res.seconds, wait_s=t["waited"] - t["start"] + step_wait,
        pull_s=t["pull"] - t["waited"], sweep_s=t["sweep"] - t["pull"] - step_wait,
        ll_s=t["ll"] - t["sweep"], push_s=t["push"] - t["ll"],
        checkpoint_s=t["end"] - t["push"], clock_s=t["end"] - t["start"], t_start=t["start"],
        t_end=t["end"], bytes_pulled=pulled, bytes_pushed=pushed, accept_rate=res.accept_rate,
        doc_ll=doc_ll, checkpoint=wrote, kernel_cpu_s=kernel_cpu_s, process_cpu_s=process_cpu_s)


class IterationRecord(TypedDict, total=False):
    """The record of one iteration (clock).

    Built by :func:`iteration_record`, then the driver adds ``alpha`` (when optimized),
    ``stragglers``, ``top_words`` and ``checkpoint``.
    """

    type: str
    run_id: str
    iteration: int
    n_iterations: int
    elapsed: float
    ll: float
    ll_per_token: float
    tokens_per_s: float
    tokens_per_s_per_worker: dict[str, float]
    clocks: dict[str, int]
    clock_spread: int
    bytes_pushed: int
    bytes_pulled: int
    bytes_early_sent: int      # managed communication; 0 without --comm-budget
    bytes_early_received: int
    accept_rate: float | None
    eta_s: float
    ps_overhead: float | None
    kernel_s: float
    clock_s: float
    kernel_cpu_s: float
    process_cpu_s: float
    wait_s: float
    pull_s: float
    push_s: float
    ll_s: float
    backends: dict[str, str]
    tokens_per_worker: dict[str, int]
    busy_s_per_worker: dict[str, float]
    clock_spread_s: float
    top_words: list[list[str]] | None
    alpha: list[float]
    stragglers: list[str]
    checkpoint: int | None


class StartRecord(TypedDict):
    """Emitted once the workers and backends are known, before any sampling."""

    type: str
    run_id: str
    config: dict[str, Any]
    backends: dict[str, str]
    balance: bool
    n_tokens: int
    n_docs: int
    n_words: int
    dashboard: str | None
    pages: list[str]
    corpus: str
    out: str
    sampler_choice: dict[str, Any] | None  # what sampler="auto" chose and why (else None)
    layout: dict[str, Any] | None  # the embedded cluster's processes x threads, and why


class EndRecord(TypedDict):
    """Emitted last; ``status``: "ok", "error" or "interrupted"."""

    type: str
    run_id: str
    elapsed: float
    status: str
    out: str | None


class RecoveryRecord(TypedDict):
    """Emitted when the run restarted its shards after a lost worker (:class:`Recovery`)."""

    type: str
    run_id: str
    failed_clock: int
    resumed_clock: int
    lost_workers: list[str]
    error: str
    restart_s: float
    workers: list[str]


class RebalanceRecord(TypedDict):
    """Emitted when shards moved between workers (:class:`Rebalance`)."""

    type: str
    run_id: str
    clock: int
    reason: str
    slow_workers: list[str]
    tokens_per_s: dict[str, float]
    shards_before: dict[str, list[int]]
    shards_after: dict[str, list[int]]
    restart_s: float


# ----------------------------------------------------------------------------- builders


def busy_by_worker(rows: Iterable[ShardClockStats]) -> dict[str, list[float]]:
    """Return ``{worker: [busy seconds, tokens]}`` of shards' statistics.

    Busy time is clock time minus SSP wait (waiting is the symptom in *other* workers, not
    slowness).
    """
    busy: dict[str, list[float]] = {}
    for r in rows:
        acc = busy.setdefault(r["worker"], [0.0, 0.0])
        acc[0] += max(0.0, r["clock_s"] - r["wait_s"])
        acc[1] += max(1, r["tokens"])
    return busy


def clock_spread_s(busy: dict[str, list[float]]) -> float:
    """Return the clock spread in seconds.

    It is the longest minus the shortest busy time of the workers at one clock, a worker's
    busy time being the sum over its shards of the clock's time minus
    the SSP wait (pull, sweep, log-likelihood, push, checkpoint). Under BSP every worker starts
    a clock at the same barrier, so this is how long the fastest worker sits idle waiting for
    the slowest. Durations only, so clocks of different machines need not agree.
    ``busy``: :func:`busy_by_worker` of one clock's statistics.

    Examples
    --------
    >>> clock_spread_s({"a": [1.5, 100], "b": [0.5, 100]})
    1.0
    """
    times = [v[0] for v in busy.values()]
    return float(max(times) - min(times)) if times else 0.0


@dataclass(frozen=True)
class ClockFrame:
    """What :func:`iteration_record` needs besides the stats: the run and where it stands."""

    run_id: str
    n_iterations: int
    n_tokens: int
    t_prev: float                    # end of the previous clock (or the attempt's start)
    t0: float                        # start of the attempt
    done_before: int                 # records in the history before this one
    # the end of the attempt's first clock and that clock (None during it): the ETA is
    # from the clocks after it, as the first compiles kernels and fills caches (on a fresh
    # install most of a short run's time, which made an ETA from it many times too long)
    t_first: float | None = None
    c_first: int = -1


def iteration_record(frame: ClockFrame, c: int, stats: dict[int, ShardClockStats],
                     ll: float, clocks: list[int], placement: dict[int, str]) -> IterationRecord:
    """Build the record of clock ``c`` from every shard's stats.

    ``ll``: the joint log-likelihood; ``clocks``: completed clocks of every shard;
    ``placement``: shard -> worker.
    """
    rows = list(stats.values())
    t_end = max(r["t_end"] for r in rows)
    dt = max(t_end - frame.t_prev, 1e-9)
    per_worker: dict[str, list[float]] = {}
    for r in rows:
        acc = per_worker.setdefault(r["worker"], [0.0, 0.0])
        acc[0] += r["tokens"]
        acc[1] += r["clock_s"]
    clock_s = sum(r["clock_s"] for r in rows)
    kernel_s = sum(r["kernel_s"] for r in rows)
    accepts = [(r["accept_rate"], r["tokens"]) for r in rows if r["accept_rate"] is not None]
    worker_clock: dict[str, int] = {}
    for shard, done in enumerate(clocks):
        w = placement.get(shard, "?")
        worker_clock[w] = min(worker_clock.get(w, done), done)
    elapsed = t_end - frame.t0
    if frame.t_first is not None and c > frame.c_first:
        mean_it = (t_end - frame.t_first) / (c - frame.c_first)
    else:
        mean_it = elapsed / (frame.done_before + 1)
    busy = busy_by_worker(rows)
    return IterationRecord(
        type="iteration", run_id=frame.run_id, iteration=c + 1,
        n_iterations=frame.n_iterations, elapsed=elapsed,
        ll=ll, ll_per_token=ll / frame.n_tokens,
        tokens_per_s=sum(r["tokens"] for r in rows) / dt,
        tokens_per_s_per_worker={w: v[0] / max(v[1], 1e-9) for w, v in per_worker.items()},
        clocks=worker_clock, clock_spread=int(max(clocks) - min(clocks)),
        bytes_pushed=int(sum(r["bytes_pushed"] for r in rows)),
        bytes_pulled=int(sum(r["bytes_pulled"] for r in rows)),
        bytes_early_sent=int(sum(r.get("bytes_early_sent", 0) for r in rows)),
        bytes_early_received=int(sum(r.get("bytes_early_received", 0) for r in rows)),
        accept_rate=(sum(a * n for a, n in accepts) / sum(n for _, n in accepts)
                     if accepts else None),
        eta_s=max(0.0, (frame.n_iterations - (c + 1)) * mean_it),
        ps_overhead=max(0.0, 1.0 - kernel_s / clock_s) if clock_s > 0 else None,
        kernel_s=kernel_s, clock_s=clock_s,
        kernel_cpu_s=sum(r.get("kernel_cpu_s", 0.0) for r in rows),
        process_cpu_s=sum(r.get("process_cpu_s", 0.0) for r in rows),
        wait_s=sum(r["wait_s"] for r in rows), pull_s=sum(r["pull_s"] for r in rows),
        push_s=sum(r["push_s"] for r in rows), ll_s=sum(r["ll_s"] for r in rows),
        backends={r["worker"]: r.get("backend", "cpu") for r in rows},
        tokens_per_worker={w: int(v[0]) for w, v in per_worker.items()},
        busy_s_per_worker={w: v[0] for w, v in busy.items()},
        clock_spread_s=clock_spread_s(busy),
        top_words=None,
    )


def start_record(*, run_id: str, config: dict[str, Any], backends: dict[str, str],
                 balance: bool, corpus: Any, corpus_url: str, out: str,
                 dashboard: str | None, pages: list[str],
                 sampler_choice: dict[str, Any] | None = None,
                 layout: dict[str, Any] | None = None) -> StartRecord:
    """Build the ``start`` record of a run on ``corpus`` (a :class:`biglda.corpus.Corpus`)."""
    return StartRecord(type="start", run_id=run_id, config=config, backends=backends,
                       sampler_choice=sampler_choice, layout=layout,
                       balance=balance, n_tokens=int(corpus.n_tokens),
                       n_docs=int(corpus.n_docs), n_words=int(corpus.n_words),
                       dashboard=dashboard, pages=pages, corpus=str(corpus_url), out=str(out))


def end_record(run_id: str, elapsed: float, status: str, out: str | None) -> EndRecord:
    """Build the ``end`` record; ``out`` only when the model was written (``status == "ok"``)."""
    return EndRecord(type="end", run_id=run_id, elapsed=elapsed, status=status,
                     out=str(out) if status == "ok" and out is not None else None)


@dataclass
class Recovery:
    """One recovery: when the failure was seen, what was lost, where the run went back to."""

    failed_clock: int        # the clock the driver was waiting for when it saw the failure
    resumed_clock: int       # the checkpoint clock every shard restarted from
    lost_workers: list[str]
    error: str
    detect_s: float          # failure seen -> old tasks stopped and actors released
    restart_s: float         # failure seen -> new actors started and tasks submitted
    workers: list[str]       # the workers of the new attempt

    def as_record(self, run_id: str) -> RecoveryRecord:
        """Build the ``recovery`` record."""
        return RecoveryRecord(type="recovery", run_id=run_id, failed_clock=self.failed_clock,
                              resumed_clock=self.resumed_clock,
                              lost_workers=list(self.lost_workers), error=self.error,
                              restart_s=self.restart_s, workers=list(self.workers))


@dataclass
class Rebalance:
    """One rebalance: the slow workers, their rates and every worker's shards around a restart.

    The shards are those before and after the restart at ``clock`` (a committed checkpoint).
    ``reason``: ``"straggler"`` (a
    worker slow for ``rebalance_after`` clocks) or ``"throughput"`` (the one-time balance of a
    heterogeneous job by the throughput measured over its first clocks).
    """

    clock: int
    slow_workers: list[str]
    rates: dict[str, float]
    before: dict[str, list[int]]
    after: dict[str, list[int]]
    restart_s: float = 0.0   # decision -> new actors started and tasks submitted
    reason: str = "straggler"

    def as_record(self, run_id: str) -> RebalanceRecord:
        """Build the ``rebalance`` record."""
        return RebalanceRecord(type="rebalance", run_id=run_id, clock=self.clock,
                               reason=self.reason, slow_workers=list(self.slow_workers),
                               tokens_per_s=dict(self.rates),
                               shards_before={w: list(v) for w, v in self.before.items()},
                               shards_after={w: list(v) for w, v in self.after.items()},
                               restart_s=self.restart_s)


def backends_used(history: Sequence[Record]) -> dict[str, str]:
    """``{worker: backend}`` of every worker that sampled a clock of ``history``."""
    out: dict[str, str] = {}
    for r in history:
        out.update(r.get("backends") or {})
    return dict(sorted(out.items()))


def history_for_store(history: Sequence[Record]) -> list[Record]:
    """Return the records as a model or checkpoint stores them (without the top words)."""
    return [{k: v for k, v in r.items() if k != "top_words"} for r in history]


# ----------------------------------------------------------------------------- sinks


class Emitter:
    """Sends every record to the scheduler's event log (the dashboard's feed) and callbacks.

    Neither may stop training, a failing event log least of all.
    """

    def __init__(self, client: Any, callbacks: OnRecord | Iterable[OnRecord] | None) -> None:
        self.client = client
        self.callbacks = as_callbacks(callbacks)

    def __call__(self, record: Record) -> None:
        """Send ``record`` to the event log (errors dropped), then to every callback."""
        with contextlib.suppress(Exception):
            self.client.log_event("biglda", record)
        for cb in self.callbacks:
            cb(record)


def as_callbacks(on_record: OnRecord | Iterable[OnRecord] | None) -> list[OnRecord]:
    """``on_record`` (None, one callback or several) as a list."""
    if on_record is None:
        return []
    return list(on_record) if isinstance(on_record, list | tuple) else [on_record]  # type: ignore[list-item]


class JsonlSink:
    """Writes every record as one JSON line (``metrics.jsonl``), flushed per record.

    The file is opened on the first record (a run that fails before starting writes none)
    and closed by :meth:`close` (or the ``with`` block). ``append``: add to an existing
    file (a resumed run continues its metrics; iterations recorded after the checkpoint it
    resumes from appear twice, the later record being the one the model keeps).
    """

    def __init__(self, path: str | None, append: bool = False) -> None:
        self.path = path
        self.append = append
        self._file: IO[str] | None = None

    def __call__(self, record: Record) -> None:
        """Write ``record`` as one JSON line and flush (nothing without a path)."""
        if self.path is None:
            return
        if self._file is None:
            # closed in close()
            self._file = open(self.path, "a" if self.append else "w")  # noqa: SIM115
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file (if one was opened)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> JsonlSink:
        """Return the sink itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the file."""
        self.close()
