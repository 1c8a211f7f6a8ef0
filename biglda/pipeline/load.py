"""Reading a pipeline file: stages, overrides, parameter checks and references."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable
from typing import Any

from biglda.errors import PipelineError
from biglda.pipeline.spec import Pipeline, Stage, refs_in
from biglda.pipeline.stages import KINDS

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def load_pipeline(path: str, run_dir: str | None = None,
                  overrides: Iterable[str] = ()) -> Pipeline:
    """Read and check a pipeline file; ``overrides`` are ``STAGE.KEY=VALUE`` (TOML values).

    Raises :class:`PipelineError` (one line) for a missing or invalid file, an unknown stage
    kind, a reference to a stage that does not come earlier, or a missing parameter.

    Examples
    --------
    >>> p = load_pipeline("pipelines/demo.toml")  # doctest: +SKIP
    >>> [s.name for s in p.stages]  # doctest: +SKIP
    ['ingest', 'train', 'evaluate', 'report']
    """
    doc = _read_toml(path)
    head = doc.get("pipeline", {})
    name = str(head.get("name") or os.path.splitext(os.path.basename(path))[0])
    here = os.path.dirname(os.path.abspath(path))
    root = os.path.normpath(os.path.join(here, str(head.get("root", "."))))
    if run_dir is None:
        run_dir = os.path.join(root, str(head.get("run_dir", os.path.join("runs", name))))
    stages = _declared_stages(path, doc["stages"])
    _apply_overrides(stages, overrides)
    pipeline = Pipeline(name, os.path.abspath(path), root, os.path.abspath(run_dir),
                        str(head.get("description", "")), stages)
    for st in stages:
        _check_params(path, st)
    _resolve_refs(pipeline)
    return pipeline


def _read_toml(path: str) -> dict[str, Any]:
    """Read the file as TOML, with a ``[pipeline]`` table (maybe empty) and ``[stages.*]``."""
    if not os.path.isfile(path):
        raise PipelineError(f"{path}: no such pipeline file")
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise PipelineError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{path}: cannot read: {exc}") from None
    if not isinstance(doc.get("pipeline", {}), dict):
        raise PipelineError(f"{path}: [pipeline] must be a table")
    unknown = set(doc) - {"pipeline", "stages"}
    if unknown:
        raise PipelineError(f"{path}: unknown top-level table(s) {', '.join(sorted(unknown))} "
                            "(expected [pipeline] and [stages.NAME])")
    raw = doc.get("stages")
    if not isinstance(raw, dict) or not raw:
        raise PipelineError(f"{path}: no stages (declare them as [stages.NAME] tables)")
    return doc


def _declared_stages(path: str, raw: dict[str, Any]) -> list[Stage]:
    stages: list[Stage] = []
    for sname, params in raw.items():
        if not isinstance(params, dict):
            raise PipelineError(f"{path}: stages.{sname} must be a table")
        if not _NAME.match(sname):
            raise PipelineError(f"{path}: stage name {sname!r} may only use letters, digits, _ "
                                "and -")
        params = dict(params)
        kind = str(params.pop("kind", sname))
        if kind not in KINDS:
            raise PipelineError(f"{path}: stage {sname!r} has unknown kind {kind!r} (known: "
                                f"{', '.join(KINDS)})")
        if KINDS[kind].script is not None:
            params.setdefault("script", KINDS[kind].script)
        stages.append(Stage(sname, KINDS[kind], params))
    return stages


def _apply_overrides(stages: list[Stage], overrides: Iterable[str]) -> None:
    by_name = {s.name: s for s in stages}
    for item in overrides:
        key, eq, value = item.partition("=")
        sname, dot, param = key.strip().partition(".")
        if not eq or not dot or not param:
            raise PipelineError(f"--set {item!r}: expected STAGE.KEY=VALUE")
        if sname not in by_name:
            raise PipelineError(f"--set {item!r}: no stage named {sname!r}")
        by_name[sname].params[param] = _toml_value(value.strip())


def _check_params(path: str, st: Stage) -> None:
    allowed = st.spec.params()
    extra = set(st.params) - allowed if allowed is not None else set()
    if extra:
        raise PipelineError(f"{path}: stage {st.name!r} ({st.kind}): unknown parameter(s) "
                            f"{', '.join(sorted(extra))} (allowed: "
                            f"{', '.join(sorted(allowed or ()))})")


def _resolve_refs(p: Pipeline) -> None:
    """Fill default references, check every reference, and list each stage's dependencies."""
    seen: list[Stage] = []
    for st in p.stages:
        for param, wanted in st.spec.refs.items():
            if param in st.params:
                continue
            for prev in reversed(seen):
                hit = next((a for a in wanted if a in prev.outputs), None)
                if hit is not None:
                    st.params[param] = f"@{prev.name}.{hit}"
                    break
        for param in st.spec.required:
            if param not in st.params:
                raise PipelineError(f"{p.path}: stage {st.name!r} ({st.kind}) needs "
                                    f"{param!r}")
        for param, value in st.params.items():
            for ref in refs_in(value):
                _check_ref(p, seen, st, param, ref)
        seen.append(st)


def _check_ref(p: Pipeline, seen: list[Stage], st: Stage, param: str, ref: str) -> None:
    sname, _, art = ref[1:].partition(".")
    prev = next((s for s in seen if s.name == sname), None)
    if prev is None:
        where = "is declared later" if sname in {s.name for s in p.stages} else \
            "does not exist"
        raise PipelineError(f"{p.path}: stage {st.name!r}: {param} = {ref!r}: stage "
                            f"{sname!r} {where}")
    if art and art not in prev.outputs:
        raise PipelineError(f"{p.path}: stage {st.name!r}: {param} = {ref!r}: "
                            f"{sname!r} has no output {art!r} (it has "
                            f"{', '.join(prev.outputs)})")
    if sname not in st.deps:
        st.deps.append(sname)


def list_pipelines(folder: str) -> list[tuple[str, str]]:
    """``(path, description)`` of every ``*.toml`` pipeline in ``folder``."""
    out = []
    for fn in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if fn.endswith(".toml"):
            path = os.path.join(folder, fn)
            try:
                with open(path, "rb") as f:
                    desc = str(tomllib.load(f).get("pipeline", {}).get("description", ""))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                desc = f"(unreadable: {exc})"
            out.append((path, desc))
    return out
