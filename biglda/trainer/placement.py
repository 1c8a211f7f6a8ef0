"""Where shards run: the shard plan, each worker's backend, task groups, and the moves.

- :func:`plan_cluster`: the workers, the shard plan (one shard per worker thread, or
  ``shards_per_worker`` per thread when the job is balanced) and the backend of each worker
  (:func:`plan_backends` asks the workers for their GPU status); checks the table fits.
- :func:`plan_groups`: shards onto (worker, thread) task groups, largest first.
- Stragglers (:func:`find_stragglers`, :class:`StragglerWatch`) and the throughput balance of
  a heterogeneous job both end in :func:`propose_rebalance`: a new placement in proportion to
  the workers' measured tokens/s (:func:`balance_shards`), returned as a
  :class:`RebalancePlan` for the run to restart from the checkpoint just committed.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.errors import ConfigError
from biglda.ps import check_table_fits
from biglda.trainer.cluster import worker_slots
from biglda.trainer.config import TrainConfig
from biglda.trainer.metrics import Rebalance, ShardClockStats, busy_by_worker

log = logging.getLogger("biglda.train")

Slots = list[tuple[str, int, int]]  # (address, nthreads, memory_limit) of every worker


def plan_cluster(client: Any, corpus: Any, cfg: TrainConfig, log_choice: bool = False
                 ) -> tuple[Slots, list[Any], dict[str, str]]:
    """Return the workers, the shard plan and the backend of each worker.

    Workers are ``(address, nthreads, memory_limit)``. Checks the table fits and that every
    worker can run its backend.

    Shards: ``cfg.n_shards``, else one per worker thread, or ``shards_per_worker`` per thread
    when the job is balanced by throughput (:func:`balancing`), so there are shards to move.
    """
    slots = worker_slots(client, timeout=30.0)
    backends = plan_backends(client, cfg, [a for a, _, _ in slots], log_choice)
    n_slots = sum(max(1, t) for _, t, _ in slots)
    per_slot = cfg.shards_per_worker if balancing(cfg, backends) and len(slots) > 1 else 1
    shards = corpus.plan_shards(int(cfg.n_shards or n_slots * per_slot))
    check_fits(corpus, cfg, slots, shards)
    return slots, shards, backends



def plan_backends(client: Any, cfg: TrainConfig, workers: list[str],
                  log_choice: bool = False) -> dict[str, str]:
    """Return ``{worker: "cpu" | "gpu"}``: what each worker will run.

    Its task decides the same way (:func:`biglda.trainer.worker.worker_backend`). Asks the
    workers for their GPU status unless every request is "cpu"; "gpu" on a worker without a
    usable GPU is a ConfigError naming the worker and the cause. Logs the choice of "auto".
    """
    requested = {w: cfg.worker_backends.get(w, cfg.backend) for w in workers}
    if all(b == "cpu" for b in requested.values()):
        return dict(requested)
    from biglda.samplers.backends import GpuStatus, pick_backend
    from biglda.trainer.worker import gpu_probe  # (imports the ps cache: only when asked)

    probes = client.run(gpu_probe, workers=list(workers))
    out, reasons = {}, {}
    for w in workers:
        status = GpuStatus(**probes[w])
        try:
            out[w] = pick_backend(requested[w], status)
        except ConfigError as exc:
            raise ConfigError(f"worker {w}: {exc}") from None
        reasons[w] = status.reason
    if log_choice:
        for w in workers:
            log.info("backend %s on worker %s: %s (%s)", requested[w], w, out[w], reasons[w])
    return out



def balancing(cfg: TrainConfig, backends: dict[str, str]) -> bool:
    """Return whether shards are balanced by measured throughput.

    They are with ``balance="throughput"``, or ``"auto"`` and the workers run different
    backends (a GPU and CPU job).
    """
    if cfg.balance == "auto":
        return len(set(backends.values())) > 1
    return cfg.balance == "throughput"



def check_fits(corpus: Any, cfg: TrainConfig, slots: Slots,
                shards: list[Any], max_per_worker: int | None = None) -> None:
    """Raise :class:`ConfigError` if a table shard plus the workers' shard caches cannot fit."""
    # Each worker caches at most min(V, its tokens) rows per shard it holds.
    per_worker_cache = max(min(corpus.n_words, s.n_tokens) for s in shards) * \
        (max_per_worker or -(-len(shards) // len(slots)))
    check_table_fits(corpus.n_words, cfg.n_topics, {a: m for a, _, m in slots},
                     cache_rows_per_worker=per_worker_cache)



def plan_groups(shards: list[Any], slots: Slots,
                assignment: dict[int, str] | None = None) -> list[tuple[str, list]]:
    """Assign shards to (worker, thread) task groups, largest first onto the lightest group.

    ``assignment`` (shard -> worker, a rebalance): each worker's shards over its threads.
    """
    if assignment is not None:
        return [g for addr, nthreads, mem in slots for g in plan_groups(
            [s for s in shards if assignment.get(s.index) == addr], [(addr, nthreads, mem)])]
    groups: list[tuple[str, list]] = [(addr, []) for addr, nthreads, _ in slots
                                      for _ in range(max(1, nthreads))]
    load = [0] * len(groups)
    for s in sorted(shards, key=lambda s: -s.n_tokens):
        g = min(range(len(groups)), key=lambda i: (load[i], i))
        groups[g][1].append(s)
        load[g] += s.n_tokens
    for _, members in groups:
        members.sort(key=lambda s: s.index)
    return [g for g in groups if g[1]]



def by_process(groups: list[tuple[str, list]]) -> list[tuple[str, list[list]]]:
    """Gather :func:`plan_groups`' (worker, thread) groups per worker process.

    One task per process sweeps them with one thread per group over one process cache.
    """
    out: dict[str, list[list]] = {}
    for addr, members in groups:
        out.setdefault(addr, []).append(list(members))
    return list(out.items())



def balance_shards(throughputs, shard_tokens) -> list[int]:
    """Assign shards to workers of unequal speed (GPU and CPU workers in one job).

    Greedy longest-processing-time on uniform machines: shards in decreasing size, each to
    the worker that would finish it first, ``(load_w + tokens) / throughput_w``. Each
    worker's share of tokens comes out about proportional to its throughput, and the
    makespan is within a factor 2 of the optimum (Gonzalez, Ibarra & Sahni 1977).

    Parameters
    ----------
    throughputs : sequence of float
        Tokens/s of each worker (measured, e.g. the first clock's ``tokens_per_s``).
    shard_tokens : sequence of int
        Tokens of each shard.

    Returns
    -------
    list of int
        ``assignment[shard] = worker``; ties go to the lower worker index.

    Examples
    --------
    >>> balance_shards([3e8, 1e8], [100] * 8)
    [0, 0, 0, 1, 0, 0, 0, 1]
    """
    speed = [float(t) for t in throughputs]
    if not speed or any(not (t > 0.0) or t == float("inf") for t in speed):
        raise ConfigError(f"throughputs must be positive and finite, got {list(throughputs)}")
    sizes = [int(n) for n in shard_tokens]
    if any(n < 0 for n in sizes):
        raise ConfigError("shard_tokens must be >= 0")
    load = [0] * len(speed)
    assignment = [0] * len(sizes)
    for s in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        w = min(range(len(speed)), key=lambda j: ((load[j] + sizes[s]) / speed[j], j))
        assignment[s] = w
        load[w] += sizes[s]
    return assignment



def plan_rebalance(shard_tokens: dict[int, int], placement: dict[int, str],
                   rates: dict[str, float], min_gain: float = 0.1) -> dict[int, str] | None:
    """Return a ``shard -> worker`` placement in proportion to the workers' throughput, or None.

    ``shard_tokens``: tokens of every shard; ``placement``: where each shard is now;
    ``rates``: measured tokens/s of the workers that hold shards (only they are placed again:
    a worker without shards has no measured rate). Shards go largest first to the worker that
    would finish soonest (:func:`balance_shards`). None when the
    predicted time of a clock (the slowest worker's load / rate) would not drop by at least
    ``min_gain`` (a fraction), so a rebalance that gains little is not worth a restart.
    """
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



def find_stragglers(rows: list[ShardClockStats], factor: float,
                    min_excess_s: float = 0.05) -> list[str]:
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

    def update(self, rows: list[ShardClockStats], stragglers: list[str]) -> list[str]:
        """Record one clock; return the workers stragglers for ``after`` clocks in a row."""
        busy = busy_by_worker(rows)
        self.window.append(busy)
        self.streak = {w: self.streak.get(w, 0) + 1 for w in stragglers}
        if self.after <= 0:
            return []
        return sorted(w for w, n in self.streak.items() if n >= self.after)

    def rates(self) -> dict[str, float]:
        """Return tokens per busy second of each worker over the last ``after`` clocks."""
        total: dict[str, list[float]] = {}
        for busy in self.window:
            for w, (s, n) in busy.items():
                acc = total.setdefault(w, [0.0, 0.0])
                acc[0] += s
                acc[1] += n
        return {w: n / max(s, 1e-9) for w, (s, n) in total.items()}



def shards_by_worker(placement: dict[int, str]) -> dict[str, list[int]]:
    """Invert ``placement`` (shard -> worker) to each worker's shards, in shard order."""
    out: dict[str, list[int]] = {}
    for s, w in sorted(placement.items()):
        out.setdefault(w, []).append(int(s))
    return out



def throughput(window: dict[str, list[float]], slots: Slots
                ) -> dict[str, float]:
    """Return tokens per second of each worker from ``{worker: [busy s, tokens]}``.

    The window is summed over the measured clocks: per thread (the busy time is summed over a
    worker's threads), times its threads.
    """
    threads = {a: max(1, t) for a, t, _ in slots}
    return {w: n / max(s, 1e-9) * threads.get(w, 1) for w, (s, n) in window.items()}



@dataclass(frozen=True)
class RebalancePlan:
    """The outcome of :func:`propose_rebalance`.

    Move to ``assignment`` (shard -> worker) by a restart of every shard from the checkpoint of
    ``event.clock``.
    """

    event: Rebalance
    assignment: dict[int, str]


def propose_rebalance(corpus: Any, cfg: TrainConfig, shards: list[Any], slots: Slots,
                      placement: dict[int, str], rates: dict[str, float], slow: list[str],
                      c: int, reason: str = "straggler") -> RebalancePlan | None:
    """Return a :class:`RebalancePlan` when a placement by measured throughput gains enough.

    None when it does not. ``rates``: tokens per second of each worker. Called only at a clock
    ``c`` whose checkpoint was just committed, so the restart loses no work. A plan whose caches
    would not fit the workers' memory is not used.
    """
    min_gain = cfg.balance_min_gain if reason == "throughput" else 0.1
    new = plan_rebalance({s.index: s.n_tokens for s in shards}, placement, rates,
                         min_gain=min_gain)
    if new is None:
        if reason == "throughput":
            log.info("throughput balance at clock %d: no placement would shorten a clock by "
                     "%.0f%% (tokens/s per worker: %s); shards stay", c, 100 * min_gain,
                     {w: round(v) for w, v in sorted(rates.items())})
        return None
    per_worker: dict[str, int] = {}
    for w in new.values():
        per_worker[w] = per_worker.get(w, 0) + 1
    try:
        check_fits(corpus, cfg, slots, shards, max_per_worker=max(per_worker.values()))
    except ConfigError as exc:
        log.info("no rebalance at clock %d: %s", c, exc)
        return None
    before, after = shards_by_worker(placement), shards_by_worker(new)
    if reason == "throughput":  # the workers that lose shards
        slow = sorted(w for w in before if len(after.get(w, [])) < len(before[w]))
    return RebalancePlan(Rebalance(clock=c, slow_workers=list(slow),
                                   rates={w: float(rates[w]) for w in sorted(rates)},
                                   before=before, after=after, reason=reason), new)
