"""The steps of processes taking turns, on one time line: where a clock's time goes between steps.

``scale_out.py`` reports a clock's wait summed over its steps. This says which step boundary
it is at and what it waits for. It runs one ``biglda train`` (its own embedded cluster)
with this module preloaded into every worker (``DASK_DISTRIBUTED__WORKER__PRELOAD``). The
preload wraps the sampler's sweep, the clock, the push and the wait for the processes'
``n_k`` totals, and each worker process logs their start and end times to a file of its
own. Then it prints:

- each clock's steps for every process;
- the gaps before the steps: at the clock's first step (the clock's tail, the push, the LL
  and the tick, and the totals' wait) and at the later ones (a step's fold);
- a replay of the logged sweep times under two rules for when a step may start. In
  ``totals at step 0`` (the code's) a clock's first step waits for every process's last
  step of the clock before. In ``totals at step m - 1`` it waits only for its window's post,
  m steps back, like any other step. The replay shows what that would save with these step
  times.

::

    .venv/bin/python pipelines/turns_timeline.py --corpus runs/synth4m.zarr -- \\
        -k 1000 --iterations 12 --sampler lightlda --workers 2 --threads-per-worker 1

The flags after ``--`` go to ``biglda train`` (add ``--process-partition on`` where the
sampler would not take turns by default). The logged calls are the trainer's own functions,
wrapped. Nothing in the package changes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOG_DIR_ENV = "BIGLDA_TIMELINE_DIR"
HERE = Path(__file__).resolve().parent


def dask_setup(worker) -> None:  # (the worker preload's hook)
    """Wrap the trainer's steps in this worker process so that each logs its times."""
    from biglda.ps import process_cache
    from biglda.trainer import worker as w

    path = Path(os.environ[LOG_DIR_ENV]) / f"process_{os.getpid()}.jsonl"

    def logged(fn, tag):
        def call(*args, **kw):
            t0 = time.time()
            out = fn(*args, **kw)
            with path.open("a") as f:
                f.write(json.dumps({"tag": tag, "t0": t0, "t1": time.time()}) + "\n")
            return out
        return call

    make = w._make_sampler

    def make_logged(*args, **kw):
        sampler = make(*args, **kw)
        sampler.sweep = logged(sampler.sweep, "sweep")
        return sampler

    w._make_sampler = make_logged
    w._sweep_clock = logged(w._sweep_clock, "clock")
    w._wait_totals = logged(w._wait_totals, "totals")
    process_cache.ProcessCache.push_all = logged(process_cache.ProcessCache.push_all, "push")


def replay(sweeps: list[list[float]], n_windows: int, m: int, reset: int, tail: float,
           gap: float, latency: float) -> float:
    """Makespan of two or more processes' logged sweep times under a step rule.

    Process ``p``'s global step ``g`` starts after its step ``g - 1`` ends (plus ``tail`` at
    a clock's first step after the first, ``gap`` at the others) and after the process before
    it in the turns has ended its step ``g - m`` (its window's post). The clock's step
    ``reset`` also waits for every other process's last step of the clock before (the ``n_k``
    totals).

    >>> replay([[1.0] * 8, [1.0] * 8], 4, 2, 0, 0.0, 0.0, 0.0)
    8.0
    >>> replay([[1.0, 2.0] * 4, [2.0, 1.0] * 4], 4, 2, 0, 0.0, 0.0, 0.0)
    12.0
    """
    n_proc, n = len(sweeps), min(len(s) for s in sweeps)
    end = [[0.0] * n for _ in range(n_proc)]
    for g in range(n):
        s = g % n_windows
        for p in range(n_proc):
            t = end[p][g - 1] + (tail if s == 0 else gap) if g else 0.0
            if g >= m:
                t = max(t, end[(p + 1) % n_proc][g - m] + latency)
            if s == reset and g >= n_windows:
                last = g - s - 1
                t = max([t] + [end[q][last] + latency for q in range(n_proc) if q != p])
            end[p][g] = t + sweeps[p][g]
    return max(e[-1] for e in end)


def summary(logs: list[list[dict]], skip: int, m: int) -> list[str]:
    """The report's lines from the worker processes' logs (a list of records a process).

    ``skip``: clocks left out of the shares and the replay; ``m``: windows a process.
    """
    if len(logs) < 2:
        raise SystemExit("turns_timeline.py: fewer than two worker processes logged a step "
                         "(does the run take turns? --workers 2 or more)")
    sweeps = [[r for r in log if r["tag"] == "sweep"] for log in logs]
    n_clocks = min(len([r for r in log if r["tag"] == "clock"]) for log in logs)
    n_windows = min(len(s) for s in sweeps) // max(1, n_clocks)
    if n_windows < 2 or n_clocks <= skip:
        raise SystemExit("turns_timeline.py: one sweep a clock (the processes do not take "
                         f"turns), or no clock after the first {skip}")
    lines = [f"{len(logs)} processes, {n_clocks} clocks, {n_windows} steps a clock",
             "clock: per process, each step's gap before it + its sweep, in s"]
    first_gaps, later_gaps, busy = [], [], 0.0
    for c in range(n_clocks):
        cells = []
        for steps in sweeps:
            row = []
            for s in range(n_windows):
                g = c * n_windows + s
                gap = steps[g]["t0"] - steps[g - 1]["t1"] if g else 0.0
                dur = steps[g]["t1"] - steps[g]["t0"]
                row.append(f"{gap:.3f}+{dur:.3f}")
                if c >= skip:
                    (first_gaps if s == 0 else later_gaps).append(gap)
                    busy += dur
            cells.append(" ".join(row))
        lines.append(f"{c:3d}: " + " | ".join(cells))
    # each process's time from the end of clock skip - 1's last step to its last step's end
    spans = sum(s[n_clocks * n_windows - 1]["t1"] - s[skip * n_windows - 1]["t1"]
                if skip else s[n_clocks * n_windows - 1]["t1"] - s[0]["t0"] for s in sweeps)
    totals = [r["t1"] - r["t0"] for log in logs for r in log if r["tag"] == "totals"] or [0.0]
    pushes = [r["t1"] - r["t0"] for log in logs for r in log if r["tag"] == "push"] or [0.0]
    lines.append(f"after clock {skip}: the sweeps {busy / spans:.1%} of the processes' time; "
                 f"the gaps at a clock's first step {sum(first_gaps) / spans:.1%} (median "
                 f"{statistics.median(first_gaps):.3f} s), at the others "
                 f"{sum(later_gaps) / spans:.1%} (median {statistics.median(later_gaps):.3f} s)")
    lines.append(f"the totals' wait: median {statistics.median(totals):.3f} s, max "
                 f"{max(totals):.3f} s; the push: median {statistics.median(pushes):.3f} s")
    # a clock's first-step gap in three: its last step's end to the clock's end (the LL, the
    # push, the stats), the clock's end to the next one's start (the tick), and that start to
    # the first step's (the folds' and the totals' waits)
    parts: list[list[float]] = [[], [], []]
    for log, steps in zip(logs, sweeps, strict=True):
        ends = [r for r in log if r["tag"] == "clock"]
        for c in range(max(1, skip), n_clocks):
            last, first = steps[c * n_windows - 1], steps[c * n_windows]
            parts[0].append(ends[c - 1]["t1"] - last["t1"])
            parts[1].append(ends[c]["t0"] - ends[c - 1]["t1"])
            parts[2].append(first["t0"] - ends[c]["t0"])
    if all(parts):
        lines.append("a clock's first-step gap, medians: after the last step (LL, push, stats) "
                     f"{statistics.median(parts[0]):.3f} s, the tick "
                     f"{statistics.median(parts[1]):.3f} s, the next clock to its first step "
                     f"(folds, totals) {statistics.median(parts[2]):.3f} s")
    # the replay: a clock's own tail as the lower quartile of the first steps' gaps (those
    # that waited for nobody), a later step's gap as their median
    tail = sorted(first_gaps)[len(first_gaps) // 4]
    gap = statistics.median(later_gaps)
    times = [[r["t1"] - r["t0"] for r in s][skip * n_windows:n_clocks * n_windows]
             for s in sweeps]
    at0 = replay(times, n_windows, m, 0, tail, gap, 0.002)
    atm = replay(times, n_windows, m, m - 1, tail, gap, 0.002)
    lines.append(f"replay of these sweeps (tail {tail:.3f} s, gap {gap:.3f} s): totals at step 0 "
                 f"{at0:.2f} s, at step {m - 1} {atm:.2f} s ({at0 / atm:.3f}x); the slowest "
                 f"process's sweeps alone {max(sum(t) for t in times):.2f} s")
    return lines

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--skip", type=int, default=2, help="clocks left out of the summary")
    ap.add_argument("--turn-windows", type=int, default=2, help="m, as the run's (default 2)")
    ap.add_argument("flags", nargs=argparse.REMAINDER, help="-- then flags for biglda train")
    args = ap.parse_args()
    flags = [f for f in args.flags if f != "--"]
    with tempfile.TemporaryDirectory(prefix="turns_timeline_") as tmp:
        env = dict(os.environ, **{LOG_DIR_ENV: tmp},
                   PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
                   DASK_DISTRIBUTED__WORKER__PRELOAD=json.dumps(["turns_timeline"]))
        cmd = [sys.executable, "-m", "biglda.cli", "train", args.corpus, *flags,
               "--out", str(Path(tmp) / "model.zarr"), "--overwrite", "--checkpoint-every",
               "0"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit("turns_timeline.py: biglda train failed: "
                             + (done.stderr.strip().splitlines() or ["?"])[-1])
        logs = [[json.loads(line) for line in p.read_text().splitlines()]
                for p in sorted(Path(tmp).glob("process_*.jsonl"))]
    for line in summary(logs, args.skip, args.turn_windows):
        print(line)


if __name__ == "__main__":
    main()
