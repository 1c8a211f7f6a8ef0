"""Repeated measurements in the benchmark pipelines (``pipelines/repeats.py``, used by the
``scaling`` script stage and the ``compare`` stage): the median and spread of the repeats,
and tiny real runs with ``repeats = 3`` whose tables print the median of what they recorded.

Oracles: hand-computed medians and ranges; in the real runs, the recorded repeats themselves
(the printed median must be theirs), and invariants of a seeded run (under BSP the chain,
hence the final log-likelihood, is the same in every repeat; only the time differs).
"""

from __future__ import annotations

import json
import os
import statistics
import textwrap
from types import SimpleNamespace

import pytest

from biglda import pipeline as pl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def scripts(pipeline_script):
    """The scripts of ``pipelines/`` as modules (they import each other by file name)."""
    return SimpleNamespace(**{n: pipeline_script(n) for n in ("compare", "repeats", "scaling")})


# --------------------------------------------------------------------------- aggregation


def test_spread_is_median_min_max_of_the_repeats(scripts):
    sp = scripts.repeats.spread
    s = sp([5, 1, 3])
    assert (s["median"], s["min"], s["max"], s["n"]) == (3.0, 1.0, 5.0, 3)
    assert s["values"] == [5.0, 1.0, 3.0]  # in the order they ran
    assert sp([1, 2, 3, 10])["median"] == 2.5  # even count: mean of the middle two
    assert sp([7])["median"] == sp([7])["min"] == sp([7])["max"] == 7.0
    with pytest.raises(ValueError):
        sp([])


def test_spreads_skip_missing_and_non_numbers(scripts):
    runs = [{"a": 1.0, "b": None}, {"a": 4.0, "b": 2.0}, {"a": 2.0, "c": "x"}]
    s = scripts.repeats.spreads(runs, ["a", "b", "c", "d"])
    assert set(s) == {"a", "b"}
    assert s["a"]["median"] == 2.0 and s["b"]["values"] == [2.0]


@pytest.mark.parametrize(("values", "index"), [
    ([-7.2, -7.0, -7.1], 2),      # odd: the run holding the median value
    ([4.0, 1.0, 3.0, 2.0], 3),    # even: the lower middle run (2.0)
    ([1.0, 1.0, 1.0], 1),         # ties: ordered by run number
    ([9.0], 0),
])
def test_median_index(scripts, values, index):
    assert scripts.repeats.median_index(values) == index


def test_fmt_shows_the_spread_only_for_several_runs(scripts):
    r = scripts.repeats
    assert r.fmt(r.spread([1200, 1000, 1100]), ",.0f") == "1,100 (1,000 – 1,200)"
    assert r.fmt(r.spread([-7.1, -7.3, -7.2]), ".2f") == "-7.20 (-7.30 – -7.10)"
    assert r.fmt(r.spread([5.0]), ".1f") == "5.0"
    assert r.fmt(None, ".1f") == "-"
    assert r.ratio(r.spread([2, 4, 6]), r.spread([1, 2, 9])) == 2.0  # medians 4 / 2


def _run(ll: float, maxrss: float, sweeps: int, status: str = "ok") -> dict:
    return {"system": "lda", "k": 10, "status": status, "maxrss_mib": maxrss,
            "tree_rss_mib": 2 * maxrss, "wall_s": 1.0,
            "checkpoints": [{"train_s": 5.0, "sweeps": 1, "units": 1,
                             "heldout_ll_per_token": ll - 1},
                            {"train_s": 10.0, "sweeps": sweeps, "units": sweeps,
                             "heldout_ll_per_token": ll, "npmi": 0.1 * sweeps}]}


def test_compare_aggregate_takes_the_median_run_and_every_metric_median(scripts):
    c = scripts.compare
    runs = [_run(-7.0, 300, 20), _run(-7.4, 100, 30), _run(-7.2, 200, 25)]
    row = c.aggregate(runs)
    assert row["median_run"] == 2 and row["checkpoints"] is runs[2]["checkpoints"]
    assert row["repeats"] == runs and row["status"] == "ok"
    sp = row["spread"]
    assert (sp["heldout_ll_per_token"]["min"], sp["heldout_ll_per_token"]["max"]) == (-7.4, -7.0)
    assert sp["sweeps"]["median"] == 25 and sp["npmi"]["median"] == pytest.approx(2.5)
    assert row["maxrss_mib"] == 200 and sp["tree_rss_mib"]["max"] == 600
    assert "tokens_per_s" not in sp  # no run has it
    line = next(ln for ln in c.markdown([row], _meta(3)).splitlines() if "| lda |" in ln)
    assert "| -7.2000 (-7.4000 – -7.0000) |" in line and "| 25 (20 – 30) sweeps |" in line
    assert "| 200 (100 – 300) / 400 (200 – 600) |" in line
    # One run is returned as it is, and printed without a spread.
    one = _run(-7.0, 300, 20)
    assert c.aggregate([one]) is one
    assert "| -7.0000 |" in c.markdown([one], _meta(1))


def test_compare_aggregate_names_the_runs_that_were_not_ok(scripts):
    c = scripts.compare
    failed = {"system": "lda", "k": 10, "status": "failed (boom)", "maxrss_mib": 50.0,
              "tree_rss_mib": 60.0, "wall_s": 1.0, "checkpoints": []}
    row = c.aggregate([_run(-7.0, 300, 20), failed, _run(-7.2, 200, 25)])
    assert row["status"] == "ok in 2 of 3 runs; run 2: failed (boom)"
    assert row["spread"]["heldout_ll_per_token"]["n"] == 2  # the scored runs only
    assert row["spread"]["maxrss_mib"]["n"] == 3           # memory of every run
    over = [_run(-7.0, 1, 1, "over budget (first unit took 91 s)"),
            _run(-7.1, 1, 1, "over budget (first unit took 95 s)"),
            _run(-7.2, 1, 1, "over budget (first unit took 93 s)")]
    assert c.aggregate(over)["status"] == "over budget (first unit took 95 s) (all 3 runs)"


def _meta(repeats: int) -> dict:
    return {"train_docs": 1, "train_tokens": 1, "test_docs": 1, "test_tokens": 1,
            "n_words": 1, "alpha": 0.1, "beta": 0.01, "budgets": [5.0, 10.0], "workers": 2,
            "machine": "m", "date": "d", "repeats": repeats}


def test_scaling_refuses_zero_repeats(scripts, tmp_path, capsys):
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"corpus": "none", "repeats": 0}))
    assert scripts.scaling.main(["--params", str(params), "--out", str(tmp_path)]) == 2
    assert "repeats must be a whole number >= 1" in capsys.readouterr().err


# --------------------------------------------------------------------------- real runs


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _pipeline(tmp_path, stage: str) -> pl.Pipeline:
    path = tmp_path / "p.toml"
    path.write_text(textwrap.dedent(f"""
        [pipeline]
        root = "{ROOT}"
        run_dir = "{tmp_path / 'run'}"

        [stages.synth]
        n_docs = 120
        n_words = 40
        n_topics = 3
        mean_doc_length = 12
        seed = 1
    """) + textwrap.dedent(stage))
    return pl.load_pipeline(str(path))


def test_scaling_workers_ratios_are_ratios_of_medians(scripts, monkeypatch):
    """The workers section with a stand-in for the training run (known tokens/s per call):
    round-by-round order, medians, the speed-up of the medians and its per-round range."""
    sc = scripts.scaling
    rates = {1: [100.0, 130.0, 110.0], 2: [150.0, 300.0, 200.0]}
    calls: list[int] = []

    def measure(p, out, sampler, n_topics, workers):
        calls.append(workers)
        rate = rates[workers][calls.count(workers) - 1]
        return {"tokens_per_s": rate, "ps_overhead": 0.1 * workers, "kernel_cpu_s": 1.0,
                "final_ll_per_token": -5.0, "wall_s": 2.0}

    monkeypatch.setattr(sc, "measure_training", measure)
    p = {**sc.DEFAULTS, "workers": [1, 2], "repeats": 3}
    rows = sc.section_workers(p, "unused")
    assert calls == [1, 2, 1, 2, 1, 2]  # round by round
    one, two = rows
    assert one["tokens_per_s"] == 110.0 and two["tokens_per_s"] == 200.0
    assert [m["tokens_per_s"] for m in two["repeats"]] == rates[2]
    assert two["speedup"] == pytest.approx(200 / 110) and one["speedup"] == 1.0
    assert two["speedup_per_round"] == pytest.approx([1.5, 300 / 130, 200 / 110])
    md = sc.markdown({"date": "d", "machine": "m", "corpus": "c", "load_start": 1.0,
                      "params": p, "workers": rows})
    assert "| 2 | 1000 | 200 (150 – 300) | 1.82x (1.50 – 2.31) | 20.0% (20.0% – 20.0%) |" in md
    assert "| 1 | 1000 | 110 (100 – 130) | 1.00x (1.00 – 1.00) | 10.0% (10.0% – 10.0%) |" in md


SCALING_STAGE = """
    [stages.scaling]
    kind = "script"
    script = "pipelines/scaling.py"
    corpus = "@synth"
    outputs = ["scaling.json", "scaling.md"]
    iterations = 3
    repeats = 3
"""


def _check_scaling_rows(rows: list[dict], md: str, fmt, label) -> None:
    for r in rows:
        tps = [m["tokens_per_s"] for m in r["repeats"]]
        assert len(tps) == 3 and len(set(tps)) > 1  # three real runs, not one copied
        assert r["tokens_per_s"] == statistics.median(tps)
        assert r["spread"]["tokens_per_s"]["values"] == tps
        # Same seed under BSP: the same chain in every repeat; only the clock differs (and
        # the order in which the shards' log-likelihood terms are summed: last digit).
        lls = [m["final_ll_per_token"] for m in r["repeats"]]
        assert max(lls) == pytest.approx(min(lls), rel=1e-12, abs=0)
        cell = fmt(r["spread"]["tokens_per_s"], ",.0f")
        assert f"({min(tps):,.0f} – {max(tps):,.0f})" in cell
        assert f"{label(r)} {cell} |" in md


def test_scaling_topics_with_three_repeats(tmp_path, scripts):
    """A real scaling stage: one configuration trained 3 times; every repeat is recorded and
    the table prints their median and range."""
    p = _pipeline(tmp_path, SCALING_STAGE + """
    sections = ["topics"]
    samplers = ["cgs"]
    topics = [4]
    workers_k = 1
    """)
    assert [r.status for r in pl.run_pipeline(p)] == ["ran", "ran"]
    out = os.path.join(p.run_dir, "scaling")
    res = json.loads(_read(os.path.join(out, "scaling.json")))
    md = _read(os.path.join(out, "scaling.md"))
    (row,) = res["topics"]
    assert row["vs_first_k"] == 1.0
    _check_scaling_rows(res["topics"], md, scripts.repeats.fmt,
                        lambda r: f"| {r['sampler']} | {r['k']} | {r['workers']} |")
    assert "median of 3 runs per row" in md


@pytest.mark.slow
def test_scaling_workers_with_three_repeats(tmp_path, scripts):
    """6 real trainings (1 and 2 workers, 3 rounds): the speed-up is the ratio of the
    recorded medians."""
    p = _pipeline(tmp_path, SCALING_STAGE + """
    sections = ["workers"]
    workers = [1, 2]
    workers_topics = 4
    """)
    assert [r.status for r in pl.run_pipeline(p)] == ["ran", "ran"]
    out = os.path.join(p.run_dir, "scaling")
    res = json.loads(_read(os.path.join(out, "scaling.json")))
    md = _read(os.path.join(out, "scaling.md"))
    _check_scaling_rows(res["workers"], md, scripts.repeats.fmt,
                        lambda r: f"| {r['workers']} | 4 |")
    rows = {r["workers"]: r for r in res["workers"]}
    speedup = rows[2]["tokens_per_s"] / rows[1]["tokens_per_s"]
    assert rows[2]["speedup"] == pytest.approx(speedup)
    per_round = [a["tokens_per_s"] / b["tokens_per_s"]
                 for a, b in zip(rows[2]["repeats"], rows[1]["repeats"], strict=True)]
    assert rows[2]["speedup_per_round"] == pytest.approx(per_round)
    assert f"| {speedup:.2f}x ({min(per_round):.2f} – {max(per_round):.2f}) |" in md


def test_compare_with_three_repeats(tmp_path, scripts):
    """Random topics, 3 runs in their own processes: 3 folders, 3 recorded rows, the table
    prints the medians of what they recorded."""
    p = _pipeline(tmp_path, f"""
        [stages.split]
        test_fraction = 0.25

        [stages.compare]
        topics = [3]
        budgets = [0.1, 0.2]
        systems = ["random"]
        setup = false
        peers_dir = "{tmp_path / 'no-peers'}"
        burn_in = 2
        samples = 2
        repeats = 3
    """)
    assert [r.status for r in pl.run_pipeline(p)] == ["ran"] * 3
    res = json.loads(_read(p.artifact("compare", "results")))
    md = _read(p.artifact("compare", "table"))
    assert res["meta"]["repeats"] == 3
    (row,) = res["results"]
    assert len(row["repeats"]) == 3 and row["status"] == "ok"
    folder = os.path.join(p.run_dir, "compare", "k3", "random")
    for i in range(3):
        assert os.path.exists(os.path.join(folder, f"repeat-{i}", "checkpoints.json"))
    rss = [r["maxrss_mib"] for r in row["repeats"]]
    tree = [r["tree_rss_mib"] for r in row["repeats"]]
    assert row["maxrss_mib"] == statistics.median(rss) and all(v > 0 for v in rss)
    fmt = scripts.repeats.fmt
    mem = (f"{fmt(scripts.repeats.spread(rss), '.0f')} / "
           f"{fmt(scripts.repeats.spread(tree), '.0f')}")
    assert f"| {mem} | ok |" in md
    # Seeded random topics: every run scores the same; the median is that score.
    lls = [r["checkpoints"][-1]["heldout_ll_per_token"] for r in row["repeats"]]
    assert max(lls) == min(lls) == row["spread"]["heldout_ll_per_token"]["median"]
    assert f"| {lls[0]:.4f} ({lls[0]:.4f} – {lls[0]:.4f}) |" in md
    assert "the median of 3 runs" in md and "median run of 3" in md
