"""The panel table: every panel reads fields the trainer's iteration record declares, and a
panel added to the table is drawn by both the live page and the report."""

from __future__ import annotations

import pathlib
import typing

import numpy as np
import pytest
from bokeh.models import Plot
from dash_helpers import fake_records

from biglda.model.store import save_model
from biglda.trainer.metrics import IterationRecord
from dashboards import panels, report
from dashboards.panels import PANELS, Panel
from dashboards.plugin import LivePage
from dashboards.records import RunLog

#: A panel that is not in the table: one line more, over a field the record already has.
NEW = Panel("SSP wait per clock", "iteration", ("wait_s",), "0.00", "seconds", y_start=0)


def _record_types() -> dict[str, typing.Any]:
    return typing.get_type_hints(IterationRecord)


@pytest.mark.parametrize("panel", [*PANELS, NEW], ids=lambda p: p.title)
def test_panel_fields_are_iteration_record_fields(panel):
    types = _record_types()
    missing = set(panel.fields) - set(types)
    assert not missing, f"{panel.title!r} reads {missing}, not in IterationRecord"
    for name in panel.y:
        tp = types[name]
        if panel.kind == "line":  # a number (or None: a gap in the line)
            assert set(typing.get_args(tp) or (tp,)) <= {int, float, type(None)}, (name, tp)
        else:  # {worker: number}
            assert typing.get_origin(tp) is dict and typing.get_args(tp)[0] is str, (name, tp)


def test_titles_are_unique_and_history_covers_line_fields():
    assert len({p.title for p in PANELS}) == len(PANELS)
    fields = panels.history_fields(PANELS)
    assert all(set(p.fields) <= set(fields) for p in PANELS if p.kind == "line")


def _plots(models) -> dict[str, Plot]:
    """Every figure among ``models`` and what they reference, by title."""
    found: dict[str, Plot] = {}
    for m in models:
        for ref in m.references():
            if isinstance(ref, Plot):
                found[ref.title.text] = ref
    return found


def _line_data(plot: Plot, field: str) -> list:
    (renderer,) = [r for r in plot.renderers if getattr(r.glyph, "y", None) == field
                   and type(r.glyph).__name__ == "Line"]
    return list(renderer.data_source.data[field])


def _records_with_wait(run_id: str, n: int) -> list[dict]:
    recs = fake_records(run_id, n)
    for r in recs:
        if r["type"] == "iteration":
            r["wait_s"] = 0.25 * r["iteration"]
    return recs


def test_a_new_panel_is_drawn_by_the_live_page_and_the_report(monkeypatch, tmp_path):
    monkeypatch.setattr(panels, "PANELS", [*PANELS, NEW])
    recs = _records_with_wait("new-panel", 6)
    waits = [r["wait_s"] for r in recs if r["type"] == "iteration"]

    log = RunLog()
    for r in recs:
        log.add(r)
    page = LivePage(log)
    live = _plots([page.root])
    assert set(live) == {p.title for p in panels.PANELS}
    assert _line_data(live[NEW.title], "wait_s") == waits
    assert live[NEW.title].yaxis[0].axis_label == "seconds"

    # The report of a model whose history has the field: the same panel, the same numbers.
    roots: list = []
    real_file_html = report.file_html

    def capture(models, *args, **kwargs):
        roots.extend(models)
        return real_file_html(models, *args, **kwargs)

    monkeypatch.setattr(report, "file_html", capture)
    url = str(tmp_path / "model.zarr")
    rng = np.random.default_rng(0)
    save_model(url, n_wk=rng.integers(0, 9, size=(20, 4)).astype(np.int32),
               n_dk=rng.integers(0, 3, size=(5, 4)), vocab=np.array([f"w{i}" for i in range(20)]),
               doc_ids=np.arange(5), alpha=0.1, beta=0.01,
               attrs={"history": [r for r in recs if r["type"] == "iteration"],
                      "sampler": "lightlda", "config": {"sampler": "lightlda"}})
    text = pathlib.Path(report.write_report(url, str(tmp_path / "r.html"))).read_text()
    rep = _plots(roots)
    assert {p.title for p in panels.PANELS} <= set(rep)
    assert _line_data(rep[NEW.title], "wait_s") == waits
    assert NEW.title in text


def test_when_hides_a_panel_the_run_cannot_fill():
    mh = next(p for p in PANELS if p.title.startswith("Metropolis-Hastings"))
    log = RunLog()
    for r in fake_records("gibbs", 3, sampler="cgs"):
        log.add(r)
    page = LivePage(log)
    fig = page.panels.figures[PANELS.index(mh)]
    assert fig.visible is False  # exact Gibbs: nothing to show, ever
    assert mh.title not in _plots([page.root.children[1]])  # and no hole in the grid
    for r in fake_records("mh", 3, sampler="lightlda")[:1]:  # a start record only
        log.add(r)
    page.update()
    assert page.run_id == "mh" and fig.visible is True  # MH: its rates are coming
    assert all(f.visible for f in _plots([page.root]).values())
    assert set(_plots([page.root.children[1]])) == {p.title for p in PANELS}
