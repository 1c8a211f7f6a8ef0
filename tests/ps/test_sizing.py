"""Sizing of the table: row ranges and the memory check."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.errors import ConfigError
from biglda.ps.sizing import check_table_fits, row_bounds


def test_table_too_large_is_a_config_error_that_says_what_fits():
    check_table_fits(1000, 100, {"a": 2**30, "b": 2**30})
    with pytest.raises(ConfigError, match=r"K <= \d+ fits"):
        check_table_fits(10**6, 10**4, {"a": 2**30, "b": 2**30})
    check_table_fits(10**6, 10**4, {"a": 0})  # no limit: not checked


def test_row_bounds_cover_the_vocabulary():
    b = row_bounds(10, 3)
    assert b[0] == 0 and b[-1] == 10 and np.all(np.diff(b) > 0)
    assert len(row_bounds(2, 5)) == 3
