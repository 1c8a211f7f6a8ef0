"""Benchmark the CPU samplers against tomotopy on one shard, one thread.

Usage (from the repository root)::

    .venv/bin/python -m pip install tomotopy   # the peer; optional, skipped if missing
    .venv/bin/python pipelines/bench_samplers.py --topics 100 1000 10000 --iterations 10

The corpus is ingested with ``biglda.corpus.ingest`` (default tokenizer: lowercase,
``\\b\\w\\w+\\b``, English stop words, min_df=5) into ``runs/bench/`` once. For each K the
samplers start from the same random ``z`` (tomotopy from its own) and run ``--iterations``
sweeps, then go on (up to 3x ``--iterations``) until ``--budget`` CPU seconds of sampling
have passed (default: the time tomotopy took for ``--iterations`` at that K); after every sweep
the joint log-likelihood log p(w, z) (Griffiths & Steyvers) is recomputed from the
assignments, for tomotopy too (from ``doc.topics``), outside the timed part.

Throughput is tokens / CPU seconds of the sampling thread (``time.thread_time``): the
machine is shared, and wall time there measures the other jobs. Wall-clock tokens/s are
printed too. Prints Markdown tables; ``--json`` writes every record.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from biglda.samplers import (
    RandomKey,
    count_from_z,
    fit_local,
    get_sampler,
    init_z,
    joint_loglik,
)
from biglda.samplers.init import anchor_counts, anchor_documents, sequential_z

CORPUS_SRC = "/work/shared/corpora/debian-descriptions.tsv.gz"
# settings that make a warm-up sweep load every kernel a sampler may run
WARMUP_PARAMS = {"cgs": [{"dense_above": 0.0}, {"dense_above": 2.0}]}


def load_corpus(src: str, cache_dir: Path):
    """``(tokens int32, doc_ptr int64, vocab)`` of ``src`` via biglda's ingest (cached)."""
    from biglda.corpus.ingest import ingest
    from biglda.corpus.store import Corpus

    out = cache_dir / (Path(src).name.split(".")[0] + ".zarr")
    if not out.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        ingest([src], str(out), jobs=1)
    corpus = Corpus.open(str(out))
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), dtype=np.int32)
    doc_ptr = np.ascontiguousarray(corpus.doc_ptr, dtype=np.int64)
    return tokens, doc_ptr, np.asarray(corpus.vocab)


def table_nbytes(algorithm: str, tokens, doc_ptr, z, n_wk, n_k, beta, n_words) -> int:
    """Bytes of the per-sweep sampling structures (alias tables / word lists), rebuilt here."""
    n_topics = n_k.shape[0]
    if algorithm == "warplda":
        # word_ptr + the cached word order (perm, inv: int64) + per sweep: two word-order
        # copies of z and 2 * mh_steps proposals a token (z's dtype); one shard, so no G
        m = get_sampler("warplda").mh_steps
        return (8 * (n_wk.shape[0] + 1) + 16 * len(tokens)
                + (2 + 2 * m) * z.itemsize * len(tokens))
    if algorithm == "lightlda":
        from biglda.samplers.lightlda_cpu import _word_tables

        # one half's tables (the larger of the two a sweep builds): the other half's counts
        half = np.zeros(len(tokens), dtype=bool)
        for d in range(0, len(doc_ptr) - 1, 2):
            half[doc_ptr[d]:doc_ptr[d + 1]] = True
        idx = np.flatnonzero(half)
        by_word = idx[np.argsort(tokens[idx], kind="stable")].astype(np.int64)
        word_ptr = np.zeros(n_wk.shape[0] + 1, dtype=np.int64)
        word_ptr[1:] = np.cumsum(np.bincount(tokens[idx], minlength=n_wk.shape[0]))
        n_k_other = n_k - np.bincount(z[idx], minlength=n_topics)
        coef = 1.0 / (n_k_other + n_words * beta)
        tables = _word_tables(word_ptr, by_word, z, n_wk, coef)
        # + the dense beta and alpha tables (thr, alias, prob: 16 bytes a topic each)
        return sum(a.nbytes for a in tables) + 2 * 16 * n_topics
    from biglda.samplers.cgs_cpu import _word_lists

    bits = max(1, int(np.ceil(np.log2(n_topics))))
    return sum(a.nbytes for a in _word_lists(tokens, n_wk, bits))


def first_topics(init, tokens, doc_ptr, n_words, n_topics, alpha, beta, seed):
    """The starting ``z`` of a one-shard run, as the trainer's worker draws it."""
    if init == "random":
        return init_z(len(tokens), n_topics, RandomKey(seed, -1))
    n_docs = anchor_documents(doc_ptr, n_topics)
    anchor = anchor_counts(tokens[:doc_ptr[n_docs]], doc_ptr[:n_docs + 1], n_topics, n_words,
                           alpha, beta, seed)
    return sequential_z(tokens, doc_ptr, n_topics, n_words, alpha, beta, RandomKey(seed, -1),
                        anchor)


def run_biglda(name, algorithm, params, tokens, doc_ptr, n_words, n_topics, alpha, beta,
               iterations, budget, seed, init="random"):
    sampler = get_sampler(algorithm, **params)
    # the initialisation's time is counted: in the first sweep's
    t_cpu, t_wall = time.thread_time(), time.perf_counter()
    z = first_topics(init, tokens, doc_ptr, n_words, n_topics, alpha, beta, seed)
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    curve, cpu, wall, it = [], time.thread_time() - t_cpu, time.perf_counter() - t_wall, 0
    while it < iterations or (cpu < budget and it < 3 * iterations):
        it += 1
        t_cpu, t_wall = time.thread_time(), time.perf_counter()
        res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
                            RandomKey(seed, it))
        cpu += time.thread_time() - t_cpu
        wall += time.perf_counter() - t_wall
        ll = joint_loglik(doc_ptr, z, n_wk, n_k, alpha, beta, n_words) / len(tokens)
        curve.append({"iteration": it, "cpu_s": cpu, "wall_s": wall, "ll_per_token": ll,
                      "accept_rate": res.accept_rate})
    state = z.nbytes + n_wk.nbytes + n_k.nbytes
    tables = table_nbytes(algorithm, tokens, doc_ptr, z, n_wk, n_k, beta, n_words)
    return {"sampler": name, "curve": curve, "state_bytes": state, "table_bytes": tables}


def run_tomotopy(tokens, doc_ptr, vocab, n_topics, alpha, beta, iterations, budget, seed):
    import tomotopy as tp

    mdl = tp.LDAModel(k=n_topics, alpha=alpha, eta=beta, seed=seed)
    mdl.optim_interval = 0  # keep alpha fixed, as ours is
    words = np.array([str(w) for w in vocab], dtype=object)
    for d in range(len(doc_ptr) - 1):
        mdl.add_doc(words[tokens[doc_ptr[d]:doc_ptr[d + 1]]].tolist())
    mdl.train(0, workers=1)  # initialise the assignments, not timed as sampling
    n_words = len(mdl.used_vocabs)
    curve, cpu, wall, it = [], 0.0, 0.0, 0
    while it < iterations or (cpu < budget and it < 3 * iterations):
        it += 1
        t_cpu, t_wall = time.thread_time(), time.perf_counter()
        mdl.train(1, workers=1, parallel=tp.ParallelScheme.NONE)
        cpu += time.thread_time() - t_cpu
        wall += time.perf_counter() - t_wall
        # joint LL recounted from tomotopy's own topic assignments, like ours
        tt = np.concatenate([np.asarray(doc.words, dtype=np.int32) for doc in mdl.docs])
        zz = np.concatenate([np.asarray(doc.topics, dtype=np.int32) for doc in mdl.docs])
        dp = np.zeros(len(mdl.docs) + 1, dtype=np.int64)
        np.cumsum([len(doc.words) for doc in mdl.docs], out=dp[1:])
        n_wk, n_k = count_from_z(tt, dp, zz.astype(np.uint16), n_words, n_topics)
        ll = joint_loglik(dp, zz.astype(np.uint16), n_wk, n_k, alpha, beta, n_words) / len(tt)
        curve.append({"iteration": it, "cpu_s": cpu, "wall_s": wall, "ll_per_token": ll,
                      "tomotopy_ll_per_word": float(mdl.ll_per_word)})
    return {"sampler": "tomotopy", "curve": curve, "state_bytes": None, "table_bytes": None}


def at_budget(curve, budget):
    inside = [c for c in curve if c["cpu_s"] <= budget]
    return inside[-1] if inside else curve[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=CORPUS_SRC)
    ap.add_argument("--cache-dir", default="runs/bench")
    ap.add_argument("--topics", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--budget", type=float, default=None,
                    help="CPU seconds of sampling for the fixed-budget LL (default: what "
                         "tomotopy needs for --iterations at that K)")
    ap.add_argument("--samplers", nargs="+",
                    default=["cgs", "lightlda", "warplda", "tomotopy"])
    ap.add_argument("--inits", nargs="+", default=["random"],
                    choices=["random", "sequential"],
                    help="biglda's first topics (default random, as before the init "
                         "setting); with more than one, each biglda sampler runs from each, "
                         "named sampler/init; the initialisation's time counts in sweep 1")
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--beta", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--steady", type=int, default=0, metavar="ITER",
                    help="instead: biglda throughput after ITER sweeps (mean of the last 5), "
                         "once the sparse structures have settled; no LL, no tomotopy")
    ap.add_argument("--mh-profile", type=int, default=0, metavar="ITER",
                    help="instead: warplda ns/token with mh_steps 1, 2, 4 after ITER sweeps "
                         "(the slope is the MH work, the intercept the passes)")
    ap.add_argument("--cgs-start", type=int, default=0, metavar="ITER",
                    help="instead: cgs sweep by sweep from random topics: the row density its "
                         "switch reads, SparseLDA and the dense kernel timed from the same "
                         "state, the sampler's sweep and the tokens moved")
    args = ap.parse_args(argv)
    if args.steady:
        return steady(args)
    if args.mh_profile:
        return mh_profile(args)
    if args.cgs_start:
        return cgs_start(args)

    samplers = list(args.samplers)
    if "tomotopy" in samplers:
        try:
            import tomotopy  # noqa: F401
        except ImportError:
            print("tomotopy is not installed: `.venv/bin/python -m pip install tomotopy` to "
                  "compare against it; running without it.", file=sys.stderr)
            samplers.remove("tomotopy")

    t0 = time.perf_counter()
    tokens, doc_ptr, vocab = load_corpus(args.corpus, Path(args.cache_dir))
    n_words = len(vocab)
    print(f"corpus {args.corpus}: {len(doc_ptr) - 1} docs, {len(tokens)} tokens, V={n_words} "
          f"(loaded in {time.perf_counter() - t0:.1f}s)", flush=True)
    # compile the kernels on a small slice first, so JIT time is not counted (cgs: both of
    # the kernels its switch picks between)
    cut = int(np.searchsorted(doc_ptr, 20000))
    for name in samplers:
        if name != "tomotopy":
            for init in args.inits:
                for params in WARMUP_PARAMS.get(name, [{}]):
                    run_biglda(name, name, params, tokens[:doc_ptr[cut]], doc_ptr[:cut + 1],
                               n_words, 8, args.alpha, args.beta, 1, 0.0, args.seed, init)

    results = []
    # tomotopy first: by default the fixed budget is the CPU time it needs for --iterations
    order = sorted(samplers, key=lambda s: s != "tomotopy")
    for k in args.topics:
        budget = args.budget
        for name in order:
            print(f"K={k} {name} ...", file=sys.stderr, flush=True)
            if name == "tomotopy":
                r = run_tomotopy(tokens, doc_ptr, vocab, k, args.alpha, args.beta,
                                 args.iterations, budget or 0.0, args.seed)
                if budget is None:
                    budget = r["curve"][args.iterations - 1]["cpu_s"]
                runs = [r]
            else:
                runs = []
                for init in args.inits:
                    label = name if len(args.inits) == 1 else f"{name}/{init}"
                    runs.append(run_biglda(label, name, {}, tokens, doc_ptr, n_words, k,
                                           args.alpha, args.beta, args.iterations,
                                           budget or 0.0, args.seed, init))
            for r in runs:
                r["n_topics"] = k
                r["n_tokens"] = len(tokens)
                results.append(r)
        for r in results:
            if r["n_topics"] == k:
                r["budget_s"] = budget if budget is not None else r["curve"][-1]["cpu_s"]
    report(results, args, n_words)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    return 0


def steady(args) -> int:
    tokens, doc_ptr, vocab = load_corpus(args.corpus, Path(args.cache_dir))
    n, n_words = len(tokens), len(vocab)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
          f"{os.cpu_count()} cores (shared); N={n}, V={n_words}; tokens per CPU second over "
          f"sweeps {args.steady - 4}..{args.steady}\n")
    print("| K | sampler | Mtok/s (CPU) | first sweep Mtok/s |")
    print("|---|---|---|---|")
    for k in args.topics:
        for name in [s for s in args.samplers if s != "tomotopy"]:
            sampler = get_sampler(name)
            for params in WARMUP_PARAMS.get(name, [{}]):  # load / compile the kernels
                fit_local(tokens[:doc_ptr[100]], doc_ptr[:101], n_words, k, name,
                          iterations=1, loglik_every=0, **params)
            z = init_z(n, k, RandomKey(args.seed, -1))
            n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
            secs = []
            for it in range(1, args.steady + 1):
                t = time.thread_time()
                sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, args.alpha, args.beta, n_words,
                              RandomKey(args.seed, it))
                secs.append(time.thread_time() - t)
            last = secs[-5:]
            print(f"| {k} | {name} | {n * len(last) / sum(last) / 1e6:.2f} | "
                  f"{n / secs[0] / 1e6:.2f} |", flush=True)
    return 0


def mh_profile(args) -> int:
    tokens, doc_ptr, vocab = load_corpus(args.corpus, Path(args.cache_dir))
    n, n_words = len(tokens), len(vocab)
    print(f"\nwarplda after {args.mh_profile} sweeps, one sweep per mh_steps from the same "
          f"state (best of 2), ns per token; N={n}\n")
    print("| K | mh_steps=1 | 2 | 4 | tokens moved | delta entries |")
    print("|---|---|---|---|---|---|")
    for k in args.topics:
        base = get_sampler("warplda")
        z = init_z(n, k, RandomKey(args.seed, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
        for it in range(1, args.mh_profile + 1):
            base.sweep(tokens, doc_ptr, z, n_wk, n_k, args.alpha, args.beta, n_words,
                       RandomKey(args.seed, it))
        cells, moved, nnz = [], [], []
        for m in (1, 2, 4):
            sampler = get_sampler("warplda", mh_steps=m)
            sampler._orders = base._orders  # the cached word order: not part of the timing
            best = float("inf")
            for rep in range(2):
                zz, ww, kk = z.copy(), n_wk.copy(), n_k.copy()
                t = time.thread_time()
                res = sampler.sweep(tokens, doc_ptr, zz, ww, kk, args.alpha, args.beta,
                                    n_words, RandomKey(args.seed, 1000 + rep))
                best = min(best, time.thread_time() - t)
            cells.append(f"{best * 1e9 / n:.0f}")
            moved.append(f"{np.mean(zz != z):.0%}")
            nnz.append(len(res.delta_counts))
        print(f"| {k} | {' | '.join(cells)} | {moved[0]}-{moved[-1]} | "
              f"{nnz[1] / 1e6:.2f} M |", flush=True)
    return 0


def cgs_start(args) -> int:
    """cgs sweep by sweep from random topics: both exact kernels from the same state.

    The chain follows the default sampler (its per-sweep switch); at every sweep the
    SparseLDA and the dense kernel are each timed on a copy of the state, so the columns
    compare the kernels on the same counts (the row density and the expected share of
    moving tokens are what the switch reads).
    """
    from biglda.samplers.cgs_cpu import (
        _DENSITY_ENTRIES,
        _MOVE_TERMS,
        _cgs_dense_sweep,
        _cgs_sparse_sweep,
        _move_share,
        _row_density,
        _word_lists,
    )

    tokens, doc_ptr, vocab = load_corpus(args.corpus, Path(args.cache_dir))
    n, n_words = len(tokens), len(vocab)
    for k in args.topics:
        sampler = get_sampler("cgs")
        alpha = np.full(k, args.alpha)
        for variant in ("sparse", "dense"):  # compile outside the timing
            fit_local(tokens[:doc_ptr[100]], doc_ptr[:101], n_words, k, "cgs", iterations=1,
                      loglik_every=0, variant=variant)
        z = init_z(n, k, RandomKey(args.seed, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, k)
        bits = max(1, int(np.ceil(np.log2(k))))
        print(f"\ncgs from random topics, K={k}, N={n}; kernels timed from the same state\n")
        print("| sweep | row density | nnz of the word's row, per token | SparseLDA Mtok/s | "
              "dense Mtok/s | switch picks | sweep Mtok/s (sampler) | tokens moved |")
        print("|---|---|---|---|---|---|---|---|")
        for it in range(1, args.cgs_start + 1):
            _, length, _ = _word_lists(tokens, n_wk, bits)
            nnz = float(length[tokens].mean())
            t = time.thread_time()
            density = _row_density(tokens, n_wk, _DENSITY_ENTRIES)
            t_density = time.thread_time() - t
            moves = _move_share(tokens, doc_ptr, z, n_wk, n_k, alpha, args.beta,
                                float(n_words), _MOVE_TERMS)
            rates = []
            for kernel in (_cgs_sparse_sweep, _cgs_dense_sweep):
                zz, ww, kk = z.copy(), n_wk.copy(), n_k.copy()
                t = time.thread_time()
                kernel(tokens, doc_ptr, zz, ww, kk, alpha, args.beta, float(n_words),
                       RandomKey(args.seed, it).state())
                rates.append(n / (time.thread_time() - t) / 1e6)
            before = z.copy()
            t = time.thread_time()
            sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, args.alpha, args.beta, n_words,
                          RandomKey(args.seed, it))
            dt = time.thread_time() - t
            print(f"| {it} | {density:.3f} ({t_density * 1e3:.1f} ms) | {nnz:.0f} | "
                  f"{rates[0]:.2f} | {rates[1]:.2f} | {sampler.kernel_for(density, moves)} | "
                  f"{n / dt / 1e6:.2f} | {np.mean(before != z):.0%} |", flush=True)
    return 0


def report(results, args, n_words) -> None:
    n = results[0]["n_tokens"]
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), "
          f"python {platform.python_version()}; 1 shard, 1 thread; alpha={args.alpha}, "
          f"beta={args.beta}; N={n}, V={n_words}\n")
    print(f"| K | sampler | Mtok/s (CPU) | Mtok/s (wall) | vs tomotopy | Mtok/s last 3 it | "
          f"LL/token @ {args.iterations} it | LL/token @ budget (<= {3 * args.iterations} it) | "
          f"budget s | accept |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in args.topics:
        rows = [r for r in results if r["n_topics"] == k]
        tput = {}
        for r in rows:
            c = r["curve"][: args.iterations]
            tail = min(3, len(c) - 1)
            last3 = n * tail / (c[-1]["cpu_s"] - c[-1 - tail]["cpu_s"]) if tail else 0.0
            tput[r["sampler"]] = (n * len(c) / c[-1]["cpu_s"], n * len(c) / c[-1]["wall_s"],
                                  last3)
        ref = tput.get("tomotopy", (None,))[0]
        for r in rows:
            cpu_t, wall_t, last3 = tput[r["sampler"]]
            ratio = f"{cpu_t / ref:.2f}x" if ref else "-"
            last = r["curve"][args.iterations - 1]
            b = at_budget(r["curve"], r["budget_s"])
            acc = last.get("accept_rate")
            print(f"| {k} | {r['sampler']} | {cpu_t / 1e6:.2f} | {wall_t / 1e6:.2f} | {ratio} | "
                  f"{last3 / 1e6:.2f} | "
                  f"{last['ll_per_token']:.4f} | {b['ll_per_token']:.4f} (it {b['iteration']}, "
                  f"{b['cpu_s']:.0f}s) | "
                  f"{r['budget_s']:.1f} | {'-' if acc is None else f'{acc:.2f}'} |")
    print("\nMemory of the sampler state (z uint16 + cached n_wk int32 [V, K] + n_k) and of the "
          "per-sweep tables, at the end of each run:\n")
    print("| K | sampler | state MB | tables MB |")
    print("|---|---|---|---|")
    for r in results:
        if r["state_bytes"] is not None:
            print(f"| {r['n_topics']} | {r['sampler']} | {r['state_bytes'] / 2**20:.1f} | "
                  f"{r['table_bytes'] / 2**20:.1f} |")
    print("\nLL/token vs CPU seconds of sampling (every iteration):\n")
    for r in results:
        pts = ", ".join(f"{c['cpu_s']:.1f}s:{c['ll_per_token']:.3f}" for c in r["curve"])
        print(f"- K={r['n_topics']} {r['sampler']}: {pts}")
    print("\nMtok per CPU second, sweep by sweep (a slow start shows here):\n")
    for r in results:
        prev, rates = 0.0, []
        for c in r["curve"]:
            rates.append(f"{n / max(c['cpu_s'] - prev, 1e-9) / 1e6:.2f}")
            prev = c["cpu_s"]
        print(f"- K={r['n_topics']} {r['sampler']}: {' '.join(rates)}")
    tomo = [r for r in results if r["sampler"] == "tomotopy"]
    if tomo:
        print("\n(tomotopy's own `ll_per_word` at the last iteration, a different quantity: "
              + ", ".join(f"K={r['n_topics']}: {r['curve'][-1]['tomotopy_ll_per_word']:.4f}"
                          for r in tomo) + ")")


if __name__ == "__main__":
    sys.exit(main())
