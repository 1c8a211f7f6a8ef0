"""The training driver (:mod:`biglda.train.driver`), worker tasks, checkpoints, the model store.

``from biglda.train.driver import train`` is the entry point; it is not imported here so that
reading a model (:mod:`biglda.train.model_store`) does not import Dask.

This package is also callable: ``biglda.train`` names both this subpackage and the top-level
function :func:`biglda.model.train` (a lazy export). Importing any ``biglda.train.*`` module
makes Python set the attribute ``biglda.train`` to this package, replacing the function, so
``biglda.train(corpus, n_topics=...)`` would fail with "module is not callable" after the
first call or after the CLI imported the driver. Calling the package forwards to
:func:`biglda.model.train` (imported only on call: still no Dask import here).
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
