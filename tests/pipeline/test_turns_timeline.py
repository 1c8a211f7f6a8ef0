"""``pipelines/turns_timeline.py``: the replay of logged step times under the two rules for a
clock's first steps, and the report's shares, on hand-made logs."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def timeline(pipeline_script):
    return pipeline_script("turns_timeline")


def test_replay_of_a_slow_last_step_in_each_process(timeline):
    """W = 4 windows, m = 2 a process. P0's last step of clock 0 and P1's of clock 1 take 2 s,
    every other step 1 s. Worked by hand: with the totals at step 0, P1's clock 1 starts only
    when P0's slow step ends (5 s), and ends at 10 s; with them at step 1, P1's first step of
    clock 1 needs only P0's step 2 (over at 3 s), and both end at 9 s."""
    p0 = [1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    p1 = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0]
    assert timeline.replay([p0, p1], 4, 2, 0, 0.0, 0.0, 0.0) == 10.0
    assert timeline.replay([p0, p1], 4, 2, 1, 0.0, 0.0, 0.0) == 9.0
    # one slow process: it sets the pace under either rule
    slow = [1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    assert timeline.replay([[1.0] * 8, slow], 4, 2, 0, 0.0, 0.0, 0.0) == 9.0
    assert timeline.replay([[1.0] * 8, slow], 4, 2, 1, 0.0, 0.0, 0.0) == 9.0
    # a clock's own tail and a step's gap add to each process's line
    assert timeline.replay([[1.0] * 8] * 2, 4, 2, 0, 0.5, 0.1, 0.0) == pytest.approx(
        8.0 + 0.5 + 6 * 0.1)


def test_report_of_hand_made_logs(timeline):
    """Two processes, 3 clocks of 2 steps (m = 1), every step 1 s; before a clock's first
    step a gap of 0.5 s, before the other 0.1 s. After clock 1 the sweeps are 4 of the
    processes' 5.2 s (76.9%), the first steps' gaps 1.0 s (19.2%), the others' 0.2 s; a
    clock's records end with its last step, so its first-step gap is all the tick's."""
    def log(offset):
        recs, t = [], offset
        for c in range(3):
            t += 0.5 if c else 0.0
            recs.append({"tag": "clock", "t0": t, "t1": t + 2.1})
            for s in range(2):
                t += 0.1 if s else 0.0
                recs.append({"tag": "sweep", "t0": t, "t1": t + 1.0})
                t += 1.0
            recs.append({"tag": "push", "t0": t, "t1": t + 0.02})
        return recs

    lines = timeline.summary([log(0.0), log(0.01)], 1, 1)
    assert lines[0] == "2 processes, 3 clocks, 2 steps a clock"
    assert lines[3].startswith("  1: 0.500+1.000 0.100+1.000 | 0.500+1.000 0.100+1.000")
    assert ("after clock 1: the sweeps 76.9% of the processes' time; the gaps at a clock's "
            "first step 19.2% (median 0.500 s), at the others 3.8% (median 0.100 s)") in lines
    assert "the push: median 0.020 s" in lines[-3]
    # the first steps' gaps are the tick's: each clock ends with its last step, and its first
    # step starts with it
    assert lines[-2] == ("a clock's first-step gap, medians: after the last step (LL, push, "
                         "stats) 0.000 s, the tick 0.500 s, the next clock to its first step "
                         "(folds, totals) 0.000 s")
    with pytest.raises(SystemExit, match="fewer than two"):
        timeline.summary([log(0.0)], 1, 1)
