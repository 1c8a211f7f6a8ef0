"""The panels of a training run, declared as data: one :class:`Panel` record per plot.

Both the live ``/biglda`` page and the static report draw :data:`PANELS` (through
:class:`dashboards.figures.RunPanels`), so adding a panel is one field in the iteration
record (``biglda.trainer.metrics.IterationRecord``) and one line here, e.g.::

    Panel("SSP wait", "iteration", ("wait_s",), "0.00", "seconds", y_start=0),

Pure Python (no Bokeh): a panel says *what* to plot; :mod:`dashboards.figures` says how.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dashboards.records import RunSeries

#: How a panel draws its fields: ``line`` one line per y field against x; ``per_worker``
#: one line per worker of a ``{worker: value}`` field against x; ``latest`` one bar per
#: worker of that field in the newest record.
Kind = Literal["line", "per_worker", "latest"]

#: Axis labels of the x fields (other fields are labelled with their name).
X_LABELS = {"iteration": "iteration", "elapsed": "elapsed (s)", "worker": "worker"}


@dataclass(frozen=True)
class Panel:
    """One plot of a run's iteration records.

    Parameters
    ----------
    title : str
        The plot's title (unique: it names the plot on the page).
    x : str
        The record field on the x axis (``"worker"`` for a ``latest`` panel).
    y : tuple of str
        The record fields drawn, one line each (``line``), or the one per-worker field.
    format : str
        Numeral format of the y values (axis ticks and hover), e.g. ``"0.000"``, ``"0%"``.
    y_label : str
        The y axis label.
    kind : {"line", "per_worker", "latest"}
        How the fields are drawn (:data:`Kind`).
    labels : tuple of str
        Legend labels of the y fields (a legend only when given).
    y_start, y_end : float, optional
        Fixed ends of the y axis (``y_start=0`` for counts and shares).
    when : callable, optional
        ``when(run) -> bool``: whether the run has anything to show in this panel (the
        report leaves the panel out, the live page hides it); always shown when None.
    """

    title: str
    x: str
    y: tuple[str, ...]
    format: str = "0.[000]"
    y_label: str = ""
    kind: Kind = "line"
    labels: tuple[str, ...] = ()
    y_start: float | None = None
    y_end: float | None = None
    when: Callable[[RunSeries], bool] | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """The iteration-record fields this panel reads."""
        return self.y if self.kind == "latest" else (self.x, *self.y)

    @property
    def x_label(self) -> str:
        """The x axis label (the field name when it has no label of its own)."""
        return X_LABELS.get(self.x, self.x)

    def shown(self, run: RunSeries | None) -> bool:
        """Whether the panel is drawn for ``run`` (no run yet: every panel is)."""
        return run is None or self.when is None or bool(self.when(run))


def has_mh_acceptance(run: RunSeries) -> bool:
    """Tell whether the run has a Metropolis-Hastings acceptance rate.

    It has one when some record carries one, or none has arrived yet and the sampler is not
    exact Gibbs (``cgs`` never has one).
    """
    if any(r.get("accept_rate") is not None for r in run.records):
        return True
    return not run.records and run.sampler != "cgs"


PANELS: list[Panel] = [
    Panel("Log-likelihood per token", "iteration", ("ll_per_token",), "0.000", "LL / token"),
    Panel("Log-likelihood per token over time", "elapsed", ("ll_per_token",), "0.000",
          "LL / token"),
    Panel("Throughput, all workers", "iteration", ("tokens_per_s",), "0.[000]a", "tokens / s"),
    Panel("Throughput per worker", "iteration", ("tokens_per_s_per_worker",), "0.[000]a",
          "tokens / s", kind="per_worker"),
    Panel("Each worker's clock (now)", "worker", ("clocks",), "0", "clock", kind="latest",
          y_start=0),
    Panel("Clock spread (max - min clock)", "iteration", ("clock_spread",), "0.[0]", "clocks",
          y_start=0),
    Panel("Parameter-server traffic per clock", "iteration", ("bytes_pushed", "bytes_pulled"),
          "0.0 b", "bytes", labels=("pushed", "pulled")),
    Panel("Metropolis-Hastings acceptance rate", "iteration", ("accept_rate",), "0.00",
          "accepted / proposed", y_start=0, y_end=1, when=has_mh_acceptance),
    Panel("Parameter-server overhead", "iteration", ("ps_overhead",), "0%",
          "share of iteration time", y_start=0),
]


def history_fields(panels: list[Panel]) -> tuple[str, ...]:
    """Return the scalar fields the ``line`` panels plot: the shared history source's columns."""
    fields: dict[str, None] = {"iteration": None}
    for p in panels:
        if p.kind == "line":
            fields.update(dict.fromkeys(p.fields))
    return tuple(fields)
