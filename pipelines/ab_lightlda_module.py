"""A/B of lightlda's sweep: the module of another checkout (A) against this one's (B), no Dask.

Both chains start from the same random topics and take their sweeps in turn (A then B, then
B then A, ...), so the VM's drift falls on both; prints each one's median seconds and CPU µs
a token over the sweeps after ``--skip``, and whether the two chains are the same (a change
that should not move the chain must print ``same chain: True``)::

    git worktree add /tmp/base c8c49a0
    .venv/bin/python pipelines/ab_lightlda_module.py \\
        --a /tmp/base/biglda/samplers/lightlda_cpu.py --corpus runs/synth4m.zarr --threads 1

A's module is loaded from its file beside this checkout's package (its imports are this
checkout's), so only ``lightlda_cpu.py`` differs between the two.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from biglda.corpus import Corpus
    from biglda.samplers import RandomKey, count_from_z, init_z
    from biglda.samplers import lightlda_cpu as this

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="lightlda_cpu.py of the other checkout")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--skip", type=int, default=3)
    ap.add_argument("--order", default="ab", choices=["ab", "ba"], help="who sweeps first")
    args = ap.parse_args(argv)
    # A's module from a copy in a fresh folder: numba caches its kernels beside the file, and
    # a second run that loaded them from there failed (their environment names a module
    # that cannot be imported again); compiled afresh every run instead
    copy = Path(tempfile.mkdtemp(prefix="ab_lightlda_")) / "lightlda_a.py"
    shutil.copyfile(args.a, copy)
    atexit.register(shutil.rmtree, copy.parent, True)
    spec = importlib.util.spec_from_file_location("lightlda_a", copy)
    if spec is None or spec.loader is None:
        raise SystemExit(f"ab_lightlda_module: cannot load {args.a}")
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    corpus = Corpus.open(args.corpus)
    tokens = np.ascontiguousarray(corpus.read_tokens(0, corpus.n_tokens), np.int32)
    doc_ptr = np.asarray(corpus.doc_ptr, np.int64)
    n_words, k = int(corpus.n_words), args.topics
    chains = {}
    for name, module in (("a", other), ("b", this)):
        z = init_z(len(tokens), k, RandomKey(0, -1))
        chains[name] = (module.LightLDASampler(), z,
                        *count_from_z(tokens, doc_ptr, z, n_words, k), [], [])
    with ThreadPoolExecutor(max(1, args.threads - 1)) as pool:
        for it in range(args.sweeps):
            for name in args.order if it % 2 == 0 else args.order[::-1]:
                sampler, z, n_wk, n_k, secs, cpus = chains[name]
                t0, c0 = time.perf_counter(), time.thread_time()
                res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words,
                                    RandomKey(0, it), pool=pool, n_threads=args.threads)
                secs.append(time.perf_counter() - t0)
                cpus.append(res.cpu_seconds if res.cpu_seconds is not None
                            else time.thread_time() - c0)
    rest = slice(args.skip, None)
    for name, (_, _, _, _, secs, cpus) in chains.items():
        print(f"{name}: s a sweep {statistics.median(secs[rest]):.3f}, CPU µs a token "
              f"{1e6 * statistics.median(cpus[rest]) / len(tokens):.3f}; every sweep: "
              + " ".join(f"{x:.2f}" for x in secs))
    print("same chain:", np.array_equal(chains["a"][1], chains["b"][1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
