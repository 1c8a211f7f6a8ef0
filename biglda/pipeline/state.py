"""Whether a stage is up to date: fingerprints of files, stage keys, records, the plan."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import biglda
from biglda.pipeline.spec import Pipeline, Stage, refs_in

#: Files up to this size are fingerprinted by content, larger ones by size and mtime.
HASH_LIMIT = 256 << 20


def fingerprint(path: str) -> str:
    """Hash a file (by content up to HASH_LIMIT) or a folder (names, sizes, mtimes), shortly.

    Examples
    --------
    >>> fingerprint("/no/such/path")
    'missing'
    """
    h = hashlib.sha256()
    if os.path.isfile(path):
        st = os.stat(path)
        if st.st_size <= HASH_LIMIT:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        else:
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    elif os.path.isdir(path):
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for fn in sorted(filenames):
                full = os.path.join(dirpath, fn)
                st = os.stat(full)
                rel = os.path.relpath(full, path)
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    else:
        return "missing"
    return h.hexdigest()[:16]


def version() -> str:
    """Biglda's version (part of every stage key)."""
    return biglda.__version__


def _resolve_value(p: Pipeline, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("@"):
        sname, _, art = value[1:].partition(".")
        return p.artifact(sname, art or None)
    if isinstance(value, list):
        return [_resolve_value(p, v) for v in value]
    return value


def _abs(p: Pipeline, path: str) -> str:
    return path if "://" in path else os.path.normpath(os.path.join(p.root, path))


def resolved_params(p: Pipeline, st: Stage) -> dict[str, Any]:
    """Return the stage's parameters with references and input paths made absolute."""
    out = {k: _resolve_value(p, v) for k, v in st.params.items()}
    for param in st.spec.paths:
        if param in out and not refs_in(st.params[param]):
            v = out[param]
            out[param] = [_abs(p, x) for x in v] if isinstance(v, list) else _abs(p, str(v))
    return out


def stage_key(p: Pipeline, st: Stage) -> tuple[str, dict[str, str]]:
    """``(key, input fingerprints)`` of a stage as things are on disk now."""
    params = resolved_params(p, st)
    inputs: dict[str, str] = {}
    for value in st.params.values():
        for ref in refs_in(value):
            sname, _, art = ref[1:].partition(".")
            inputs[ref] = fingerprint(p.artifact(sname, art or None))
    for param in st.spec.paths:
        if param in params and not refs_in(st.params[param]):
            vals = params[param] if isinstance(params[param], list) else [params[param]]
            for v in vals:
                inputs[v] = fingerprint(v) if "://" not in v else "url"
    payload = {"kind": st.kind, "params": st.params, "inputs": inputs, "version": version()}
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest(), inputs


def read_record(p: Pipeline, st: Stage) -> dict | None:
    """Return the record of the stage's last success, or None."""
    try:
        with open(p.record_path(st)) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("status") == "ok" else None


def stage_state(p: Pipeline, st: Stage) -> tuple[bool, str]:
    """``(up_to_date, why)`` of one stage given what is on disk now."""
    rec = read_record(p, st)
    if rec is None:
        return False, "never ran"
    key, _ = stage_key(p, st)
    if rec.get("key") != key:
        return False, "parameters or inputs changed"
    for name, fn in st.outputs.items():
        path = os.path.join(p.stage_dir(st), fn)
        if not os.path.exists(path):
            return False, f"output {fn} is missing"
        if rec.get("outputs", {}).get(name) != fingerprint(path):
            return False, f"output {fn} changed since it was written"
    return True, "up to date"


def plan(p: Pipeline) -> list[tuple[Stage, bool, str]]:
    """``(stage, up_to_date, why)`` of every stage; a stage after a stale one is stale too."""
    stale: set[str] = set()
    out = []
    for st in p.stages:
        ok, why = stage_state(p, st)
        after = [d for d in st.deps if d in stale]
        if ok and after:
            ok, why = False, f"after {', '.join(after)} reruns"
        if not ok:
            stale.add(st.name)
        out.append((st, ok, why))
    return out
