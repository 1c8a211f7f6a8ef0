"""``pipelines/scale_out.py``'s report: each layout's time to the worst last LL/token of all
layouts against 1x1's, on hand-made curves (the ranking of ``biglda layout --measure``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def scale_out(pipeline_script):
    return pipeline_script("scale_out")


def _layout(tokens_per_s, elapsed, ll):
    return {"tokens_per_s": tokens_per_s, "pulled_per_token": 0.0, "pushed_per_token": 0.0,
            "kernel_cpu_us_per_token": 0.1, "other_cpu_us_per_token": 0.01,
            "ll_per_token": ll, "elapsed_s": elapsed}


def test_time_to_the_worst_last_ll_against_one_thread(scale_out):
    res = {"1x1": _layout(1e6, [1.0, 3.0, 5.0, 7.0], [-9.0, -8.5, -8.2, -8.0]),
           "1x2": _layout(2e6, [1.0, 2.0, 3.0, 4.0], [-9.0, -8.5, -8.2, -8.1]),
           # more tokens/s than 1x1, less gained a sweep
           "2x1": _layout(1.8e6, [1.0, 2.1, 3.2, 4.3], [-9.3, -8.9, -8.6, -8.4])}
    lines = scale_out.report(res)
    # the worst last LL is 2x1's -8.4: 1x1 reaches it 2 + 2 * (0.1 / 0.3) s after its first
    # iteration, 1x2 1 + 1 * (0.1 / 0.3) s, 2x1 at its last iteration, 3.3 s (seconds
    # rounded to 0.01 before the ratio: 2.67 / 1.33)
    assert "- 1x2: to LL/token -8.4000 in 1.3 s against 1x1's 2.7 s: 2.01x" in lines
    assert "- 2x1: to LL/token -8.4000 in 3.3 s against 1x1's 2.7 s: 0.81x" in lines
    # without the elapsed times (a file of before 2026-11-27) there are no such lines
    old = {k: {x: y for x, y in v.items() if x != "elapsed_s"} for k, v in res.items()}
    assert not [ln for ln in scale_out.report(old) if "to LL/token" in ln]


def test_layout_names_with_and_without_turns(scale_out):
    """``:p`` / ``:n``: the processes take turns on the vocabulary, or not (AD-LDA); a name
    with neither takes the default (auto); the threads of a name pick ties."""
    from biglda.trainer.layout import pick

    assert scale_out.settings_of("2x1:n") == {"workers": 2, "threads_per_worker": 1,
                                              "process_partition": "off"}
    assert scale_out.settings_of("4x2:s1:p") == {"workers": 4, "threads_per_worker": 2,
                                                 "staleness": 1.0, "process_partition": "on"}
    assert "process_partition" not in scale_out.settings_of("2x1")
    same = [[(1.0, -9.0), (2.0, -8.0)]]
    assert pick({"2x1:p": same, "1x2": same, "2p/4s": same})[0] == "1x2"



def test_the_ceiling_line_compares_the_same_rounds_as_the_ratio(scale_out):
    """The "CPU-bound ceiling ... measured" line takes the ratio of the medians over the
    rounds, as the ratio lines do, not one layout's median run against 1x1's (which may
    come from different rounds: Debian's 1x2 read 1.96x there and 1.68x on the line above)."""
    runs = {"1x1": [_layout(8.0e6, [1.0], [-8.0]), _layout(9.6e6, [1.0], [-8.0])],
            "1x2": [_layout(14.0e6, [1.0], [-8.0]), _layout(16.0e6, [1.0], [-8.0])]}
    res = {"1x1": runs["1x1"][0], "1x2": runs["1x2"][1]}  # each layout's upper run
    lines = scale_out.report(res, runs)
    # medians over the rounds 15.0 / 8.8 M = 1.70x; the ceiling 2 x 0.1 / 0.11 = 1.82x
    assert "- 1 process x 2 threads vs 1x1, tokens/s: 1.70x (rounds 1.67 – 1.75) " \
           "(target >= 1.8x)" in lines
    assert ("- 1x2: CPU-bound ceiling 1.82x 1x1 (2 cores at its kernel + other CPU a token "
            "against 1x1's kernel CPU); measured 1.70x, 94% of it") in lines


def test_layouts_against_the_machines_own_ceiling(scale_out):
    """``Px1:i`` (P one-thread runs at once, nothing exchanged) is the ceiling of the layouts
    on as many cores: each gets a line against it; it is no chain of its own, so it has no
    time-to-model line."""
    assert scale_out.layout_cores("2x1:i") == 2
    runs = {"1x1": [_layout(8.0e6, [1.0, 2.0], [-9.0, -8.0])],
            "2x1:i": [_layout(15.0e6, [1.0, 2.0], [-9.0, -8.0])],
            "2x1:p": [_layout(12.0e6, [1.0, 1.6], [-9.0, -8.0])],
            "1x2": [_layout(14.0e6, [1.0, 1.5], [-9.0, -8.0])],
            "4x1:p": [_layout(10.0e6, [1.0, 2.0], [-9.0, -8.0])]}
    lines = scale_out.report({k: v[0] for k, v in runs.items()}, runs)
    assert ("- 2x1:p vs 2x1:i (2 one-thread runs at once, nothing exchanged), tokens/s: 0.80x"
            in lines)
    assert "- 1x2 vs 2x1:i (2 one-thread runs at once, nothing exchanged), tokens/s: 0.93x" \
        in lines
    assert not [ln for ln in lines if ln.startswith(("- 4x1:p vs 2x1:i", "- 1x1 vs 2x1:i"))]
    assert not [ln for ln in lines if "to LL/token" in ln and "2x1:i" in ln]
    # the target's "2 processes" line takes a layout of 2 processes, not the ceiling, and
    # of them the one taking turns (a plain run's, where the sampler can)
    assert "- 2 processes vs 1, tokens/s: 1.50x (target >= 1.8x)" in lines
    runs["2x1:n"] = [_layout(13.0e6, [1.0, 1.6], [-9.0, -8.0])]
    runs = {k: runs[k] for k in ("1x1", "2x1:n", "2x1:p")}
    lines = scale_out.report({k: v[0] for k, v in runs.items()}, runs)
    assert "- 2 processes vs 1, tokens/s: 1.50x (target >= 1.8x)" in lines


def test_the_ceiling_is_refused_for_a_layout_of_several_threads(scale_out):
    """``:i`` runs one-thread runs at once: ``2x2:i`` is refused in one line, before any run."""
    with pytest.raises(SystemExit, match=r"2x2:i: ':i' is for P x 1 layouts only"):
        scale_out.measure("no-corpus.zarr", "no-out", "2x2:i", None, 1)
