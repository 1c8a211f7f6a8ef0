"""Recovery from lost workers, clean interruption, straggler reports, memory settings.

Strategy for a lost worker ("resume in-process"): the parameter server is a function of all
``z`` (DESIGN.md), and a committed checkpoint holds the ``z`` of *every* shard at the *same*
clock (the driver commits a slot only after every shard reported writing it). So when a worker
is lost — a sampling task fails, an actor call fails, or a worker leaves the scheduler — the
driver aborts the round, waits for the tasks still running on live workers to return (so no old
task writes into a checkpoint slot the new tasks use), restarts the table-shard and clock
actors on the live workers (the nanny's replacement included, when it joins within
``recovery_wait``), and starts every shard again from the latest committed checkpoint (or from
the initial ``z`` when there is none): each shard pushes the recount of its ``z``, exactly as
``--resume`` does. No delta can be applied twice or lost, because the new table is built from
nothing but the checkpoint's ``z``; the price is at most ``checkpoint_every`` clocks of work.
Under BSP the chain is deterministic for a seed and shard plan (pulls are by clock), so a
recovered run ends with the same ``z`` as a run without failures.

Rebalancing a straggler uses the same restart without a failure: when a worker has been a
straggler for ``rebalance_after`` consecutive clocks, there are more shards than workers and a
checkpoint was just committed at the current clock (so no work is lost), the driver stops the
round, places the shards again in proportion to the workers' measured sampling throughput
(:func:`biglda.samplers.backends.balance_shards`), and restarts every shard from that
checkpoint. The shard plan does not change, and under BSP the chain depends on the seed and the
shard plan only, so a rebalanced run ends with the same ``z`` as one that was not.

This module holds the pieces the driver composes: the errors, the checkpoint lookup, the
SIGINT flag, the worker-loss and straggler checks, the rebalance plan, and the Dask memory
settings of the embedded cluster.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.errors import BigLDAError, ClusterError

log = logging.getLogger("biglda.train")

# Dask memory management for the workers of the embedded cluster. The parameter-server
# actors hold the table outside Dask's data store, so spilling cannot shrink them, and a
# nanny that terminates a worker at 95% of its limit would kill a table shard. The table and
# caches are sized up front (``check_table_fits``: at most half of the smallest limit), so the
# workers are told never to terminate or pause themselves; spilling of task results stays on.
EMBEDDED_MEMORY_CONFIG = {
    "distributed.worker.memory.terminate": False,
    "distributed.worker.memory.pause": False,
}


class WorkerLost(ClusterError):
    """A worker the run uses left the cluster (the driver recovers from it)."""


class Interrupted(BigLDAError):
    """Training was interrupted (SIGINT); the message says how to resume."""

    exit_code = 130


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

    def as_record(self, run_id: str) -> dict[str, Any]:
        return {"type": "recovery", "run_id": run_id, "failed_clock": self.failed_clock,
                "resumed_clock": self.resumed_clock, "lost_workers": list(self.lost_workers),
                "error": self.error, "restart_s": self.restart_s, "workers": list(self.workers)}


def latest_checkpoint(url: str | None, n_topics: int, n_tokens: int) -> dict[str, Any] | None:
    """Attributes of the committed checkpoint at ``url``, or None if there is none (yet)."""
    if url is None:
        return None
    from biglda.train import checkpoint as ckpt

    try:
        return ckpt.open_checkpoint(url, n_topics, n_tokens)
    except BigLDAError:
        return None


def live_workers(client: Any) -> set[str]:
    """Addresses of the workers the scheduler knows now (a fresh query)."""
    return set(client.scheduler_info(n_workers=-1)["workers"])


def check_workers(client: Any, used: set[str], confirm_s: float = 2.0) -> None:
    """Raise :class:`WorkerLost` if a worker in ``used`` is no longer in the cluster.

    A worker missing from one answer is asked about again ``confirm_s`` later and counts as
    lost only if it is still missing: in the 100M-token run (2026-11-21) one answer left out
    both workers while their processes, actors and tasks ran on, and the recovery it started
    found nothing lost (``lost_workers: []``) and cost a restart from clock 0.
    """
    lost = used - live_workers(client)
    if lost and confirm_s > 0:
        time.sleep(confirm_s)
        lost &= used - live_workers(client)
    lost = sorted(lost)
    if lost:
        raise WorkerLost(f"lost worker(s) {', '.join(lost)}")


def wait_for_loss(client: Any, used: set[str], timeout: float) -> set[str]:
    """The workers of ``used`` gone from the scheduler, waiting up to ``timeout`` for one."""
    deadline = time.monotonic() + timeout
    while True:
        lost = used - live_workers(client)
        if lost or time.monotonic() >= deadline:
            return lost
        time.sleep(0.1)


def wait_for_workers(client: Any, n: int, timeout: float) -> None:
    """Wait up to ``timeout`` s for ``n`` workers (a nanny's replacement); never raises."""
    deadline = time.monotonic() + timeout
    while len(live_workers(client)) < n and time.monotonic() < deadline:
        time.sleep(0.2)


def busy_by_worker(rows: list[dict]) -> dict[str, list[float]]:
    """``{worker: [busy seconds, tokens]}`` of shards' statistics: clock time minus SSP wait
    (waiting is the symptom in *other* workers, not slowness)."""
    busy: dict[str, list[float]] = {}
    for r in rows:
        acc = busy.setdefault(r["worker"], [0.0, 0.0])
        acc[0] += max(0.0, r["clock_s"] - r["wait_s"])
        acc[1] += max(1, r["tokens"])
    return busy


def find_stragglers(rows: list[dict], factor: float, min_excess_s: float = 0.05) -> list[str]:
    """Workers whose sampling of one clock took ``factor`` x longer per token than the others.

    ``rows``: the shards' statistics of one clock. A worker's time is its shards' clock time
    minus the SSP wait, per token; it is compared with the median of the *other* workers (with
    two workers, the other one). ``min_excess_s`` keeps scheduling noise on very short clocks
    from being reported.
    """
    busy = busy_by_worker(rows)
    if len(busy) < 2:
        return []
    rate = {w: s / n for w, (s, n) in busy.items()}
    out = []
    for w, (s, n) in busy.items():
        others = float(np.median([v for o, v in rate.items() if o != w]))
        if rate[w] > factor * others and s - others * n > min_excess_s:
            out.append(w)
    return sorted(out)


class StragglerWatch:
    """Counts consecutive straggler clocks per worker and measures every worker's throughput.

    ``update(rows, stragglers)`` once per clock; it returns the workers that have now been
    stragglers for at least ``after`` consecutive clocks (``after`` = 0: never any).
    ``rates()`` is tokens per busy second of each worker over the last ``after`` clocks.
    """

    def __init__(self, after: int) -> None:
        self.after = int(after)
        self.streak: dict[str, int] = {}
        self.window: deque[dict[str, list[float]]] = deque(maxlen=max(1, self.after))

    def update(self, rows: list[dict], stragglers: list[str]) -> list[str]:
        busy = busy_by_worker(rows)
        self.window.append(busy)
        self.streak = {w: self.streak.get(w, 0) + 1 for w in stragglers}
        if self.after <= 0:
            return []
        return sorted(w for w, n in self.streak.items() if n >= self.after)

    def rates(self) -> dict[str, float]:
        total: dict[str, list[float]] = {}
        for busy in self.window:
            for w, (s, n) in busy.items():
                acc = total.setdefault(w, [0.0, 0.0])
                acc[0] += s
                acc[1] += n
        return {w: n / max(s, 1e-9) for w, (s, n) in total.items()}


def plan_rebalance(shard_tokens: dict[int, int], placement: dict[int, str],
                   rates: dict[str, float], min_gain: float = 0.1) -> dict[int, str] | None:
    """A new ``shard -> worker`` placement in proportion to the workers' throughput, or None.

    ``shard_tokens``: tokens of every shard; ``placement``: where each shard is now;
    ``rates``: measured tokens/s of the workers that hold shards (only they are placed again:
    a worker without shards has no measured rate). Shards go largest first to the worker that
    would finish soonest (:func:`biglda.samplers.backends.balance_shards`). None when the
    predicted time of a clock (the slowest worker's load / rate) would not drop by at least
    ``min_gain`` (a fraction), so a rebalance that gains little is not worth a restart.
    """
    from biglda.samplers.backends import balance_shards

    workers = sorted({placement[s] for s in shard_tokens})
    if len(workers) < 2 or any(not rates.get(w, 0.0) > 0 for w in workers):
        return None
    shards = sorted(shard_tokens)
    speed = [rates[w] for w in workers]
    assign = balance_shards(speed, [shard_tokens[s] for s in shards])
    new = {s: workers[a] for s, a in zip(shards, assign, strict=True)}

    def makespan(p: dict[int, str]) -> float:
        load: dict[str, int] = {}
        for s, w in p.items():
            load[w] = load.get(w, 0) + shard_tokens[s]
        return max(n / rates[w] for w, n in load.items())

    if makespan(new) > (1.0 - min_gain) * makespan(placement):
        return None
    return new


@dataclass
class Rebalance:
    """One rebalance: the slow workers, their rates and the shards of every worker before and
    after the restart at ``clock`` (a committed checkpoint). ``reason``: ``"straggler"`` (a
    worker slow for ``rebalance_after`` clocks) or ``"throughput"`` (the one-time balance of a
    heterogeneous job by the throughput measured over its first clocks)."""

    clock: int
    slow_workers: list[str]
    rates: dict[str, float]
    before: dict[str, list[int]]
    after: dict[str, list[int]]
    restart_s: float = 0.0   # decision -> new actors started and tasks submitted
    reason: str = "straggler"

    def as_record(self, run_id: str) -> dict[str, Any]:
        return {"type": "rebalance", "run_id": run_id, "clock": self.clock, "reason": self.reason,
                "slow_workers": list(self.slow_workers), "tokens_per_s": dict(self.rates),
                "shards_before": {w: list(v) for w, v in self.before.items()},
                "shards_after": {w: list(v) for w, v in self.after.items()},
                "restart_s": self.restart_s}


class RebalanceRequest(Exception):
    """Raised inside an attempt to stop it at a committed checkpoint and restart the shards
    with ``assignment`` (shard -> worker). Not an error: no recovery is counted."""

    def __init__(self, event: Rebalance, assignment: dict[int, str]) -> None:
        super().__init__(f"rebalance at clock {event.clock}")
        self.event = event
        self.assignment = assignment


def shards_by_worker(placement: dict[int, str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for s, w in sorted(placement.items()):
        out.setdefault(w, []).append(int(s))
    return out


@contextlib.contextmanager
def ignore_sigint() -> Iterator[None]:
    """Ignore SIGINT while worker processes are started (they inherit it across exec).

    Python leaves SIGINT ignored in a process that starts with it ignored, so the workers of
    the embedded cluster do not die of the Ctrl-C meant for the driver. Main thread only.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class InterruptFlag:
    """Set by the first SIGINT; a second SIGINT raises KeyboardInterrupt (hard stop)."""

    def __init__(self) -> None:
        self.set = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.set:
            raise KeyboardInterrupt
        self.set = True
        log.warning("interrupt: stopping after the current clock and writing a checkpoint "
                    "(interrupt again to stop at once)")


@contextlib.contextmanager
def interrupt_flag() -> Iterator[InterruptFlag]:
    """Catch SIGINT as a flag while the driver runs (main thread only; restored after)."""
    flag = InterruptFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, flag._handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def run_group_failfast(spec: Any, connect_timeout: float) -> dict[int, np.ndarray]:
    """:func:`biglda.train.worker.run_group`, seceded from the worker's thread pool.

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

    from biglda.train.worker import run_group

    secede()
    with dask.config.set({"distributed.comm.timeouts.connect": f"{float(connect_timeout)}s"}):
        return run_group(spec)
