"""The Dask trainer (``biglda.train.driver``) — and, when called, ``biglda.train(...)``.

``biglda.train`` names both this subpackage and the top-level training function (a lazy
export of :func:`biglda.model.train`). Importing any ``biglda.train.*`` module makes
Python set the package attribute ``biglda.train`` to this module, replacing the
function; so the module itself is made callable and forwards to
:func:`biglda.model.train`, and ``biglda.train(corpus, n_topics=...)`` works whatever
was imported before.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from biglda.model import train

        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
