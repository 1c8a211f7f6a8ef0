"""The embedded cluster's layout: how many worker processes, how many sampling threads each.

``--workers`` / ``--threads-per-worker`` name a layout. Without them, a CPU run takes the
layout ``biglda layout --measure`` found fastest on this machine for the run's sampler
(:func:`measure_layouts`: a short training on a synthetic corpus per candidate and per
measured sampler, compared in one run by the time each takes to a common log-likelihood),
kept in :func:`layout_file`; on a machine
never measured, one process with a sampling thread per core. The CLI prints the pick and
its reason; the ``start`` record carries it (``layout``).

Why one process, not one per core, where nothing was measured: a process's threads share
one chain (the partitioned sweep: only ``n_k`` lags), while processes are data-parallel
(AD-LDA): each sweeps against the others' counts of the clock before. That costs per
iteration, not only per token: on 2 cores (cgs, K = 100, synth4m) 2 processes reached at
iteration 30 the log-likelihood one thread had at iteration ~21, so at equal time they
were about as far as one thread, while 1 process x 2 threads was 1.9x ahead; on 16 cores
16 processes made 2.0x one thread's tokens/s and 1 x 16 7.5x (pipelines/README.md,
"Seventeenth session" and "16 cores").

Processes against threads: a process has its own table cache, pull and push per clock and
its own Python orchestration; threads share one cache. How they share it depends on the
sampler (``docs/design.md``, "In-process scheme"): all of a process's shards are one sweep
on all its threads (``threads_per_sweep``), warplda's in blocks, lightlda's and cgs's
partitioned by documents and words; cgs's plain kernel gives each thread its own part and
exchanges moves in rounds (AD-LDA inside the process). Which layout is faster depends on
that and on the machine (memory bandwidth, cores, what else runs), which is why it is
measured per sampler rather than ruled: ``cgs`` at K = 100 for its runs, ``warplda`` at
K = 1,000 for the runs of the other samplers that share a sweep.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from biglda.io import write_atomic

log = logging.getLogger("biglda.train")

#: The measurement's corpus and run (small: the whole measurement takes about a minute).
MEASURE_DOCS, MEASURE_WORDS, MEASURE_ITERATIONS = 12_000, 5_000, 6
#: The samplers measured, each at the K ``auto`` picks it for (:mod:`biglda.samplers.auto`).
MEASURE_SAMPLERS = {"cgs": 100, "warplda": 1000}


def measured_as(sampler: str) -> str:
    """Return the measured sampler whose layout a run of ``sampler`` takes.

    A sampler that shares one sweep on a process's threads (``threads_per_sweep``) takes
    warplda's, the others cgs's.

    Examples
    --------
    >>> measured_as("warplda"), measured_as("lightlda"), measured_as("cgs")
    ('warplda', 'warplda', 'cgs')
    """
    if sampler in MEASURE_SAMPLERS:
        return sampler
    from biglda.samplers import get_sampler

    try:
        shares = bool(getattr(get_sampler(sampler), "threads_per_sweep", False))
    except Exception:  # an unknown sampler fails later, where the run checks it
        shares = False
    return "warplda" if shares else "cgs"


class LayoutChoice(NamedTuple):
    """Worker processes x sampling threads per process, and why."""

    processes: int
    threads: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """Return the ``start`` record's ``layout`` entry."""
        return {"processes": self.processes, "threads": self.threads, "reason": self.reason}

    def label(self) -> str:
        """Say ``"2 processes x 1 thread"``."""
        return (f"{self.processes} process{'es' if self.processes != 1 else ''} x "
                f"{self.threads} thread{'s' if self.threads != 1 else ''}")


def layout_file() -> Path:
    """Where the measurement is kept: ``$BIGLDA_CACHE_DIR`` or the user's cache folder."""
    root = os.environ.get("BIGLDA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "biglda")
    return Path(root) / "layout.json"


def machine() -> dict[str, Any]:
    """Return what a measurement is valid for: this host and its core count."""
    return {"host": platform.node(), "cores": os.cpu_count() or 1}


def candidates(cores: int) -> list[tuple[int, int]]:
    """Layouts worth measuring on ``cores`` cores: all processes, all threads, and between.

    Examples
    --------
    >>> candidates(2)
    [(2, 1), (1, 2)]
    >>> candidates(8)
    [(8, 1), (4, 2), (2, 4), (1, 8)]
    """
    out = [(cores // t, t) for t in range(1, cores + 1) if cores % t == 0
           and (t in (1, cores) or t & (t - 1) == 0)]
    return sorted(set(out), key=lambda pt: pt[1])


def saved_measurement() -> dict[str, Any] | None:
    """Return the kept measurement if it is for this machine, else None."""
    try:
        data = json.loads(layout_file().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("machine") != machine():
        return None
    return data


def choose_layout(workers: int | None, threads_per_worker: int | None,
                  backend: str = "cpu", sampler: str = "cgs",
                  process_partition: bool = False) -> LayoutChoice | None:
    """Return the embedded cluster's layout for these settings (None: the GPU path decides).

    ``sampler`` is the run's (``auto`` resolved): a measurement is kept per sampler.
    ``process_partition``: the run's processes take turns on the vocabulary (they share
    one chain: no hint that threads would).

    Examples
    --------
    >>> choose_layout(3, None).label()
    '3 processes x 1 thread'
    """
    if workers is not None or threads_per_worker is not None:
        p = (int(workers) if workers else
             max(1, (os.cpu_count() or 1) // int(threads_per_worker or 1)))
        return LayoutChoice(p, int(threads_per_worker or 1), "named by the run" + (
            "; on one machine threads reach a model sooner than processes, which here take "
            "no turns on the vocabulary (cgs and lightlda under BSP do) and sweep against "
            "each other's counts of the clock before (docs/design.md)"
            if p > 1 and not process_partition else
            "; the processes take turns on the vocabulary" if p > 1 else ""))
    if backend != "cpu":
        return None
    data = saved_measurement()
    name = measured_as(sampler)
    got = _measured(data, name)
    if data is not None and got is not None:
        p, t, rates = got
        return LayoutChoice(p, t, f"fastest for {name} in `biglda layout --measure` "
                                  f"of {data.get('measured_at', '?')}: tokens/s {rates}")
    cores = os.cpu_count() or 1
    why = ("not measured on this machine" if data is None else
           f"{name} not measured on this machine")
    return LayoutChoice(1, cores, f"one process, a thread per core: {why}; "
                                  f"`biglda layout --measure` measures it")


def seconds_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """Seconds after the first iteration until the LL/token first reaches ``target``.

    ``curve`` is ``(elapsed s, LL/token)`` per iteration; time counts from the first
    iteration's end (its JIT and first full pull differ from run to run), linear between
    iterations; None if it never does.

    Examples
    --------
    >>> seconds_to([(5.0, -9.0), (6.0, -8.0), (7.0, -7.0)], -7.5)
    1.5
    >>> seconds_to([(5.0, -9.0)], -9.5), seconds_to([(5.0, -9.0), (6.0, -8.0)], -7.5)
    (0.0, None)
    """
    t0, ll0 = curve[0]
    if ll0 >= target:
        return 0.0
    for t, ll in curve[1:]:
        if ll >= target:
            return (t0 + (t - t0) * (target - ll0) / (ll - ll0)) - curve[0][0]
        t0, ll0 = t, ll
    return None


def pick(curves: Mapping[str, list[list[tuple[float, float]]]]) -> tuple[str, float,
                                                                          dict[str, float]]:
    """Return the layout that reaches a common LL/token first, that LL, and each one's seconds.

    ``curves``: layout -> its runs' ``(elapsed s, LL/token)`` per iteration. The common LL
    is the worst last LL/token of any run, so every run reaches it; a layout's time is the
    median over its runs (:func:`seconds_to`). Not tokens/s: processes sweep against each
    other's counts of the clock before (AD-LDA) and need more iterations for the same model,
    while the threads of a process share one chain.

    Examples
    --------
    >>> pick({"2x1": [[(1.0, -9.0), (1.5, -8.6), (2.0, -8.4)]],
    ...       "1x2": [[(1.0, -8.8), (1.7, -8.3), (2.4, -8.0)]]})
    ('1x2', -8.4, {'2x1': 1.0, '1x2': 0.56})
    """
    target = min(run[-1][1] for runs in curves.values() for run in runs)
    seconds = {}
    for name, runs in curves.items():
        got = [x for x in (seconds_to(run, target) for run in runs) if x is not None]
        seconds[name] = round(float(statistics.median(got)), 2) if got else math.inf
    # (a tie goes to more threads: one chain)
    return (min(seconds, key=lambda key: (seconds[key], -_threads_of(key))), target, seconds)


def _threads_of(name: str) -> int:
    """Return the threads of a layout's name: ``PxT`` with any suffix (``2x1:p``), else 1.

    >>> _threads_of("1x16"), _threads_of("2x2:p"), _threads_of("2p/4s")
    (16, 2, 1)
    """
    got = re.match(r"\d+x(\d+)", name)
    return int(got.group(1)) if got else 1


def _measured(data: dict[str, Any] | None, name: str) -> tuple[int, int, str] | None:
    """Return ``(processes, threads, rates in words)`` kept for sampler ``name``, or None.

    A file written before measurements were per sampler holds one, made with cgs. An entry
    of the wrong shape counts as not measured (the file is a cache, not a setting).
    """
    if data is None:
        return None
    got = data.get("samplers", {}) if "samplers" in data else {"cgs": data}
    entry = got.get(name) if isinstance(got, dict) else None
    if not isinstance(entry, dict):
        return None
    try:
        p, t = (int(x) for x in entry["best"])
        rates = ", ".join(f"{k} {float(v) / 1e6:.2f}M"
                          for k, v in entry["tokens_per_s"].items())
        if "seconds_to_ll" in entry:  # (a file of before 2026-11-27 has tokens/s alone)
            rates += f"; seconds to LL/token {float(entry['target_ll']):.3f}: " + ", ".join(
                f"{k} {float(v):.2f}" for k, v in entry["seconds_to_ll"].items())
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return (p, t, rates) if p >= 1 and t >= 1 else None


def measure_layouts(layouts: list[tuple[int, int]] | None = None, repeats: int = 1,
                    iterations: int = MEASURE_ITERATIONS, n_docs: int = MEASURE_DOCS,
                    save: bool = True, samplers: dict[str, int] | None = None
                    ) -> dict[str, Any]:
    """Train the same short run under each layout and sampler; keep the fastest per sampler.

    Each layout gets its own embedded cluster; the runs go round by round (``repeats``),
    so a change in the machine's load falls on all alike. The fastest is the one that
    reaches a common LL/token first (:func:`pick`). tokens/s, kept beside it, is of one run
    the median over its iterations after the first two (JIT, first full pull), of a layout
    the median over its runs. ``samplers``: name -> K (default :data:`MEASURE_SAMPLERS`).
    Returns what is saved to :func:`layout_file` (written atomically) when ``save``.
    """
    from biglda.corpus import write_corpus
    from biglda.corpus.synth import SynthSpec, generate
    from biglda.trainer.cluster import connect
    from biglda.trainer.config import TrainConfig, validate
    from biglda.trainer.run import run_training

    layouts = layouts or candidates(os.cpu_count() or 1)
    samplers = dict(samplers or MEASURE_SAMPLERS)
    tokens, doc_ptr, phi, _ = generate(SynthSpec(  # (100 true topics, whatever K is trained)
        n_docs=n_docs, n_words=MEASURE_WORDS, n_topics=100,
        mean_doc_length=100, alpha=0.1, beta=0.01, seed=0))
    rates: dict[str, dict[str, list[float]]] = {
        name: {f"{p}x{t}": [] for p, t in layouts} for name in samplers}
    curves: dict[str, dict[str, list[list[tuple[float, float]]]]] = {
        name: {f"{p}x{t}": [] for p, t in layouts} for name in samplers}
    with tempfile.TemporaryDirectory(prefix="biglda-layout-") as tmp:
        url = os.path.join(tmp, "corpus.zarr")
        write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(phi.shape[1])])
        for _ in range(repeats):
            for name, k in samplers.items():
                for p, t in layouts:
                    records: list[Mapping[str, Any]] = []
                    cfg = TrainConfig(n_topics=k, iterations=iterations, seed=0,
                                      sampler=name, checkpoint_every=0, top_words_every=0,
                                      workers=p, threads_per_worker=t).validated()
                    with connect(None, p, t) as client:
                        run_training(client, validate(url, None, cfg, False), cfg,
                                     out=os.path.join(tmp, f"{name}-{p}x{t}.zarr"),
                                     on_record=[records.append])
                    its = [r for r in records if r["type"] == "iteration"]
                    tps = [r["tokens_per_s"] for r in its]
                    rates[name][f"{p}x{t}"].append(float(statistics.median(tps[2:] or tps)))
                    curves[name][f"{p}x{t}"].append(
                        [(float(r["elapsed"]), float(r["ll_per_token"])) for r in its])
                    log.info("layout %dx%d, %s: %.2f M tokens/s, LL/token %.4f", p, t, name,
                             rates[name][f"{p}x{t}"][-1] / 1e6, its[-1]["ll_per_token"])
    by_sampler = {}
    for name, runs in rates.items():
        medians = {key: float(statistics.median(v)) for key, v in runs.items()}
        best, target, seconds = pick(curves[name])
        by_sampler[name] = {"topics": samplers[name], "tokens_per_s": medians, "runs": runs,
                            "target_ll": target, "seconds_to_ll": seconds,
                            "curves": curves[name], "best": [int(x) for x in best.split("x")]}
    result = {"machine": machine(), "measured_at": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                 time.gmtime()),
              "samplers": by_sampler,
              "corpus": {"docs": n_docs, "tokens": len(tokens), "words": MEASURE_WORDS},
              "iterations": iterations}
    if save:
        path = layout_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(result, indent=1).encode()

        def write(f: Any) -> None:
            f.write(text)

        write_atomic(str(path), write)
    return result
