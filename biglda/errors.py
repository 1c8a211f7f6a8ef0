"""User-facing errors.

Every problem caused by the user's input (a missing file, a bad option, a store
that is not a biglda corpus) is raised as a :class:`BigLDAError` whose message is
one self-contained line. ``biglda/cli.py`` prints that line on stderr and exits
non-zero; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class BigLDAError(Exception):
    """An error the user can fix; its message is one line that says what is wrong."""

    exit_code = 2


class InputError(BigLDAError):
    """Input data that cannot be read or parsed (missing, empty, wrong format, bad bytes)."""


class FormatError(BigLDAError):
    """A store that is not a biglda corpus/model, or of another format version."""


class OutputExistsError(BigLDAError):
    """The output path exists and ``overwrite`` was not asked for."""


class ConfigError(BigLDAError):
    """Invalid training or inference settings (K < 2, unknown sampler, table too large...)."""


class ClusterError(BigLDAError):
    """The Dask cluster cannot be reached or lost state that cannot be recovered."""
