"""Repeated measurements: the median of the repeats and their spread (min to max).

Issue "Pipelines and the public benchmark": machines are noisy, so short measurements are
run several times and reported as the median, with the spread next to it so a reader sees
the noise; ratios are taken between medians. Used by ``scaling.py`` and ``compare.py``
(scripts in this folder, not part of the package).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence


def spread(values: Sequence[float]) -> dict:
    """``{"median", "min", "max", "n", "values"}`` of the repeats (in the order they ran).

    ``values`` must not be empty. With an even count the median is the mean of the two
    middle values (``statistics.median``).

    >>> spread([3.0, 1.0, 2.0])["median"], spread([3.0, 1.0, 2.0])["min"]
    (2.0, 1.0)
    """
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("spread of no values")
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "values": vals}


def spreads(runs: Sequence[dict], keys: Sequence[str]) -> dict[str, dict]:
    """:func:`spread` of each key over the runs that have a number under it.

    A key no run has a number for is left out (e.g. tokens/s of a variational system).
    """
    out = {}
    for key in keys:
        vals = [r[key] for r in runs if isinstance(r.get(key), int | float)
                and not isinstance(r.get(key), bool) and math.isfinite(r[key])]
        if vals:
            out[key] = spread(vals)
    return out


def median_index(values: Sequence[float]) -> int:
    """Index of the run whose value is the (low) median: the run that stands for the others.

    For an odd count it is the run whose value *is* the median; for an even count the lower
    of the two middle runs. Equal values are ordered by run number.

    >>> median_index([-7.2, -7.0, -7.1])
    2
    """
    if not values:
        raise ValueError("median of no values")
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    return order[(len(values) - 1) // 2]


def ratio(num: dict, den: dict) -> float:
    """Ratio of two :func:`spread` medians (nan when the denominator is 0)."""
    return num["median"] / den["median"] if den["median"] else float("nan")


def fmt(s: dict | None, f: Callable[[float], str] | str) -> str:
    """``"median (min – max)"`` of a :func:`spread`; just the value when there is one run.

    ``f`` formats one number: a format spec (``",.0f"``) or a function.

    >>> fmt(spread([1200, 1000, 1100]), ",.0f")
    '1,100 (1,000 – 1,200)'
    >>> fmt(spread([5.0]), ".1f")
    '5.0'
    """
    if s is None:
        return "-"
    one = f if callable(f) else (lambda v: format(v, f))
    if s["n"] == 1:
        return one(s["median"])
    return f"{one(s['median'])} ({one(s['min'])} – {one(s['max'])})"
