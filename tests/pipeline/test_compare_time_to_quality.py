"""``pipelines/time_to_quality.py``: the time a run first reaches the target (linear between
checkpoints), the median over repeats and the ratio to the reference, on hand-made curves."""

from __future__ import annotations

import math

import pytest


@pytest.fixture(scope="module")
def ttq(pipeline_script):
    return pipeline_script("time_to_quality")


def _run(*points):
    return {"checkpoints": [{"train_s": t, "heldout_ll_per_token": ll} for t, ll in points]}


def test_time_to_reach_interpolates_between_checkpoints(ttq):
    run = _run((10, -8.0), (20, -7.0), (30, -6.5))["checkpoints"]
    assert ttq.time_to_reach(run, -7.5) == pytest.approx(15.0)
    assert ttq.time_to_reach(run, -8.5) == 10.0          # already there at the first one
    assert ttq.time_to_reach(run, -6.5) == 30.0
    assert math.isinf(ttq.time_to_reach(run, -6.0))      # never reached


def test_summary_takes_medians_and_the_ratio_to_the_reference(ttq):
    ref = [_run((10, -7.5), (20, -7.0)), _run((10, -7.4), (20, -6.9)),
           _run((10, -7.6), (20, -7.1))]
    fast = [_run((5, -7.2), (10, -6.8)), _run((5, -7.1), (10, -6.7)),
            _run((5, -8.0), (10, -7.5))]
    results = [{"k": 100, "system": "tomotopy-2", **ref[0], "repeats": ref},
               {"k": 100, "system": "biglda", **fast[0], "repeats": fast,
                "sampler_choice": {"sampler": "cgs"}}]
    by = {s["system"]: s for s in ttq.summarize(results, "tomotopy-2")}
    assert by["tomotopy-2"]["target"] == -7.0             # median of -7.0, -6.9, -7.1
    assert by["tomotopy-2"]["time"] == 20.0               # the end of its budget, by definition
    # 5 + 5 * 0.2 / 0.4 = 7.5, 5 + 5 * 0.1 / 0.4 = 6.25, never -> median 7.5
    assert by["biglda"]["times"] == pytest.approx([7.5, 6.25, math.inf])
    assert by["biglda"]["time"] == pytest.approx(7.5)
    assert by["biglda"]["ratio"] == pytest.approx(7.5 / 20.0)
    assert by["biglda"]["sampler"] == "cgs" and by["biglda"]["final"] == -6.8
    md = ttq.markdown(list(by.values()), {
        "train_tokens": 1, "test_tokens": 1, "n_words": 1, "alpha": 0.1, "beta": 0.01,
        "workers": 2, "budgets": [10, 20], "repeats": 3, "machine": "m", "date": "d",
        "reference": "tomotopy-2"})
    assert "| 100 | biglda (cgs) | -7.0000 | 7.5 (6.2 - not reached) | 0.38 |" in md


def test_the_reference_reaches_its_median_final_at_the_end_of_its_budget(ttq):
    """Two runs: the median final lies between them, so one run never "reaches" it; the
    reference's time is still its budget's end (the ratio must not become nan or 0)."""
    ref = [_run((10, -7.5), (60, -7.0)), _run((10, -7.4), (62, -6.9))]
    fast = [_run((10, -7.0), (60, -6.8)), _run((10, -6.9), (60, -6.7))]
    results = [{"k": 100, "system": "tomotopy-2", **ref[0], "repeats": ref},
               {"k": 100, "system": "biglda", **fast[0], "repeats": fast}]
    by = {s["system"]: s for s in ttq.summarize(results, "tomotopy-2")}
    assert by["tomotopy-2"]["time"] == 61.0 and by["tomotopy-2"]["ratio"] == 1.0
    # -6.95: 10 + 50 * 0.05 / 0.2 = 22.5 and 10 (already there) -> 16.25
    assert by["biglda"]["time"] == pytest.approx(16.25)
    assert by["biglda"]["ratio"] == pytest.approx(16.25 / 61.0)
