"""Benchmark ``biglda ingest``: throughput and peak memory at 1x and Nx input size.

The Nx input is the source gzip repeated N times (concatenated gzip members are
one valid gzip stream), so both runs read the same format and the same
vocabulary: a flat peak RSS between them shows that memory does not grow with the
input. Each ingest runs in its own process under ``/usr/bin/time -v`` (or, when
that is missing, a Python wrapper reading ``ru_maxrss`` of its child).

Usage::

    .venv/bin/python pipelines/bench_ingest.py                 # debian 1x and 10x
    .venv/bin/python pipelines/bench_ingest.py --repeat 3 --jobs 2
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

DEFAULT_SOURCE = "/work/shared/corpora/debian-descriptions.tsv.gz"


def _run_measured(cmd: list[str]) -> tuple[float, float, float]:
    """Run ``cmd``; return (wall seconds, CPU seconds (user + system), peak RSS in MiB)."""
    if shutil.which("time") or os.path.exists("/usr/bin/time"):
        t0 = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"ingest failed:\n{proc.stderr}")
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)",
                                                proc.stderr))
        return wall, cpu, int(m.group(1)) / 1024 if m else float("nan")
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print(u.ru_utime + u.ru_stime, u.ru_maxrss); sys.exit(r.returncode)")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"ingest failed:\n{proc.stderr}")
    cpu, rss = proc.stdout.split()[-2:]
    return wall, float(cpu), int(rss) / 1024


def main() -> None:
    """Run the benchmark and print a table and the Nx/1x ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="input corpus (TSV, gzip ok)")
    parser.add_argument("--repeat", type=int, default=10, help="size of the large input (10)")
    parser.add_argument("--jobs", type=int, default=None, help="ingest --jobs (default: auto)")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir)")
    args = parser.parse_args()

    from biglda.corpus.store import Corpus

    work = args.workdir or tempfile.mkdtemp(prefix="bench-ingest-")
    os.makedirs(work, exist_ok=True)
    suffix = ".tsv.gz" if args.source.endswith(".gz") else ".tsv"
    big = os.path.join(work, f"x{args.repeat}{suffix}")
    with open(big, "wb") as out, open(args.source, "rb") as src:
        data = src.read()
        for _ in range(args.repeat):
            out.write(data)
    rows = []
    for label, path in (("1x", args.source), (f"{args.repeat}x", big)):
        corpus = os.path.join(work, f"{label}.zarr")
        cmd = [sys.executable, "-m", "biglda.cli", "-q", "ingest", path, "--format", "tsv",
               "--out", corpus, "--overwrite"]
        if args.jobs:
            cmd += ["--jobs", str(args.jobs)]
        wall, cpu, rss = _run_measured(cmd)
        c = Corpus.open(corpus)
        words = int(c.attrs["source"]["input_tokens"])
        rows.append((label, os.path.getsize(path) / 2**20, c.n_docs, words, c.n_tokens, wall,
                     words / wall / 1e6, cpu, words / cpu / 1e6, rss))
    print(f"ingest benchmark: {args.source} (jobs={args.jobs or 'auto'}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    # CPU seconds next to wall seconds: on a shared machine the wall-clock rate
    # depends on the other users' load; words per CPU-second does not.
    head = ("input", "file MiB", "docs", "input words", "stored tokens", "wall s",
            "M words/s", "CPU s", "M words/CPU-s", "peak RSS MiB")
    print("  ".join(f"{h:>13}" for h in head))
    for r in rows:
        print(f"{r[0]:>13}  {r[1]:>13.1f}  {r[2]:>13,}  {r[3]:>13,}  {r[4]:>13,}  {r[5]:>13.2f}"
              f"  {r[6]:>13.2f}  {r[7]:>13.2f}  {r[8]:>13.2f}  {r[9]:>13.0f}")
    a, b = rows
    print(f"ratios {b[0]}/{a[0]}: words {b[3] / a[3]:.1f}x, wall {b[5] / a[5]:.1f}x, "
          f"CPU {b[7] / a[7]:.1f}x, peak RSS {b[9] / a[9]:.2f}x (flat means within 1.20x)")
    if args.jobs and args.jobs > 1:
        print("note: with --jobs > 1 the tokenizing workers are children of a forkserver, "
              "so CPU s and peak RSS cover the main process only")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
