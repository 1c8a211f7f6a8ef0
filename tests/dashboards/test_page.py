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


def test_run_selector_and_header_name_output_and_corpus():
    log = RunLog()
    _feed(log, fake_records("3f2a9c", 4))
    _feed(log, [{"type": "iteration", "run_id": "no-start", "iteration": 1}])
    page = LivePage(log)
    labels = dict(page.selector.options)
    assert labels["3f2a9c"].startswith("3f2a9c/model.zarr <- 3f2a9c/corpus.zarr | ok | ")
    assert labels["3f2a9c"].endswith(" | 3f2a9c")  # the id still tells two runs apart
    assert labels["no-start"].startswith("running | ")  # nothing known: no made-up paths
    page._on_select("value", "no-start", "3f2a9c")
    assert "/runs/3f2a9c/model.zarr" in page.status.text
    assert "/data/3f2a9c/corpus.zarr: 100 docs" in page.status.text


def test_top_words_table_has_a_row_per_topic_and_room_for_them():
    from dashboards.figures import TABLE_ROW, TABLE_ROWS_MAX

    log = RunLog()
    page = LivePage(log)
    for k in (8, 60):
        _feed(log, fake_records(f"k{k}", 5, n_topics=k))
        page.update()
        assert page.panels.top_words.data["topic"] == list(range(k))
        rows_shown = min(k, TABLE_ROWS_MAX)  # beyond that the table scrolls
        assert page.panels.table.height >= TABLE_ROW * (rows_shown + 1)
        assert f"all {k}" in page.panels.table_title.text
