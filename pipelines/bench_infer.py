"""Benchmark inference on new documents (``TopicModel.transform``), one thread.

Reports, for K = 100 and K = 1000, two throughputs that the "1 M tokens/s per core"
target can mean:

* **kernel token-samples/s**: the fold-in kernel alone on ids already mapped to the
  model (``foldin_theta``), counting every sweep's draw: ``tokens * sweeps / CPU s``;
* **end-to-end input tokens/s**: ``model.transform(input, iterations=I)`` for I = 50 and
  I = 10, counting each input token once: ``known tokens / s``, for a stored corpus
  (read from zarr, mapped by word) and for raw strings (tokenized, then mapped).

Times are the best of ``--repeat`` calls after a warm-up call (numba loads its compiled
kernels from the on-disk cache on the first call in a process; that one-time cost is
printed separately). CPU seconds are this process's (``time.process_time``), so on a
shared machine the per-CPU-second figures are the ones to compare; wall figures are
printed next to them with the load average.

K = 1000 uses ``--model1000`` if given; otherwise it is derived from the K = 100 model
by splitting each topic's word counts into 10 topics (binomial thinning, seed 0) — a
sparse, trained-looking phi of the right size, not a model trained at K = 1000.

Usage::

    .venv/bin/python pipelines/bench_infer.py
    .venv/bin/python pipelines/bench_infer.py --model runs/debian/train/model.zarr \\
        --test runs/debian/split/test.zarr --repeat 3
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

DEFAULT_MODEL = "runs/debian/train/model.zarr"
DEFAULT_TEST = "runs/debian/split/test.zarr"
DEFAULT_TEXTS = "/work/shared/corpora/debian-descriptions.tsv.gz"


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best wall s, best CPU s) over ``repeat`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def _texts_of(test: Any, path: str) -> list[str]:
    """Raw texts (TSV: id, text) of the test corpus's documents."""
    wanted = set(test.doc_ids.tolist())
    texts = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            doc_id, _, text = line.rstrip("\n").partition("\t")
            if doc_id in wanted:
                texts.append(text)
    return texts


def _model_1000(model: Any) -> Any:
    from biglda.model import TopicModel

    rng = np.random.default_rng(0)
    n_wk = np.asarray(model.topic_word_counts.T, dtype=np.int64)  # [V, K]
    parts = rng.binomial(np.repeat(n_wk[:, :, None], 10, axis=2), 0.1)
    n_topics = 10 * n_wk.shape[1]
    return TopicModel.from_counts(parts.reshape(n_wk.shape[0], -1), np.zeros((0, n_topics)),
                                  model.vocab, alpha=model.alpha[0], beta=model.beta,
                                  attrs=model.attrs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="a K = 100 model.zarr")
    ap.add_argument("--model1000", default=None, help="a K = 1000 model.zarr (optional)")
    ap.add_argument("--test", default=DEFAULT_TEST, help="held-out corpus (zarr)")
    ap.add_argument("--texts", default=DEFAULT_TEXTS, help="TSV.gz holding the raw texts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from biglda.corpus import Corpus
    from biglda.model import TopicModel
    from biglda.model._data import docs_from_corpus
    from biglda.samplers.foldin import foldin_theta

    test = Corpus.open(args.test)
    texts = _texts_of(test, args.texts)
    k100 = TopicModel.load(args.model)
    k1000 = TopicModel.load(args.model1000) if args.model1000 else _model_1000(k100)
    print(f"held-out corpus: {test.n_docs} docs, {test.n_tokens} tokens; raw texts: "
          f"{len(texts)} docs; cpus {os.cpu_count()}, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    c0 = time.process_time()
    k100.transform(["warm up"], iterations=2)
    print(f"first transform call in this process (numba cache load, phi tables): "
          f"{time.process_time() - c0:.2f} CPU s, once per process")

    print(f"{'K':>5} {'measure':<40} {'sweeps':>6} {'wall s':>7} {'CPU s':>7} "
          f"{'per wall s':>12} {'per CPU s':>12}")
    for model in (k100, k1000):
        k = model.n_topics
        phi_wk, prior_cdf = model._phi_arrays()
        model.transform(["warm up"], iterations=2)
        docs = docs_from_corpus(test, model.vocab)
        mapped = docs.part(0, docs.n_docs).load(docs.id_map)
        n = mapped.n_tokens
        for sweeps in (50, 10):
            run = partial(foldin_theta, mapped.tokens, mapped.doc_ptr, phi_wk, prior_cdf,
                          model.alpha, burn_in=sweeps // 2, samples=sweeps - sweeps // 2,
                          seed=args.seed)
            wall, cpu = _best(run, args.repeat)
            print(f"{k:>5} {'kernel token-samples/s':<40} {sweeps:>6} {wall:>7.3f} {cpu:>7.3f} "
                  f"{n * sweeps / wall / 1e6:>10.2f} M {n * sweeps / cpu / 1e6:>10.2f} M")
        for label, source in (("stored corpus", test), ("raw strings", texts)):
            for sweeps in (50, 10):
                run = partial(model.transform, source, iterations=sweeps, seed=args.seed)
                wall, cpu = _best(run, args.repeat)
                used = model.last_transform_stats_["n_tokens"]
                print(f"{k:>5} {'end-to-end input tokens/s, ' + label:<40} {sweeps:>6} "
                      f"{wall:>7.3f} {cpu:>7.3f} {used / wall / 1e6:>10.3f} M "
                      f"{used / cpu / 1e6:>10.3f} M")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
