"""Chaos run: train while SIGKILLing random workers at random clocks; does it recover, exactly?

On a synthetic corpus with known topics (90% of the documents train, 10% are held out), on a
local cluster of ``--workers`` worker processes with nannies (a killed worker is replaced):

1. one failure-free run (the baseline);
2. ``--runs`` runs with the same settings, each killing ``--kills`` workers with SIGKILL at
   clocks drawn from a seeded generator; the victim is drawn too: the worker of the clock
   actor (it also holds table shard 0 and document shards) or another one (a table shard and
   document shards) — every worker samples and holds a table shard here.

Per run it reports: completed or not, for every failure the clock it happened at, the
checkpoint clock the run rolled back to, ``restart_s`` (failure seen -> new actors and tasks
out) and ``catch_up_s`` (kill -> the run is back past the clock it had reached), whether the
final table equals the recount of the final z (consistency), whether the final z equals the
baseline's (BSP with a seed and shard plan is deterministic, so a correct recovery gives the
same chain), the final LL/token, the held-out log-likelihood per token (document completion)
and the topic recovery (mean cosine of Hungarian-matched topics) against the baseline's.

Usage::

    .venv/bin/python pipelines/chaos.py --runs 3 --kills 2          # results in runs/chaos/
    .venv/bin/python pipelines/chaos.py --staleness 2 --out runs/chaos-ssp
    .venv/bin/python pipelines/chaos.py --workers 2 --threads-per-worker 2 \
        --shards-per-worker 3 --sampler warplda --out runs/chaos-threads   # shared caches
    .venv/bin/python pipelines/chaos.py --workers 2 --shards-per-worker 2 \
        --process-partition off --out runs/chaos-adlda   # processes not taking turns (AD-LDA)

Under SSP (``--staleness`` > 0) runs are not deterministic (who waits for whom depends on
timing), so ``same_z_as_baseline`` is not expected; consistency and quality are.

Deterministic for a ``--seed`` (clocks and victims); timings of course vary.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from biglda.corpus import write_corpus
from biglda.corpus.synth import SynthSpec, generate
from biglda.samplers import count_from_z
from biglda.trainer.cluster import restart_tolerant
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training

log = logging.getLogger("chaos")


def _corpus(out: Path, n_docs: int, seed: int):
    spec = SynthSpec(n_docs=n_docs, n_words=1000, n_topics=10, mean_doc_length=150, alpha=0.1,
                     beta=0.05, seed=seed)
    tokens, doc_ptr, phi, _ = generate(spec)
    n_train = int(0.9 * n_docs)
    cut = int(doc_ptr[n_train])
    url = str(out / "synth.zarr")
    remap = write_corpus(url, tokens[:cut], doc_ptr[:n_train + 1], [f"w{i}" for i in
                                                                    range(phi.shape[1])],
                         chunk_tokens=8192, overwrite=True)
    # held-out docs in the training corpus's word ids (words it never saw are dropped)
    test = remap[tokens[cut:]]
    lengths = np.diff(doc_ptr[n_train:])
    doc_of = np.repeat(np.arange(len(lengths)), lengths)
    keep = test >= 0
    test_ptr = np.concatenate([[0], np.cumsum(np.bincount(doc_of[keep],
                                                          minlength=len(lengths)))])
    keep_w = remap >= 0
    phi_new = np.zeros((phi.shape[0], int(keep_w.sum())))
    phi_new[:, remap[keep_w]] = phi[:, keep_w]
    return url, (test[keep].astype(np.int32), test_ptr.astype(np.int64)), phi_new


def _topic_match(n_wk: np.ndarray, phi: np.ndarray, beta: float) -> float:
    from scipy.optimize import linear_sum_assignment

    est = (n_wk.T + beta) / (n_wk.sum(0)[:, None] + beta * n_wk.shape[0])
    a = phi / np.linalg.norm(phi, axis=1, keepdims=True)
    b = est / np.linalg.norm(est, axis=1, keepdims=True)
    sim = a @ b.T
    rows, cols = linear_sum_assignment(-sim)
    return float(sim[rows, cols].mean())


def _score(r, corpus, test, phi, cfg) -> dict:
    from biglda.model.evaluate import heldout_loglik

    z = np.concatenate([r.z[s.index] for s in r.shards])
    n_wk, n_k = count_from_z(corpus.read_tokens(0, corpus.n_tokens), corpus.doc_ptr, z,
                             corpus.n_words, cfg.n_topics)
    phi_est = (r.n_wk.T + cfg.beta) / (r.n_wk.sum(0)[:, None] + cfg.beta * corpus.n_words)
    held = heldout_loglik(phi_est, cfg.alpha, test, burn_in=10, samples=10, seed=0)
    return {"consistent": bool((n_wk == r.n_wk).all() and (n_k == r.n_k).all()),
            "ll_per_token": r.history[-1]["ll_per_token"],
            "heldout_ll_per_token": held.loglik_per_token,
            "topic_match": _topic_match(r.n_wk, phi, cfg.beta)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--kills", type=int, default=2, help="workers killed per run")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--threads-per-worker", type=int, default=1,
                   help="sampling threads per worker process (they share its table cache)")
    p.add_argument("--shards-per-worker", type=int, default=1,
                   help="document shards per worker process")
    p.add_argument("--sampler", default="cgs", choices=["cgs", "lightlda", "warplda"])
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--checkpoint-every", type=int, default=3)
    p.add_argument("--docs", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baselines", type=int, default=1,
                   help="failure-free runs (under SSP they differ: their spread is the yardstick)")
    p.add_argument("--staleness", type=float, default=0.0,
                   help="SSP bound (0 = BSP: recovered runs must equal the baseline exactly)")
    p.add_argument("--process-partition", default="auto", choices=["auto", "on", "off"],
                   help="the processes take turns on the vocabulary (cgs, lightlda)")
    p.add_argument("--out", default="runs/chaos")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("distributed").setLevel(logging.CRITICAL)

    from distributed import Client, LocalCluster

    from biglda.corpus import Corpus

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    url, test, phi = _corpus(out, args.docs, args.seed)
    corpus = Corpus.open(url)
    cfg = TrainConfig(n_topics=10, iterations=args.iterations, sampler=args.sampler, beta=0.05,
                      seed=args.seed, n_shards=args.workers * args.shards_per_worker,
                      staleness=args.staleness, process_partition=args.process_partition,
                      checkpoint_every=args.checkpoint_every, top_words_every=0,
                      recovery_wait=30.0, call_timeout=60.0, max_recoveries=args.kills + 1)
    # (a LocalCluster that keeps a nanny whose worker was lost twice within Dask's
    # lost-worker-timeout: docs/reliability.md)
    cluster = restart_tolerant(LocalCluster)(
        n_workers=args.workers, threads_per_worker=args.threads_per_worker, processes=True,
        dashboard_address="127.0.0.1:0", host="127.0.0.1")
    client = Client(cluster, direct_to_workers=True)
    rng = np.random.default_rng(args.seed)
    report: dict = {"config": vars(args), "n_tokens": int(corpus.n_tokens), "runs": []}
    try:
        validate(url, None, cfg, False)
        report["baselines"] = []
        for i in range(max(1, args.baselines)):
            t0 = time.time()
            r0 = run_training(client, corpus, cfg, out=str(out / "baseline.zarr"))
            report["baselines"].append({"seconds": time.time() - t0,
                                        **_score(r0, corpus, test, phi, cfg)})
            print("baseline", json.dumps(report["baselines"][-1]), flush=True)
            if i == 0:
                base = r0
        report["baseline"] = report["baselines"][0]
        for run in range(args.runs):
            clocks = sorted(rng.choice(np.arange(2, args.iterations - 1), size=args.kills,
                                       replace=False).tolist())
            roles = rng.choice(["clock", "other"], size=args.kills).tolist()
            # (one worker, the default layout: every kill is of it)
            others = rng.integers(1, max(2, args.workers), size=args.kills).tolist()
            kills: list[dict] = []
            reached = {"iteration": 0}

            def on_record(rec, clocks=clocks, roles=roles, others=others, kills=kills,
                          reached=reached):
                if rec.get("type") != "iteration":
                    return
                it = rec["iteration"]
                for k in kills:  # back past the clock it had reached when it was killed?
                    if "catch_up_s" not in k and it > k["reached"]:
                        k["catch_up_s"] = time.time() - k["t_kill"]
                reached["iteration"] = max(reached["iteration"], it)
                i = len(kills)
                if i < len(clocks) and it == clocks[i]:
                    # asked now (scheduler_info answers a failed query with a cache
                    # that holds no workers)
                    workers = sorted(client.nthreads())
                    addr = workers[0] if roles[i] == "clock" else \
                        workers[others[i] % len(workers)]
                    pid = client.run(os.getpid, workers=[addr])[addr]
                    os.kill(pid, signal.SIGKILL)
                    kills.append({"clock": it, "role": roles[i], "worker": addr,
                                  "reached": reached["iteration"], "t_kill": time.time()})

            t0 = time.time()
            row: dict = {"run": run, "kill_clocks": clocks, "roles": roles}
            try:
                r = run_training(client, corpus, cfg, out=str(out / f"run{run}.zarr"),
                                 on_record=[on_record])
                row.update(completed=True, seconds=time.time() - t0,
                           **_score(r, corpus, test, phi, cfg))
                row["same_z_as_baseline"] = all(np.array_equal(r.z[s.index], base.z[s.index])
                                                for s in r.shards)
                row["recoveries"] = [{"failed_clock": x.failed_clock,
                                      "resumed_clock": x.resumed_clock,
                                      "restart_s": round(x.restart_s, 2),
                                      "lost": x.lost_workers} for x in r.recoveries]
            except Exception as exc:  # a run that does not complete is a result, not a crash
                row.update(completed=False, seconds=time.time() - t0,
                           error=f"{type(exc).__name__}: {exc}")
            row["kills"] = [{k: (round(v, 2) if isinstance(v, float) else v)
                             for k, v in x.items() if k != "t_kill"} for x in kills]
            report["runs"].append(row)
            print(f"run {run}", json.dumps(row, default=str), flush=True)
    finally:
        client.close()
        cluster.close()
    runs = report["runs"]
    done = [r for r in runs if r["completed"]]
    restarts = [x["restart_s"] for r in done for x in r["recoveries"]]
    catch = [k["catch_up_s"] for r in runs for k in r["kills"] if "catch_up_s" in k]
    b = report["baseline"]
    report["summary"] = {
        "runs": len(runs), "completed": len(done),
        "failures_injected": sum(len(r["kills"]) for r in runs),
        "recoveries": len(restarts),
        "restart_s_median": float(np.median(restarts)) if restarts else None,
        "restart_s_max": max(restarts) if restarts else None,
        "catch_up_s_median": float(np.median(catch)) if catch else None,
        "consistent": all(r["consistent"] for r in done),
        "same_z_as_baseline": all(r["same_z_as_baseline"] for r in done),
        "heldout_ll_per_token_baseline": b["heldout_ll_per_token"],
        "heldout_ll_per_token_baselines": [x["heldout_ll_per_token"]
                                           for x in report["baselines"]],
        "topic_match_baselines": [x["topic_match"] for x in report["baselines"]],
        "heldout_ll_per_token_runs": [r["heldout_ll_per_token"] for r in done],
        "topic_match_baseline": b["topic_match"],
        "topic_match_runs": [r["topic_match"] for r in done],
    }
    (out / "chaos.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report["summary"], indent=1))
    return 0 if len(done) == len(runs) and report["summary"]["consistent"] else 1


if __name__ == "__main__":
    sys.exit(main())
