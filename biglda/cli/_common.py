"""What the commands share: the one-line error, aligned tables and checks of arguments."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from biglda.errors import BigLDAError


def err(msg: str) -> None:
    """Say ``msg`` as the one line of a failed command, on stderr."""
    print(f"biglda: error: {msg}", file=sys.stderr)


def aligned(rows: list[tuple[str, ...]], right: Sequence[int] = ()) -> list[str]:
    """Rows of cells as lines of columns padded to a common width."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in rows]


def check_positive(name: str, value: int) -> None:
    """Refuse a count below 1, naming its flag ``name``."""
    if value < 1:
        raise BigLDAError(f"{name} must be at least 1, got {value}")
