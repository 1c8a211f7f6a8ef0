"""Benchmark the parameter server's pull: the work of serving every puller once per clock, for
2, 4, 8 and 16 writers, before (per-writer log merged for each puller) and after (each clock
folded once, pulls served as slices of it).

Usage (from the repository root, < 1 min)::

    .venv/bin/python pipelines/bench_ps.py            # --tokens 1000000 --rows 10000 --topics 1000

One table shard (:class:`biglda.ps.TableShard`) in this process, no Dask: what is measured is
the actor's own work, not the transport. Each clock, ``--tokens`` tokens (Zipf words over the
shard's ``--rows`` rows) are split over N writers (the same data, more shards, as in issue 15);
a fraction ``--moves`` of them changes topic, and each writer pushes its moves aggregated into
one delta sorted by word. Each writer is also a puller whose vocabulary is the words of its
tokens. "before" is the algorithm this branch replaced (kept here only for the comparison):
concatenate every other writer's entries, mask them to the puller's rows, sort-merge.
"after" is :meth:`TableShard.pull` (BSP: ``upto`` = the clock just pushed; the puller's own
moves taken out of the folded slice), plus the fold, done once per clock by the first pull
that needs it (none with 2 writers: a pull with one other writer gets that writer's entry).

Times are CPU seconds of this thread (``time.thread_time``; the machine is shared), medians
of ``--clocks`` clocks after one warm-up clock. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from biglda.ps import TableShard
from biglda.ps._kernels import merge_coo


def _clock_deltas(rng, n_writers: int, tokens: int, rows: int, topics: int, moves: float,
                  p_word: np.ndarray) -> tuple[list[tuple[np.ndarray, ...]], list[np.ndarray]]:
    """Per writer: its aggregated delta (rows, topics, counts; sorted by row) and vocabulary."""
    deltas, vocabs = [], []
    for n in np.diff(np.linspace(0, tokens, n_writers + 1).astype(np.int64)):
        words = rng.choice(rows, int(n), p=p_word)
        vocabs.append(np.unique(words))
        moved = words[rng.random(len(words)) < moves]
        old = rng.integers(0, topics, len(moved))
        new = rng.integers(0, topics, len(moved))
        flat = np.concatenate([moved * topics + old, moved * topics + new])
        cnt = np.concatenate([-np.ones(len(moved)), np.ones(len(moved))])
        uniq, inv = np.unique(flat, return_inverse=True)
        summed = np.bincount(inv, weights=cnt).astype(np.int32)
        keep = summed != 0
        deltas.append(((uniq[keep] // topics).astype(np.int32),
                       (uniq[keep] % topics).astype(np.int32), summed[keep]))
    return deltas, vocabs


def _old_pull(log: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]], shard: int,
              mask: np.ndarray, n_topics: int) -> tuple[int, int]:
    """The replaced pull: concatenate other writers' entries, mask, merge. (scanned, out)."""
    parts = [e for e in log if e[0] != shard]
    rows = np.concatenate([e[1] for e in parts])
    topics = np.concatenate([e[2] for e in parts])
    counts = np.concatenate([e[3] for e in parts])
    keep = mask[rows]
    rows, topics, counts = rows[keep], topics[keep], counts[keep]
    if len(parts) > 1:
        rows, topics, counts = merge_coo(rows, topics, counts, n_topics)
    return len(keep), len(rows)


def run(n_writers: int, args: argparse.Namespace, p_word: np.ndarray) -> dict[str, float]:
    rng = np.random.default_rng(args.seed)
    ps = TableShard(0, 0, args.rows, args.topics, n_writers, beta=0.01)
    folding = ps._fold  # the first pull that needs a clock folds it: timed apart
    fold_cpu = [0.0]

    def timed_fold(clock: int) -> object:
        t0 = time.thread_time()
        out = folding(clock)
        fold_cpu[0] += time.thread_time() - t0
        return out

    ps._fold = timed_fold  # type: ignore[method-assign]
    vocabs = None
    old_s, new_s, fold_s, old_scan, old_out, new_touch, out, nbytes = ([] for _ in range(8))
    received = np.full(n_writers, -1, dtype=np.int64)
    for clock in range(args.clocks + 1):
        deltas, v = _clock_deltas(rng, n_writers, args.tokens, args.rows, args.topics,
                                  args.moves, p_word)
        if vocabs is None:  # a shard's vocabulary is fixed: its first clock's words
            vocabs = v
            masks = []
            for s, words in enumerate(vocabs):
                ps.attach(s, words, -1)
                m = np.zeros(args.rows, dtype=bool)
                m[words] = True
                masks.append(m)
        for s, (w, t, c) in enumerate(deltas[:-1]):
            ps.push(s, clock, w, t, c)
        ps.push(n_writers - 1, clock, *deltas[-1])  # completes the clock
        log = [(s, *d) for s, d in enumerate(deltas)]
        t0 = time.thread_time()
        scanned = [_old_pull(log, s, masks[s], args.topics) for s in range(n_writers)]
        old = time.thread_time() - t0
        before = ps.info()
        fold_cpu[0] = 0.0
        t0 = time.thread_time()
        for s in range(n_writers):
            ps.pull(s, received, clock)
        fold = fold_cpu[0]
        new = time.thread_time() - t0 - fold
        after = ps.info()
        received[:] = clock
        if clock == 0:
            continue  # warm-up (JIT)
        old_s.append(old / n_writers)
        new_s.append(new / n_writers)
        fold_s.append(fold)
        old_scan.append(sum(a for a, _ in scanned) / n_writers)
        old_out.append(sum(b for _, b in scanned) / n_writers)
        new_touch.append(sum(after[k] - before[k] for k in
                             ("pull_rows_probed", "pull_gathered", "pull_own",
                              "pull_log_scanned", "pull_merged")) / n_writers)
        out.append((after["pull_entries_out"] - before["pull_entries_out"]) / n_writers)
        nbytes.append((after["bytes_out"] - before["bytes_out"]) / n_writers)
    med = {k: float(np.median(v)) for k, v in
           {"old_ms": old_s, "new_ms": new_s, "fold_ms": fold_s, "old_scanned": old_scan,
            "old_out": old_out, "new_touched": new_touch, "out": out, "bytes": nbytes}.items()}
    med["old_ms"] *= 1e3
    med["new_ms"] *= 1e3
    med["fold_ms"] *= 1e3
    med["pushed"] = float(sum(len(d[0]) for d in deltas))
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000, help="tokens per clock")
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the table shard")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--moves", type=float, default=0.3, help="fraction of tokens moved")
    parser.add_argument("--writers", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--clocks", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    p_word = 1.0 / np.arange(1, args.rows + 1)
    p_word /= p_word.sum()
    print(f"one table shard: {args.rows} rows x K={args.topics}, {args.tokens} tokens per "
          f"clock ({args.moves:.0%} moved), CPU ms per puller per clock (median of "
          f"{args.clocks})\n")
    print("Per pull (one puller, one table shard). before: entries scanned / sent; after: "
          "entries touched (rows probed + gathered + own taken out + scanned + merged) / "
          "sent.\n")
    print("| writers | entries pushed | before ms | before scanned | before sent | after ms "
          "| after touched | after sent | after bytes |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for n in args.writers:
        r = run(n, args, p_word)
        rows.append((n, r))
        print(f"| {n} | {r['pushed']:,.0f} | {r['old_ms']:.1f} | {r['old_scanned']:,.0f} | "
              f"{r['old_out']:,.0f} | {r['new_ms']:.2f} | {r['new_touched']:,.0f} | "
              f"{r['out']:,.0f} | {r['bytes']:,.0f} |")
    print("\nPer clock, every puller served once (the server's work per clock).\n")
    print("| writers | before ms | after ms (fold + pulls) | fold ms | speed-up |")
    print("|---|---|---|---|---|")
    for n, r in rows:
        before, after = n * r["old_ms"], r["fold_ms"] + n * r["new_ms"]
        print(f"| {n} | {before:.0f} | {after:.0f} | {r['fold_ms']:.0f} | "
              f"{before / max(after, 1e-9):.1f}x |")


if __name__ == "__main__":
    main()
