"""``biglda report``: the HTML report of a model store, checked in a headless browser."""

from __future__ import annotations

import importlib.metadata
import math
import pathlib

import numpy as np
import pytest
from dash_helpers import JS_SOURCE_DATA, console_errors, fake_records, reset_page, wait_for

from biglda.cli import main
from biglda.model.store import save_model
from dashboards import report
from dashboards.report import top_word_ids, write_report

K, V, D = 6, 40, 30


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[str, np.ndarray, list[dict]]:
    """A small model store with a training history and an evaluation."""
    rng = np.random.default_rng(3)
    n_wk = rng.integers(0, 30, size=(V, K)).astype(np.int32)
    history = [r for r in fake_records("rep", 12, n_topics=K) if r["type"] == "iteration"]
    url = str(tmp_path_factory.mktemp("report") / "model.zarr")
    save_model(url, n_wk=n_wk, n_dk=rng.integers(0, 4, size=(D, K)),
               vocab=np.array([f"word{v:02d}" for v in range(V)]),
               doc_ids=np.array([f"doc{d}" for d in range(D)]), alpha=0.1, beta=0.01,
               attrs={"history": history, "sampler": "lightlda",
                      "config": {"n_topics": K, "iterations": 12, "sampler": "lightlda"},
                      "evaluation": {"perplexity": 812.25,
                                     "coherence": {"npmi": [0.1 * k for k in range(K)]}}})
    return url, n_wk, history


def _oracle_top(n_wk: np.ndarray, n: int) -> np.ndarray:
    """Slow and obvious: per topic, sort (-count, id) pairs."""
    return np.array([[w for _, w in sorted((-int(n_wk[w, k]), w) for w in range(len(n_wk)))[:n]]
                     for k in range(n_wk.shape[1])])


def test_top_word_ids_match_oracle_across_row_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    n_wk = rng.integers(0, 5, size=(53, 4)).astype(np.int32)  # many ties
    monkeypatch.setattr(report, "_ROW_BLOCK", 7)
    np.testing.assert_array_equal(top_word_ids(n_wk, 9), _oracle_top(n_wk, 9))
    np.testing.assert_array_equal(top_word_ids(n_wk, 100), _oracle_top(n_wk, 53))


def test_report_holds_top_words_history_and_evaluation(model, tmp_path):
    url, n_wk, history = model
    out = write_report(url, str(tmp_path / "r.html"), top_n=5)
    text = pathlib.Path(out).read_text(encoding="utf-8")
    for row in _oracle_top(n_wk, 5):
        assert " ".join(f"word{v:02d}" for v in row) in text
    assert "812.25" in text and "coherence.npmi per topic" in text
    assert "cdn.bokeh.org" not in text  # inline resources: opens offline
    # every history record is in the plotted source (ll values to full precision)
    assert all(repr(r["ll_per_token"])[:12] in text for r in history)


def _report_entry_point(monkeypatch) -> None:
    """Point the CLI at dashboards.report even where the package was installed before the
    ``biglda.reports`` entry point existed (the installed one is checked separately)."""
    ep = importlib.metadata.EntryPoint("html", "dashboards.report:write_report",
                                       "biglda.reports")
    real = importlib.metadata.entry_points

    def fake(**kw):
        if kw.get("group") == "biglda.reports":
            return importlib.metadata.EntryPoints([ep])
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)


def test_cli_report_writes_file_and_reports_errors(model, tmp_path, monkeypatch, capsys):
    _report_entry_point(monkeypatch)
    url, _, _ = model
    out = tmp_path / "cli.html"
    assert main(["report", url, "-o", str(out)]) == 0
    assert out.stat().st_size > 100_000  # BokehJS inlined
    assert f"report written to {out}" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nope.zarr"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("biglda: error:") and "no such model" in err[0]
    assert main(["report", url, "-o", str(tmp_path / "missing" / "r.html")]) == 2


def test_report_entry_point_is_installed():
    eps = importlib.metadata.entry_points(group="biglda.reports", name="html")
    assert eps, ('pyproject.toml needs [project.entry-points."biglda.reports"] '
                 'html = "dashboards.report:write_report" (then pip install -e .)')
    assert next(iter(eps)).load() is write_report


@pytest.mark.browser
def test_report_renders_without_console_errors(model, tmp_path, browser, artifacts_dir):
    url, _, history = model
    out = write_report(url, str(tmp_path / "r.html"))
    reset_page(browser)  # leave earlier pages and drop what they logged
    browser.get(f"file://{out}")
    data = wait_for(lambda: browser.execute_script(JS_SOURCE_DATA, "biglda-history"), 20,
                    "the report's plots to render")
    assert data["iteration"] == [r["iteration"] for r in history]
    assert all(math.isclose(a, r["ll_per_token"]) for a, r in zip(
        data["ll_per_token"], history, strict=True))
    assert browser.execute_script("return document.title").startswith("biglda report")
    shot = artifacts_dir / "report.png"
    browser.save_screenshot(str(shot))
    print(f"report screenshot: {shot}")
    assert console_errors(browser) == []
