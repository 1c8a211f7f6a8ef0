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
    assert main(["report", str(tmp_path / "nope.zarr"), "-o", str(tmp_path / "n.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("biglda: error:") and "no such model" in err[0]
    nested = tmp_path / "missing" / "deeper" / "r.html"
    assert main(["report", url, "-o", str(nested)]) == 0 and nested.exists()  # folders made
    capsys.readouterr()


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("biglda: error:"), err
    return err[0]


def test_cli_report_refuses_existing_out_and_unwritable_paths(model, tmp_path, monkeypatch,
                                                              capsys):
    _report_entry_point(monkeypatch)
    url, _, _ = model
    out = tmp_path / "r.html"
    out.write_text("keep me")
    assert main(["report", url, "-o", str(out)]) == 2
    assert "already exists (use --overwrite" in _one_error_line(capsys)
    assert out.read_text() == "keep me"
    assert main(["report", url, "-o", str(out), "--overwrite"]) == 0
    assert out.stat().st_size > 100_000
    capsys.readouterr()
    # a folder that cannot be made (a file is in the way): refused before any work
    assert main(["report", url, "-o", str(out / "sub" / "r.html")]) == 2
    assert "cannot write" in _one_error_line(capsys)


def test_report_write_failure_leaves_nothing(model, tmp_path, monkeypatch, capsys):
    import errno
    import os

    _report_entry_point(monkeypatch)
    url, _, _ = model

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(report.os, "replace", full)
    out = tmp_path / "full" / "r.html"
    assert main(["report", url, "-o", str(out)]) == 2
    assert "No space left on device" in _one_error_line(capsys)
    assert list((tmp_path / "full").iterdir()) == []  # no report, no temporary file


def test_report_topics_npmi_evaluation_history_and_cgs_panels(tmp_path):
    rng = np.random.default_rng(5)
    history = [{**r, "accept_rate": None}
               for r in fake_records("cgs", 5, n_topics=K) if r["type"] == "iteration"]
    url = str(tmp_path / "cgs.zarr")
    save_model(url, n_wk=rng.integers(0, 30, size=(V, K)).astype(np.int32),
               n_dk=rng.integers(0, 4, size=(D, K)), vocab=np.array([f"w{v}" for v in range(V)]),
               doc_ids=np.arange(D), alpha=0.1, beta=0.01,
               attrs={"history": history, "sampler": "cgs",
                      "config": {"n_topics": K, "sampler": "cgs"}})
    text = pathlib.Path(write_report(url, str(tmp_path / "a.html"))).read_text()
    assert "Metropolis-Hastings acceptance" not in text  # no empty panel for exact Gibbs
    assert f"biglda evaluate {url} --test TEST.zarr --save" in text  # the full command
    import biglda

    m = biglda.load(url)
    npmi = [0.5, None, -0.25, 0.125, 0.0, 0.75]
    m.record_evaluation({"test_corpus": "/data/a.zarr", "perplexity": 99.5, "npmi": 0.2})
    m.record_evaluation({"test_corpus": "/data/b.zarr", "perplexity": 88.25,
                         "npmi_per_topic": npmi})
    text = pathlib.Path(write_report(url, str(tmp_path / "b.html"))).read_text()
    assert "<th>NPMI</th>" in text and "<td class='num'>-0.250</td>" in text
    assert "/data/a.zarr" in text and "/data/b.zarr" in text and "99.5" in text  # history
    assert "No evaluation yet" not in text


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
