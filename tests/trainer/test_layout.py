"""The embedded cluster's layout: named, measured on this machine and kept, or the default.

The measurement is real (a short training per layout, each on an embedded cluster of that
layout: here the session's, already started, as the start is not part of what is measured);
the oracle is that the kept pick is the one that reached a common log-likelihood first in
what it measured, and that a later ``train`` starts exactly that many processes of that
many threads.
"""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np
import pytest

from biglda.trainer import layout as lay


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BIGLDA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "layout.json"


def test_named_and_default_layouts(cache):
    cores = os.cpu_count() or 1
    three = lay.choose_layout(3, None)
    assert three[:2] == (3, 1) and three.reason.startswith("named by the run; on one machine "
                                                           "threads reach a model sooner")
    assert lay.choose_layout(1, 2) == (1, 2, "named by the run")
    assert lay.choose_layout(2, 1, process_partition=True).reason == (
        "named by the run; the processes take turns on the vocabulary")
    assert lay.choose_layout(None, 2)[:2] == (max(1, cores // 2), 2)
    default = lay.choose_layout(None, None)
    # one process of a thread per core: its threads share one chain, where processes lag
    # a clock behind each other (AD-LDA)
    assert default[:2] == (1, cores) and "not measured" in default.reason
    # the CLI prints the start record's entry back through LayoutChoice
    assert lay.LayoutChoice(**default.as_dict()).label() == (
        f"1 process x {cores} thread{'s' if cores > 1 else ''}")
    assert lay.choose_layout(None, None, backend="auto") is None  # the GPU path decides


def test_a_measurement_of_another_machine_is_not_used(cache):
    cache.parent.mkdir(parents=True)
    other = {**lay.machine(), "cores": (os.cpu_count() or 1) + 1}
    cache.write_text(json.dumps({"machine": other, "best": [1, 7], "tokens_per_s": {},
                                 "measured_at": "then"}))
    assert lay.choose_layout(None, None)[:2] == (1, os.cpu_count() or 1)
    cache.write_text("not json")
    assert lay.saved_measurement() is None


@pytest.mark.parametrize("entry", [{"best": "1x2"}, {"best": [1, 2]}, {"best": [0, 2],
                                   "tokens_per_s": {}}, "garbage", None])
def test_a_malformed_entry_counts_as_not_measured(cache, entry):
    # the file is a cache: an entry of the wrong shape gives the default, never a traceback
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"machine": lay.machine(), "measured_at": "then",
                                 "samplers": {"warplda": entry}}))
    choice = lay.choose_layout(None, None, sampler="warplda")
    assert choice[:2] == (1, os.cpu_count() or 1) and "warplda not measured" in choice.reason
    cache.write_text(json.dumps({"machine": lay.machine(), "samplers": ["not", "a", "dict"]}))
    assert "not measured" in lay.choose_layout(None, None, sampler="cgs").reason


def test_the_pick_is_the_first_to_the_worst_last_ll():
    # processes: more tokens/s, each iteration worth less; threads: slower, one chain
    curves = {"2x1": [[(2.0, -9.0), (2.5, -8.6), (3.0, -8.4), (3.5, -8.3)]],
              "1x2": [[(2.0, -8.8), (2.7, -8.3), (3.4, -8.0)],
                      [(2.0, -8.9), (2.6, -8.5), (3.2, -8.1)]]}
    best, target, seconds = lay.pick(curves)
    assert target == -8.3  # the worst last LL of any run
    # 2x1 reaches it at its last iteration, 1.5 s after its first; 1x2's two runs at 0.7 s
    # and 0.6 + 0.6 * (0.2 / 0.4) = 0.9 s: the median 0.8 s
    assert seconds == {"2x1": 1.5, "1x2": 0.8} and best == "1x2"
    # a curve that starts above the target reached it at once; one that never does is None
    assert lay.seconds_to([(1.0, -8.0), (2.0, -7.0)], -8.5) == 0.0
    assert lay.seconds_to([(1.0, -9.0), (2.0, -8.8)], -8.5) is None
    # a tie goes to more threads
    assert lay.pick({"2x1": [[(1.0, -9.0), (2.0, -8.0)]],
                     "1x2": [[(1.0, -9.0), (2.0, -8.0)]]})[0] == "1x2"


def test_candidates_span_processes_and_threads():
    assert lay.candidates(1) == [(1, 1)]
    assert lay.candidates(6) == [(6, 1), (3, 2), (1, 6)]
    assert all(p * t == 16 for p, t in lay.candidates(16))


def test_an_older_single_measurement_is_cgs(cache):
    # a file from before per-sampler measurements (one, made with cgs) serves cgs; lightlda
    # shares a sweep on a process's threads as warplda does, so it takes warplda's
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"machine": lay.machine(), "best": [1, 2], "measured_at": "then",
                                 "tokens_per_s": {"1x2": 2e6, "2x1": 1e6}}))
    assert lay.choose_layout(None, None, sampler="cgs")[:2] == (1, 2)
    for sampler in ("warplda", "lightlda"):
        got = lay.choose_layout(None, None, sampler=sampler)
        assert got[:2] == (1, os.cpu_count() or 1) and "warplda not measured" in got.reason


def test_measure_keeps_the_fastest_per_sampler_and_train_starts_it(cache, tmp_path, capsys,
                                                                   embedded_cluster,
                                                                   monkeypatch):
    from biglda.cli import main
    from biglda.corpus import write_corpus
    from biglda.corpus.synth import SynthSpec, generate
    from biglda.model.training import train
    from biglda.trainer import cluster

    layouts = [(2, 1), (1, 2)]
    started = []

    @contextlib.contextmanager
    def session_cluster(scheduler, workers, threads):
        started.append((scheduler, workers, threads))
        yield embedded_cluster(workers, threads)  # (4 fresh clusters cost ~10 s)

    with monkeypatch.context() as m:
        m.setattr(cluster, "connect", session_cluster)
        res = lay.measure_layouts(layouts, iterations=4, n_docs=1500,
                                  samplers={"cgs": 20, "warplda": 40})
    # each sampler in turn on each layout, on an embedded cluster of that layout
    assert started == [(None, 2, 1), (None, 1, 2)] * 2
    kept = json.loads(cache.read_text())
    assert kept == json.loads(json.dumps(res))  # kept, for this machine
    for sampler, got in res["samplers"].items():
        rates = got["tokens_per_s"]
        assert set(rates) == {"2x1", "1x2"} and all(r > 0 for r in rates.values())
        # the pick is the layout that reaches the worst last LL/token of all runs first,
        # counted from each run's first iteration (a slow reading of the kept curves)
        curves = kept["samplers"][sampler]["curves"]
        target = min(run[-1][1] for runs in curves.values() for run in runs)
        assert got["target_ll"] == pytest.approx(target)
        for name, runs in curves.items():
            assert len(runs) == 1 and len(runs[0]) == 4  # one run of 4 iterations
            t, ll = np.array(runs[0]).T
            i = int(np.argmax(ll >= target))
            want = 0.0 if i == 0 else float(np.interp(target, ll[i - 1:i + 1], t[i - 1:i + 1])
                                            - t[0])
            assert got["seconds_to_ll"][name] == pytest.approx(want, abs=0.006)
        best = min(got["seconds_to_ll"], key=lambda k: got["seconds_to_ll"][k])
        assert got["best"] == [int(x) for x in best.split("x")]
        choice = lay.choose_layout(None, None, sampler=sampler)
        assert list(choice[:2]) == got["best"] and f"fastest for {sampler}" in choice.reason
        assert f"seconds to LL/token {target:.3f}: 2x1 " in choice.reason
    assert main(["layout"]) == 0
    out = capsys.readouterr().out
    for sampler in lay.MEASURE_SAMPLERS:
        label = lay.choose_layout(None, None, sampler=sampler).label()
        assert f"layout with {sampler}: {label} (fastest" in out

    # a training with no layout named starts the one measured for its sampler (auto: cgs
    # on this small corpus)
    choice = lay.choose_layout(None, None, sampler="cgs")
    tokens, doc_ptr, phi, _ = generate(SynthSpec(n_docs=200, n_words=80, n_topics=4,
                                                 mean_doc_length=30, seed=1))
    url = str(tmp_path / "c.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(phi.shape[1])])
    records = []
    train(url, str(tmp_path / "m.zarr"), n_topics=4, iterations=2, checkpoint_every=0,
          on_record=records.append)
    start = next(r for r in records if r["type"] == "start")
    assert start["layout"] == choice.as_dict()
    assert len(start["backends"]) == choice.processes  # one worker per process
    it = next(r for r in records if r["type"] == "iteration")
    assert len(it["tokens_per_worker"]) == choice.processes
