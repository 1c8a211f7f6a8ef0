"""What a pipeline is made of: stage kinds, declared stages, and the parsed pipeline."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Where a run directory keeps the record of each stage that succeeded.
RECORD_DIR = ".stages"

Note = Callable[[str], None]  # a stage's progress line
Runner = Callable[["Pipeline", "Stage", dict, str, Note], str]


@dataclass(frozen=True)
class StageKind:
    """One stage kind, declared once: what it reads and writes, what it accepts, how it runs.

    ``params`` returns the parameters the kind accepts (``None``: any, passed on to a
    script); it is a function so that a kind whose keys come from another declaration
    (``train``: the trainer's settings) imports that declaration only when asked.
    ``run(pipeline, stage, params, folder, note)`` does the work inside ``folder`` and
    returns a one-line summary.
    """

    name: str
    params: Callable[[], frozenset[str] | None]
    run: Runner
    outputs: dict[str, str] | None  # artifact -> file name; None: the stage's `outputs`
    default: str = ""  # the artifact "@stage" means
    refs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # param -> artifacts it
    # defaults to (from the latest stage that has one)
    required: tuple[str, ...] = ()  # params that must be given (or defaulted)
    paths: tuple[str, ...] = ()  # params that name input files (relative to root)
    script: str | None = None  # default ``script`` of a kind that runs one


@dataclass
class Stage:
    """One declared stage: its name, kind and raw parameters (references unresolved)."""

    name: str
    spec: StageKind
    params: dict[str, Any]
    deps: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The name of the stage's kind."""
        return self.spec.name

    @property
    def outputs(self) -> dict[str, str]:
        """Artifact name -> file name in the stage folder."""
        if self.spec.outputs is not None:
            return self.spec.outputs
        # named by stem ("@stage.scaling"); files sharing a stem keep their full names,
        # so every declared output is tracked (scaling.json and scaling.md both)
        files = list(self.params.get("outputs", []))
        stems = [os.path.splitext(o)[0] for o in files]
        return {(s if stems.count(s) == 1 else o): o for s, o in zip(stems, files, strict=True)}


@dataclass
class Pipeline:
    """A parsed pipeline file."""

    name: str
    path: str
    root: str
    run_dir: str
    description: str
    stages: list[Stage]

    def stage_dir(self, stage: Stage | str) -> str:
        """Return the folder a stage writes in."""
        return os.path.join(self.run_dir, stage if isinstance(stage, str) else stage.name)

    def record_path(self, stage: Stage | str) -> str:
        """Where the record of a stage's last success is."""
        name = stage if isinstance(stage, str) else stage.name
        return os.path.join(self.run_dir, RECORD_DIR, f"{name}.json")

    def artifact(self, stage: str, name: str | None = None) -> str:
        """Return the path of a stage's output ``name`` (default: the one "@stage" means)."""
        st = self._by_name()[stage]
        name = name or st.spec.default
        return os.path.join(self.stage_dir(st), st.outputs[name])

    def _by_name(self) -> dict[str, Stage]:
        return {s.name: s for s in self.stages}


def refs_in(value: Any) -> list[str]:
    """Return the references (``"@stage"``, ``"@stage.output"``) in a parameter value."""
    if isinstance(value, str) and value.startswith("@"):
        return [value]
    if isinstance(value, list):
        return [r for v in value for r in refs_in(v)]
    return []
