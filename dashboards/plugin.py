"""The ``/biglda`` page of the Dask dashboard: a scheduler plugin plus a Bokeh document.

The trainer publishes its metrics records with ``client.log_event("biglda", record)``.
:class:`DashboardPlugin` runs inside the scheduler (embedded ``LocalCluster`` or an
external ``dask scheduler`` alike), receives every record through the ``log_event``
plugin hook and keeps its own series per run (the scheduler itself keeps only the last
1,000 events of a topic). On ``start`` it mounts a Bokeh application at ``/biglda`` on
the scheduler's HTTP server, next to Dask's own pages, and adds ``biglda`` to the navigation
bar of those pages (``/status`` and the others), so the page is one click from Dask's.

Loaded through the ``biglda.plugins`` entry point (name ``dashboard``)::

    url = register(client)      # -> "http://127.0.0.1:8787/biglda"
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from distributed.diagnostics.plugin import SchedulerPlugin

from dashboards.records import RunLog, RunSeries

log = logging.getLogger(__name__)

#: The event topic the trainer publishes on (docs/contracts.md).
TOPIC = "biglda"
#: Where the page is mounted, relative to the dashboard prefix.
PAGE = "biglda"
#: How often an open page looks for new records (ms).
REFRESH_MS = 500


@dataclass
class _Mount:
    runs: RunLog
    app: Any  # the BokehTornado application serving PAGE
    path: str  # where PAGE is served: the dashboard prefix + PAGE


# One mount per scheduler object: registering the plugin again (or a second plugin
# instance after the first was removed) reuses the page and the series instead of
# mounting a second application on the same route.
_MOUNTS: weakref.WeakKeyDictionary[Any, _Mount] = weakref.WeakKeyDictionary()


class DashboardPlugin(SchedulerPlugin):
    """Keeps the biglda metrics series on the scheduler and serves them at ``/biglda``.

    Parameters
    ----------
    max_runs : int
        How many runs the page remembers (older ones drop out of its run selector).

    Examples
    --------
    >>> client.register_plugin(DashboardPlugin())  # doctest: +SKIP
    """

    name = "biglda-dashboard"
    # A second registration is a no-op on the scheduler (Client.register_plugin reads it).
    idempotent = True

    def __init__(self, max_runs: int = 50) -> None:
        self.max_runs = max_runs
        self.runs: RunLog | None = None

    def start(self, scheduler: Any) -> None:
        """Mount the page on the scheduler (once per scheduler) and follow its run log."""
        mount = _MOUNTS.get(scheduler)
        if mount is None:
            runs = RunLog(self.max_runs)
            # Records published before the plugin arrived are still in the scheduler's
            # own (bounded) event log: start from them.
            for _, msg in scheduler.get_events(TOPIC):
                runs.add(msg)
            prefix = _dashboard_prefix(scheduler)
            mount = _Mount(runs, _mount_page(scheduler, runs, prefix),
                           prefix.rstrip("/") + "/" + PAGE)
            _MOUNTS[scheduler] = mount
            _link_from_dask_pages(scheduler)
        self.runs = mount.runs

    def log_event(self, topic: str, msg: Any) -> None:
        """Add a training record published on the biglda topic to the run log."""
        if topic == TOPIC and self.runs is not None:
            self.runs.add(msg)


def _dashboard_prefix(scheduler: Any) -> str:
    """Return the prefix Dask's own Bokeh pages are served under ("/" unless overridden)."""
    from bokeh.server.server import BokehTornado

    for app in getattr(scheduler.http_application, "applications", []):
        if isinstance(app, BokehTornado):
            return app.prefix or "/"
    return "/"


def _dask_nav_pages(scheduler: Any) -> list[list[str]]:
    """Return the ``pages`` lists of the navigation bars of Dask's own Bokeh pages.

    Dask builds ``/status``, ``/workers``, ... with one shared dict of template variables
    (``distributed.dashboard.core.BokehApplication`` binds it to every page function with
    ``functools.partial``), read again at each page load; its ``pages`` list is the
    navigation bar. Dask offers no public hook to add an entry, so this finds that dict.
    """
    from bokeh.application.handlers.function import FunctionHandler
    from bokeh.server.server import BokehTornado

    found: list[list[str]] = []
    for app in getattr(scheduler.http_application, "applications", []):
        if not isinstance(app, BokehTornado):
            continue
        for ctx in app.applications.values():
            for handler in ctx.application.handlers:
                func = getattr(handler, "_func", None) if isinstance(
                    handler, FunctionHandler) else None
                args = getattr(func, "args", ())
                pages = args[1].get("pages") if len(args) == 2 and isinstance(
                    args[1], dict) else None
                if isinstance(pages, list) and not any(pages is p for p in found):
                    found.append(pages)
    return found


def _link_from_dask_pages(scheduler: Any) -> None:
    """Add ``biglda`` to the navigation bar of Dask's pages (after ``status``).

    The entry is a relative link, like Dask's own, so it follows a ``--dashboard-prefix``.
    Pages opened from now on show it; when this version of Dask lays its pages out
    differently, the page is still at ``/biglda``, only without the link.
    """
    try:
        lists = _dask_nav_pages(scheduler)
    except Exception:  # pragma: no cover - a Dask without this layout: no link, page works
        log.debug("cannot find Dask's navigation bar", exc_info=True)
        return
    for pages in lists:
        _add_nav_entry(pages)
    if not lists:
        log.debug("no navigation bar found in Dask's pages; /%s is not linked", PAGE)


def _add_nav_entry(pages: list[str]) -> None:
    """Put ``biglda`` after ``status`` in a navigation bar's pages (once)."""
    if PAGE not in pages:
        pages.insert(pages.index("status") + 1 if "status" in pages else len(pages), PAGE)


def _mount_page(scheduler: Any, runs: RunLog, prefix: str) -> Any:
    from distributed.dashboard.core import BokehApplication
    from tornado.ioloop import IOLoop

    extra: dict[str, Any] = {}
    try:  # Dask's navigation bar on top of the page, when Dask's own pages are available
        from distributed.dashboard.scheduler import template_variables

        extra = template_variables(scheduler)
        if isinstance(extra.get("pages"), list):  # the same bar as on Dask's pages
            _add_nav_entry(extra["pages"])
    except Exception:  # pragma: no cover - dashboard extras missing; the page works without
        log.debug("no Dask dashboard template variables", exc_info=True)
    app = BokehApplication({f"/{PAGE}": functools.partial(_page_doc, runs)}, scheduler,
                           prefix=prefix, template_variables=extra)
    scheduler.http_application.add_application(app)
    app.initialize(IOLoop.current())
    app.start()
    log.info("biglda dashboard mounted at /%s", PAGE)
    return app


def _page_doc(runs: RunLog, scheduler: Any, extra: dict[str, Any], doc: Any) -> None:
    """Build one browser session's document (Bokeh calls this per page load)."""
    page = LivePage(runs)
    doc.title = "biglda: training"
    doc.add_root(page.root)
    doc.add_periodic_callback(page.update, REFRESH_MS)
    template = _dask_template()
    if template is not None:
        doc.template = template
        doc.template_variables.update(extra)


@functools.cache
def _dask_template() -> Any:
    """Dask's dashboard frame (navigation bar, styles) with our page title in it.

    Dask's ``base.html`` hard-codes its ``<title>``; we swap in Bokeh's ``{{ title }}``.
    None (a plain Bokeh page) when this version of distributed lays its templates out
    differently.
    """
    try:
        from distributed.dashboard.components.scheduler import env

        source = env.loader.get_source(env, "base.html")[0]
        if "<title>Dask Diagnostic UI</title>" not in source:
            return None
        base = env.from_string(source.replace("<title>Dask Diagnostic UI</title>",
                                              "<title>{{ title }}</title>"))
        return env.from_string("{% extends dask_base %}{% block content %}"
                               "{{ plot_div }}{{ plot_script }}{% endblock %}",
                               globals={"dask_base": base})
    except Exception:  # pragma: no cover - plain Bokeh page instead of Dask's frame
        log.debug("no Dask dashboard template", exc_info=True)
        return None


class LivePage:
    """One open ``/biglda`` page: follows the newest run unless the user picks another."""

    def __init__(self, runs: RunLog) -> None:
        from bokeh.layouts import column, row
        from bokeh.models import Div, Select

        from dashboards.figures import RunPanels

        self.runs = runs
        self.panels = RunPanels()
        self.selector = Select(title="Run (output <- corpus)", width=480,
                               name="biglda-run-select")
        self.selector.on_change("value", self._on_select)
        self.status = Div(name="biglda-status", sizing_mode="stretch_width")
        self.config = Div(name="biglda-config", width=360)
        self.follow_latest = True
        self.run_id: str | None = None
        self._seen_version = -1
        self._options: list[tuple[str, str]] = []
        self._grid_figures = [id(f) for f in self.panels.figures if f.visible]
        self.root = column(
            row(self.selector, self.status, sizing_mode="stretch_width"),
            self.panels.grid(only_shown=True),
            row(column(self.panels.table_title, self.panels.table, sizing_mode="stretch_width"),
                self.config, sizing_mode="stretch_width"),
            sizing_mode="stretch_width", name="biglda-root",
        )
        self.update()

    # ---------------------------------------------------------------- callbacks
    def update(self) -> None:
        """Periodic callback: push whatever arrived since the last call."""
        if self.runs.version == self._seen_version:
            return
        self._seen_version = self.runs.version
        self._refresh_selector()
        current = self.runs.current()
        if self.follow_latest and current is not None and current.run_id != self.run_id:
            self._show(current.run_id)
            return
        run = self.runs.get(self.run_id)
        if run is not None:
            self.panels.append(run)
            self._sync_grid()
        self._refresh_header(run)

    def _on_select(self, attr: str, old: str, new: str) -> None:
        if new == self.run_id or new not in self.runs.runs:
            return
        current = self.runs.current()
        self.follow_latest = current is not None and new == current.run_id
        self._show(new)

    # ---------------------------------------------------------------- helpers
    def _show(self, run_id: str) -> None:
        self.run_id = run_id
        run = self.runs.get(run_id)
        self.panels.set_run(run)
        self._sync_grid()
        if self.selector.value != run_id:
            self.selector.value = run_id
        self._refresh_header(run)

    def _sync_grid(self) -> None:
        """Lay the grid out again when the set of shown panels changed (a panel's ``when``).

        A hidden figure would leave a hole in the grid.
        """
        shown = [id(f) for f in self.panels.figures if f.visible]
        if shown != self._grid_figures:
            self._grid_figures = shown
            self.root.children[1] = self.panels.grid(only_shown=True)

    def _refresh_header(self, run: RunSeries | None) -> None:
        from dashboards.figures import config_table_html, status_html

        self.status.text = status_html(run)
        self.config.text = config_table_html(run.config if run else {})

    def _refresh_selector(self) -> None:
        options = [(r.run_id, _run_label(r)) for r in reversed(self.runs.runs.values())]
        if options != self._options:
            self._options = options
            self.selector.options = options


def _run_label(run: RunSeries) -> str:
    """Label a run: ``demo/model.zarr <- demo/corpus.zarr | ok | 21:03:04 | 3f2a9c``.

    What a user knows a run by (where it writes and what it reads) comes before the id that
    tells two apart.
    """
    when = time.strftime("%H:%M:%S", time.localtime(run.first_seen))
    what = (f"{_path_tail(run.out) or '?'} <- {_path_tail(run.corpus) or '?'} | "
            if run.out or run.corpus else "")
    return f"{what}{run.status} | {when} | {run.run_id}"


def _path_tail(path: str, parts: int = 2) -> str:
    """Return the last ``parts`` components of a path or URL.

    ``s3://b/x/y/m.zarr`` -> ``y/m.zarr``.
    """
    return "/".join(path.rstrip("/").split("/")[-parts:])


# --------------------------------------------------------------------------- entry point


def page_path(dask_scheduler: Any = None) -> str | None:
    """Return the page's path on the scheduler (None before the plugin started).

    Runs on the scheduler.
    """
    mount = _MOUNTS.get(dask_scheduler)
    return mount.path if mount else None


def page_url(client: Any, path: str | None = None) -> str:
    """Return the address of the ``/biglda`` page of ``client``'s scheduler.

    Host and port come from ``client.dashboard_link``; the path from the scheduler
    (``path``), since the link does not know a ``--dashboard-prefix``.
    """
    link = client.dashboard_link
    if path is None:
        base = link[: -len("status")] if link.endswith("/status") else link.rstrip("/") + "/"
        return base + PAGE
    parts = urlsplit(link)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def register(client: Any) -> str:
    """Install the ``/biglda`` page on ``client``'s scheduler and return its URL.

    The ``biglda.plugins`` entry point (name ``dashboard``). Registering again, from
    the same or another client, changes nothing: the page and its series stay.

    Examples
    --------
    >>> url = register(client)  # doctest: +SKIP
    >>> url
    'http://127.0.0.1:8787/biglda'
    """
    client.register_plugin(DashboardPlugin())
    return page_url(client, client.run_on_scheduler(page_path))
