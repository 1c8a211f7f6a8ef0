"""biglda's monitoring: the live ``/biglda`` page of the Dask dashboard and static reports.

- :mod:`dashboards.plugin`: the scheduler plugin + Bokeh page (entry point ``dashboard``
  of the ``biglda.plugins`` group: ``register(client) -> url``).
- :mod:`dashboards.report`: ``write_report(model, out)``, the HTML report of a finished
  run behind ``biglda report``.
- :mod:`dashboards.panels`: the panel table (``PANELS``), what both draw, as data.
- :mod:`dashboards.records` / :mod:`dashboards.figures`: the record series and the Bokeh
  rendering of the panel table both share, so the live page and the report plot the same
  numbers.

The ``biglda`` package never imports this package; it finds it through entry points.
"""
