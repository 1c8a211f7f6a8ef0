"""The distributed trainer: runs LDA's clocks on Dask (the layer between ``ps`` and ``model``).

Rooms, one role each:

- :mod:`~biglda.trainer.config` — every training setting, declared once (:class:`TrainConfig`),
  and the validation of a run's inputs.
- :mod:`~biglda.trainer.cluster` — connect or start a cluster, watch its workers, SIGINT.
- :mod:`~biglda.trainer.placement` — the shard plan, backends, balancing and rebalancing.
- :mod:`~biglda.trainer.run` / :mod:`~biglda.trainer.attempt` — the clock loop, recovery and
  restarts.
- :mod:`~biglda.trainer.worker` — the task on each worker thread.
- :mod:`~biglda.trainer.metrics` — the records and their sinks; :mod:`~biglda.trainer.alpha` —
  asymmetric alpha; :mod:`~biglda.trainer.checkpoint` — checkpoints of ``z``.

The job (validate, connect, run, save) is :func:`biglda.model.training.train`, exported as
``biglda.train``. Nothing is imported here, so ``import biglda.trainer`` imports no Dask.
"""
