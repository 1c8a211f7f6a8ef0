"""The live page's logic without a server: streaming, following the newest run, selector."""

from __future__ import annotations

from dash_helpers import fake_records

from dashboards.plugin import LivePage
from dashboards.records import RunLog


def _feed(log: RunLog, records: list[dict]) -> None:
    for r in records:
        log.add(r)


def test_page_streams_records_and_follows_new_runs():
    log = RunLog()
    page = LivePage(log)  # no run yet: empty panels, a hint in the header
    assert page.panels.history.data["iteration"] == []
    assert "data-iterations='0'" in page.status.text

    recs = fake_records("first", 8)
    _feed(log, recs[:4])  # start + 3 iterations
    page.update()
    assert page.run_id == "first"
    assert page.panels.history.data["iteration"] == [1, 2, 3]
    _feed(log, recs[4:])
    page.update()
    assert page.panels.history.data["iteration"] == list(range(1, 9))
    assert page.panels.top_words.data["words"][0].startswith("t0w0 t0w1")
    assert "data-iterations='8'" in page.status.text and "data-status='ok'" in page.status.text

    # A second job on the same cluster: the page switches to it, the first stays listed.
    _feed(log, fake_records("second", 2)[:2])
    page.update()
    assert page.run_id == "second" and page.panels.history.data["iteration"] == [1]
    assert [v for v, _ in page.selector.options] == ["second", "first"]


def test_choosing_an_earlier_run_stops_following():
    log = RunLog()
    _feed(log, fake_records("first", 5))
    _feed(log, fake_records("second", 3)[:3])
    page = LivePage(log)
    assert page.run_id == "second"
    page._on_select("value", "second", "first")
    assert page.run_id == "first" and not page.follow_latest
    assert page.panels.history.data["iteration"] == [1, 2, 3, 4, 5]
    _feed(log, fake_records("third", 2)[:2])
    page.update()  # a new run does not steal the view from a user looking at an old one
    assert page.run_id == "first"
    assert [v for v, _ in page.selector.options] == ["third", "second", "first"]
    page._on_select("value", "first", "third")
    assert page.follow_latest and page.run_id == "third"
