"""What runs on a worker: one long-running task per worker thread that sweeps its shards.

Design: a task per (worker, thread slot) holds its document shards — tokens, ``z`` and the row
cache — in local variables for the whole run and loops over all clocks: wait for the SSP clock,
pull the other shards' deltas, sweep (numba, releases the GIL), push the delta, checkpoint,
tick. The alternative, one task per shard per clock with the state in a worker-held object,
pays a scheduler round trip per shard per clock (about ten actor calls' worth) and gains
nothing: the state never moves, and a lost worker is recovered by recounting ``z`` from a
checkpoint either way (measurements in pipelines/README.md). The driver submits
:func:`run_group_failfast`, which secedes from the worker's thread pool (so a task stuck on a
dead actor does not hold the thread a recovered run needs); there is one such task per worker
thread. Each worker runs its actors' sync methods in a separate actor thread and ``async``
ones (the clock) on its event loop, so a task waiting on a clock never blocks an actor.

Every parameter-server call goes through the client (:class:`biglda.ps.PSClient`) and has a
timeout; a clock wait is a sequence of short server-side waits, so a lost clock actor surfaces
as a :class:`biglda.errors.ClusterError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.ps import ALL_CLOCKS, ClockAnswer, PSClient, ShardCache
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.alpha import alpha_due
from biglda.trainer.config import TrainConfig
from biglda.trainer.metrics import ShardClockStats, shard_clock_stats


@dataclass(frozen=True)
class GroupSpec:
    """Everything a worker task needs: the run's settings and where this attempt stands
    (picklable: actors pickle as handles).
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


def gpu_probe() -> dict[str, Any]:
    """This process's :func:`biglda.samplers.backends.gpu_status` as a dict (``client.run``)."""
    from biglda.samplers.backends import gpu_status

    s = gpu_status()
    return {"usable": s.usable, "simulator": s.simulator, "reason": s.reason,
            "n_devices": s.n_devices}


def worker_backend(spec: GroupSpec, worker: str) -> str:
    """The backend this worker runs: its override, else the run's request, resolved here.

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
    """This shard's ``[count_hist, length_hist]`` trimmed to the last non-zero column."""
    from biglda.samplers.hyper import histograms_from_z

    ch, lh = histograms_from_z(doc_ptr, z, n_topics)
    cols = np.flatnonzero(ch[:, 1:].any(axis=0))
    ch = ch[:, :int(cols[-1]) + 2] if len(cols) else ch[:, :1]
    small = np.int32 if len(doc_ptr) < 2**31 else np.int64
    return [ch.astype(small), lh.astype(small)]


def _alpha(spec: GroupSpec, shard: int, clock: int, alpha: np.ndarray
           ) -> np.ndarray | ClockAnswer:
    """The alpha to sweep ``clock`` with: the newest published one. Under BSP, at the clock
    right after an optimization, wait until the driver published exactly that one (so a seed and
    layout give the same run). ``ABORT`` / ``STOP``: the run was aborted / stops.
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


class _ShardState:
    def __init__(self, spec: GroupSpec, corpus: Any, shard: Any) -> None:
        from biglda.samplers import RandomKey, init_z, z_dtype

        self.index = int(shard.index)
        tokens, self.doc_ptr = corpus.read_shard(shard)
        self.doc_ptr = np.ascontiguousarray(self.doc_ptr, dtype=np.int64)
        self.cache = ShardCache(self.index, tokens, spec.ps.bounds, spec.cfg.n_topics)
        del tokens
        if spec.resume_attrs is not None:
            z = ckpt.read_z(spec.checkpoint_url, spec.resume_attrs, shard.token_start,
                            shard.token_stop)
            self.z = np.ascontiguousarray(z, dtype=z_dtype(spec.cfg.n_topics))
        else:
            # init stream: iteration -1 never collides with a sweep's (seed, iteration, shard)
            self.z = init_z(len(self.cache.tokens), spec.cfg.n_topics,
                            RandomKey(spec.cfg.seed, -1, self.index))
        self.attached = False
        self.slot = spec.checkpoint_slot


def run_group(spec: GroupSpec) -> dict[int, np.ndarray]:
    """Sweep this task's shards from ``start_clock`` to the stop clock; return their final ``z``."""
    from distributed import get_worker

    from biglda.corpus import Corpus

    worker = get_worker().address
    corpus = Corpus.open(spec.corpus_url)
    backend = worker_backend(spec, worker)
    sampler = _make_sampler(spec, backend)
    states = [_ShardState(spec, corpus, s) for s in spec.shards]
    _push_recounts(spec, states, worker, backend)
    clock = spec.start_clock
    alpha = np.asarray(spec.alpha, dtype=np.float64)
    running = True
    while running and clock < spec.stop_clock:
        for st in states:
            t0, cpu0 = time.time(), time.process_time()
            go = spec.ps.clock.wait(st.index, clock, spec.wait_chunk, spec.cfg.call_timeout)
            if go is ClockAnswer.ABORT:  # the driver restarts every shard from a checkpoint
                return {}
            if go is ClockAnswer.STOP:
                running = False
                break
            if spec.cfg.optimize_alpha_every > 0:
                new = _alpha(spec, st.index, clock, alpha)
                if isinstance(new, ClockAnswer):
                    if new is ClockAnswer.ABORT:  # the driver restarts every shard: write nothing
                        return {}
                    running = False
                    break
                alpha = new
            stats = _sweep_clock(spec, st, sampler, clock, alpha, worker, backend, t0, cpu0)
            spec.ps.clock.tick(st.index, clock + 1, stats, spec.cfg.call_timeout)
        else:
            clock += 1
    _final_checkpoint(spec, states, clock)
    return {st.index: st.z for st in states}


def _push_recounts(spec: GroupSpec, states: list[_ShardState], worker: str,
                   backend: str) -> None:
    """Push the counts of every shard's starting ``z`` and tick its start clock."""
    from biglda.samplers import count_from_z

    t_init = time.time()
    for st in states:
        n_wk, _ = count_from_z(st.cache.tokens, st.doc_ptr, st.z, st.cache.n_local,
                               spec.cfg.n_topics)
        st.cache.push_counts(spec.ps.tables, spec.start_clock - 1, n_wk, spec.cfg.call_timeout)
        del n_wk
        spec.ps.clock.tick(st.index, spec.start_clock,
                           {"shard": st.index, "worker": worker, "backend": backend,
                            "init_s": time.time() - t_init}, spec.cfg.call_timeout)


def _sweep_clock(spec: GroupSpec, st: _ShardState, sampler: Any, clock: int,
                 alpha: np.ndarray, worker: str, backend: str, t0: float,
                 cpu0: float) -> ShardClockStats:
    """Pull, sweep, log-likelihood, push and checkpoint of one shard's ``clock`` (the wait is
    done: it began at ``t0``); the stats of the clock.
    """
    from biglda.samplers import RandomKey, doc_loglik

    cfg = spec.cfg
    t_wait = time.time()
    # BSP: exactly the deltas of the clocks before this one (all arrived, by the wait), so a
    # seed and shard layout give the same run. SSP: whatever has arrived (at least up to
    # clock - 1 - s, by the wait) — fresher reads than the bound are allowed and help a slow
    # shard most.
    upto = clock - 1 if cfg.staleness == 0 else ALL_CLOCKS
    pulled = (st.cache.refresh(spec.ps.tables, upto, cfg.call_timeout) if st.attached else
              st.cache.attach(spec.ps.tables, upto, cfg.call_timeout))
    st.attached = True
    t_pull = time.time()
    kcpu0 = time.thread_time()
    res = sampler.sweep(st.cache.tokens, st.doc_ptr, st.z, st.cache.n_wk, st.cache.n_k,
                        alpha, cfg.beta, spec.n_words, RandomKey(cfg.seed, clock, st.index))
    kernel_cpu = time.thread_time() - kcpu0
    if st.index in cfg.slow_shards:  # debug: an artificially slow shard
        time.sleep(float(cfg.slow_shards[st.index]))
    if worker in cfg.slow_workers:  # debug: an artificially slow worker
        time.sleep(float(cfg.slow_workers[worker]))
    t_sweep = time.time()
    doc_ll = float(doc_loglik(st.doc_ptr, st.z, alpha, cfg.n_topics))
    t_ll = time.time()
    pushed = st.cache.push(spec.ps.tables, clock, res.delta_words, res.delta_topics,
                           res.delta_counts, cfg.call_timeout)
    t_push = time.time()
    done = clock + 1
    wrote = None
    if spec.checkpoint_url and ((spec.checkpoint_every > 0 and (
            done % spec.checkpoint_every == 0 or done == spec.stop_clock))
            or done in spec.checkpoint_at):
        ckpt.write_shard_z(spec.checkpoint_url, st.slot, st.index, st.z)
        wrote = [done, st.slot]
        st.slot = 1 - st.slot
    times = {"start": t0, "waited": t_wait, "pull": t_pull, "sweep": t_sweep, "ll": t_ll,
             "push": t_push, "end": time.time()}
    # CPU seconds: of the sweep (this thread), of the whole clock (the worker process: task,
    # actor and comm threads) — rates that do not depend on how busy the machine's other
    # processes keep the cores
    stats = shard_clock_stats(shard=st.index, worker=worker, backend=backend, clock=clock,
                              res=res, times=times, pulled=pulled, pushed=pushed,
                              doc_ll=doc_ll, wrote=wrote, kernel_cpu_s=kernel_cpu,
                              process_cpu_s=time.process_time() - cpu0)
    if done < spec.stop_clock and alpha_due(done, cfg.optimize_alpha_every, cfg.alpha_burn_in):
        stats["alpha_hist"] = _hist_stats(st.doc_ptr, st.z, cfg.n_topics)
    return stats


def _final_checkpoint(spec: GroupSpec, states: list[_ShardState], clock: int) -> None:
    """Stopped early (the driver's stop rule): make the last state resumable too."""
    if spec.checkpoint_url and spec.checkpoint_every > 0 and clock < spec.stop_clock:
        for st in states:
            if clock % spec.checkpoint_every:
                ckpt.write_shard_z(spec.checkpoint_url, st.slot, st.index, st.z)
                spec.ps.mailbox.note(st.index, {"final_checkpoint": [clock, st.slot]},
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
