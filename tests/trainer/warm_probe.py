"""Run in a fresh process by test_warm_kernels.py: which kernels a training first calls when.

``python warm_probe.py CORPUS SAMPLER K ITERATIONS WORKERS THREADS OUT [NAME=VALUE ...]``
(sampler parameters, floats) trains on an in-process
cluster (``processes=False``: the workers' kernels are this process's dispatchers) and prints
one JSON object: ``late`` — every biglda kernel that gained a compiled signature after the
first clock, by clock — and ``kernels``, the cgs kernels the sweeps of the later clocks
chose (from the sampler's debug log).
"""

from __future__ import annotations

import json
import logging
import sys


def signatures() -> dict[str, int]:
    from numba.core.registry import CPUDispatcher

    out = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("biglda"):
            for attr, obj in list(vars(module).items()):
                if isinstance(obj, CPUDispatcher):
                    out[f"{name}.{attr}"] = len(obj.signatures)
    return out


class _Kernels(logging.Handler):
    """The kernels the cgs sweeps chose once ``clocks`` is on (after the first clock)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: set[str] = set()
        self.on = False

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.on and message.startswith("cgs sweep:"):
            self.seen.add(message.rsplit(", ", 1)[-1])


def main(corpus: str, sampler: str, k: int, iterations: int, workers: int, threads: int,
         out: str, params: dict[str, float]) -> None:
    from distributed import LocalCluster

    import biglda

    kernels = _Kernels()
    log = logging.getLogger("biglda.samplers.cgs_cpu")
    log.setLevel(logging.DEBUG)
    log.addHandler(kernels)
    late: dict[int, list[str]] = {}
    seen = [signatures()]

    def on_record(record: dict) -> None:
        if record.get("type") != "iteration":
            return
        now = signatures()
        new = sorted(n for n, c in now.items() if c > seen[0].get(n, 0))
        if new and record["iteration"] > 1:
            late[record["iteration"]] = new
        seen[0] = now
        kernels.on = True

    with LocalCluster(n_workers=workers, threads_per_worker=threads, processes=False,
                      dashboard_address=None) as cluster:
        biglda.train(corpus, out, n_topics=k, iterations=iterations, sampler=sampler,
                     scheduler=cluster.scheduler_address, on_record=on_record,
                     overwrite=True, top_words_every=2, sampler_params=params)
    print(json.dumps({"late": late, "kernels": sorted(kernels.seen)}))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]), a[6],
         {n: float(v) for n, v in (p.split("=", 1) for p in a[7:])})
