r"""The Bokeh panels of a training run, shared by the live ``/biglda`` page and the report.

:class:`RunPanels` draws the panel table (:data:`dashboards.panels.PANELS`): it owns the
data sources and one figure per :class:`~dashboards.panels.Panel`; the live page streams
new records into the sources, the static report fills them once. Sources carry Bokeh
``name``\ s (``biglda-history``, ``biglda-top-words``, ``biglda-<field>`` for a per-worker
panel) so a browser test can read them back with
``Bokeh.documents[0].get_model_by_name(name)``; each figure is named
``biglda-panel-<index>``.
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
    Title,
)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from dashboards import panels as panel_table
from dashboards.panels import Panel, history_fields
from dashboards.records import (
    RunSeries,
    format_bytes,
    format_seconds,
    history_columns,
    latest_columns,
    per_worker_columns,
    short_worker,
    top_words_columns,
    worker_names,
)

PANEL_HEIGHT = 240
PANEL_WIDTH = 430
#: Words per topic shown in the table.
TABLE_WORDS = 12
#: Height of a row of the top-words table (Bokeh's DataTable default) and how many rows
#: it shows before it scrolls.
TABLE_ROW = 25
TABLE_ROWS_MAX = 24


def panel_figure(title: str, x_label: str, y_label: str, **kw: Any):
    """Make a figure with the page's size, tools and label style."""
    kw.setdefault("height", PANEL_HEIGHT)
    kw.setdefault("width", PANEL_WIDTH)
    # A Title model, not a string: Bokeh converts a string only while property validation
    # is on, and Dask's dashboard turns validation off (process-wide) in its callbacks.
    fig = figure(title=Title(text=title, text_font_size="11pt"),
                 tools="pan,wheel_zoom,box_zoom,reset,save", toolbar_location="above", **kw)
    fig.xaxis.axis_label = x_label
    fig.yaxis.axis_label = y_label
    fig.axis.axis_label_text_font_style = "normal"
    fig.min_border_left = 60
    return fig


def _quiet_legend(fig) -> None:
    """Make the legend small and see-through (lines stay visible under it); click hides a line."""
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


def _colors(n: int) -> list[str]:
    return [Category10_10[i % len(Category10_10)] for i in range(n)]


class RunPanels:
    """Sources + figures for one run. ``set_run`` redraws, ``append`` streams new records.

    Parameters
    ----------
    panels : list of Panel, optional
        The panels to draw; :data:`dashboards.panels.PANELS` (read at construction) if None.
    """

    def __init__(self, panels: list[Panel] | None = None) -> None:
        self.panels = list(panel_table.PANELS if panels is None else panels)
        self.fields = history_fields(self.panels)
        #: The per-worker fields: a worker gets one colour across all their panels.
        self.worker_fields = [p.y[0] for p in self.panels if p.kind != "line"]
        self.history = ColumnDataSource(history_columns([], self.fields), name="biglda-history")
        self.sources: dict[int, ColumnDataSource] = {}  # by panel index
        self.top_words = ColumnDataSource(top_words_columns(None), name="biglda-top-words")
        self._n_records = 0
        self._top_words_iteration: int | None = None
        self.figures = self._build_figures()
        self.table = DataTable(
            source=self.top_words, name="biglda-top-words-table",
            columns=[TableColumn(field="topic", title="topic", width=50),
                     TableColumn(field="words", title="top words", width=900)],
            index_position=None, reorderable=False, row_height=TABLE_ROW,
            height=self._table_height(0), sizing_mode="stretch_width",
        )
        self.table_title = Div(text="<b>Top words per topic</b>", name="biglda-top-words-title")

    # ----------------------------------------------------------------- figures
    def _build_figures(self) -> list:
        # Every per-iteration panel shares one x range: zooming one zooms all, and a
        # panel without data yet still gets a sensible axis.
        shared: dict[str, Any] = {}
        figures = []
        for i, panel in enumerate(self.panels):
            kw: dict[str, Any] = {}
            if panel.kind == "latest":
                kw["x_range"] = FactorRange(factors=[])
            elif panel.x in shared:
                kw["x_range"] = shared[panel.x]
            fig = panel_figure(panel.title, panel.x_label, panel.y_label, **kw)
            fig.name = f"biglda-panel-{i}"
            shared.setdefault(panel.x, fig.x_range)
            {"line": self._draw_lines, "per_worker": self._draw_per_worker,
             "latest": self._draw_latest}[panel.kind](fig, i, panel)
            fig.yaxis.formatter = NumeralTickFormatter(format=panel.format)
            if panel.y_start is not None and panel.y_end is not None:
                fig.y_range = Range1d(panel.y_start, panel.y_end)
            elif panel.y_start is not None:
                fig.y_range.start = panel.y_start
            figures.append(fig)
        return figures

    def _draw_lines(self, fig, i: int, panel: Panel) -> None:
        src = self.history
        for field, color, label in zip(panel.y, _colors(len(panel.y)),
                                       panel.labels or [None] * len(panel.y), strict=True):
            kw = {"legend_label": label} if label else {}
            fig.line(panel.x, field, source=src, color=color, line_width=2, **kw)
            fig.scatter(panel.x, field, source=src, color=color, size=3, **kw)
            fig.add_tools(HoverTool(
                tooltips=[(panel.x_label, f"@{panel.x}"),
                          (label or panel.y_label or field, f"@{field}{{{panel.format}}}")],
                mode="vline", renderers=fig.renderers[-1:]))
        if panel.labels:
            _quiet_legend(fig)

    def _draw_per_worker(self, fig, i: int, panel: Panel) -> None:
        src = self.sources[i] = ColumnDataSource(
            {"xs": [], "ys": [], "worker": [], "color": []}, name=f"biglda-{panel.y[0]}")
        fig.multi_line("xs", "ys", source=src, color="color", line_width=2,
                       legend_field="worker")
        _quiet_legend(fig)

    def _draw_latest(self, fig, i: int, panel: Panel) -> None:
        src = self.sources[i] = ColumnDataSource(
            {**latest_columns(None, panel.y[0]), "color": []}, name=f"biglda-{panel.y[0]}")
        fig.vbar(x="worker", top="value", source=src, width=0.7, color="color")
        fig.xaxis.major_label_orientation = 0.5
        fig.add_tools(HoverTool(tooltips=[("worker", "@worker"),
                                          (panel.y_label, f"@value{{{panel.format}}}")]))

    def grid(self, *, only_shown: bool = False):
        """Lay the panels out in a grid.

        ``only_shown`` leaves out the panels hidden for this run (a panel's ``when``: e.g. no
        MH acceptance for exact Gibbs, ever).
        """
        figures = [f for f in self.figures if f.visible or not only_shown]
        return gridplot(figures, ncols=3, toolbar_location="right", merge_tools=True)

    # ----------------------------------------------------------------- data
    def set_run(self, run: RunSeries | None, sizes: list[float] | None = None) -> None:
        """Redraw everything from ``run`` (a run switch, or the static report)."""
        records = run.records if run else []
        self.history.data = history_columns(records, self.fields)
        self._n_records = len(records)
        self._refresh_workers(records)
        self._top_words_iteration = None
        self._refresh_top_words(run, sizes)
        self._refresh_shown(run)

    def append(self, run: RunSeries) -> None:
        """Stream the records of ``run`` that arrived since the last call."""
        records = run.records
        if len(records) < self._n_records:  # cannot happen for one run; be safe
            self.set_run(run)
            return
        if len(records) > self._n_records:
            self.history.stream(history_columns(records[self._n_records:], self.fields))
            self._n_records = len(records)
            self._refresh_workers(records)
            self._refresh_shown(run)
        if run.top_words_iteration != self._top_words_iteration:
            self._refresh_top_words(run)

    def _refresh_workers(self, records: list[dict[str, Any]]) -> None:
        # one colour per worker across panels: its place among all workers of the run
        workers = [short_worker(w) for w in worker_names(records, self.worker_fields)]
        palette = dict(zip(workers, _colors(len(workers)), strict=True))
        for i, (panel, fig) in enumerate(zip(self.panels, self.figures, strict=True)):
            if panel.kind == "per_worker":
                cols = per_worker_columns(records, panel.y[0], panel.x)
            elif panel.kind == "latest":
                cols = latest_columns(records[-1] if records else None, panel.y[0])
                if list(fig.x_range.factors) != cols["worker"]:
                    fig.x_range.factors = cols["worker"]
            else:
                continue
            cols["color"] = [palette.get(w, "#7f7f7f") for w in cols["worker"]]
            self.sources[i].data = cols

    def _refresh_top_words(self, run: RunSeries | None, sizes: list[float] | None = None) -> None:
        top = run.top_words if run else None
        self._top_words_iteration = run.top_words_iteration if run else None
        self.top_words.data = top_words_columns(top, TABLE_WORDS, sizes)
        # Every topic has a row: the table grows with them, then scrolls.
        self.table.height = self._table_height(len(top or []))
        where = (f" (iteration {self._top_words_iteration})"
                 if self._top_words_iteration is not None else "")
        n = f", all {len(top)}" if top else ""
        self.table_title.text = (f"<b>Top words per topic{where}{n}</b>" if top else
                                 "<b>Top words per topic</b> <i>(none yet: the trainer sends "
                                 "them every few clocks)</i>")

    @staticmethod
    def _table_height(n_rows: int) -> int:
        """Room for every row up to :data:`TABLE_ROWS_MAX` (then the table scrolls)."""
        return TABLE_ROW * (1 + min(max(n_rows, 4), TABLE_ROWS_MAX)) + 4

    def _refresh_shown(self, run: RunSeries | None) -> None:
        for panel, fig in zip(self.panels, self.figures, strict=True):
            shown = panel.shown(run)
            if fig.visible != shown:
                fig.visible = shown


# --------------------------------------------------------------------------- HTML helpers


def config_table_html(config: dict[str, Any], title: str = "Configuration") -> str:
    """Render a (possibly nested) settings dict as a small two-column HTML table."""
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
    """Render the page's header line; ``data-*`` attributes let tests read the numbers back."""
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
        ("output", run.out or "-"),
        ("corpus", f"{run.corpus + ': ' if run.corpus else ''}{start.get('n_docs', '?')} docs, "
                   f"{start.get('n_tokens', '?')} tokens, {start.get('n_words', '?')} words"),
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
