"""The package's layers import downward only (docs/architecture.md).

Every ``import`` in every module of ``biglda`` — at the top or inside a function — is read
with :mod:`ast` and checked against the layer order; ``biglda/__init__.py`` (the lazy public
façade) is the one module allowed to name every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "biglda"

# lowest first; a module may import its own layer or any lower one
LAYERS = ["io", "errors", "corpus", "samplers", "ps", "trainer", "model", "pipeline", "cli"]
GROUND = {"io": 0, "errors": 0}


def _rank(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "biglda" or len(parts) < 2:
        return None
    name = parts[1]
    if name in GROUND:
        return GROUND[name]
    return LAYERS.index(name) if name in LAYERS else None


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    rel = path.relative_to(PACKAGE)
    own = "biglda." + ".".join(rel.with_suffix("").parts)
    mine = _rank(own)
    assert mine is not None, f"{rel} belongs to no layer: add it to LAYERS"
    upward = [f"{rel}:{line} imports {name}" for line, name in _imports(path)
              if (r := _rank(name)) is not None and r > mine]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_the_layer_list_covers_the_package():
    top = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()
           if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    assert top - {"__init__"} <= set(LAYERS)


def test_the_check_sees_function_local_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import numpy\n\ndef f():\n    from biglda.model.store import save_model\n")
    names = [name for _, name in _imports(src)]
    assert names == ["numpy", "biglda.model.store"]
    assert _rank("biglda.model.store") > _rank("biglda.trainer.run") > _rank("biglda.ps.table")
