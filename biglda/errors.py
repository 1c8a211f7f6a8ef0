"""User-facing errors.

Every problem caused by the user's input (a missing file, a bad option, a store
that is not a biglda corpus) is raised as a :class:`BigLDAError` whose message is
one self-contained line. ``biglda/cli/`` prints that line on stderr and exits
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


class SettingError(ConfigError):
    """A training setting with a bad value; ``name`` is the setting, ``problem`` the rest.

    The message reads ``"<name> <problem>"`` (``n_topics must be >= 2, got 1``); the CLI
    says the same with the flag in place of the name (``--topics must be >= 2, got 1``).
    """

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}{'' if problem.startswith(':') else ' '}{problem}")
        self.name = name
        self.problem = problem


class WorkerLost(ClusterError):
    """A worker the run uses left the cluster (the driver recovers from it)."""


class Interrupted(BigLDAError):
    """Training was interrupted (SIGINT); the message says how to resume."""

    exit_code = 130


class PipelineError(BigLDAError):
    """A pipeline file that cannot be read, or a stage that failed (one line)."""


class ExportError(BigLDAError):
    """An export that cannot be written (unwritable path, missing optional library)."""
