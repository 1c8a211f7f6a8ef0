"""Outside ``biglda/ps`` nothing spells a clock answer or a clock sentinel: it uses the names.

Oracle: the syntax trees of the package's other modules (string constants equal to a
:class:`ClockAnswer` value, and the ``2**62`` sentinel in any spelling).
"""

from __future__ import annotations

import ast
from pathlib import Path

import biglda
from biglda.ps.protocol import ALL_CLOCKS, NO_CLOCK, ClockAnswer

ROOT = Path(biglda.__file__).parent
ANSWERS = {a.value for a in ClockAnswer}


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if isinstance(node, ast.Constant) and node.value in ANSWERS:
            found.append(f"{path.name}:{node.lineno} {node.value!r}")
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
                and isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)
                and node.left.value == 2 and node.right.value == 62):
            found.append(f"{path.name}:{node.lineno} 2**62")
        if isinstance(node, ast.Constant) and node.value in (ALL_CLOCKS, NO_CLOCK):
            found.append(f"{path.name}:{node.lineno} {node.value}")
    return found


def test_no_module_outside_ps_spells_the_protocol():
    others = [p for p in ROOT.rglob("*.py") if "ps" not in p.relative_to(ROOT).parts[:1]]
    assert others
    offences = [o for p in others for o in _offences(p)]
    assert not offences, offences
