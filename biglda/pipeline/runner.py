"""Running a pipeline: one run per run directory, each stage in its folder, then its record."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from biglda.errors import BigLDAError, PipelineError
from biglda.io import write_text_atomic
from biglda.pipeline.spec import RECORD_DIR, Note, Pipeline, Stage
from biglda.pipeline.state import fingerprint, resolved_params, stage_key, stage_state, version


@dataclass
class StageResult:
    """What happened to one stage in a run."""

    name: str
    kind: str
    status: str                 # "ran" or "skipped"
    reason: str
    seconds: float = 0.0
    summary: str = ""


Event = Callable[[str, Stage, dict[str, Any]], None]


def _progress(emit: Any, st: Stage) -> Any:
    """Return the stage's progress callback: each line of text becomes a ``progress`` event."""
    def note(text: str) -> None:
        emit("progress", st, {"text": text})
    return note


def run_pipeline(p: Pipeline, *, force: bool = False, stages: Iterable[str] | None = None,
                 on_event: Event | None = None) -> list[StageResult]:
    """Run the stages of ``p`` that are not up to date, in order; return what happened.

    ``force`` reruns every selected stage. ``stages`` selects stages by name; the stages they
    depend on are included (and run only if they are not up to date). ``on_event(what, stage,
    info)`` is called with ``what`` in {"skip", "start", "progress", "done"}.

    Examples
    --------
    >>> p = load_pipeline("pipelines/demo.toml")  # doctest: +SKIP
    >>> [(r.name, r.status) for r in run_pipeline(p)]  # doctest: +SKIP
    [('ingest', 'skipped'), ('train', 'skipped'), ('evaluate', 'skipped'), ('report', 'skipped')]
    """
    selected = _select(p, stages)
    emit = on_event or (lambda *a: None)
    os.makedirs(os.path.join(p.run_dir, RECORD_DIR), exist_ok=True)
    with _RunLock(os.path.join(p.run_dir, RECORD_DIR, "lock")):
        return _run_selected(p, selected, force, emit)


class _RunLock:
    """One run per run directory at a time: a lock file holding the runner's pid.

    A lock left by a process that no longer exists is taken over.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> _RunLock:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    with open(self.path) as f:
                        pid = int(f.read().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and _alive(pid):
                    run_dir = os.path.dirname(os.path.dirname(self.path))
                    raise PipelineError(f"another run is using {run_dir} (pid {pid}); wait for "
                                        f"it or remove {self.path}") from None
                os.remove(self.path)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return self
        raise PipelineError(f"cannot take the lock {self.path}")

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            os.remove(self.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_selected(p: Pipeline, selected: set[str], force: bool, emit: Event) -> list[StageResult]:
    results: list[StageResult] = []
    for st in p.stages:
        if st.name not in selected:
            continue
        ok, why = stage_state(p, st)
        if ok and not force:
            emit("skip", st, {"reason": why})
            results.append(StageResult(st.name, st.kind, "skipped", why))
            continue
        why = "forced" if force else why
        emit("start", st, {"reason": why})
        t0 = time.perf_counter()
        summary = _run_stage(p, st, _progress(emit, st))
        seconds = time.perf_counter() - t0
        emit("done", st, {"seconds": seconds, "summary": summary})
        results.append(StageResult(st.name, st.kind, "ran", why, seconds, summary))
    return results


def _select(p: Pipeline, names: Iterable[str] | None) -> set[str]:
    by_name = p._by_name()
    if names is None:
        return set(by_name)
    todo = list(names)
    for n in todo:
        if n not in by_name:
            raise PipelineError(f"no stage named {n!r} in {p.path} (stages: "
                                f"{', '.join(by_name)})")
    out: set[str] = set()
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += by_name[n].deps
    return out


def _run_stage(p: Pipeline, st: Stage, note: Note) -> str:
    """Run one stage in an emptied folder; write its record only once it succeeded."""
    record = p.record_path(st)
    if os.path.exists(record):
        os.remove(record)  # from here on, nothing claims this stage succeeded
    key, inputs = stage_key(p, st)
    folder = p.stage_dir(st)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    params = resolved_params(p, st)
    started = time.time()
    try:
        summary = st.spec.run(p, st, params, folder, note)
        for fn in st.outputs.values():
            if not os.path.exists(os.path.join(folder, fn)):
                raise PipelineError(f"did not write its output {fn}")
    except BaseException as exc:
        with open(os.path.join(folder, "error.log"), "w") as f:
            traceback.print_exc(file=f)
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise PipelineError(_failure(st, folder, exc)) from exc
    rec = {"stage": st.name, "kind": st.kind, "status": "ok", "key": key,
           "params": st.params, "inputs": inputs,
           "outputs": {name: fingerprint(os.path.join(folder, fn))
                       for name, fn in st.outputs.items()},
           "biglda_version": version(), "started": started, "finished": time.time(),
           "seconds": time.time() - started, "summary": summary}
    write_text_atomic(record, json.dumps(rec, indent=1, default=str))
    return summary


def _failure(st: Stage, folder: str, exc: BaseException) -> str:
    """Return the one line a failed stage raises: its first line, the type of a non-user error."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if not isinstance(exc, BigLDAError):
        msg = f"{type(exc).__name__}: {msg}"
    return (f"stage {st.name!r} ({st.kind}) failed: {msg} (details in "
            f"{os.path.relpath(os.path.join(folder, 'error.log'))})")
