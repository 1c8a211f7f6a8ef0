"""RunLog / column builders: pure Python, the numbers every panel is drawn from."""

from __future__ import annotations

import math

from dash_helpers import fake_records

from dashboards.panels import PANELS, history_fields
from dashboards.records import (
    RunLog,
    format_bytes,
    format_seconds,
    history_columns,
    latest_columns,
    per_worker_columns,
    top_words_columns,
)


def test_runlog_keeps_every_record_per_run_and_follows_newest():
    log = RunLog()
    for r in fake_records("a", 7) + fake_records("b", 3):
        assert log.add(r)
    assert list(log.runs) == ["a", "b"]
    assert log.current().run_id == "b"
    a = log.get("a")
    assert [r["iteration"] for r in a.records] == list(range(1, 8))
    assert a.status == "ok" and a.config["iterations"] == 7
    # top words come every 5th record: the latest list and its iteration are kept
    assert a.top_words_iteration == 5 and len(a.top_words) == 4


def test_runlog_ignores_foreign_events_and_bounds_runs():
    log = RunLog(max_runs=2)
    assert not log.add("not a record")
    assert not log.add({"type": "something else", "run_id": "x"})
    v = log.version
    for rid in "abc":
        log.add(fake_records(rid, 1)[0])
    assert list(log.runs) == ["b", "c"] and log.version == v + 3


def test_iteration_without_start_creates_running_run():
    log = RunLog()
    log.add(fake_records("late", 3)[2])
    run = log.current()
    assert run.run_id == "late" and run.status == "running" and len(run.records) == 1


def test_history_columns_align_and_turn_none_into_nan():
    recs = [r for r in fake_records("a", 6, sampler="cgs") if r["type"] == "iteration"]
    fields = history_fields(PANELS)
    cols = history_columns(recs, fields)
    assert set(cols) == set(fields) and {"iteration", "elapsed", "accept_rate"} <= set(fields)
    assert all(len(v) == 6 for v in cols.values())
    assert cols["iteration"] == [1, 2, 3, 4, 5, 6]
    assert cols["ll_per_token"] == [r["ll_per_token"] for r in recs]
    assert all(math.isnan(x) for x in cols["accept_rate"])


def test_per_worker_and_clock_columns():
    recs = [r for r in fake_records("a", 4, workers=3) if r["type"] == "iteration"]
    cols = per_worker_columns(recs, "tokens_per_s_per_worker")
    assert cols["worker"] == ["127.0.0.1:40000", "127.0.0.1:40001", "127.0.0.1:40002"]
    assert cols["xs"][0] == [1, 2, 3, 4] and cols["ys"][1] == [1e4 + i for i in range(1, 5)]
    clocks = latest_columns(recs[-1], "clocks")
    assert clocks["worker"] == cols["worker"]
    assert clocks["value"] == [recs[-1]["clocks"][f"tcp://{w}"] for w in cols["worker"]]
    assert max(clocks["value"]) - min(clocks["value"]) <= 1
    assert latest_columns(None, "clocks") == {"worker": [], "value": []}


def test_top_words_columns_and_formatting():
    cols = top_words_columns([["a", "b", "c"], ["d"]], n_words=2, sizes=[0.75, 0.25])
    assert cols == {"topic": [0, 1], "words": ["a b", "d"], "share": ["75.0%", "25.0%"]}
    assert top_words_columns(None) == {"topic": [], "words": [], "share": []}
    assert format_seconds(3725.2) == "1h 02m 05s" and format_seconds(None) == "-"
    assert format_seconds(59.6) == "1m 00s" and format_seconds(4) == "4s"
    assert format_bytes(512) == "512 B" and format_bytes(3 * 1024**2) == "3.0 MiB"
