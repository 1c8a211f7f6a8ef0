"""Scale-out benchmark: throughput, traffic and quality per layout (processes x threads, shards).

One command (issue 15, item 5)::

    .venv/bin/python pipelines/scale_out.py --corpus runs/synth.zarr --topics 1000 \\
        --iterations 8 --out runs/scale_out

Layouts (``--layouts``, default all): ``1x1``, ``1x2`` (1 process x 2 threads), ``2x1``
(2 processes, 2 shards), and 2 processes with 4, 8 and 16 shards (``2p/4s`` ...); a suffix
``:rN`` sweeps each clock in N rounds (``1x2:r1`` is the threads' AD-LDA without rounds,
``1x2:r8`` eight rounds), ``:sN`` trains with SSP staleness N instead of BSP (``2x1:s1``),
``:p`` / ``:n`` with the processes taking turns on the vocabulary or not (``2x1:n`` is
AD-LDA: ``--process-partition on/off``; without either, the default, auto);
``Px1:i`` is no layout of one run but the machine's own ceiling for P processes: P
one-thread runs of the whole corpus at once, each its own cluster, nothing exchanged
(their tokens/s summed), so the cores, caches and memory contend as P processes' do and
nothing else does; a layout's tokens/s against it is what its coordination costs;
any ``PxT`` or ``Pp/Ss`` is a layout too (``1x16``, ``16x1`` on 16 cores). For each it
prints tokens/s, bytes pulled and pushed per token, worker CPU-seconds
per token spent in the sampling kernels and outside them (parameter-server actors, comms,
cache: they run in the worker processes), the median over iterations after ``--skip`` (JIT,
first full pull), and LL/token per iteration; then the ratios the issue's targets name,
every other layout's tokens/s against 1x1, and the training time each layout takes to reach
the worst last LL/token of all layouts against 1x1's (processes lag a clock per iteration,
so their tokens/s overstate what they gain). Layouts run one after the other, round by round
when ``--repeats`` > 1, so a change in the machine's load falls on all alike. Writes
``scale_out.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time

from bench_train import run

from biglda.trainer.layout import pick

LAYOUTS = {"1x1": dict(workers=1, threads_per_worker=1),
           "1x2": dict(workers=1, threads_per_worker=2),
           "2x1": dict(workers=2, threads_per_worker=1),
           "2p/4s": dict(workers=2, threads_per_worker=1, n_shards=4),
           "2p/8s": dict(workers=2, threads_per_worker=1, n_shards=8),
           "2p/16s": dict(workers=2, threads_per_worker=1, n_shards=16)}


def settings_of(layout: str) -> dict:
    """A layout's training settings; ``:rN`` sweeps each clock in N rounds (``--rounds``),
    ``:sN`` trains with staleness N (``--staleness``).

    Besides the names of :data:`LAYOUTS`, any ``PxT`` (P processes x T threads) and ``Pp/Ss``
    (P single-thread processes, S shards), e.g. ``1x16`` or ``16x1`` on a 16-core machine.

    >>> settings_of("1x16:r1")
    {'workers': 1, 'threads_per_worker': 16, 'rounds': 1}
    >>> settings_of("4p/32s")
    {'workers': 4, 'threads_per_worker': 1, 'n_shards': 32}
    >>> settings_of("2x1:s1")
    {'workers': 2, 'threads_per_worker': 1, 'staleness': 1.0}
    >>> settings_of("2x2:p"), settings_of("2x1:n")["process_partition"]
    ({'workers': 2, 'threads_per_worker': 2, 'process_partition': 'on'}, 'off')
    >>> settings_of("2x1:i")  # two one-thread runs at once (measure)
    {'workers': 2, 'threads_per_worker': 1, 'independent': True}
    """
    if layout.endswith(":i"):
        return settings_of(layout[:-2]) | {"independent": True}
    turns = {":p": "on", ":n": "off"}.get(layout[-2:])
    layout, _, stale = (layout[:-2] if turns else layout).partition(":s")
    name, _, rounds = layout.partition(":r")
    if name in LAYOUTS:
        base = LAYOUTS[name]
    elif "p/" in name:
        p, _, s = name.partition("p/")
        base = dict(workers=int(p), threads_per_worker=1, n_shards=int(s.rstrip("s")))
    else:
        p, _, t = name.partition("x")
        base = dict(workers=int(p), threads_per_worker=int(t))
    return (base | ({"rounds": int(rounds)} if rounds else {})
            | ({"staleness": float(stale)} if stale else {})
            | ({"process_partition": turns} if turns else {}))


def layout_cores(layout: str) -> int:
    """The sampling threads of a layout: processes x threads.

    >>> layout_cores("1x2"), layout_cores("2p/16s"), layout_cores("4x4:r1")
    (2, 2, 16)
    """
    s = settings_of(layout)
    return int(s["workers"]) * int(s["threads_per_worker"])


def measure(corpus: str, out: str, layout: str, args: argparse.Namespace, n_tokens: int
            ) -> dict:
    """One training run of ``layout``; its medians and LL/token per iteration.

    ``Px1:i``: P one-thread runs at once (:func:`independent`).
    """
    settings = settings_of(layout)
    if settings.pop("independent", False):
        if settings != {"workers": settings["workers"], "threads_per_worker": 1}:
            raise SystemExit(f"scale_out: {layout}: ':i' is for P x 1 layouts only (P "
                             "one-thread runs at once)")
        return independent(corpus, out, int(settings["workers"]), args, n_tokens)
    records, wall, _ = run(corpus, os.path.join(out, "model.zarr"), n_topics=args.topics,
                           iterations=args.iterations, sampler=args.sampler, seed=args.seed,
                           **settings)
    return summary(records, wall, args.skip, n_tokens)


def summary(records: list[dict], wall: float, skip: int, n_tokens: int) -> dict:
    """A run's medians over the iterations after ``skip`` and its LL/token per iteration."""
    rs = records[skip:] or records

    def med(key: str) -> float:
        return float(statistics.median(float(r[key]) for r in rs))

    kernel_cpu, proc_cpu = med("kernel_cpu_s"), med("process_cpu_s")
    return {"tokens_per_s": med("tokens_per_s"),
            "pulled_per_token": med("bytes_pulled") / n_tokens,
            "pushed_per_token": med("bytes_pushed") / n_tokens,
            "kernel_cpu_us_per_token": 1e6 * kernel_cpu / n_tokens,
            "other_cpu_us_per_token": 1e6 * max(0.0, proc_cpu - kernel_cpu) / n_tokens,
            "pull_s": med("pull_s"), "push_s": med("push_s"), "kernel_s": med("kernel_s"),
            "clock_s": med("clock_s"), "ll_s": med("ll_s"), "wait_s": med("wait_s"),
            "ll_per_token": [float(r["ll_per_token"]) for r in records], "wall_s": wall,
            "elapsed_s": [float(r["elapsed"]) for r in records]}


def _one_run(conn, corpus: str, out: str, kw: dict, skip: int, n_tokens: int) -> None:
    """A child of :func:`independent`: one 1 x 1 run; its summary goes back on ``conn``."""
    start = time.time()
    records, wall, _ = run(corpus, out, workers=1, threads_per_worker=1, **kw)
    conn.send(summary(records, wall, skip, n_tokens) | {"start": start})
    conn.close()


def independent(corpus: str, out: str, n: int, args: argparse.Namespace, n_tokens: int
                ) -> dict:
    """``n`` one-thread runs of the whole corpus at once, each its own embedded cluster.

    Nothing passes between them, so what slows each against a 1 x 1 run alone is the
    machine (cores, caches, memory shared with the others), as it is for ``n`` worker
    processes. Returns their tokens/s summed, CPU a token and phases averaged, the first
    run's LL/token (every run is the same chain), and ``overlap``: the share of the longest
    run's wall time that all ran at once (the sum holds where it is near 1; a warning
    below 0.9). Spawned processes (not daemons: each starts its cluster's).
    """
    ctx = multiprocessing.get_context("spawn")
    kw = dict(n_topics=args.topics, iterations=args.iterations, sampler=args.sampler,
              seed=args.seed)
    conns, procs = [], []
    for i in range(n):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_one_run, args=(send, corpus,
                                                  os.path.join(out, f"independent{i}.zarr"),
                                                  kw, args.skip, n_tokens))
        proc.start()
        send.close()
        conns.append(recv)
        procs.append(proc)
    try:
        got = [c.recv() for c in conns]
    except EOFError:
        raise SystemExit(f"scale_out: one of {n} independent runs failed (its error is "
                         "above)") from None
    finally:
        for proc in procs:
            proc.join()
    out_ = dict(got[0])
    out_["tokens_per_s"] = sum(g["tokens_per_s"] for g in got)
    for key in ("pulled_per_token", "pushed_per_token", "kernel_cpu_us_per_token",
                "other_cpu_us_per_token", "pull_s", "push_s", "kernel_s", "clock_s", "ll_s",
                "wait_s"):
        out_[key] = statistics.fmean(g[key] for g in got)
    out_["wall_s"] = max(g["wall_s"] for g in got)
    both = (min(g["start"] + g["wall_s"] for g in got) - max(g["start"] for g in got))
    out_["overlap"] = max(0.0, both) / out_["wall_s"] if out_["wall_s"] > 0 else 0.0
    del out_["start"]
    if out_["overlap"] < 0.9:
        print(f"scale_out: the {n} independent runs overlapped for only "
              f"{100 * out_['overlap']:.0f}% of the longest: their sum overstates the ceiling",
              file=sys.stderr, flush=True)
    return out_


def cpu_ceiling(base: dict, layout: dict, n_cores: int) -> float:
    """The tokens/s a layout can reach against 1x1 if its cores did nothing but its work.

    ``n_cores`` cores, each spending the layout's kernel and other CPU a token, against one
    core spending 1x1's kernel CPU a token (1x1's other CPU runs on an idle core). Where a
    layout reaches its ceiling, only less CPU a token (in its kernels or besides) makes it
    faster; below, the cores also wait.

    >>> cpu_ceiling({"kernel_cpu_us_per_token": 0.08},
    ...             {"kernel_cpu_us_per_token": 0.088, "other_cpu_us_per_token": 0.012}, 2)
    1.6
    """
    spent = layout["kernel_cpu_us_per_token"] + layout["other_cpu_us_per_token"]
    return round(n_cores * base["kernel_cpu_us_per_token"] / spent, 6) if spent > 0 else 0.0


def report(res: dict[str, dict], runs: dict[str, list[dict]] | None = None) -> list[str]:
    lines = ["| layout | tokens/s | pulled B/token | pushed B/token | kernel CPU µs/token | "
             "other CPU µs/token | LL/token per iteration |", "|---|---|---|---|---|---|---|"]
    for name, r in res.items():
        lls = " ".join(f"{x:.3f}" for x in r["ll_per_token"])
        lines.append(f"| {name} | {r['tokens_per_s'] / 1e6:.2f} M | {r['pulled_per_token']:.2f} "
                     f"| {r['pushed_per_token']:.2f} | {r['kernel_cpu_us_per_token']:.3f} | "
                     f"{r['other_cpu_us_per_token']:.3f} | {lls} |")

    def ratios(a: str, b: str, key: str) -> tuple[float, list[float]] | None:
        """Ratio of the medians over the rounds, and the rounds' own ratios (None: not run).

        A layout name also matches its variants (``:rN``, ``:p`` ...) where it was not
        measured: ``:p`` first (taking turns: what a plain run of 2 processes does where the
        sampler can), else the first one measured; never ``:i`` (no layout: the machine's
        ceiling).
        """
        if not runs:
            return None
        a, b = (x if x in runs else next(
            (n for n in sorted(runs, key=lambda n: not n.endswith(":p"))
             if n.startswith(x + ":") and not n.endswith(":i")), x)
            for x in (a, b))
        if a not in runs or b not in runs:
            return None
        pairs = [(x[key], y[key]) for x, y in zip(runs[a], runs[b], strict=True) if y[key]]
        if not pairs:
            return None
        med = (statistics.median(x for x, _ in pairs) / statistics.median(y for _, y in pairs))
        return med, [x / y for x, y in pairs]

    def ratio(a: str, b: str, key: str) -> str:
        """:func:`ratios` as text: ``1.83x (rounds 1.82 – 1.84)``."""
        got = ratios(a, b, key)
        if got is None:
            return "n/a"
        med, per = got
        spread = f" (rounds {min(per):.2f} – {max(per):.2f})" if len(per) > 1 else ""
        return f"{med:.2f}x{spread}"

    lines += ["", f"- 16 vs 2 shards on 2 processes, tokens/s: "
              f"{ratio('2p/16s', '2x1', 'tokens_per_s')} (target >= 0.8x)",
              f"- 16 vs 2 shards, bytes pulled per token: "
              f"{ratio('2p/16s', '2x1', 'pulled_per_token')} (target <= 1.2x)",
              f"- 1 process x 2 threads vs 1x1, tokens/s: {ratio('1x2', '1x1', 'tokens_per_s')}"
              " (target >= 1.8x)",
              f"- 2 processes vs 1, tokens/s: {ratio('2x1', '1x1', 'tokens_per_s')} "
              "(target >= 1.8x)"]
    if "1x1" in res:
        base = next(n for n in res if n == "1x1" or n.startswith("1x1:"))
        lines += [f"- {name} vs 1x1, tokens/s: {ratio(name, base, 'tokens_per_s')}"
                  for name in res if name not in (base, "1x2", "2x1")]
        # what each layout's CPU a token allows on the cores it uses (its run of median
        # tokens/s, as in the table)
        n_cpu = os.cpu_count() or 1
        for name, r in res.items():
            used = min(n_cpu, layout_cores(name))
            ceiling = cpu_ceiling(res[base], r, used)
            if name == base or used < 2 or ceiling <= 0 or not res[base]["tokens_per_s"]:
                continue
            # (the ratio of the medians over the rounds, as the lines above: a layout's
            # median run against 1x1's median run may come from different rounds)
            both = ratios(name, base, "tokens_per_s")
            got = both[0] if both else r["tokens_per_s"] / res[base]["tokens_per_s"]
            lines.append(f"- {name}: CPU-bound ceiling {ceiling:.2f}x 1x1 ({used} cores at its "
                         f"kernel + other CPU a token against 1x1's kernel CPU); measured "
                         f"{got:.2f}x, {100 * got / ceiling:.0f}% of it")
        # against the machine's own ceiling (Px1:i: P runs at once, nothing exchanged): what
        # a layout's coordination costs on as many cores
        for ind in (n for n in res if n.endswith(":i")):
            lines += [f"- {name} vs {ind} ({layout_cores(ind)} one-thread runs at once, "
                      f"nothing exchanged), tokens/s: {ratio(name, ind, 'tokens_per_s')}"
                      for name in res if not name.endswith(":i")
                      and layout_cores(name) == layout_cores(ind)]
        lines.append("- LL/token after the last iteration: " + ", ".join(
            f"{name} {r['ll_per_token'][-1]:.4f}" for name, r in res.items()))
        # tokens/s is not what a user waits for: processes lag a clock per iteration
        # (AD-LDA), threads share one chain. The time each layout takes to the worst last
        # LL/token of all (from its first iteration's end, as `biglda layout` ranks them):
        curves = {n: [list(zip(r["elapsed_s"], r["ll_per_token"], strict=True))]
                  for n, r in res.items() if "elapsed_s" in r and not n.endswith(":i")}
        if base in curves and len(curves) > 1:
            _, target, secs = pick(curves)
            lines += [f"- {name}: to LL/token {target:.4f} in {secs[name]:.1f} s against "
                      f"1x1's {secs[base]:.1f} s: {secs[base] / secs[name]:.2f}x"
                      for name in curves if name != base and secs[name] > 0]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--sampler", default="lightlda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    args = ap.parse_args(argv)
    import biglda
    from biglda.corpus import Corpus

    print(f"biglda from {os.path.dirname(biglda.__file__)}", file=sys.stderr, flush=True)

    n_tokens = Corpus.open(args.corpus).n_tokens
    layouts = [x for x in args.layouts.split(",") if x]
    os.makedirs(args.out, exist_ok=True)
    runs: dict[str, list[dict]] = {name: [] for name in layouts}
    for _ in range(args.repeats):
        for name in layouts:
            t0 = time.time()
            runs[name].append(measure(args.corpus, args.out, name, args, n_tokens))
            print(f"{name}: {runs[name][-1]['tokens_per_s'] / 1e6:.2f} M tokens/s "
                  f"({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
            # Written after every run, so a benchmark stopped at a time limit keeps what it
            # measured (the device machine's calls are time-boxed).
            with open(os.path.join(args.out, "scale_out.json"), "w") as f:
                json.dump({"n_tokens": n_tokens, "topics": args.topics,
                           "sampler": args.sampler, "iterations": args.iterations,
                           "runs": {n: r for n, r in runs.items() if r}}, f, indent=1)
    res = {name: min(rs, key=lambda r: abs(r["tokens_per_s"] - statistics.median(
        x["tokens_per_s"] for x in rs))) for name, rs in runs.items()}
    print("\n".join(report(res, runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
