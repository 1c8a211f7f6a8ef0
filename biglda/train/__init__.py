"""The training driver (:mod:`biglda.train.driver`), worker tasks, checkpoints, the model store.

``from biglda.train.driver import train`` is the entry point; it is not imported here so that
reading a model (:mod:`biglda.train.model_store`) does not import Dask.
"""
