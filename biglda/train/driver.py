"""The training driver: plan shards, start the parameter server, run the clocks, save the model.

:func:`train` is the whole job: validate everything up front (so a bad input fails in one line
before anything is started or written), connect to a scheduler or start an embedded
``LocalCluster``, then :func:`run_training` on it, then write the model atomically.

:func:`run_training` is the distributed loop on a connected client, returned as a
:class:`TrainResult` (final ``z`` of every shard, the parameter server's table, recorded clock
starts, metrics history) — what tests check invariants on.

Flow of one run::

    driver                      worker task (one per worker thread, biglda.train.worker)
    plan shards, place groups   read shard, z = init_z or checkpoint, remap to local vocab
    start PS actors + clock     push recount of its z to the table shards, tick(start)
    mailbox.iteration(c)    <-- per clock: wait SSP bound, pull deltas, sweep, doc LL, push,
    one metrics record            checkpoint every N clocks, tick(c + 1) with its stats
    stop rule -> clock.stop     ... until the stop clock; return z
    gather table, save model

A lost worker (a failed task or actor call, or a worker gone from the scheduler) makes the run
restart every shard from the latest committed checkpoint on the live workers with a recounted
table (:mod:`biglda.train.recovery`, docs/reliability.md); a first SIGINT ends the run after the
current clock with a checkpoint. A worker that stays a straggler for ``rebalance_after`` clocks
gets fewer shards by the same restart, at a just-committed checkpoint (no work is lost).

Backends (``TrainConfig.backend``: cpu, gpu, auto) are chosen per worker: the driver asks every
worker for its GPU status before anything is written (:func:`plan_backends`; ``gpu`` without a
GPU fails there), and each task picks its sampler the same way. A job whose workers run
different backends (or ``balance="throughput"``) is planned with several shards per worker and
balanced once by measured throughput, by the same restart at a checkpoint (docs/gpu.md);
``clock_spread_s`` in the records measures how long the fastest worker idles per clock.

The metrics record of iteration ``c`` (fields in docs/contracts.md) joins the shards' stats of
clock ``c`` with the table shards' word log-likelihood snapshot of the moment every push of clock
``c`` arrived (exactly the table after clock ``c`` under BSP).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from biglda.errors import ClusterError, ConfigError, OutputExistsError
from biglda.ps import check_table_fits, start_parameter_server
from biglda.train import checkpoint as ckpt
from biglda.train.recovery import (
    EMBEDDED_MEMORY_CONFIG,
    Interrupted,
    Rebalance,
    RebalanceRequest,
    Recovery,
    StragglerWatch,
    WorkerLost,
    busy_by_worker,
    check_workers,
    find_stragglers,
    ignore_sigint,
    interrupt_flag,
    latest_checkpoint,
    live_workers,
    plan_rebalance,
    run_group_failfast,
    shards_by_worker,
    wait_for_loss,
    wait_for_workers,
)
from biglda.train.worker import GroupSpec

log = logging.getLogger("biglda.train")

SAMPLERS = ("cgs", "lightlda")
MAX_TOPICS = 65535  # z is uint16
BALANCE = ("auto", "throughput", "none")


@dataclass
class TrainConfig:
    """Validated settings of one run (stored in the model's ``config`` attribute)."""

    n_topics: int
    iterations: int
    sampler: str = "lightlda"
    alpha: float = 0.1
    beta: float = 0.01
    staleness: float = 0.0
    seed: int = 0
    checkpoint_every: int = 10
    resume: bool = False
    max_seconds: float | None = None
    tol: float | None = None
    n_shards: int | None = None
    sampler_params: dict = field(default_factory=dict)
    slow_shards: dict = field(default_factory=dict)
    slow_workers: dict = field(default_factory=dict)  # debug: {worker address: s per shard-clock}
    call_timeout: float = 120.0
    top_words_every: int = 10
    max_recoveries: int = 3          # lost workers recovered per run before giving up
    recovery_wait: float = 10.0      # seconds to wait for a replacement worker to join
    straggler_factor: float = 2.0    # "straggler": this many times slower per token
    connect_timeout: float = 10.0    # tasks' connects to actors (a dead worker's fail after it)
    rebalance_after: int = 3         # straggler clocks in a row before its shards move (0: never)
    optimize_alpha_every: int = 0    # asymmetric alpha by Minka's fixed point every N clocks
    optimize_alpha_burn_in: int | None = None  # first optimization after this many clocks
    optimize_alpha_iterations: int = 20        # fixed-point iterations per optimization
    backend: str = "cpu"             # "cpu" | "gpu" | "auto": resolved on each worker
    worker_backends: dict = field(default_factory=dict)  # {worker address: backend} overrides
    gpu_sampler_params: dict = field(default_factory=dict)  # settings of the GPU sampler
    balance: str = "auto"            # "throughput" | "none" | "auto" (throughput if mixed)
    balance_after: int = 2           # clocks measured (the first one not counted) before it
    shards_per_worker: int = 4       # default shards per worker thread when balancing
    balance_min_gain: float = 0.1    # restart only if the slowest worker's time drops this much

    @property
    def alpha_burn_in(self) -> int:
        """Clocks before the first optimization (default ``max(10, 2 N)``)."""
        if self.optimize_alpha_burn_in is not None:
            return int(self.optimize_alpha_burn_in)
        return max(10, 2 * int(self.optimize_alpha_every))

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("n_topics", "iterations", "sampler", "alpha",
                                           "beta", "seed", "checkpoint_every", "resume",
                                           "max_seconds", "tol", "n_shards", "sampler_params",
                                           "optimize_alpha_every", "backend", "balance")}
        if self.optimize_alpha_every:
            d["optimize_alpha_burn_in"] = self.alpha_burn_in
        d["staleness"] = "inf" if math.isinf(self.staleness) else self.staleness
        return d


@dataclass
class TrainResult:
    """What :func:`run_training` leaves: the final state and the evidence of how it ran."""

    z: dict[int, np.ndarray]           # final z of every shard
    shards: list[Any]                  # the shard plan (biglda.corpus Shard)
    n_wk: np.ndarray                   # the parameter server's table after the run
    n_k: np.ndarray
    history: list[dict]                # one metrics record per iteration
    starts: list[tuple[int, int, float, int]]  # (shard, clock, time, min completed clock)
    ticks: list[tuple[int, int, float]]        # (shard, completed clocks, time)
    ps_info: list[dict]
    clocks: list[int]                  # completed clocks of every shard at the end
    placement: dict[int, str]          # shard -> worker address
    stop_reason: str = "iterations"
    recoveries: list[Any] = field(default_factory=list)  # biglda.train.recovery.Recovery
    rebalances: list[Any] = field(default_factory=list)  # biglda.train.recovery.Rebalance
    alpha: np.ndarray | None = None    # the final alpha (optimized, or the symmetric one)


# ----------------------------------------------------------------------------- validation


def validate(corpus_url: str, out: str | None, cfg: TrainConfig, overwrite: bool) -> Any:
    """Check every input before anything starts; return the opened corpus."""
    from biglda.corpus import Corpus
    from biglda.samplers import get_sampler

    if not isinstance(cfg.n_topics, int | np.integer) or cfg.n_topics < 2:
        raise ConfigError(f"--topics must be an integer >= 2, got {cfg.n_topics}")
    if cfg.n_topics > MAX_TOPICS:
        raise ConfigError(f"--topics must be <= {MAX_TOPICS} (topics are stored as uint16), "
                          f"got {cfg.n_topics}")
    if cfg.iterations < 1:
        raise ConfigError(f"--iterations must be >= 1, got {cfg.iterations}")
    if cfg.sampler not in SAMPLERS:
        raise ConfigError(f"unknown sampler {cfg.sampler!r} (choose from {', '.join(SAMPLERS)})")
    get_sampler(cfg.sampler, **cfg.sampler_params)  # unknown params / backends fail here
    from biglda.samplers.backends import BACKEND_CHOICES
    for name, b in [("--backend", cfg.backend)] + [(f"the backend of worker {w}", b)
                                                   for w, b in cfg.worker_backends.items()]:
        if b not in BACKEND_CHOICES:
            raise ConfigError(f"{name} must be one of {', '.join(BACKEND_CHOICES)}, got {b!r}")
    if cfg.balance not in BALANCE:
        raise ConfigError(f"--balance must be one of {', '.join(BALANCE)}, got {cfg.balance!r}")
    if not isinstance(cfg.balance_after, int | np.integer) or cfg.balance_after < 1:
        raise ConfigError(f"balance_after must be an integer >= 1, got {cfg.balance_after}")
    if cfg.shards_per_worker < 1:
        raise ConfigError(f"shards_per_worker must be >= 1, got {cfg.shards_per_worker}")
    if not (np.isfinite(cfg.alpha) and cfg.alpha > 0):
        raise ConfigError(f"--alpha must be > 0, got {cfg.alpha}")
    if not (np.isfinite(cfg.beta) and cfg.beta > 0):
        raise ConfigError(f"--beta must be > 0, got {cfg.beta}")
    if not (cfg.staleness >= 0):
        raise ConfigError(f"--staleness must be >= 0 (or inf), got {cfg.staleness}")
    if cfg.staleness != math.inf and cfg.staleness != int(cfg.staleness):
        raise ConfigError(f"--staleness must be a whole number of clocks, got {cfg.staleness}")
    if not isinstance(cfg.optimize_alpha_every, int | np.integer) or cfg.optimize_alpha_every < 0:
        raise ConfigError(f"--optimize-alpha-every must be an integer >= 0, got "
                          f"{cfg.optimize_alpha_every}")
    if cfg.optimize_alpha_burn_in is not None and cfg.optimize_alpha_burn_in < 0:
        raise ConfigError(f"optimize_alpha_burn_in must be >= 0, got {cfg.optimize_alpha_burn_in}")
    if cfg.rebalance_after < 0:
        raise ConfigError(f"rebalance_after must be >= 0, got {cfg.rebalance_after}")
    if cfg.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {cfg.checkpoint_every}")
    if cfg.max_seconds is not None and not cfg.max_seconds > 0:
        raise ConfigError(f"--max-seconds must be > 0, got {cfg.max_seconds}")
    if cfg.tol is not None and not cfg.tol > 0:
        raise ConfigError(f"tol must be > 0, got {cfg.tol}")
    if cfg.n_shards is not None and cfg.n_shards < 1:
        raise ConfigError(f"n_shards must be >= 1, got {cfg.n_shards}")
    if cfg.resume and not cfg.checkpoint_every and out is None:
        raise ConfigError("resume needs an output path (the checkpoint lives next to it)")
    corpus = Corpus.open(corpus_url)
    if corpus.n_tokens == 0:
        raise ConfigError(f"{corpus_url}: the corpus has no tokens")
    if out is not None:
        from biglda.corpus.storage import exists
        if exists(out) and not overwrite:
            raise OutputExistsError(f"output {out} already exists (use --overwrite to replace it)")
    if cfg.resume:
        if out is None:
            raise ConfigError("resume needs an output path (the checkpoint lives next to it)")
        ckpt.open_checkpoint(ckpt.checkpoint_url(out), cfg.n_topics, corpus.n_tokens)
    return corpus


# ----------------------------------------------------------------------------- cluster


@contextlib.contextmanager
def connect(scheduler: Any = None, workers: int | None = None, threads_per_worker: int = 1,
            timeout: float = 10.0, backend: str = "cpu") -> Iterator[Any]:
    """A client: the given one, one connected to ``scheduler``, or an embedded LocalCluster.

    The embedded cluster has ``workers`` CPU workers (default one per core). With
    ``backend`` "gpu" or "auto" and CUDA devices here (a real GPU: the simulator does not
    count), it has one worker per GPU with one thread instead (``CUDA_VISIBLE_DEVICES`` set
    to its device), plus under "auto" ``workers`` CPU workers (default: the cores left),
    which see no GPU. With backend "cpu" no GPU is looked for.
    """
    from distributed import Client

    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler  # a Client the caller owns
        return
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=timeout, direct_to_workers=True)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} within "
                               f"{timeout:g} s ({type(exc).__name__})") from None
        try:
            yield client
        finally:
            client.close()
        return
    tpw = max(1, threads_per_worker)
    n_gpus = local_gpus(backend)
    if n_gpus:
        n_cpu = 0 if backend == "gpu" else (
            int(workers) if workers else max(0, (os.cpu_count() or 1) // tpw - n_gpus))
        log.info("embedded cluster: %d GPU worker(s) (one per GPU, 1 thread) and %d CPU "
                 "worker(s)", n_gpus, n_cpu)
        cluster = start_local_cluster(
            n_cpu, tpw, [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(n_gpus)],
            cpu_env={"CUDA_VISIBLE_DEVICES": ""}, timeout=max(60.0, timeout))
    else:
        n = int(workers) if workers else max(1, (os.cpu_count() or 1) // tpw)
        cluster = start_local_cluster(n, threads_per_worker)
    client = Client(cluster, direct_to_workers=True)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def local_gpus(backend: str) -> int:
    """CUDA devices the embedded cluster gives a worker each (0 for "cpu" or no real GPU).

    Imports numba.cuda (through :func:`biglda.samplers.backends.gpu_status`) only when
    ``backend`` is not "cpu"; ``import biglda`` never does.
    """
    if backend == "cpu":
        return 0
    from biglda.samplers.backends import gpu_status

    status = gpu_status()
    return status.n_devices if status.usable and not status.simulator else 0


def start_local_cluster(n_workers: int, threads_per_worker: int = 1,
                        single_envs: list[dict[str, str]] | None = None,
                        cpu_env: dict[str, str] | None = None, timeout: float = 60.0) -> Any:
    """A process ``LocalCluster`` on loopback: ``n_workers`` workers, plus one single-thread
    worker per environment in ``single_envs`` (a GPU worker: ``CUDA_VISIBLE_DEVICES``; in the
    tests, a worker on the CUDA simulator: ``NUMBA_ENABLE_CUDASIM=1``).

    The environment reaches the worker process before it imports numba (the nanny sets it
    when it spawns the worker). ``cpu_env``: the environment of the ``n_workers`` workers.
    The memory limit is the machine's, shared equally by all workers.
    """
    import copy

    import dask
    from distributed import LocalCluster

    single_envs = list(single_envs or [])
    # the nannies read the memory thresholds when they start (see recovery.py for why); the
    # worker processes ignore SIGINT, so Ctrl-C (sent to the whole process group) reaches the
    # driver only, which stops cleanly with a checkpoint
    with dask.config.set(EMBEDDED_MEMORY_CONFIG), ignore_sigint():
        if not single_envs:  # the plain cluster, exactly as a CPU-only run always had it
            return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                                processes=True, dashboard_address="127.0.0.1:0",
                                host="127.0.0.1")
        from distributed.system import MEMORY_LIMIT

        n_total = n_workers + len(single_envs)
        extra = {"env": dict(cpu_env)} if cpu_env else {}
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                               processes=True, dashboard_address="127.0.0.1:0",
                               host="127.0.0.1", memory_limit=int(MEMORY_LIMIT // n_total),
                               **extra)
        try:
            for i, env in enumerate(single_envs):
                spec = copy.deepcopy(cluster.new_spec)
                spec["options"].update(nthreads=1, env={**(cpu_env or {}), **env})
                cluster.worker_spec[f"single-{i}"] = spec
            cluster.scale(len(cluster.worker_spec))  # starts the workers added to the spec
            cluster.wait_for_workers(n_total, timeout=timeout)
        except BaseException:
            cluster.close()
            raise
    return cluster


def load_plugins(client: Any) -> list[str]:
    """Call ``register(client)`` of every ``biglda.plugins`` entry point; return page URLs.

    A failing plugin is a warning in the log, never an error of the run.
    """
    from importlib.metadata import entry_points

    urls = []
    for ep in entry_points(group="biglda.plugins"):
        try:
            url = ep.load()(client)
        except Exception as exc:  # a plugin must never break training
            log.warning("plugin %s failed: %s: %s", ep.name, type(exc).__name__, exc)
            continue
        if url:
            log.info("plugin %s: %s", ep.name, url)
            urls.append(str(url))
    return urls


def _worker_slots(client: Any, timeout: float) -> list[tuple[str, int, int]]:
    """``(address, nthreads, memory_limit)`` of every worker, waiting up to ``timeout`` for one."""
    deadline = time.monotonic() + timeout
    while True:
        info = client.scheduler_info(n_workers=-1)["workers"]
        if info:
            return sorted((a, int(w.get("nthreads", 1)), int(w.get("memory_limit") or 0))
                          for a, w in info.items())
        if time.monotonic() > deadline:
            raise ClusterError(f"the Dask cluster has no workers (waited {timeout:g} s)")
        time.sleep(0.2)


def plan_groups(shards: list[Any], slots: list[tuple[str, int, int]],
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


# ----------------------------------------------------------------------------- the loop


def _record(run_id: str, c: int, cfg: TrainConfig, stats: dict[int, dict], word: list,
            n_tokens: int, n_words: int, t_prev: float, t0: float, clocks: list[int],
            placement: dict[int, str], history: list[dict]) -> dict:
    from biglda.samplers import word_loglik_topics

    rows = list(stats.values())
    t_end = max(r["t_end"] for r in rows)
    dt = max(t_end - t_prev, 1e-9)
    row_ll = sum(w[0] for w in word)
    n_k = sum(w[1] for w in word)
    ll = sum(r["doc_ll"] for r in rows) + row_ll + word_loglik_topics(n_k, cfg.beta, n_words)
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
    elapsed = t_end - t0
    done_its = len(history) + 1
    mean_it = elapsed / done_its
    busy = busy_by_worker(rows)
    return {
        "type": "iteration", "run_id": run_id, "iteration": c + 1,
        "n_iterations": cfg.iterations, "elapsed": elapsed,
        "ll": ll, "ll_per_token": ll / n_tokens,
        "tokens_per_s": sum(r["tokens"] for r in rows) / dt,
        "tokens_per_s_per_worker": {w: v[0] / max(v[1], 1e-9) for w, v in per_worker.items()},
        "clocks": worker_clock, "clock_spread": int(max(clocks) - min(clocks)),
        "bytes_pushed": int(sum(r["bytes_pushed"] for r in rows)),
        "bytes_pulled": int(sum(r["bytes_pulled"] for r in rows)),
        "accept_rate": (sum(a * n for a, n in accepts) / sum(n for _, n in accepts)
                        if accepts else None),
        "eta_s": max(0.0, (cfg.iterations - (c + 1)) * mean_it),
        "ps_overhead": max(0.0, 1.0 - kernel_s / clock_s) if clock_s > 0 else None,
        "kernel_s": kernel_s, "clock_s": clock_s,
        "kernel_cpu_s": sum(r.get("kernel_cpu_s", 0.0) for r in rows),
        "process_cpu_s": sum(r.get("process_cpu_s", 0.0) for r in rows),
        "wait_s": sum(r["wait_s"] for r in rows), "pull_s": sum(r["pull_s"] for r in rows),
        "push_s": sum(r["push_s"] for r in rows), "ll_s": sum(r["ll_s"] for r in rows),
        "backends": {r["worker"]: r.get("backend", "cpu") for r in rows},
        "tokens_per_worker": {w: int(v[0]) for w, v in per_worker.items()},
        "busy_s_per_worker": {w: v[0] for w, v in busy.items()},
        # the time the fastest worker waits for the slowest at this clock (see clock_spread_s)
        "clock_spread_s": clock_spread_s(busy),
        "top_words": None,
    }


def clock_spread_s(busy: dict[str, list[float]]) -> float:
    """The clock spread in seconds: the longest minus the shortest busy time of the workers at
    one clock, a worker's busy time being the sum over its shards of the clock's time minus
    the SSP wait (pull, sweep, log-likelihood, push, checkpoint). Under BSP every worker starts
    a clock at the same barrier, so this is how long the fastest worker sits idle waiting for
    the slowest. Durations only, so clocks of different machines need not agree.
    ``busy``: :func:`biglda.train.recovery.busy_by_worker` of one clock's statistics.

    Examples
    --------
    >>> clock_spread_s({"a": [1.5, 100], "b": [0.5, 100]})
    1.0
    """
    times = [v[0] for v in busy.values()]
    return float(max(times) - min(times)) if times else 0.0


def _top_words(ps, vocab: np.ndarray, n: int, timeout: float) -> list[list[str]]:
    parts = ps.tables.top_words(n, timeout)
    ids = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    order = np.argsort(-counts, axis=0, kind="stable")[:n]
    best = np.take_along_axis(ids, order, axis=0)
    return [[str(vocab[w]) for w in best[:, k]] for k in range(best.shape[1])]


def _gather_table(ps, n_words: int, n_topics: int, timeout: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    n_wk = np.zeros((n_words, n_topics), dtype=np.int32)
    n_k = np.zeros(n_topics, dtype=np.int64)
    for start, rows, nk in ps.tables.parts(timeout):
        n_wk[start:start + len(rows)] = rows
        n_k += nk
    return n_wk, n_k


def plan_cluster(client: Any, corpus: Any, cfg: TrainConfig, log_choice: bool = False
                 ) -> tuple[list[tuple[str, int, int]], list[Any], dict[str, str]]:
    """Workers ``(address, nthreads, memory_limit)``, the shard plan and the backend of each
    worker; checks the table fits and that every worker can run its backend.

    Shards: ``cfg.n_shards``, else one per worker thread, or ``shards_per_worker`` per thread
    when the job is balanced by throughput (:func:`balancing`), so there are shards to move.
    """
    slots = _worker_slots(client, timeout=30.0)
    backends = plan_backends(client, cfg, [a for a, _, _ in slots], log_choice)
    n_slots = sum(max(1, t) for _, t, _ in slots)
    per_slot = cfg.shards_per_worker if balancing(cfg, backends) and len(slots) > 1 else 1
    shards = corpus.plan_shards(int(cfg.n_shards or n_slots * per_slot))
    _check_fits(corpus, cfg, slots, shards)
    return slots, shards, backends


def plan_backends(client: Any, cfg: TrainConfig, workers: list[str],
                  log_choice: bool = False) -> dict[str, str]:
    """``{worker: "cpu" | "gpu"}``: what each worker will run (its task decides the same way,
    :func:`biglda.train.worker.worker_backend`). Asks the workers for their GPU status unless
    every request is "cpu"; "gpu" on a worker without a usable GPU is a ConfigError naming
    the worker and the cause. Logs the choice of "auto".
    """
    requested = {w: cfg.worker_backends.get(w, cfg.backend) for w in workers}
    if all(b == "cpu" for b in requested.values()):
        return dict(requested)
    from biglda.samplers.backends import GpuStatus, pick_backend
    from biglda.train.worker import gpu_probe

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
    """Whether shards are balanced by measured throughput: ``balance="throughput"``, or
    ``"auto"`` and the workers run different backends (a GPU and CPU job)."""
    if cfg.balance == "auto":
        return len(set(backends.values())) > 1
    return cfg.balance == "throughput"


@dataclass
class _RunState:
    """What carries over from one attempt to the next (recovery rolls it back)."""

    start_clock: int
    stop_clock: int
    resume_attrs: dict | None
    first_slot: int
    history: list[dict]
    ck_read: str | None
    stop_reason: str = "iterations"
    clock: int = 0                      # the clock the driver waits for
    attempt: int = 0
    stragglers: set = field(default_factory=set)
    assignment: dict | None = None      # shard -> worker after a rebalance (None: even plan)
    t_fail: float = 0.0                 # when the current attempt failed (or started)
    balance: bool = False               # balance shards by throughput after the first clocks
    balanced: bool = False              # ... done (or given up) in this attempt's line
    known_missing: frozenset = frozenset()  # iterations the resumed checkpoint had no record of
    on_started: Callable[[float], None] | None = None  # told when an attempt's tasks are out


def run_training(client: Any, corpus: Any, cfg: TrainConfig, *, out: str | None = None,
                 on_record: list[Callable[[dict], None]] | None = None,
                 run_id: str | None = None) -> TrainResult:
    """Run the distributed sampler on a connected client; see the module docstring.

    A lost worker (a failed task or actor call, or a worker that left the scheduler) is
    recovered up to ``cfg.max_recoveries`` times: every shard restarts from the latest committed
    checkpoint on the live workers, with a recounted table (:mod:`biglda.train.recovery`). A
    first SIGINT stops after the current clock with a checkpoint (``stop_reason ==
    "interrupted"``); a second one stops at once.
    """
    run_id = run_id or uuid.uuid4().hex[:12]
    callbacks = list(on_record or [])

    def emit(record: dict) -> None:
        with contextlib.suppress(Exception):  # the dashboard feed must never stop training
            client.log_event("biglda", record)
        for cb in callbacks:
            cb(record)

    slots, shards, backends = plan_cluster(client, corpus, cfg)
    n_workers = len(slots)

    # Checkpoint: fresh store, or resume from the committed slot.
    ck_url = ckpt.checkpoint_url(out) if (out is not None and cfg.checkpoint_every) else None
    start_clock, resume_attrs, first_slot, history = 0, None, 0, []
    if cfg.resume:
        resume_url = ckpt.checkpoint_url(out)
        resume_attrs = ckpt.open_checkpoint(resume_url, cfg.n_topics, corpus.n_tokens)
        start_clock = int(resume_attrs["clock"])
        first_slot = 1 - int(resume_attrs["slot"])
        history = _checked_history([dict(r) for r in resume_attrs.get("history", [])],
                                   start_clock, f"the checkpoint {resume_url}")
        if ck_url is not None and [list(map(int, (s.token_start, s.token_stop)))
                                   for s in shards] != resume_attrs["shards"]:
            # another shard plan: read the old z first, then re-create the store
            ck_url = None  # (resume reads from the old store; no new checkpoints this run)
            log.warning("resuming with another shard plan: no further checkpoints this run")
        ck_read = resume_url
    else:
        ck_read = None
    from biglda.samplers import z_dtype
    if ck_url is not None and not cfg.resume:
        ckpt.create_checkpoint(ck_url, [(s.token_start, s.token_stop) for s in shards],
                               cfg.n_topics, corpus.n_tokens, z_dtype(cfg.n_topics),
                               cfg.as_dict())
    st = _RunState(start_clock=start_clock, stop_clock=max(start_clock, cfg.iterations),
                   resume_attrs=resume_attrs, first_slot=first_slot, history=history,
                   ck_read=ck_read,
                   known_missing=frozenset(ckpt.history_missing(history, start_clock)),
                   balance=balancing(cfg, backends) and len(slots) > 1)
    if st.balance and ck_url is None:
        log.info("no throughput balancing: it restarts the shards from a checkpoint, and this "
                 "run writes none (checkpoint_every 0 or no output path)")
        st.balance = False
    initial = (start_clock, resume_attrs, first_slot, ck_read)
    recoveries: list[Recovery] = []
    rebalances: list[Rebalance] = []
    with interrupt_flag() as interrupted:
        while True:
            lost: list[str] = []
            try:
                result = _attempt(client, corpus, cfg, shards, slots, st, ck_url, run_id, emit,
                                  interrupted, lost)
                result.recoveries = recoveries
                result.rebalances = rebalances
                return result
            except RebalanceRequest as req:
                # -- rebalance: the same restart, from the checkpoint committed just now ------
                attrs = latest_checkpoint(ck_url, cfg.n_topics, corpus.n_tokens)
                if attrs is None or int(attrs["clock"]) != req.event.clock:  # cannot happen
                    raise ClusterError(f"rebalance at clock {req.event.clock} found no "
                                       "checkpoint of that clock") from None
                st.start_clock, st.resume_attrs = int(attrs["clock"]), attrs
                st.first_slot, st.ck_read = 1 - int(attrs["slot"]), ck_url
                st.history = _checked_history(st.history, st.start_clock, "rebalance")
                st.attempt += 1
                st.stop_reason = "iterations"
                st.assignment = req.assignment
                event, t_req = req.event, st.t_fail
                rebalances.append(event)

                def rebalanced(t: float, event: Rebalance = event, t_req: float = t_req) -> None:
                    event.restart_s = t - t_req
                    emit(event.as_record(run_id))
                    why = (f"straggler(s) {', '.join(event.slow_workers)}"
                           if event.reason == "straggler" else "by measured throughput "
                           + ", ".join(f"{w} {v:,.0f} tokens/s" for w, v in event.rates.items()))
                    log.log(logging.WARNING if event.reason == "straggler" else logging.INFO,
                            "rebalanced at clock %d: %s; shards per worker %s -> %s (%.1f s "
                            "restart)", event.clock, why,
                            {w: len(v) for w, v in event.before.items()},
                            {w: len(event.after.get(w, [])) for w in event.before},
                            event.restart_s)
                st.on_started = rebalanced
                continue
            except ClusterError as exc:
                if interrupted.set:  # the user asked to stop: no recovery
                    raise KeyboardInterrupt from exc
                if len(recoveries) >= cfg.max_recoveries:
                    if recoveries:
                        raise ClusterError(f"{str(exc).splitlines()[0]} (after "
                                           f"{len(recoveries)} recoveries)") from None
                    raise
                t_fail = st.t_fail  # set by _attempt when it saw the failure
                error = str(exc).splitlines()[0]
            # -- recover: roll every shard back to the latest committed checkpoint -------
            t_stopped = time.time()
            log.warning("recovering from a lost worker at clock %d: %s", st.clock, error)
            # The failure may be seen (a task's failed call) before the scheduler has removed
            # the dead worker; planning then would place actors on it again.
            prev = {a for a, _, _ in slots}
            lost = sorted(set(lost) | wait_for_loss(client, prev, timeout=3.0))
            wait_for_workers(client, n_workers, cfg.recovery_wait)
            log.info("recovery: %d workers after %.1f s", len(live_workers(client)),
                     time.time() - t_stopped)
            slots = _worker_slots(client, timeout=cfg.recovery_wait + 30.0)
            _check_fits(corpus, cfg, slots, shards)
            attrs = latest_checkpoint(ck_url, cfg.n_topics, corpus.n_tokens)
            if attrs is not None:
                st.start_clock, st.resume_attrs = int(attrs["clock"]), attrs
                st.first_slot, st.ck_read = 1 - int(attrs["slot"]), ck_url
            else:  # nothing committed in this run: where it started (a resume, or z0)
                st.start_clock, st.resume_attrs, st.first_slot, st.ck_read = initial
            kept = ckpt.history_upto(st.history, st.start_clock)
            if not ckpt.history_complete(kept, st.start_clock) and attrs is not None:
                kept = [dict(r) for r in attrs.get("history", [])]  # the committed records
            st.history = _checked_history(kept, st.start_clock, "recovery")
            st.attempt += 1
            st.stop_reason = "iterations"
            st.assignment = None  # other workers: the even plan again
            st.balanced = False   # ... measured and balanced again
            rec = Recovery(failed_clock=st.clock, resumed_clock=st.start_clock,
                           lost_workers=lost, error=error, detect_s=t_stopped - t_fail,
                           restart_s=0.0, workers=[a for a, _, _ in slots])
            recoveries.append(rec)

            def started(t: float, rec: Recovery = rec, t_fail: float = t_fail) -> None:
                rec.restart_s = t - t_fail
                emit(rec.as_record(run_id))
                log.warning("recovered: %d shards restart from clock %d on %d workers "
                            "(%.1f s after the failure)", len(shards), rec.resumed_clock,
                            len(rec.workers), rec.restart_s)
            st.on_started = started


def _check_fits(corpus: Any, cfg: TrainConfig, slots: list[tuple[str, int, int]],
                shards: list[Any], max_per_worker: int | None = None) -> None:
    # Each worker caches at most min(V, its tokens) rows per shard it holds.
    per_worker_cache = max(min(corpus.n_words, s.n_tokens) for s in shards) * \
        (max_per_worker or -(-len(shards) // len(slots)))
    check_table_fits(corpus.n_words, cfg.n_topics, {a: m for a, _, m in slots},
                     cache_rows_per_worker=per_worker_cache)


def _abandon(client: Any, ps: Any, futures: list[Any], addrs: list[str], timeout: float) -> None:
    """Stop an attempt: abort the tasks, wait for those on live workers, free everything.

    Waiting matters: a task still running when the next attempt starts could write its ``z``
    into the checkpoint slot the new tasks write. A task on a live worker gets ``ABORT`` from a
    live clock at its next wait; one blocked in a call to a dead actor (up to the connect
    timeout) can write nothing more, and it blocks only its own thread (tasks secede, see
    :func:`biglda.train.recovery.run_group_failfast`), so the wait is short. Tasks on a lost
    worker never run again (they are pinned to its address) and are only cancelled.
    """
    from distributed import wait

    with contextlib.suppress(Exception):
        ps.clock.abort(timeout=5)
    with contextlib.suppress(Exception):
        live = live_workers(client)
        running = [f for f, a in zip(futures, addrs, strict=True) if a in live]
        t0 = time.monotonic()
        wait(running, timeout=timeout)
        log.info("abandoned attempt: %d tasks on live workers stopped in %.1f s", len(running),
                 time.monotonic() - t0)
        if any(f.status == "pending" for f in running):
            log.warning("some training tasks did not stop within %g s", timeout)
    with contextlib.suppress(Exception):
        client.cancel(futures)
    with contextlib.suppress(Exception):
        ps.close()


def _attempt(client: Any, corpus: Any, cfg: TrainConfig, shards: list[Any],
             slots: list[tuple[str, int, int]], st: _RunState, ck_url: str | None, run_id: str,
             emit: Callable[[dict], None], interrupted: Any, lost: list[str]) -> TrainResult:
    """One start of the parameter server and the tasks, from ``st.start_clock`` to the end."""
    n_shards = len(shards)
    slot_addrs = {a for a, _, _ in slots}
    if st.assignment is not None and (set(st.assignment.values()) - slot_addrs
                                      or len(st.assignment) != n_shards):
        st.assignment = None  # (a worker of that plan is gone)
    groups = plan_groups(shards, slots, st.assignment)
    placement = {s.index: addr for addr, members in groups for s in members}
    workers = [a for a, _, _ in slots]
    st.clock = st.start_clock
    st.t_fail = time.time()
    history = st.history
    ps = start_parameter_server(client, corpus.n_words, cfg.n_topics, n_shards, cfg.beta,
                                cfg.staleness, workers, start_clock=st.start_clock,
                                timeout=cfg.call_timeout)
    alpha = alpha_from_history(history, cfg)  # (a resumed or recovered run: its optimized one)
    futures, addrs = [], []
    stop_clock = st.stop_clock
    # The throughput balance: measure clocks start+1 .. start+balance_after-1 (the first clock
    # compiles kernels and fills the caches, so it is left out when there is another), then at
    # start+balance_after, a checkpoint every shard writes for it, place the shards in
    # proportion to the measured rates (a restart from that checkpoint, as a rebalance).
    bal_clock = st.start_clock + int(cfg.balance_after)
    if not (st.balance and not st.balanced and ck_url is not None and n_shards > len(slots)
            and bal_clock < stop_clock):
        bal_clock = -1
    measure_from = st.start_clock + (1 if cfg.balance_after > 1 else 0)
    for addr, members in groups:
        spec = GroupSpec(
            corpus_url=corpus.url, shards=tuple(members), ps=ps.client,
            n_topics=cfg.n_topics, n_words=corpus.n_words, alpha=alpha,
            beta=cfg.beta, sampler=cfg.sampler, sampler_params=dict(cfg.sampler_params),
            seed=cfg.seed, start_clock=st.start_clock, stop_clock=stop_clock,
            staleness=cfg.staleness, checkpoint_url=ck_url if ck_url else st.ck_read,
            checkpoint_every=cfg.checkpoint_every if ck_url else 0,
            checkpoint_slot=st.first_slot, resume_attrs=st.resume_attrs,
            call_timeout=cfg.call_timeout,
            slow_shards={int(k): float(v) for k, v in cfg.slow_shards.items()},
            slow_workers={str(k): float(v) for k, v in cfg.slow_workers.items()},
            optimize_alpha_every=int(cfg.optimize_alpha_every),
            optimize_alpha_burn_in=cfg.alpha_burn_in, backend=cfg.backend,
            worker_backends={str(k): str(v) for k, v in cfg.worker_backends.items()},
            gpu_sampler_params=dict(cfg.gpu_sampler_params),
            checkpoint_at=(bal_clock,) if bal_clock >= 0 else ())
        futures.append(client.submit(
            run_group_failfast, spec, cfg.connect_timeout, workers=[addr],
            allow_other_workers=False, pure=False,
            key=f"biglda-{run_id}-{st.attempt}-{addr}-{len(futures)}"))
        addrs.append(addr)
    if st.on_started is not None:
        st.on_started(time.time())
        st.on_started = None
    used = set(workers)

    def watch() -> None:  # while an actor call has no answer: is every worker still there?
        check_workers(client, used)

    log.info("parameter server and %d tasks placed on %d workers", len(futures), len(slots))
    t0 = time.time()
    t_prev = t0
    c = st.start_clock
    poll = 2.0
    slow_watch = StragglerWatch(cfg.rebalance_after)
    movable = ck_url is not None and n_shards > len(slots) and cfg.rebalance_after > 0
    window: dict[str, list[float]] = {}  # {worker: [busy s, tokens]} of the measured clocks
    try:
        while c < stop_clock:
            st.clock = c
            stats = ps.mailbox.iteration(c, poll, cfg.call_timeout, check=watch)
            if stats is None:
                _check_tasks(futures)
                check_workers(client, used)
                if interrupted.set and st.stop_reason != "interrupted":
                    st.stop_reason = "interrupted"
                    stop_clock = ps.clock.stop(cfg.call_timeout)
                continue
            word = ps.tables.snapshots(c, cfg.call_timeout, check=watch)
            if any(w is None for w in word):  # cannot happen: ticks follow pushes
                raise ClusterError(f"table shards have no snapshot of clock {c}")
            clocks = ps.clock.clocks(cfg.call_timeout, check=watch)
            rec = _record(run_id, c, cfg, stats, word, corpus.n_tokens, corpus.n_words,
                          t_prev, t0, clocks, placement, history)
            new_alpha = _optimized_alpha(stats, alpha, cfg)
            if new_alpha is not None:
                # published before any shard may start c + 1 with it (BSP: they wait for it)
                ps.alpha.publish(c + 1, new_alpha, cfg.call_timeout, check=watch)
                alpha = new_alpha
                rec["alpha"] = [float(a) for a in alpha]
            rec["stragglers"] = find_stragglers(list(stats.values()), cfg.straggler_factor)
            for w in rec["stragglers"]:
                if w not in st.stragglers:
                    st.stragglers.add(w)
                    log.warning("straggler: worker %s sampled clock %d more than %gx slower "
                                "per token than the others", w, c, cfg.straggler_factor)
            slow = slow_watch.update(list(stats.values()), rec["stragglers"])
            if measure_from <= c < bal_clock:
                for w, (b, n) in busy_by_worker(list(stats.values())).items():
                    acc = window.setdefault(w, [0.0, 0.0])
                    acc[0] += b
                    acc[1] += n
            if cfg.top_words_every and ((c + 1) % cfg.top_words_every == 0
                                        or c + 1 == stop_clock):
                rec["top_words"] = _top_words(ps, corpus.vocab, 10, cfg.call_timeout)
            t_prev = max(r["t_end"] for r in stats.values())
            rec["checkpoint"] = _commit_checkpoint(ck_url, stats, c, history, rec, n_shards,
                                                   st.known_missing)
            history.append(rec)
            emit(rec)
            c += 1
            reason = "interrupted" if interrupted.set else \
                _stop_reason(cfg, history, time.time() - t0)
            if reason and c < stop_clock and st.stop_reason == "iterations":
                st.stop_reason = reason
                stop_clock = ps.clock.stop(cfg.call_timeout)
            if c == bal_clock and st.stop_reason == "iterations":
                st.balanced = True  # once per attempt line, restart or not
                if rec["checkpoint"] != c:
                    log.warning("no throughput balance at clock %d: its checkpoint was not "
                                "committed", c)
                else:
                    _maybe_rebalance(corpus, cfg, shards, slots, placement,
                                     _throughput(window, slots), [], c, reason="throughput")
            if (movable and slow and rec["checkpoint"] == c and c < stop_clock
                    and st.stop_reason == "iterations"):
                _maybe_rebalance(corpus, cfg, shards, slots, placement, slow_watch.rates(),
                                 slow, c)
        st.clock = c
        results = _results(futures, cfg.call_timeout)
    except BaseException as exc:
        st.t_fail = time.time()
        if isinstance(exc, WorkerLost):
            lost.extend(sorted(used - live_workers(client)))
        elif isinstance(exc, ClusterError):
            with contextlib.suppress(Exception):
                lost.extend(sorted(used - live_workers(client)))
        # Stop the tasks at their next clock wait, give them a moment, then free everything.
        # (A rebalance has every worker alive: wait for all its tasks, however long a clock is,
        # so none can still write into the checkpoint slot the next attempt writes.)
        _abandon(client, ps, futures, addrs,
                 timeout=cfg.call_timeout if isinstance(exc, RebalanceRequest) else 5.0)
        if isinstance(exc, RuntimeError) and "lost" in str(exc).lower():
            # distributed: "Worker holding Actor was lost" (on attribute access, in a task too)
            lost.extend(sorted(used - live_workers(client)))
            raise WorkerLost(str(exc).splitlines()[0]) from None
        raise
    z: dict[int, np.ndarray] = {}
    for r in results:
        z.update(r)
    if ck_url is not None and stop_clock % max(1, cfg.checkpoint_every):
        notes = ps.mailbox.notes(cfg.call_timeout)
        finals = {tuple(n.get("final_checkpoint", ())) for n in notes.values()}
        if len(notes) == n_shards and len(finals) == 1:
            done, slot = finals.pop()
            stored = ckpt.history_upto(_history_for_store(history), done)
            if int(done) == c and ckpt.history_valid(stored, done, st.known_missing):
                ckpt.commit(ck_url, done, slot, stored, allow_missing=st.known_missing)
            else:
                log.warning("final checkpoint of clock %s not committed: the driver is at clock "
                            "%d with the records of iterations %s", done, c,
                            _iterations(history))
    n_wk, n_k = _gather_table(ps, corpus.n_words, cfg.n_topics, cfg.call_timeout)
    state = ps.clock.state(cfg.call_timeout)
    info = ps.tables.info(cfg.call_timeout)
    ps.close()
    del futures
    return TrainResult(z=z, shards=shards, n_wk=n_wk, n_k=n_k, history=history,
                       starts=[tuple(s) for s in state["starts"]],
                       ticks=[tuple(t) for t in state["ticks"]], ps_info=info,
                       clocks=list(state["completed"]), placement=placement,
                       stop_reason=st.stop_reason, alpha=alpha)


def alpha_from_history(history: list[dict], cfg: TrainConfig) -> np.ndarray:
    """The alpha in force after the records ``history``: the newest record's ``alpha`` (an
    optimization at clock ``c`` is in the record of iteration ``c + 1`` and applies from clock
    ``c + 1``), else the symmetric ``cfg.alpha``. A checkpoint stores exactly the records of
    iterations ``1..clock``, so a resumed or recovered run continues with the alpha it had."""
    for r in reversed(history):
        a = r.get("alpha")
        if a is not None and len(a) == cfg.n_topics:
            return np.asarray(a, dtype=np.float64)
    return np.full(cfg.n_topics, float(cfg.alpha))


def _optimized_alpha(stats: dict[int, dict], alpha: np.ndarray, cfg: TrainConfig
                     ) -> np.ndarray | None:
    """Minka's fixed point on the histograms every shard sent with clock ``c`` (else None)."""
    from biglda.samplers.hyper import optimize_alpha

    hists = [r.get("alpha_hist") for r in stats.values()]
    if not hists or any(h is None for h in hists):
        return None
    width = max(np.asarray(h[0]).shape[1] for h in hists)
    length = max(len(h[1]) for h in hists)
    count_hist = np.zeros((cfg.n_topics, width), dtype=np.int64)
    length_hist = np.zeros(length, dtype=np.int64)
    for ch, lh in hists:
        ch, lh = np.asarray(ch), np.asarray(lh)
        count_hist[:, :ch.shape[1]] += ch
        length_hist[:len(lh)] += lh
    return optimize_alpha(count_hist, length_hist, alpha,
                          iterations=int(cfg.optimize_alpha_iterations))


def _maybe_rebalance(corpus: Any, cfg: TrainConfig, shards: list[Any],
                     slots: list[tuple[str, int, int]], placement: dict[int, str],
                     rates: dict[str, float], slow: list[str], c: int,
                     reason: str = "straggler") -> None:
    """Raise :class:`RebalanceRequest` when a placement by measured throughput gains enough.

    ``rates``: tokens per second of each worker. Called only at a clock ``c`` whose
    checkpoint was just committed, so the restart loses no work. A plan whose caches would
    not fit the workers' memory is not used.
    """
    min_gain = cfg.balance_min_gain if reason == "throughput" else 0.1
    new = plan_rebalance({s.index: s.n_tokens for s in shards}, placement, rates,
                         min_gain=min_gain)
    if new is None:
        if reason == "throughput":
            log.info("throughput balance at clock %d: no placement would shorten a clock by "
                     "%.0f%% (tokens/s per worker: %s); shards stay", c, 100 * min_gain,
                     {w: round(v) for w, v in sorted(rates.items())})
        return
    per_worker: dict[str, int] = {}
    for w in new.values():
        per_worker[w] = per_worker.get(w, 0) + 1
    try:
        _check_fits(corpus, cfg, slots, shards, max_per_worker=max(per_worker.values()))
    except ConfigError as exc:
        log.info("no rebalance at clock %d: %s", c, exc)
        return
    before, after = shards_by_worker(placement), shards_by_worker(new)
    if reason == "throughput":  # the workers that lose shards
        slow = sorted(w for w in before if len(after.get(w, [])) < len(before[w]))
    raise RebalanceRequest(Rebalance(clock=c, slow_workers=list(slow),
                                     rates={w: float(rates[w]) for w in sorted(rates)},
                                     before=before, after=after, reason=reason), new)


def _throughput(window: dict[str, list[float]], slots: list[tuple[str, int, int]]
                ) -> dict[str, float]:
    """Tokens per second of each worker from ``{worker: [busy s, tokens]}`` summed over the
    measured clocks: per thread (the busy time is summed over a worker's threads), times its
    threads."""
    threads = {a: max(1, t) for a, t, _ in slots}
    return {w: n / max(s, 1e-9) * threads.get(w, 1) for w, (s, n) in window.items()}


def backends_used(history: list[dict]) -> dict[str, str]:
    """``{worker: backend}`` of every worker that sampled a clock of ``history``."""
    out: dict[str, str] = {}
    for r in history:
        out.update(r.get("backends") or {})
    return dict(sorted(out.items()))


def _history_for_store(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "top_words"} for r in history]


def _iterations(history: list[dict]) -> str:
    its = [r.get("iteration") for r in history]
    return f"{its}" if len(its) <= 8 else f"{its[:3]}..{its[-3:]} ({len(its)})"


def _checked_history(history: list[dict], clock: int, where: str) -> list[dict]:
    """``history`` up to iteration ``clock``; a warning (never a silent gap) if incomplete."""
    kept = ckpt.history_upto(history, clock)
    missing = ckpt.history_missing(kept, clock)
    if missing:
        log.warning("%s: the metrics history has no record of iteration(s) %s of 1..%d; the "
                    "model's history will miss them", where, missing, clock)
    return kept


def _commit_checkpoint(ck_url: str | None, stats: dict[int, dict], c: int,
                       history: list[dict], rec: dict, n_shards: int | None = None,
                       known_missing: frozenset[int] = frozenset()) -> int | None:
    """Commit the checkpoint of clock ``c + 1`` once every shard reported writing it.

    By construction the committed history is exactly the records of iterations ``1..c + 1``
    (``history`` then ``rec``): a report of any other clock, a shard that did not report, or
    records that do not cover ``1..c + 1`` leave the previous checkpoint committed (the
    shards' next checkpoint, or the recovery, starts from there). ``known_missing``:
    iterations already missing from the history this run resumed from (logged then).
    """
    if ck_url is None:
        return None
    rows = list(stats.values())
    wrote = {tuple(r["checkpoint"]) for r in rows if r.get("checkpoint")}
    if not rows or len(wrote) != 1 or not all(r.get("checkpoint") for r in rows):
        return None
    if n_shards is not None and len(rows) != n_shards:
        log.warning("checkpoint after clock %d not committed: %d of %d shards reported",
                    c, len(rows), n_shards)
        return None
    done, slot = wrote.pop()
    if int(done) != c + 1:
        log.warning("checkpoint not committed: the shards' stats of clock %d report a "
                    "checkpoint of clock %s", c, done)
        return None
    stored = ckpt.history_upto(_history_for_store(history + [rec]), done)
    if not ckpt.history_valid(stored, done, known_missing):
        log.warning("checkpoint of clock %d not committed: the records are of iterations %s",
                    done, _iterations(stored))
        return None
    ckpt.commit(ck_url, done, slot, stored, allow_missing=known_missing)
    return int(done)


def _stop_reason(cfg: TrainConfig, history: list[dict], elapsed: float) -> str | None:
    if cfg.max_seconds is not None and elapsed >= cfg.max_seconds:
        return "max_seconds"
    if cfg.tol is not None and len(history) >= 2:
        a, b = history[-2]["ll"], history[-1]["ll"]
        if abs(b - a) <= cfg.tol * abs(a):
            return "tol"
    return None


def _check_tasks(futures: list[Any]) -> None:
    for f in futures:
        if f.status == "error":
            f.result()  # raises the task's exception (a BigLDAError stays one line)
            # (a RuntimeError "Worker holding Actor was lost" becomes WorkerLost in _attempt)
        if f.status in ("cancelled", "lost"):
            raise ClusterError(f"a training task was {f.status} (a worker may have been lost)")


def _results(futures: list[Any], timeout: float) -> list[Any]:
    out = []
    for f in futures:
        try:
            out.append(f.result(timeout=timeout))
        except TimeoutError:
            raise ClusterError(f"a training task did not finish within {timeout:g} s after "
                               "its last clock") from None
    return out


# ----------------------------------------------------------------------------- the job


def _resume_hint(out: str, cfg: TrainConfig, corpus: Any) -> str:
    """One line: where training stopped and how to continue."""
    url = ckpt.checkpoint_url(out) if cfg.checkpoint_every else None
    attrs = latest_checkpoint(url, cfg.n_topics, corpus.n_tokens)
    if attrs is None:
        return ("interrupted: no checkpoint was written (--checkpoint-every 0 or before the "
                "first one); nothing to resume, run again")
    return (f"interrupted: checkpoint {url} holds iteration {int(attrs['clock'])}; run the same "
            f"command with --resume to continue (no model was written to {out})")


def train(
    corpus: str,
    out: str,
    n_topics: int,
    iterations: int,
    sampler: str = "lightlda",
    alpha: float = 0.1,
    beta: float = 0.01,
    workers: int | None = None,
    threads_per_worker: int = 1,
    staleness: float = 0,
    seed: int = 0,
    checkpoint_every: int = 10,
    resume: bool = False,
    scheduler: Any = None,
    max_seconds: float | None = None,
    tol: float | None = None,
    n_shards: int | None = None,
    overwrite: bool = False,
    on_record: Callable[[dict], None] | list[Callable[[dict], None]] | None = None,
    *,
    sampler_params: dict | None = None,
    slow_shards: dict[int, float] | None = None,
    slow_workers: dict[str, float] | None = None,
    rebalance_after: int = 3,
    connect_timeout: float = 10.0,
    call_timeout: float = 120.0,
    max_recoveries: int = 3,
    optimize_alpha_every: int = 0,
    optimize_alpha_burn_in: int | None = None,
    backend: str = "cpu",
    balance: str = "auto",
    worker_backends: dict[str, str] | None = None,
    gpu_sampler_params: dict | None = None,
) -> str:
    """Train an LDA model on Dask and write it to ``out`` (a ``model.zarr``); return ``out``.

    Parameters
    ----------
    corpus : URL of a ``corpus.zarr``.  out : URL of the model to write.
    n_topics : K (2..65535).  iterations : sweeps in total (counting a resumed run's).
    sampler : ``"lightlda"`` (Metropolis-Hastings, O(1)/token) or ``"cgs"`` (exact Gibbs).
    alpha, beta : symmetric Dirichlet priors.
    workers, threads_per_worker : size of the embedded LocalCluster (no ``scheduler``).
    staleness : SSP bound s in clocks (0 = BSP, ``math.inf`` = asynchronous).
    seed : all randomness is keyed by (seed, iteration, shard).
    checkpoint_every : write ``z`` every N clocks to ``<out stem>.checkpoint.zarr`` (0 = never).
    resume : start from that checkpoint (the table is recounted from its ``z``).
    scheduler : None (embedded cluster), a scheduler address, or a connected ``Client``.
    max_seconds, tol : stop early after this wall time, or once the relative change of the
        log-likelihood per iteration is below ``tol``.
    n_shards : document shards (default: one per worker thread; more are allowed).
    overwrite : replace an existing ``out``.
    on_record : callback(s) receiving every metrics record (docs/contracts.md).
    slow_shards : debug — ``{shard: seconds}`` of extra sleep per clock.
    slow_workers : debug — ``{worker address: seconds}`` of extra sleep per shard per clock.
    rebalance_after : a worker that is a straggler this many clocks in a row gets fewer shards
        (restart from the checkpoint committed at that clock; needs checkpoints and more shards
        than workers); 0 never moves shards.
    max_recoveries : lost workers recovered (from the latest checkpoint) before giving up.
    optimize_alpha_every : learn an asymmetric alpha (Minka's fixed point on the doc-topic
        count histograms of all shards) every N clocks after ``optimize_alpha_burn_in`` clocks
        (default ``max(10, 2 N)``); 0 keeps the symmetric ``alpha``. Under BSP the alpha decided
        from the state after clock ``c`` is used exactly from clock ``c + 1`` (deterministic);
        under SSP each shard uses the newest published alpha when it starts a clock. The final
        alpha is the model's; a checkpoint's history carries it for ``resume``.
    backend : ``"cpu"``, ``"gpu"`` or ``"auto"``, resolved on each worker: ``"auto"`` runs the
        GPU sampler on every worker with a working GPU and the CPU one elsewhere; ``"gpu"``
        without a usable GPU on a worker is a ConfigError naming the cause, raised before
        anything is written. The embedded cluster then has one worker per GPU (see
        :func:`connect`). Under the CUDA simulator an explicit ``"gpu"`` runs (tests).
    balance : ``"auto"`` (default: by throughput when the workers run different backends),
        ``"throughput"`` or ``"none"``. Balancing plans ``shards_per_worker`` (4) shards per
        worker thread, measures each worker's tokens/s over the first clocks and, at a
        checkpoint after ``balance_after`` (2) clocks, places the shards in proportion to it
        (a restart from that checkpoint; needs ``checkpoint_every`` > 0). The metrics records
        have ``clock_spread_s`` (:func:`clock_spread_s`) to see the effect.
    worker_backends : ``{worker address: backend}`` overriding ``backend`` on those workers.
    gpu_sampler_params : settings of the GPU sampler (``sampler_params`` are the CPU one's).

    A first SIGINT stops after the current clock, commits a checkpoint and raises
    :class:`biglda.train.recovery.Interrupted` (exit code 130 in the CLI) whose message says how
    to resume; no model is written.

    Examples
    --------
    >>> train("runs/demo/corpus.zarr", "runs/demo/model.zarr", n_topics=20,
    ...       iterations=30, workers=2)  # doctest: +SKIP
    'runs/demo/model.zarr'
    """
    from biglda.samplers import doc_topic_counts
    from biglda.train.model_store import save_model

    cfg = TrainConfig(n_topics=int(n_topics), iterations=int(iterations), sampler=sampler,
                      alpha=float(alpha), beta=float(beta), staleness=float(staleness),
                      seed=int(seed), checkpoint_every=int(checkpoint_every), resume=bool(resume),
                      max_seconds=max_seconds, tol=tol, n_shards=n_shards,
                      sampler_params=dict(sampler_params or {}),
                      slow_shards=dict(slow_shards or {}),
                      slow_workers=dict(slow_workers or {}), rebalance_after=int(rebalance_after),
                      call_timeout=call_timeout,
                      max_recoveries=int(max_recoveries),
                      optimize_alpha_every=int(optimize_alpha_every),
                      optimize_alpha_burn_in=(None if optimize_alpha_burn_in is None
                                              else int(optimize_alpha_burn_in)),
                      backend=str(backend), balance=str(balance),
                      worker_backends=dict(worker_backends or {}),
                      gpu_sampler_params=dict(gpu_sampler_params or {}))
    if workers is not None and int(workers) < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    if int(threads_per_worker) < 1:
        raise ConfigError(f"--threads-per-worker must be >= 1, got {threads_per_worker}")
    corpus_obj = validate(corpus, out, cfg, overwrite)
    if cfg.backend == "gpu" and scheduler is None:  # the embedded workers are this machine's
        from biglda.samplers.backends import require_gpu

        require_gpu()
    callbacks = [] if on_record is None else (
        list(on_record) if isinstance(on_record, list | tuple) else [on_record])
    run_id = uuid.uuid4().hex[:12]
    t0 = time.time()
    status = "error"
    with connect(scheduler, workers, int(threads_per_worker), connect_timeout,
                 backend=cfg.backend) as client:
        log.info("connected to %s in %.1f s", client.scheduler.address, time.time() - t0)

        def emit(record: dict) -> None:
            with contextlib.suppress(Exception):
                client.log_event("biglda", record)
            for cb in callbacks:
                cb(record)

        # fail before anything starts or is written
        _, _, backends = plan_cluster(client, corpus_obj, cfg, log_choice=True)
        pages = load_plugins(client)
        emit({"type": "start", "run_id": run_id, "config": cfg.as_dict(), "backends": backends,
              "balance": balancing(cfg, backends),
              "n_tokens": int(corpus_obj.n_tokens), "n_docs": int(corpus_obj.n_docs),
              "n_words": int(corpus_obj.n_words), "dashboard": client.dashboard_link,
              "pages": pages, "corpus": str(corpus), "out": str(out)})
        try:
            try:
                result = run_training(client, corpus_obj, cfg, out=out, on_record=callbacks,
                                      run_id=run_id)
            except KeyboardInterrupt:  # a second SIGINT: stopped at once
                status = "interrupted"
                raise Interrupted(_resume_hint(out, cfg, corpus_obj)) from None
            if result.stop_reason == "interrupted":  # no model: it would look finished
                status = "interrupted"
                raise Interrupted(_resume_hint(out, cfg, corpus_obj))
            log.info("trained in %.1f s (%s)", time.time() - t0, result.stop_reason)
            doc_ptr = corpus_obj.doc_ptr

            def n_dk_blocks() -> Iterator[np.ndarray]:
                for s in result.shards:
                    ptr = np.asarray(doc_ptr[s.doc_start:s.doc_stop + 1], dtype=np.int64)
                    yield doc_topic_counts(ptr - ptr[0], result.z[s.index], cfg.n_topics)

            save_model(out, n_wk=result.n_wk, n_dk=n_dk_blocks(), vocab=corpus_obj.vocab,
                       doc_ids=corpus_obj.doc_ids, alpha=result.alpha,
                       beta=cfg.beta, overwrite=overwrite,
                       attrs={"sampler": cfg.sampler, "config": cfg.as_dict(),
                              "tokenizer": dict(corpus_obj.tokenizer or {}),
                              "history": _history_for_store(result.history),
                              "backends": backends_used(result.history),
                              "corpus": str(corpus), "stop_reason": result.stop_reason})
            status = "ok"
            log.info("model saved at %.1f s", time.time() - t0)
        finally:
            emit({"type": "end", "run_id": run_id, "elapsed": time.time() - t0,
                  "status": status, "out": str(out) if status == "ok" else None})
    return out
