"""The distributed run on a connected client: attempts, and the restarts between them.

Flow of one run::

    driver                      worker task (one per worker thread, biglda.trainer.worker)
    plan shards, place groups   read shard, z = init_z or checkpoint, remap to local vocab
    start PS actors + clock     push recount of its z to the table shards, tick(start)
    mailbox.iteration(c)    <-- per clock: wait SSP bound, pull deltas, sweep, doc LL, push,
    one metrics record            checkpoint every N clocks, tick(c + 1) with its stats
    stop rule -> clock.stop     ... until the stop clock; return z
    gather table

:func:`run_training` runs attempts (:func:`biglda.trainer.attempt.run_attempt`) until one
finishes. Between two attempts every shard restarts from a committed checkpoint with a
recounted table (the parameter server is a function of all ``z``, DESIGN.md):

- **recovery** from a lost worker (a failed task or actor call, or a worker gone from the
  scheduler): from the latest committed checkpoint (or where the run started), on the live
  workers, up to ``max_recoveries`` times. No delta can be applied twice or lost, because the
  new table is built from nothing but the checkpoint's ``z``; the price is at most
  ``checkpoint_every`` clocks of work. Under BSP the chain is deterministic for a seed and
  shard plan (pulls are by clock), so a recovered run ends with the same ``z`` as a run
  without failures.
- **rebalance** (a :class:`biglda.trainer.placement.RebalancePlan`: a straggler, or the
  throughput balance of a heterogeneous job): from the checkpoint committed just then, with
  the shards placed in proportion to the workers' measured throughput. The shard plan does
  not change, so under BSP a rebalanced run ends with the same ``z`` as one that was not.

A first SIGINT stops after the current clock with a checkpoint (``stop_reason ==
"interrupted"``); a second one stops at once (KeyboardInterrupt). Details: docs/reliability.md.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from biglda.errors import ClusterError
from biglda.trainer import checkpoint as ckpt
from biglda.trainer.attempt import Run, RunState, TrainResult, run_attempt
from biglda.trainer.cluster import (
    interrupt_flag,
    live_workers,
    wait_for_loss,
    wait_for_workers,
    worker_slots,
)
from biglda.trainer.config import TrainConfig
from biglda.trainer.metrics import Emitter, OnRecord, Rebalance, Recovery
from biglda.trainer.placement import RebalancePlan, Slots, balancing, check_fits, plan_cluster

log = logging.getLogger("biglda.train")


def run_training(client: Any, corpus: Any, cfg: TrainConfig, *, out: str | None = None,
                 on_record: list[OnRecord] | None = None,
                 run_id: str | None = None) -> TrainResult:
    """Run the distributed sampler on a connected client; see the module docstring.

    ``corpus``: an opened :class:`biglda.corpus.Corpus`; ``out``: the model's URL (the
    checkpoint lives next to it; None: no checkpoints). Records go to ``on_record`` and the
    scheduler's event log.
    """
    run_id = run_id or uuid.uuid4().hex[:12]
    emit = Emitter(client, on_record)
    slots, shards, backends = plan_cluster(client, corpus, cfg)
    cfg, _ = cfg.with_sampler_chosen(corpus, backends)  # (train_to_store has done it already)
    ck_url = ckpt.checkpoint_url(out) if (out is not None and cfg.checkpoint_every) else None
    st, ck_url = _open_run(corpus, cfg, shards, out, ck_url)
    st.balance = balancing(cfg, backends) and len(slots) > 1
    if st.balance and ck_url is None:
        log.info("no throughput balancing: it restarts the shards from a checkpoint, and this "
                 "run writes none (checkpoint_every 0 or no output path)")
        st.balance = False
    initial = (st.start_clock, st.resume_attrs, st.first_slot, st.ck_read)
    recoveries: list[Recovery] = []
    rebalances: list[Rebalance] = []
    n_workers = len(slots)
    with interrupt_flag() as interrupted:
        run = Run(client=client, corpus=corpus, cfg=cfg, shards=shards, ck_url=ck_url,
                  run_id=run_id, emit=emit, interrupted=interrupted)
        while True:
            lost: list[str] = []
            try:
                outcome = run_attempt(run, slots, st, lost)
            except ClusterError as exc:
                if interrupted.set:  # the user asked to stop: no recovery
                    raise KeyboardInterrupt from exc
                if len(recoveries) >= cfg.max_recoveries:
                    if recoveries:
                        raise ClusterError(f"{str(exc).splitlines()[0]} (after "
                                           f"{len(recoveries)} recoveries)") from None
                    raise
                slots = _recover(run, st, slots, lost, str(exc).splitlines()[0], n_workers,
                                 initial, recoveries)
                continue
            if isinstance(outcome, RebalancePlan):
                _restart_for_rebalance(run, st, outcome, rebalances)
                continue
            outcome.recoveries = recoveries
            outcome.rebalances = rebalances
            return outcome


def _open_run(corpus: Any, cfg: TrainConfig, shards: list[Any], out: str | None,
              ck_url: str | None) -> tuple[RunState, str | None]:
    """Return the first attempt's state and the checkpoint URL this run writes (None: none).

    The state is that of a fresh checkpoint store, or the resumed one's clock, history and
    slot.
    """
    from biglda.samplers import z_dtype

    start_clock, resume_attrs, first_slot, history = 0, None, 0, []
    ck_read = None
    if cfg.resume:
        if out is None:
            raise AssertionError("validate() lets no resume without an output path through")
        resume_url = ckpt.checkpoint_url(out)
        resume_attrs = ckpt.open_checkpoint(resume_url, cfg.n_topics, corpus.n_tokens)
        start_clock = int(resume_attrs["clock"])
        first_slot = 1 - int(resume_attrs["slot"])
        history = ckpt.checked_history([dict(r) for r in resume_attrs.get("history", [])],
                                       start_clock, f"the checkpoint {resume_url}")
        if ck_url is not None and [list(map(int, (s.token_start, s.token_stop)))
                                   for s in shards] != resume_attrs["shards"]:
            # another shard plan: resume reads from the old store; no new checkpoints this run
            ck_url = None
            log.warning("resuming with another shard plan: no further checkpoints this run")
        ck_read = resume_url
    if ck_url is not None and not cfg.resume:
        ckpt.create_checkpoint(ck_url, [(s.token_start, s.token_stop) for s in shards],
                               cfg.n_topics, corpus.n_tokens, z_dtype(cfg.n_topics),
                               cfg.as_dict())
    st = RunState(start_clock=start_clock, stop_clock=max(start_clock, cfg.iterations),
                  resume_attrs=resume_attrs, first_slot=first_slot, history=history,
                  ck_read=ck_read,
                  known_missing=frozenset(ckpt.history_missing(history, start_clock)))
    return st, ck_url


def _restart_for_rebalance(run: Run, st: RunState, plan: RebalancePlan,
                           rebalances: list[Rebalance]) -> None:
    """Roll ``st`` to the checkpoint committed at the plan's clock, with its placement."""
    cfg = run.cfg
    attrs = ckpt.latest_checkpoint(run.ck_url, cfg.n_topics, run.corpus.n_tokens)
    if attrs is None or int(attrs["clock"]) != plan.event.clock:
        raise AssertionError(f"rebalance at clock {plan.event.clock} found no checkpoint of "
                             "that clock: it is planned only right after a commit")
    st.start_clock, st.resume_attrs = int(attrs["clock"]), attrs
    st.first_slot, st.ck_read = 1 - int(attrs["slot"]), run.ck_url
    st.history = ckpt.checked_history(st.history, st.start_clock, "rebalance")
    st.attempt += 1
    st.stop_reason = "iterations"
    st.assignment = plan.assignment
    event, t_req = plan.event, st.t_fail
    rebalances.append(event)

    def rebalanced(t: float) -> None:
        event.restart_s = t - t_req
        run.emit(event.as_record(run.run_id))
        why = (f"straggler(s) {', '.join(event.slow_workers)}"
               if event.reason == "straggler" else "by measured throughput "
               + ", ".join(f"{w} {v:,.0f} tokens/s" for w, v in event.rates.items()))
        log.log(logging.WARNING if event.reason == "straggler" else logging.INFO,
                "rebalanced at clock %d: %s; shards per worker %s -> %s (%.1f s restart)",
                event.clock, why, {w: len(v) for w, v in event.before.items()},
                {w: len(event.after.get(w, [])) for w in event.before}, event.restart_s)
    st.on_started = rebalanced


def _recover(run: Run, st: RunState, slots: Slots, lost: list[str], error: str,
             n_workers: int, initial: tuple, recoveries: list[Recovery]) -> Slots:
    """Roll every shard back to the latest committed checkpoint on the live workers.

    Returns the workers of the next attempt.
    """
    cfg, client, corpus = run.cfg, run.client, run.corpus
    t_fail = st.t_fail  # set by run_attempt when it saw the failure
    t_stopped = time.time()
    log.warning("recovering from a lost worker at clock %d: %s", st.clock, error)
    # The failure may be seen (a task's failed call) before the scheduler has removed the dead
    # worker; planning then would place actors on it again.
    prev = {a for a, _, _ in slots}
    lost = sorted(set(lost) | wait_for_loss(client, prev, timeout=3.0))
    wait_for_workers(client, n_workers, cfg.recovery_wait)
    log.info("recovery: %d workers after %.1f s", len(live_workers(client)),
             time.time() - t_stopped)
    slots = worker_slots(client, timeout=cfg.recovery_wait + 30.0)
    check_fits(corpus, cfg, slots, run.shards)
    attrs = ckpt.latest_checkpoint(run.ck_url, cfg.n_topics, corpus.n_tokens)
    if attrs is not None:
        st.start_clock, st.resume_attrs = int(attrs["clock"]), attrs
        st.first_slot, st.ck_read = 1 - int(attrs["slot"]), run.ck_url
    else:  # nothing committed in this run: where it started (a resume, or z0)
        st.start_clock, st.resume_attrs, st.first_slot, st.ck_read = initial
    kept = ckpt.history_upto(st.history, st.start_clock)
    if not ckpt.history_complete(kept, st.start_clock) and attrs is not None:
        kept = [dict(r) for r in attrs.get("history", [])]  # the committed records
    st.history = ckpt.checked_history(kept, st.start_clock, "recovery")
    st.attempt += 1
    st.stop_reason = "iterations"
    st.assignment = None  # other workers: the even plan again
    st.balanced = False   # ... measured and balanced again
    rec = Recovery(failed_clock=st.clock, resumed_clock=st.start_clock, lost_workers=lost,
                   error=error, detect_s=t_stopped - t_fail, restart_s=0.0,
                   workers=[a for a, _, _ in slots])
    recoveries.append(rec)

    def started(t: float) -> None:
        rec.restart_s = t - t_fail
        run.emit(rec.as_record(run.run_id))
        log.warning("recovered: %d shards restart from clock %d on %d workers (%.1f s after "
                    "the failure)", len(run.shards), rec.resumed_clock, len(rec.workers),
                    rec.restart_s)
    st.on_started = started
    return slots
