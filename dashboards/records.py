"""The metrics records of training runs, kept per run and turned into plot columns.

Pure Python (no Bokeh, no Dask): the scheduler plugin feeds :class:`RunLog` from
``log_event("biglda", record)``; the live page and the static report both turn a run's
records into columns with the ``*_columns`` functions, so the two always plot the same
numbers. The record schema is in ``docs/contracts.md`` (start / iteration / end); which
fields are plotted, and how, is the panel table of :mod:`dashboards.panels`.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunSeries:
    """Everything the page knows about one training run.

    ``records`` holds every iteration record in arrival order: the scheduler keeps only
    the last 1,000 events of a topic, so the plugin keeps its own series.
    """

    run_id: str
    first_seen: float = field(default_factory=time.time)
    start: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    top_words: list[list[str]] | None = None
    top_words_iteration: int | None = None

    @property
    def status(self) -> str:
        """``running`` until the end record, then the status it carries."""
        if self.end is not None:
            return str(self.end.get("status", "finished"))
        return "running"

    @property
    def config(self) -> dict[str, Any]:
        """The training settings from the start record (empty before it)."""
        return dict((self.start or {}).get("config") or {})

    @property
    def sampler(self) -> str:
        """The sampler's name as configured (``""`` before the start record)."""
        config = self.config
        return str(config.get("sampler", config.get("algorithm", ""))).lower()

    @property
    def out(self) -> str:
        """Where the run writes its model (``""`` when the start record did not say)."""
        return str((self.start or {}).get("out") or "")

    @property
    def corpus(self) -> str:
        """The corpus the run trains on (``""`` when the start record did not say)."""
        return str((self.start or {}).get("corpus") or "")

    @property
    def last(self) -> dict[str, Any] | None:
        """The latest iteration record, or None."""
        return self.records[-1] if self.records else None

    def add(self, record: dict[str, Any]) -> None:
        """File one record of this run by its ``type``."""
        kind = record.get("type")
        if kind == "start":
            self.start = record
        elif kind == "end":
            self.end = record
        elif kind == "iteration":
            top = record.get("top_words")
            if top:
                self.top_words = [list(map(str, ws)) for ws in top]
                self.top_words_iteration = record.get("iteration")
            # Only the latest top words are shown; keeping every list would hold
            # K x words strings per few clocks for the whole run.
            self.records.append({k: v for k, v in record.items() if k != "top_words"})


class RunLog:
    """The runs seen on one cluster, oldest first, at most ``max_runs`` of them.

    ``version`` grows with every accepted record, so a page can tell cheaply whether
    anything changed since it last looked.
    """

    def __init__(self, max_runs: int = 50) -> None:
        self.max_runs = max_runs
        self.runs: OrderedDict[str, RunSeries] = OrderedDict()
        self.version = 0

    def add(self, record: Any) -> bool:
        """Take one record; returns False (and ignores it) when it is not a biglda record."""
        if not isinstance(record, dict) or record.get("type") not in ("start", "iteration", "end"):
            return False
        run_id = str(record.get("run_id", "unnamed"))
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunSeries(run_id)
            while len(self.runs) > self.max_runs:
                self.runs.popitem(last=False)
        run.add(record)
        self.version += 1
        return True

    def current(self) -> RunSeries | None:
        """Return the most recently started run (the one a page follows by default)."""
        return next(reversed(self.runs.values()), None)

    def get(self, run_id: str | None) -> RunSeries | None:
        """Return the run of ``run_id`` (None for an unknown or absent id)."""
        return self.runs.get(run_id) if run_id is not None else None


# --------------------------------------------------------------------------- columns


def _num(value: Any) -> float:
    """Make a plottable float: None and non-numbers become NaN (Bokeh draws a gap)."""
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def history_columns(records: list[dict[str, Any]], fields: Sequence[str]
                    ) -> dict[str, list[float]]:
    """One column per scalar field in ``fields``, one row per iteration record."""
    return {name: [_num(r.get(name)) for r in records] for name in fields}


def worker_names(records: list[dict[str, Any]], keys: Sequence[str]) -> list[str]:
    """Every worker that appears in the per-worker fields ``keys``, sorted.

    Sorted, like :func:`latest_columns`, so a worker gets the same colour in every panel.
    """
    seen: set[str] = set()
    for r in records:
        for key in keys:
            seen.update(map(str, r.get(key) or {}))
    return sorted(seen)


def short_worker(name: str) -> str:
    """``tcp://127.0.0.1:41234`` -> ``127.0.0.1:41234`` (legend space is scarce)."""
    return name.split("://", 1)[-1]


def per_worker_columns(records: list[dict[str, Any]], key: str, x: str = "iteration"
                       ) -> dict[str, list]:
    """Build the columns for a ``multi_line``: one line per worker.

    Each line is ``record[key][worker]`` against ``record[x]``.
    """
    workers = worker_names(records, [key])
    xs: list[list[float]] = []
    ys: list[list[float]] = []
    for w in workers:
        pts = [(_num(r.get(x)), _num((r.get(key) or {}).get(w)))
               for r in records if w in (r.get(key) or {})]
        xs.append([p[0] for p in pts])
        ys.append([p[1] for p in pts])
    return {"xs": xs, "ys": ys, "worker": [short_worker(w) for w in workers]}


def latest_columns(record: dict[str, Any] | None, key: str) -> dict[str, list]:
    """Each worker's ``record[key][worker]`` (bar chart rows), e.g. its clock now."""
    values = (record or {}).get(key) or {}
    names = sorted(values)
    return {"worker": [short_worker(w) for w in names],
            "value": [_num(values[w]) for w in names]}


def top_words_columns(top_words: list[list[str]] | None, n_words: int = 12,
                      sizes: list[float] | None = None) -> dict[str, list]:
    """Rows of the top-words table: topic number, its share of tokens (if known), words."""
    top_words = top_words or []
    cols: dict[str, list] = {
        "topic": list(range(len(top_words))),
        "words": [" ".join(ws[:n_words]) for ws in top_words],
    }
    cols["share"] = ([f"{100 * s:.1f}%" for s in sizes] if sizes is not None
                     and len(sizes) == len(top_words) else [""] * len(top_words))
    return cols


def format_seconds(s: float | None) -> str:
    """``3725.2`` -> ``1h 02m 05s``; None/NaN -> ``-``."""
    if s is None or not math.isfinite(_num(s)):
        return "-"
    s = round(float(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m {sec:02d}s"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


def format_bytes(n: float | None) -> str:
    """Format a byte count in B, KiB, MiB or GiB; None/NaN -> ``-``.

    Examples
    --------
    >>> format_bytes(3 * 1024**2)
    '3.0 MiB'
    """
    x = _num(n)
    if not math.isfinite(x):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} GiB"  # pragma: no cover
