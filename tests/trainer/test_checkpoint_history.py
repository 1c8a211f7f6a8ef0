"""The history committed with a checkpoint is exactly the records of iterations 1..clock.

Deterministic, no cluster: the commit rule of the driver (:func:`_commit_checkpoint`) and of
the store (:func:`biglda.trainer.checkpoint.commit`) against shard reports and histories that
disagree with the clock being committed — the disagreement that once left a checkpoint of
clock 4 holding the records of iterations 1 and 2 only (a resume then gave a model history
[1, 2, 5, 6, 7]).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import zarr

from biglda.trainer import checkpoint as ckpt


def _recs(*its):
    return [{"type": "iteration", "iteration": i, "top_words": None} for i in its]


def _stats(*reports):
    return {i: {"shard": i, "checkpoint": list(r) if r else None} for i, r in enumerate(reports)}


@pytest.fixture
def store(tmp_path):
    url = str(tmp_path / "m.checkpoint.zarr")
    ckpt.create_checkpoint(url, [(0, 5), (5, 10)], 4, 10, np.dtype("uint16"), {})
    return url


def _attrs(url):
    return dict(zarr.open_group(url, mode="r").attrs)


def test_commit_stores_exactly_the_records_up_to_the_clock(store):
    assert ckpt.commit_after_clock(store, _stats((2, 0), (2, 0)), 1, _recs(1), _recs(2)[0], 2) == 2
    a = _attrs(store)
    assert (a["clock"], a["slot"]) == (2, 0)
    assert [r["iteration"] for r in a["history"]] == [1, 2]
    assert all("top_words" not in r for r in a["history"])
    assert ckpt.commit_after_clock(store, _stats((4, 1), (4, 1)), 3, _recs(1, 2, 3), _recs(4)[0],
                              2) == 4
    a = _attrs(store)
    assert (a["clock"], a["slot"]) == (4, 1)
    assert [r["iteration"] for r in a["history"]] == [1, 2, 3, 4]


@pytest.mark.parametrize("case", ["later-clock-report", "history-gap", "shard-missing",
                                  "shards-disagree"])
def test_commit_refused_when_clock_and_history_disagree(store, case, caplog):
    assert ckpt.commit_after_clock(store, _stats((2, 0), (2, 0)), 1, _recs(1), _recs(2)[0], 2) == 2
    before = _attrs(store)
    if case == "later-clock-report":  # the stats of clock 1 report a checkpoint of clock 4
        args = (_stats((4, 1), (4, 1)), 1, _recs(1), _recs(2)[0])
    elif case == "history-gap":       # records 3 missing when clock 4 is committed
        args = (_stats((4, 1), (4, 1)), 3, _recs(1, 2), _recs(4)[0])
    elif case == "shard-missing":     # one of the two shards did not report
        args = (_stats((4, 1)), 3, _recs(1, 2, 3), _recs(4)[0])
    else:
        args = (_stats((4, 1), (4, 0)), 3, _recs(1, 2, 3), _recs(4)[0])
    with caplog.at_level(logging.WARNING, logger="biglda.train"):
        assert ckpt.commit_after_clock(store, *args, 2) is None
    after = _attrs(store)
    # the previous checkpoint stays committed; the reports of the clock are decided, so a
    # worker waiting to write its next checkpoint goes on (into the slot not committed)
    assert after.pop("decided") == args[1] + 1 and before.pop("decided") == 2
    assert after == before
    if case != "shards-disagree":
        assert "not committed" in caplog.text


def test_store_refuses_an_incomplete_history(store):
    with pytest.raises(ValueError, match="refusing to commit checkpoint clock 4"):
        ckpt.commit(store, 4, 1, _recs(1, 2))
    with pytest.raises(ValueError):
        ckpt.commit(store, 4, 1, _recs(1, 2, 3, 4, 5))  # a record past the clock
    with pytest.raises(ValueError):
        ckpt.commit(store, 2, 1, _recs(2, 1))           # out of order
    assert _attrs(store)["clock"] == -1
    ckpt.commit(store, 4, 1, _recs(1, 2, 3, 4))
    assert (_attrs(store)["clock"], _attrs(store)["slot"]) == (4, 1)
    # iterations already missing from a resumed checkpoint (logged when read) may stay missing
    ckpt.commit(store, 6, 0, _recs(1, 2, 5, 6), allow_missing={3, 4})
    assert [r["iteration"] for r in _attrs(store)["history"]] == [1, 2, 5, 6]


def test_known_missing_lets_a_resumed_run_commit_its_own_records(store):
    assert ckpt.commit_after_clock(store, _stats((6, 0), (6, 0)), 5, _recs(1, 2, 5), _recs(6)[0], 2,
                              frozenset({3, 4})) == 6
    # ...but not a new gap
    assert ckpt.commit_after_clock(store, _stats((8, 1), (8, 1)), 7, _recs(1, 2, 5, 6), _recs(8)[0],
                              2, frozenset({3, 4})) is None
    assert _attrs(store)["clock"] == 6


def test_resumed_history_is_truncated_to_the_clock_and_a_gap_is_logged(caplog):
    assert [r["iteration"] for r in ckpt.checked_history(_recs(1, 2, 3, 4, 5), 3, "x")] == [1, 2, 3]
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="biglda.train"):
        kept = ckpt.checked_history(_recs(1, 2), 4, "the checkpoint c")
    assert [r["iteration"] for r in kept] == [1, 2]
    assert "no record of iteration(s) [3, 4]" in caplog.text


def test_every_state_a_commit_writes_is_the_old_checkpoint_or_the_new(store, monkeypatch):
    """A process killed at any point of a commit leaves the previous checkpoint or this one.

    Every write of the group's ``zarr.json`` during a commit is a state a SIGKILL can leave
    on disk; each is recorded (through the real local store) and must be the old or the new
    ``(clock, slot, history)``. zarr's ``attrs.update`` wrote the three keys one at a time,
    and a killed run resumed from clock 10 in the old slot with the records of 1..8
    (tests/reliability/test_interrupt.py, about one SIGKILL in six).
    """
    import json

    from zarr.storage import LocalStore

    ckpt.commit(store, 2, 0, _recs(1, 2))
    written = []
    real_set = LocalStore.set

    async def recording_set(self, key, value):
        if key == "zarr.json":
            a = json.loads(value.to_bytes())["attributes"]
            written.append((a["clock"], a["slot"], [r["iteration"] for r in a["history"]]))
        return await real_set(self, key, value)

    monkeypatch.setattr(LocalStore, "set", recording_set)
    ckpt.commit(store, 4, 1, _recs(1, 2, 3, 4))
    assert written, "the commit wrote nothing through the store"
    old, new = (2, 0, [1, 2]), (4, 1, [1, 2, 3, 4])
    assert all(w in (old, new) for w in written), written
    assert written[-1] == new


def test_a_worker_waits_for_the_decision_on_its_previous_checkpoint(store):
    # nothing decided yet: a worker whose last write was clock 2 waits, then gives up
    assert ckpt.wait_decided(store, 2, timeout=0.05) is None
    assert ckpt.commit_after_clock(store, _stats((2, 0), (2, 0)), 1, _recs(1), _recs(2)[0], 2) == 2
    got = ckpt.wait_decided(store, 2, timeout=0.05)
    assert got is not None and (got["clock"], got["slot"], got["decided"]) == (2, 0, 2)
    # the checkpoint of clock 4 not committed (a shard did not report) but decided: the next
    # write goes to the slot not committed, 1, never into clock 2's slot 0
    assert ckpt.commit_after_clock(store, _stats((4, 1)), 3, _recs(1, 2, 3), _recs(4)[0],
                                   2) is None
    got = ckpt.wait_decided(store, 4, timeout=0.05)
    assert got is not None and (got["clock"], got["slot"], got["decided"]) == (2, 0, 4)
    assert ckpt.wait_decided(store, 6, timeout=0.05) is None


def test_a_given_up_attempt_stops_waiting_to_write(store):
    import time

    asked = []

    def alive():
        asked.append(1)
        return len(asked) < 2  # the driver gives the attempt up after the first check

    t0 = time.monotonic()
    assert ckpt.wait_decided(store, 2, timeout=30.0, alive=alive, alive_every=0.05) is None
    assert len(asked) == 2 and time.monotonic() - t0 < 5.0
