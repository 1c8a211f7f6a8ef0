"""What runs on a worker: one long-running task per worker thread that sweeps its shards.

Design: a task per (worker, thread slot) holds its document shards — tokens, ``z`` and the row
cache — in local variables for the whole run and loops over all clocks: wait for the SSP clock,
pull the other shards' deltas, sweep (numba, releases the GIL), push the delta, checkpoint,
tick. The alternative, one task per shard per clock with the state in a worker-held object,
pays a scheduler round trip per shard per clock and gains nothing (the state never moves; a lost
worker is recovered by recounting ``z`` from a checkpoint either way). Measured on the 2-core
machine of this project (loaded): a task round trip to a given worker takes ~14 ms median, an
actor call ~1.1 ms; a demo-corpus clock is ~50 ms, so per-clock tasks would add ~30% there
(~1.5% on the Debian corpus at K = 1000, whose clocks take ~1 s). With long-running tasks the
time outside the sampling kernel was 6.2% of a clock on one worker and 9.9% on two at K = 1000
(``pipelines/bench_train.py``). The driver submits :func:`run_group` through
:func:`biglda.train.recovery.run_group_failfast`, which secedes from the worker's thread pool
(so a task stuck on a dead actor does not hold the thread a recovered run needs); there is one
such task per worker thread. Each worker runs its actors' sync methods in a separate actor
thread and ``async`` ones (the clock) on its event loop, so a task waiting on a clock never
blocks an actor.

Every parameter-server call goes through the client (:class:`biglda.ps.PSClient`) and has a
timeout; a clock wait is a sequence of short server-side waits, so a lost clock actor surfaces
as a :class:`biglda.errors.ClusterError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from biglda.ps import ALL_CLOCKS, ClockAnswer, PSClient, ShardCache
from biglda.train import checkpoint as ckpt


@dataclass(frozen=True)
class GroupSpec:
    """Everything a worker task needs (picklable: actors pickle as handles)."""

    corpus_url: str
    shards: tuple[Any, ...]          # biglda.corpus Shard objects
    ps: PSClient
    n_topics: int
    n_words: int
    alpha: np.ndarray
    beta: float
    sampler: str
    sampler_params: dict
    seed: int
    start_clock: int
    stop_clock: int
    staleness: float
    checkpoint_url: str | None = None
    checkpoint_every: int = 0
    checkpoint_slot: int = 0          # slot the first write goes to
    resume_attrs: dict | None = None  # committed checkpoint to start from
    call_timeout: float = 120.0
    wait_chunk: float = 2.0
    slow_shards: dict = field(default_factory=dict)
    slow_workers: dict = field(default_factory=dict)  # debug: {worker address: s per shard-clock}
    optimize_alpha_every: int = 0     # send alpha histograms every N clocks (0: never)
    optimize_alpha_burn_in: int = 0   # ... from this many completed clocks on
    backend: str = "cpu"              # "cpu" | "gpu" | "auto", resolved on the worker
    worker_backends: dict = field(default_factory=dict)  # {worker address: backend} overrides
    gpu_sampler_params: dict = field(default_factory=dict)  # settings of the GPU sampler
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
        return pick_backend(spec.worker_backends.get(worker, spec.backend), gpu_status())
    except ConfigError as exc:
        raise ConfigError(f"worker {worker}: {exc}") from None


def _make_sampler(spec: GroupSpec, backend: str) -> Any:
    from biglda.samplers import get_sampler

    params = spec.gpu_sampler_params if backend == "gpu" else spec.sampler_params
    return get_sampler(spec.sampler, backend, **params)


def alpha_due(done: int, every: int, burn_in: int) -> bool:
    """Whether alpha is optimized from the state after ``done`` completed clocks."""
    return every > 0 and done >= max(burn_in, 1) and done % every == 0


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
    layout give the same run). ``ABORT`` / ``STOP``: the run was aborted / stops."""
    need = (spec.staleness == 0 and clock > spec.start_clock
            and alpha_due(clock, spec.optimize_alpha_every, spec.optimize_alpha_burn_in))
    answer, got = spec.ps.alpha.lookup(shard, clock, need, spec.wait_chunk, spec.call_timeout)
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
        self.cache = ShardCache(self.index, tokens, spec.ps.bounds, spec.n_topics)
        del tokens
        if spec.resume_attrs is not None:
            z = ckpt.read_z(spec.checkpoint_url, spec.resume_attrs, shard.token_start,
                            shard.token_stop)
            self.z = np.ascontiguousarray(z, dtype=z_dtype(spec.n_topics))
        else:
            # init stream: iteration -1 never collides with a sweep's (seed, iteration, shard)
            self.z = init_z(len(self.cache.tokens), spec.n_topics,
                            RandomKey(spec.seed, -1, self.index))
        self.attached = False
        self.slot = spec.checkpoint_slot


def run_group(spec: GroupSpec) -> dict[int, np.ndarray]:
    """Sweep this task's shards from ``start_clock`` to the stop clock; return their final ``z``."""
    from distributed import get_worker

    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, doc_loglik

    worker = get_worker().address
    corpus = Corpus.open(spec.corpus_url)
    backend = worker_backend(spec, worker)
    sampler = _make_sampler(spec, backend)
    states = [_ShardState(spec, corpus, s) for s in spec.shards]
    t_init = time.time()
    for st in states:
        n_wk, _ = count_from_z(st.cache.tokens, st.doc_ptr, st.z, st.cache.n_local,
                               spec.n_topics)
        st.cache.push_counts(spec.ps.tables, spec.start_clock - 1, n_wk, spec.call_timeout)
        del n_wk
        spec.ps.clock.tick(st.index, spec.start_clock,
                           {"shard": st.index, "worker": worker, "backend": backend,
                            "init_s": time.time() - t_init}, spec.call_timeout)

    clock = spec.start_clock
    alpha = np.asarray(spec.alpha, dtype=np.float64)
    running = True
    while running and clock < spec.stop_clock:
        for st in states:
            t0 = time.time()
            cpu0 = time.process_time()
            go = spec.ps.clock.wait(st.index, clock, spec.wait_chunk, spec.call_timeout)
            if go is ClockAnswer.ABORT:  # the driver restarts every shard from a checkpoint
                return {}
            if go is ClockAnswer.STOP:
                running = False
                break
            if spec.optimize_alpha_every > 0:
                new = _alpha(spec, st.index, clock, alpha)
                if isinstance(new, ClockAnswer):
                    if new is ClockAnswer.ABORT:  # the driver restarts every shard: write nothing
                        return {}
                    running = False
                    break
                alpha = new
            t_wait = time.time()
            # BSP: exactly the deltas of the clocks before this one (all arrived, by the wait),
            # so a seed and shard layout give the same run. SSP: whatever has arrived (at least
            # up to clock - 1 - s, by the wait) — fresher reads than the bound are allowed and
            # help a slow shard most.
            upto = clock - 1 if spec.staleness == 0 else ALL_CLOCKS
            pulled = (st.cache.refresh(spec.ps.tables, upto, spec.call_timeout)
                      if st.attached else
                      st.cache.attach(spec.ps.tables, upto, spec.call_timeout))
            st.attached = True
            t_pull = time.time()
            kcpu0 = time.thread_time()
            res = sampler.sweep(st.cache.tokens, st.doc_ptr, st.z, st.cache.n_wk, st.cache.n_k,
                                alpha, spec.beta, spec.n_words,
                                RandomKey(spec.seed, clock, st.index))
            kernel_cpu = time.thread_time() - kcpu0
            if st.index in spec.slow_shards:  # debug: an artificially slow shard
                time.sleep(float(spec.slow_shards[st.index]))
            if worker in spec.slow_workers:  # debug: an artificially slow worker
                time.sleep(float(spec.slow_workers[worker]))
            t_sweep = time.time()
            doc_ll = float(doc_loglik(st.doc_ptr, st.z, alpha, spec.n_topics))
            t_ll = time.time()
            pushed = st.cache.push(spec.ps.tables, clock, res.delta_words, res.delta_topics,
                                   res.delta_counts, spec.call_timeout)
            t_push = time.time()
            done = clock + 1
            wrote = None
            if spec.checkpoint_url and ((spec.checkpoint_every > 0 and (
                    done % spec.checkpoint_every == 0 or done == spec.stop_clock))
                    or done in spec.checkpoint_at):
                ckpt.write_shard_z(spec.checkpoint_url, st.slot, st.index, st.z)
                wrote = [done, st.slot]
                st.slot = 1 - st.slot
            t_end = time.time()
            stats = {
                "shard": st.index, "worker": worker, "backend": backend, "clock": clock,
                "tokens": res.n_tokens,
                "kernel_s": res.seconds, "wait_s": t_wait - t0, "pull_s": t_pull - t_wait,
                "sweep_s": t_sweep - t_pull, "ll_s": t_ll - t_sweep, "push_s": t_push - t_ll,
                "checkpoint_s": t_end - t_push, "clock_s": t_end - t0, "t_start": t0,
                "t_end": t_end, "bytes_pulled": pulled, "bytes_pushed": pushed,
                "accept_rate": res.accept_rate, "doc_ll": doc_ll, "checkpoint": wrote,
                # CPU seconds: of the sweep (this thread), of the whole clock (the worker
                # process: task, actor and comm threads) — rates that do not depend on how busy
                # the machine's other processes keep the cores
                "kernel_cpu_s": kernel_cpu, "process_cpu_s": time.process_time() - cpu0,
            }
            if done < spec.stop_clock and alpha_due(done, spec.optimize_alpha_every,
                                                    spec.optimize_alpha_burn_in):
                stats["alpha_hist"] = _hist_stats(st.doc_ptr, st.z, spec.n_topics)
            spec.ps.clock.tick(st.index, done, stats, spec.call_timeout)
        else:
            clock += 1
    # Stopped early (driver's stop rule): make the last state resumable too.
    if spec.checkpoint_url and spec.checkpoint_every > 0 and clock < spec.stop_clock:
        for st in states:
            if clock % spec.checkpoint_every:
                ckpt.write_shard_z(spec.checkpoint_url, st.slot, st.index, st.z)
                spec.ps.mailbox.note(st.index, {"final_checkpoint": [clock, st.slot]},
                                     spec.call_timeout)
    return {st.index: st.z for st in states}
