"""The Bokeh panels of a training run, shared by the live ``/biglda`` page and the report.

:class:`RunPanels` owns the data sources and the figures drawn from them; the live page
streams new records into the sources, the static report fills them once. Sources carry
Bokeh ``name``\\ s (``biglda-history``, ``biglda-top-words``, ...) so a browser test can
read them back with ``Bokeh.documents[0].get_model_by_name(name)``.
"""

from __future__ import annotations

import html
from typing import Any

from bokeh.layouts import gridplot
from bokeh.models import (
    ColumnDataSource,
    DataTable,
    Div,
    FactorRange,
    HoverTool,
    NumeralTickFormatter,
    Range1d,
    TableColumn,
)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from dashboards.records import (
    RunSeries,
    clock_columns,
    format_bytes,
    format_seconds,
    history_columns,
    per_worker_columns,
    top_words_columns,
)

PANEL_HEIGHT = 240
PANEL_WIDTH = 430
#: Words per topic shown in the table.
TABLE_WORDS = 12

_BLUE, _ORANGE, _GREEN = Category10_10[0], Category10_10[1], Category10_10[2]


def panel_figure(title: str, x_label: str, y_label: str, **kw: Any):
    """A figure with the page's size, tools and label style."""
    kw.setdefault("height", PANEL_HEIGHT)
    kw.setdefault("width", PANEL_WIDTH)
    fig = figure(title=title, tools="pan,wheel_zoom,box_zoom,reset,save",
                 toolbar_location="above", **kw)
    fig.xaxis.axis_label = x_label
    fig.yaxis.axis_label = y_label
    fig.title.text_font_size = "11pt"
    fig.axis.axis_label_text_font_style = "normal"
    fig.min_border_left = 60
    return fig


def _line(fig, source, x: str, y: str, color: str, label: str | None = None, fmt: str = "0.000"):
    kw = {"legend_label": label} if label else {}
    fig.line(x, y, source=source, color=color, line_width=2, **kw)
    fig.scatter(x, y, source=source, color=color, size=3, **kw)
    fig.add_tools(HoverTool(tooltips=[("iteration", "@iteration"), (label or y, f"@{y}{{{fmt}}}")],
                            mode="vline", renderers=fig.renderers[-1:]))


def _quiet_legend(fig) -> None:
    """A small see-through legend (lines stay visible under it); click hides a line."""
    legend = fig.legend[0]
    legend.location = "top_right"
    legend.click_policy = "hide"
    legend.label_text_font_size = "8pt"
    legend.background_fill_alpha = 0.5
    legend.border_line_alpha = 0.0
    legend.padding = 2
    legend.spacing = 0
    legend.glyph_height = 10
    legend.label_height = 10


def _worker_colors(n: int) -> list[str]:
    return [Category10_10[i % len(Category10_10)] for i in range(n)]


class RunPanels:
    """Sources + figures for one run. ``set_run`` redraws, ``append`` streams new records."""

    def __init__(self) -> None:
        self.history = ColumnDataSource(history_columns([]), name="biglda-history")
        self.per_worker = ColumnDataSource({"xs": [], "ys": [], "worker": [], "color": []},
                                           name="biglda-per-worker")
        self.clocks = ColumnDataSource({**clock_columns(None), "color": []}, name="biglda-clocks")
        self.top_words = ColumnDataSource(top_words_columns(None), name="biglda-top-words")
        self._n_records = 0
        self._top_words_iteration: int | None = None
        self.figures = self._build_figures()
        self.table = DataTable(
            source=self.top_words, name="biglda-top-words-table",
            columns=[TableColumn(field="topic", title="topic", width=50),
                     TableColumn(field="words", title="top words", width=900)],
            index_position=None, reorderable=False, height=320, sizing_mode="stretch_width",
        )
        self.table_title = Div(text="<b>Top words per topic</b>", name="biglda-top-words-title")

    # ----------------------------------------------------------------- figures
    def _build_figures(self) -> list:
        h = self.history
        ll = panel_figure("Log-likelihood per token", "iteration", "LL / token")
        # Every per-iteration panel shares one x range: zooming one zooms all, and a
        # panel without data (acceptance under CGS) still gets a sensible axis.
        x_it = ll.x_range
        _line(ll, h, "iteration", "ll_per_token", _BLUE)

        ll_t = panel_figure("Log-likelihood per token over time", "elapsed (s)", "LL / token")
        _line(ll_t, h, "elapsed", "ll_per_token", _BLUE)

        tps = panel_figure("Throughput, all workers", "iteration", "tokens / s", x_range=x_it)
        _line(tps, h, "iteration", "tokens_per_s", _GREEN, fmt="0,0")
        tps.yaxis.formatter = NumeralTickFormatter(format="0.[000]a")

        tpw = panel_figure("Throughput per worker", "iteration", "tokens / s", x_range=x_it)
        tpw.multi_line("xs", "ys", source=self.per_worker, color="color", line_width=2,
                       legend_field="worker")
        tpw.yaxis.formatter = NumeralTickFormatter(format="0.[000]a")
        _quiet_legend(tpw)

        clk = panel_figure("Each worker's clock (now)", "worker", "clock",
                      x_range=FactorRange(factors=[]))
        clk.vbar(x="worker", top="clock", source=self.clocks, width=0.7, color="color")
        clk.xaxis.major_label_orientation = 0.5
        clk.y_range.start = 0
        clk.add_tools(HoverTool(tooltips=[("worker", "@worker"), ("clock", "@clock")]))
        self._clock_fig = clk

        spread = panel_figure("Clock spread (max - min clock)", "iteration", "clocks", x_range=x_it)
        _line(spread, h, "iteration", "clock_spread", _ORANGE, fmt="0")
        spread.y_range.start = 0

        ps = panel_figure("Parameter-server traffic per clock", "iteration", "bytes", x_range=x_it)
        _line(ps, h, "iteration", "bytes_pushed", _BLUE, "pushed", fmt="0.0 b")
        _line(ps, h, "iteration", "bytes_pulled", _ORANGE, "pulled", fmt="0.0 b")
        ps.yaxis.formatter = NumeralTickFormatter(format="0.0 b")
        _quiet_legend(ps)

        acc = panel_figure("Metropolis-Hastings acceptance rate", "iteration", "accepted / proposed", x_range=x_it)
        _line(acc, h, "iteration", "accept_rate", _GREEN)
        acc.y_range = Range1d(0, 1)
        self._accept_fig = acc

        ovh = panel_figure("Parameter-server overhead", "iteration", "share of iteration time", x_range=x_it)
        _line(ovh, h, "iteration", "ps_overhead", _ORANGE)
        ovh.yaxis.formatter = NumeralTickFormatter(format="0%")
        ovh.y_range.start = 0
        return [ll, ll_t, tps, tpw, clk, spread, ps, acc, ovh]

    def grid(self, *, drop_empty_acceptance: bool = False):
        """The panels in a grid; ``drop_empty_acceptance`` leaves out the MH acceptance
        panel when it has no data (a finished exact-Gibbs run: nothing to show, ever)."""
        figures = self.figures
        if drop_empty_acceptance and not any(
                v is not None and v == v for v in self.history.data.get("accept_rate", [])):
            figures = [f for f in figures if f is not self._accept_fig]
        return gridplot(figures, ncols=3, toolbar_location="right", merge_tools=True)

    # ----------------------------------------------------------------- data
    def set_run(self, run: RunSeries | None, sizes: list[float] | None = None) -> None:
        """Redraw everything from ``run`` (a run switch, or the static report)."""
        records = run.records if run else []
        self.history.data = history_columns(records)
        self._n_records = len(records)
        self._refresh_workers(records)
        self._top_words_iteration = None
        self._refresh_top_words(run, sizes)
        self._refresh_titles(run)

    def append(self, run: RunSeries) -> None:
        """Stream the records of ``run`` that arrived since the last call."""
        records = run.records
        if len(records) < self._n_records:  # cannot happen for one run; be safe
            self.set_run(run)
            return
        if len(records) > self._n_records:
            self.history.stream(history_columns(records[self._n_records:]))
            self._n_records = len(records)
            self._refresh_workers(records)
            self._refresh_titles(run)
        if run.top_words_iteration != self._top_words_iteration:
            self._refresh_top_words(run)

    def _refresh_workers(self, records: list[dict[str, Any]]) -> None:
        cols = per_worker_columns(records)
        # one colour per worker across panels: its place among all workers of the run
        palette = dict(zip(cols["worker"], _worker_colors(len(cols["worker"])), strict=True))
        cols["color"] = [palette[w] for w in cols["worker"]]
        self.per_worker.data = cols
        clocks = clock_columns(records[-1] if records else None)
        clocks["color"] = [palette.get(w, "#7f7f7f") for w in clocks["worker"]]
        if list(self._clock_fig.x_range.factors) != clocks["worker"]:
            self._clock_fig.x_range.factors = clocks["worker"]
        self.clocks.data = clocks

    def _refresh_top_words(self, run: RunSeries | None, sizes: list[float] | None = None) -> None:
        top = run.top_words if run else None
        self._top_words_iteration = run.top_words_iteration if run else None
        self.top_words.data = top_words_columns(top, TABLE_WORDS, sizes)
        where = (f" (iteration {self._top_words_iteration})"
                 if self._top_words_iteration is not None else "")
        self.table_title.text = (f"<b>Top words per topic{where}</b>" if top else
                                 "<b>Top words per topic</b> <i>(none yet: the trainer sends "
                                 "them every few clocks)</i>")

    def _refresh_titles(self, run: RunSeries | None) -> None:
        config = run.config if run else {}
        sampler = str(config.get("sampler", config.get("algorithm", ""))).lower()
        has_accept = bool(run and any(r.get("accept_rate") is not None for r in run.records))
        self._accept_fig.title.text = (
            "Metropolis-Hastings acceptance rate (n/a: exact Gibbs)"
            if sampler == "cgs" and not has_accept else "Metropolis-Hastings acceptance rate")


# --------------------------------------------------------------------------- HTML helpers


def config_table_html(config: dict[str, Any], title: str = "Configuration") -> str:
    """A small two-column HTML table of a (possibly nested) settings dict."""
    rows = "".join(
        f"<tr><td style='padding:1px 10px 1px 0;color:#555'>{html.escape(str(k))}</td>"
        f"<td style='font-family:monospace'>{html.escape(_short(v))}</td></tr>"
        for k, v in _flatten(config))
    if not rows:
        rows = "<tr><td><i>not known yet</i></td></tr>"
    return f"<b>{html.escape(title)}</b><table style='font-size:10pt'>{rows}</table>"


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.extend(_flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _short(v: Any, limit: int = 80) -> str:
    s = str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def status_html(run: RunSeries | None) -> str:
    """The page's header line; ``data-*`` attributes let tests read the numbers back."""
    if run is None:
        return ("<div id='biglda-status' data-iterations='0'><b>No biglda run yet.</b> "
                "Start one with <code>biglda train ...</code> against this scheduler; "
                "this page follows it live.</div>")
    last = run.last or {}
    n_it = last.get("n_iterations") or run.config.get("iterations") or "?"
    it = last.get("iteration", "-")
    start = run.start or {}
    status = run.status
    color = {"running": "#1f77b4", "finished": "#2ca02c", "ok": "#2ca02c"}.get(status, "#d62728")
    elapsed = (run.end or {}).get("elapsed", last.get("elapsed"))
    eta = last.get("eta_s") if status == "running" else None

    def num(key: str, fmt: str) -> str:
        v = last.get(key)
        return format(v, fmt) if isinstance(v, int | float) else "-"

    facts = [
        ("iteration", f"{it} / {n_it}"),
        ("elapsed", format_seconds(elapsed)),
        ("ETA", format_seconds(eta) if status == "running" else "-"),
        ("LL / token", num("ll_per_token", ".4f")),
        ("tokens / s", num("tokens_per_s", ",.0f")),
        ("workers", str(len(last.get("clocks") or {}) or "-")),
        ("PS pushed / pulled", f"{format_bytes(last.get('bytes_pushed'))} / "
                               f"{format_bytes(last.get('bytes_pulled'))}"),
        ("corpus", f"{start.get('n_docs', '?')} docs, {start.get('n_tokens', '?')} tokens, "
                   f"{start.get('n_words', '?')} words"),
    ]
    cells = "".join(
        f"<span style='margin-right:18px'><span style='color:#666'>{html.escape(k)}</span> "
        f"<b>{html.escape(str(v))}</b></span>" for k, v in facts)
    return (f"<div id='biglda-status' data-run-id='{html.escape(run.run_id)}' "
            f"data-iterations='{len(run.records)}' data-status='{html.escape(status)}' "
            f"style='font-size:11pt'>"
            f"<span style='font-size:13pt'>run <b>{html.escape(run.run_id)}</b></span> "
            f"<span style='background:{color};color:white;border-radius:3px;padding:1px 6px;"
            f"margin:0 14px 0 6px'>{html.escape(status)}</span>{cells}</div>")
