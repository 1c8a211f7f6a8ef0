"""Helpers of the dashboard tests (a module, not conftest, so tests can import them)."""

from __future__ import annotations

import math
import time

import pytest


def fake_records(run_id: str, n: int, *, n_topics: int = 4, workers: int = 2,
                 top_words_every: int = 5, sampler: str = "lightlda") -> list[dict]:
    """A start record, ``n`` iteration records and an end record, shaped like the trainer's."""
    ws = [f"tcp://127.0.0.1:{40000 + i}" for i in range(workers)]
    recs: list[dict] = [{
        "type": "start", "run_id": run_id, "n_tokens": 10_000, "n_docs": 100, "n_words": 500,
        "config": {"n_topics": n_topics, "iterations": n, "sampler": sampler},
        "dashboard": "", "corpus": f"/data/{run_id}/corpus.zarr",
        "out": f"/runs/{run_id}/model.zarr",
    }]
    for i in range(1, n + 1):
        recs.append({
            "type": "iteration", "run_id": run_id, "iteration": i, "n_iterations": n,
            "elapsed": 0.5 * i, "ll_per_token": -9.0 + 2.0 * (1.0 - math.exp(-i / 5.0)),
            "tokens_per_s": 2e4 + i, "tokens_per_s_per_worker": {w: 1e4 + i for w in ws},
            "clocks": {w: i - (j % 2) * (i % 2) for j, w in enumerate(ws)},
            "clock_spread": i % 2, "bytes_pushed": 1000 * i, "bytes_pulled": 2000 * i,
            "accept_rate": None if sampler == "cgs" else 0.6, "eta_s": 0.5 * (n - i),
            "ps_overhead": 0.1,
            "top_words": ([[f"t{k}w{j}" for j in range(10)] for k in range(n_topics)]
                          if i % top_words_every == 0 else None),
        })
    recs.append({"type": "end", "run_id": run_id, "elapsed": 0.5 * n, "status": "ok"})
    return recs


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    """Poll ``predicate()`` until it returns something truthy; fail saying ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def console_errors(driver, origin: str | None = None) -> list[dict]:
    """The SEVERE entries of the browser console since the last call.

    With ``origin`` (``"http://host:port"``), only entries about that server count: the
    browser is shared by the session, and a page of an earlier test whose cluster is gone
    may still log failed reconnects to its own (closed) port.
    """
    entries = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    if origin is not None:
        entries = [e for e in entries if "127.0.0.1:" not in e.get("message", "")
                   or origin in e.get("message", "")]
    return entries


def reset_page(driver) -> None:
    """Leave the current page (stopping its websocket) and drop the console log so far."""
    driver.get("about:blank")
    driver.get_log("browser")


#: JavaScript returning the columns of a named ColumnDataSource of the page's Bokeh
#: document (or null before the document is there). BokehJS 3 keeps ``data`` as a Map.
JS_SOURCE_DATA = """
const name = arguments[0];
if (!window.Bokeh || !Bokeh.documents || Bokeh.documents.length == 0) return null;
const src = Bokeh.documents[0].get_model_by_name(name);
if (src == null) return null;
const data = src.data instanceof Map ? Object.fromEntries(src.data) : src.data;
const out = {};
for (const [k, v] of Object.entries(data)) out[k] = Array.from(v);
return out;
"""


#: JavaScript collecting, through Bokeh's shadow DOMs, the elements matching a selector.
_JS_DEEP = """
function deep(root, sel, out) {
  root.querySelectorAll(sel).forEach(e => out.push(e));
  root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) deep(e.shadowRoot, sel, out); });
  return out;
}
"""

#: JavaScript returning the text of every element matching ``arguments[0]`` (all options of
#: a ``select``, say), as the browser renders it, joined by newlines.
JS_DEEP_TEXT = _JS_DEEP + """
return deep(document, arguments[0], []).map(e => e.innerText || e.textContent).join('\\n');
"""

#: JavaScript returning the rendered rows of the top-words DataTable (``"topic words"`` each)
#: and its viewport's height and scroll height; ``arguments[0]`` scrolls it to the end first.
JS_TABLE_ROWS = _JS_DEEP + """
const vp = deep(document, '.slick-viewport', [])[0];
if (!vp) return null;
if (arguments[0]) { vp.scrollTop = vp.scrollHeight; vp.dispatchEvent(new Event('scroll')); }
const rows = deep(document, '.slick-row', []).map(
  r => Array.from(r.querySelectorAll('.slick-cell')).map(c => c.innerText).join(' '));
return {rows: rows, height: vp.clientHeight, scroll_height: vp.scrollHeight};
"""

#: JavaScript returning the titles of the plots in the page's grid, in grid order.
JS_PLOT_TITLES = """
const root = Bokeh.documents[0].get_model_by_name('biglda-root');
if (root == null) return null;
const grid = root.children[1];
return grid.children.map(c => (Array.isArray(c) ? c[0] : c).title.text);
"""
