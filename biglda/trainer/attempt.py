"""One attempt of a run: start the parameter server and the tasks, drive the clocks, finish.

An attempt runs every shard from ``RunState.start_clock`` (a checkpoint, or the start) to the
stop clock. It ends in one of three ways: a :class:`TrainResult` (done), a
:class:`biglda.trainer.placement.RebalancePlan` (stopped at a committed checkpoint so the
shards can move; :mod:`biglda.trainer.run` restarts them), or an exception — a lost worker
(:class:`biglda.errors.WorkerLost` or another :class:`biglda.errors.ClusterError`) or a second
SIGINT — after every task of the attempt was stopped and its actors released.

The phases: :func:`_submit` (actors and tasks), :func:`_drive` (wait for each clock, then
:func:`_bookkeep` its record and :func:`_after_clock` the stop, balance and rebalance rules),
:func:`_finish` (final checkpoint, the table and the clock's evidence).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from biglda.errors import ClusterError, WorkerLost
from biglda.ps import start_parameter_server
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.alpha import alpha_from_history, optimized_alpha
from biglda.trainer.cluster import check_workers, live_workers
from biglda.trainer.config import TrainConfig
from biglda.trainer.metrics import (
    ClockFrame,
    IterationRecord,
    OnRecord,
    Rebalance,
    Record,
    Recovery,
    ShardClockStats,
    busy_by_worker,
    iteration_record,
)
from biglda.trainer.placement import (
    RebalancePlan,
    Slots,
    StragglerWatch,
    by_process,
    find_stragglers,
    plan_groups,
    propose_rebalance,
    throughput,
)
from biglda.trainer.worker import GroupSpec, processes_take_turns, run_group_failfast

log = logging.getLogger("biglda.train")


@dataclass
class TrainResult:
    """What :func:`biglda.trainer.run.run_training` leaves.

    The final state and the evidence of how it ran.
    """

    z: dict[int, np.ndarray]           # final z of every shard
    shards: list[Any]                  # the shard plan (biglda.corpus Shard)
    n_wk: np.ndarray                   # the parameter server's table after the run
    n_k: np.ndarray
    history: list[Record]              # one metrics record per iteration
    starts: list[tuple[int, int, float, int]]  # (shard, clock, time, min completed clock)
    ticks: list[tuple[int, int, float]]        # (shard, completed clocks, time)
    ps_info: list[dict]
    clocks: list[int]                  # completed clocks of every shard at the end
    placement: dict[int, str]          # shard -> worker address
    stop_reason: str = "iterations"
    recoveries: list[Recovery] = field(default_factory=list)
    rebalances: list[Rebalance] = field(default_factory=list)
    alpha: np.ndarray | None = None    # the final alpha (optimized, or the symmetric one)


@dataclass
class RunState:
    """What carries over from one attempt to the next (a recovery rolls it back)."""

    start_clock: int
    stop_clock: int
    resume_attrs: dict | None
    first_slot: int
    history: list[Record]
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


@dataclass
class Run:
    """What every attempt of one run shares (fixed for the run)."""

    client: Any
    corpus: Any
    cfg: TrainConfig
    shards: list[Any]
    ck_url: str | None
    run_id: str
    emit: OnRecord
    interrupted: Any                    # biglda.trainer.cluster.InterruptFlag


@dataclass
class _Attempt:
    """The moving parts of one attempt."""

    ps: Any
    futures: list[Any]
    addrs: list[str]
    placement: dict[int, str]
    used: set[str]
    slots: Slots
    alpha: np.ndarray
    stop_clock: int
    bal_clock: int                      # the clock of the throughput balance (-1: none)
    measure_from: int                   # the first clock measured for it
    slow_watch: StragglerWatch
    movable: bool                       # shards may move on a straggler
    c: int                              # the clock the driver waits for
    t0: float
    t_prev: float
    t_first: float | None = None        # the end of this attempt's first clock, and it
    c_first: int = -1
    slow: list[str] = field(default_factory=list)  # stragglers for rebalance_after clocks
    window: dict[str, list[float]] = field(default_factory=dict)  # {worker: [busy s, tokens]}


def run_attempt(run: Run, slots: Slots, st: RunState, lost: list[str]
                ) -> TrainResult | RebalancePlan:
    """One start of the parameter server and the tasks, from ``st.start_clock`` to the end.

    ``lost`` gets the workers found gone when the attempt fails.
    """
    at = _submit(run, slots, st)
    try:
        plan = _drive(run, st, at)
        results = _results(at.futures, run.cfg.call_timeout) if plan is None else []
    except BaseException as exc:
        st.t_fail = time.time()
        if isinstance(exc, WorkerLost):
            lost.extend(sorted(at.used - live_workers(run.client)))
        elif isinstance(exc, ClusterError):
            with contextlib.suppress(Exception):
                lost.extend(sorted(at.used - live_workers(run.client)))
        # Stop the tasks at their next clock wait, give them a moment, then free everything.
        _abandon(run.client, at.ps, at.futures, at.addrs, timeout=5.0)
        if isinstance(exc, RuntimeError) and "lost" in str(exc).lower():
            # distributed: "Worker holding Actor was lost" (on attribute access, in a task too)
            lost.extend(sorted(at.used - live_workers(run.client)))
            raise WorkerLost(str(exc).splitlines()[0]) from None
        raise
    if plan is not None:
        st.t_fail = time.time()
        # Every worker is alive: wait for all the tasks, however long a clock is, so none can
        # still write into the checkpoint slot the next attempt writes.
        _abandon(run.client, at.ps, at.futures, at.addrs, timeout=run.cfg.call_timeout)
        return plan
    return _finish(run, st, at, results)


def _submit(run: Run, slots: Slots, st: RunState) -> _Attempt:
    """Start the parameter server and one task per (worker, thread) group."""
    cfg, corpus, shards, ck_url = run.cfg, run.corpus, run.shards, run.ck_url
    n_shards = len(shards)
    slot_addrs = {a for a, _, _ in slots}
    if st.assignment is not None and (set(st.assignment.values()) - slot_addrs
                                      or len(st.assignment) != n_shards):
        st.assignment = None  # (a worker of that plan is gone)
    groups = plan_groups(shards, slots, st.assignment)
    workers = [a for a, _, _ in slots]
    st.clock = st.start_clock
    st.t_fail = time.time()
    # ranked by their first shard, not by address: a recovery that places the same shard
    # groups on new workers takes the same turns on the vocabulary (--process-partition)
    processes = sorted(by_process(groups), key=lambda g: min(s.index for t in g[1] for s in t))
    # processes taking turns start a clock once the posts it needs came, not at a barrier
    ps = start_parameter_server(run.client, corpus.n_words, cfg.n_topics, n_shards, cfg.beta,
                                cfg.staleness, workers, start_clock=st.start_clock,
                                timeout=cfg.call_timeout,
                                ahead=int(processes_take_turns(cfg, len(processes))))
    # a resumed or recovered run starts with its optimized alpha
    alpha = alpha_from_history(st.history, cfg)
    # The throughput balance: measure clocks start+1 .. start+balance_after-1 (the first clock
    # compiles kernels and fills the caches, so it is left out when there is another), then at
    # start+balance_after, a checkpoint every shard writes for it, place the shards in
    # proportion to the measured rates (a restart from that checkpoint, as a rebalance).
    bal_clock = st.start_clock + int(cfg.balance_after)
    if not (st.balance and not st.balanced and ck_url is not None and n_shards > len(slots)
            and bal_clock < st.stop_clock):
        bal_clock = -1
    worker_cfg = cfg.for_workers()
    futures: list[Any] = []
    addrs: list[str] = []
    for rank, (addr, threads) in enumerate(processes):
        members = [s for t in threads for s in t]
        spec = GroupSpec(
            cfg=worker_cfg, corpus_url=corpus.url, shards=tuple(members), ps=ps.client,
            thread_sizes=tuple(len(t) for t in threads),
            process_rank=rank, n_processes=len(processes),
            n_words=corpus.n_words, alpha=alpha,
            start_clock=st.start_clock, stop_clock=st.stop_clock,
            checkpoint_url=ck_url if ck_url else st.ck_read,
            checkpoint_every=cfg.checkpoint_every if ck_url else 0,
            checkpoint_slot=st.first_slot, resume_attrs=st.resume_attrs,
            checkpoint_at=(bal_clock,) if bal_clock >= 0 else ())
        futures.append(run.client.submit(
            run_group_failfast, spec, cfg.connect_timeout, workers=[addr],
            allow_other_workers=False, pure=False,
            key=f"biglda-{run.run_id}-{st.attempt}-{addr}-{len(futures)}"))
        addrs.append(addr)
    if st.on_started is not None:
        st.on_started(time.time())
        st.on_started = None
    log.info("parameter server and %d tasks (one per worker process) placed on %d workers",
             len(futures), len(slots))
    t0 = time.time()
    return _Attempt(
        ps=ps, futures=futures, addrs=addrs, used=set(workers), slots=slots, alpha=alpha,
        placement={s.index: addr for addr, members in groups for s in members},
        stop_clock=st.stop_clock, bal_clock=bal_clock,
        measure_from=st.start_clock + (1 if cfg.balance_after > 1 else 0),
        slow_watch=StragglerWatch(cfg.rebalance_after),
        movable=ck_url is not None and n_shards > len(slots) and cfg.rebalance_after > 0,
        c=st.start_clock, t0=t0, t_prev=t0)


def _drive(run: Run, st: RunState, at: _Attempt, poll: float = 2.0) -> RebalancePlan | None:
    """Wait for every clock's stats and make its record, until the stop clock or a rebalance.

    Returns None at the stop clock, the plan at a rebalance.
    """
    cfg = run.cfg

    def watch() -> None:  # while an actor call has no answer: is every worker still there?
        check_workers(run.client, at.used)

    while at.c < at.stop_clock:
        st.clock = at.c
        got = at.ps.mailbox.iteration(at.c, poll, cfg.call_timeout, check=watch)
        if got is None:
            _check_tasks(at.futures)
            check_workers(run.client, at.used)
            if run.interrupted.set and st.stop_reason != "interrupted":
                st.stop_reason = "interrupted"
                at.stop_clock = at.ps.clock.stop(cfg.call_timeout)
            continue
        stats, clocks = got
        rec = _bookkeep(run, st, at, stats, clocks, watch)
        st.history.append(rec)
        run.emit(rec)
        at.c += 1
        plan = _after_clock(run, st, at, rec)
        if plan is not None:
            return plan
    st.clock = at.c
    return None


def _bookkeep(run: Run, st: RunState, at: _Attempt, stats: dict[int, ShardClockStats],
              clocks: list[int], watch: Callable[[], None]) -> IterationRecord:
    """Return the record of clock ``at.c``; ``clocks``: every shard's completed clocks.

    Its log-likelihood, alpha, stragglers, top words, and the checkpoint committed with it.
    """
    from biglda.samplers import word_loglik_topics

    cfg, c, corpus = run.cfg, at.c, run.corpus
    word = at.ps.tables.snapshots(c, cfg.call_timeout, check=watch)
    if any(w is None for w in word):  # (a process ticks before its push is answered)
        raise ClusterError(f"table shards {[i for i, w in enumerate(word) if w is None]} "
                           f"had not every push of clock {c} within {cfg.call_timeout:g} s "
                           f"of its ticks")
    n_k = sum(w[1] for w in word)
    ll = (sum(r["doc_ll"] for r in stats.values()) + sum(w[0] for w in word)
          + word_loglik_topics(n_k, cfg.beta, corpus.n_words))
    frame = ClockFrame(run_id=run.run_id, n_iterations=cfg.iterations,
                       n_tokens=corpus.n_tokens, t_prev=at.t_prev, t0=at.t0,
                       done_before=len(st.history), t_first=at.t_first, c_first=at.c_first)
    rec = iteration_record(frame, c, stats, ll, clocks, at.placement)
    new_alpha = optimized_alpha(stats, at.alpha, cfg)
    if new_alpha is not None:
        # published before any shard may start c + 1 with it (BSP: they wait for it)
        at.ps.alpha.publish(c + 1, new_alpha, cfg.call_timeout, check=watch)
        at.alpha = new_alpha
        rec["alpha"] = [float(a) for a in new_alpha]
    rows = list(stats.values())
    rec["stragglers"] = find_stragglers(rows, cfg.straggler_factor)
    for w in rec["stragglers"]:
        if w not in st.stragglers:
            st.stragglers.add(w)
            log.warning("straggler: worker %s sampled clock %d more than %gx slower "
                        "per token than the others", w, c, cfg.straggler_factor)
    at.slow = at.slow_watch.update(rows, rec["stragglers"])
    if at.measure_from <= c < at.bal_clock:
        for w, (b, n) in busy_by_worker(rows).items():
            acc = at.window.setdefault(w, [0.0, 0.0])
            acc[0] += b
            acc[1] += n
    if cfg.top_words_every and ((c + 1) % cfg.top_words_every == 0 or c + 1 == at.stop_clock):
        rec["top_words"] = _top_words(at.ps, corpus.vocab, 10, cfg.call_timeout)
    at.t_prev = max(r["t_end"] for r in rows)
    if at.t_first is None:
        at.t_first, at.c_first = at.t_prev, c
    rec["checkpoint"] = ckpt.commit_after_clock(run.ck_url, stats, c,
                                                st.history, rec, len(run.shards),
                                                st.known_missing)
    return rec


def _after_clock(run: Run, st: RunState, at: _Attempt, rec: IterationRecord
                 ) -> RebalancePlan | None:
    """Apply the stop rules, the throughput balance and the straggler rebalance after a clock.

    ``at.c`` is the number of clocks done.
    """
    cfg, c = run.cfg, at.c
    reason = "interrupted" if run.interrupted.set else \
        _stop_reason(cfg, st.history, time.time() - at.t0)
    if reason and c < at.stop_clock and st.stop_reason == "iterations":
        st.stop_reason = reason
        at.stop_clock = at.ps.clock.stop(cfg.call_timeout)
    if c == at.bal_clock and st.stop_reason == "iterations":
        st.balanced = True  # once per attempt line, restart or not
        if rec["checkpoint"] != c:
            log.warning("no throughput balance at clock %d: its checkpoint was not "
                        "committed", c)
        else:
            plan = propose_rebalance(run.corpus, cfg, run.shards, at.slots, at.placement,
                                     throughput(at.window, at.slots), [], c,
                                     reason="throughput")
            if plan is not None:
                return plan
    if (at.movable and at.slow and rec["checkpoint"] == c and c < at.stop_clock
            and st.stop_reason == "iterations"):
        return propose_rebalance(run.corpus, cfg, run.shards, at.slots, at.placement,
                                 at.slow_watch.rates(), at.slow, c)
    return None


def _finish(run: Run, st: RunState, at: _Attempt, results: list[Any]) -> TrainResult:
    """Commit the final checkpoint of an early stop, gather the table, release the actors."""
    cfg, ps = run.cfg, at.ps
    z: dict[int, np.ndarray] = {}
    for r in results:
        z.update(r)
    if run.ck_url is not None and at.stop_clock % max(1, cfg.checkpoint_every):
        notes = ps.mailbox.notes(cfg.call_timeout)
        ckpt.commit_final(run.ck_url, notes, len(run.shards), at.c, st.history,
                          st.known_missing)
    n_wk, n_k = _gather_table(ps, run.corpus.n_words, cfg.n_topics, cfg.call_timeout)
    state = ps.clock.state(cfg.call_timeout)
    info = ps.tables.info(cfg.call_timeout)
    ps.close()
    return TrainResult(z=z, shards=run.shards, n_wk=n_wk, n_k=n_k, history=st.history,
                       starts=[tuple(s) for s in state["starts"]],
                       ticks=[tuple(t) for t in state["ticks"]], ps_info=info,
                       clocks=list(state["completed"]), placement=at.placement,
                       stop_reason=st.stop_reason, alpha=at.alpha)


def _stop_reason(cfg: TrainConfig, history: list[Record], elapsed: float) -> str | None:
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
            # (a RuntimeError "Worker holding Actor was lost" becomes WorkerLost in run_attempt)
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



def _abandon(client: Any, ps: Any, futures: list[Any], addrs: list[str], timeout: float) -> None:
    """Stop an attempt: abort the tasks, wait for those on live workers, free everything.

    Waiting matters: a task still running when the next attempt starts could write its ``z``
    into the checkpoint slot the new tasks write. A task on a live worker gets ``ABORT`` from a
    live clock at its next wait; one blocked in a call to a dead actor (up to the connect
    timeout) can write nothing more, and it blocks only its own thread (tasks secede, see
    :func:`biglda.trainer.worker.run_group_failfast`), so the wait is short. Tasks on a lost
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
