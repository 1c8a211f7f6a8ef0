"""Fixtures of the pipelines' tests: the scripts of ``pipelines/`` as modules."""

from __future__ import annotations

import importlib
import os
import sys

import pytest

PIPELINES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "pipelines")


@pytest.fixture(scope="module")
def pipeline_script():
    """``import_module`` while ``pipelines/`` is on the path (its scripts import each other by
    file name); the path is restored after the test module."""
    sys.path.insert(0, PIPELINES)
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(PIPELINES)
