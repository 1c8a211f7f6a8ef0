"""The training job: validate, connect, run on Dask, save ``model.zarr``.

:func:`train` is ``biglda.train``: it returns a :class:`TopicModel`. :func:`train_to_store`
is the job behind it (and behind ``biglda train``): every setting and input is checked up
front, so a bad one fails in one line before anything is started or written; then it connects
to a scheduler or starts an embedded ``LocalCluster``, runs
:func:`biglda.trainer.run.run_training` and writes the model atomically.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from biglda.errors import InputError, Interrupted
from biglda.model.topic_model import TopicModel

log = logging.getLogger("biglda.train")


def _corpus_url(corpus: Any) -> str:
    url = getattr(corpus, "url", None)
    if url is not None:
        return str(url)
    if isinstance(corpus, str | os.PathLike):
        return os.fspath(corpus)
    raise InputError(f"expected a Corpus or a corpus URL, got {type(corpus).__name__}")


def train(corpus: Any, out: str | None = None, config: Any = None, *, on_record: Any = None,
          **overrides: Any) -> TopicModel:
    """Train LDA on a corpus with the Dask trainer and return the model.

    Parameters
    ----------
    corpus : Corpus or str
        A :class:`biglda.corpus.Corpus` or the URL of a ``corpus.zarr``.
    out : str, optional
        Where to write ``model.zarr`` (any fsspec URL). Default: a new temporary
        directory (kept: the model reads its doc-topic table from it lazily).
    config : biglda.trainer.config.TrainConfig, optional
        The settings; ``overrides`` replace some of them.
    on_record : callable or list of callables, optional
        Receive every metrics record (docs/contracts.md).
    **overrides
        Settings by name (:class:`biglda.trainer.config.TrainConfig`): ``n_topics`` (needed
        unless ``config`` has it), ``iterations``, ``sampler``, ``sampler_params``, ``alpha``,
        ``beta``, ``workers``, ``staleness``, ``seed``, ``scheduler`` (an address or a
        ``Client``), ``backend``... A bad value is a ConfigError naming the setting.

    Examples
    --------
    >>> model = biglda.train("runs/demo/corpus.zarr", n_topics=20)  # doctest: +SKIP
    >>> model.top_words(0)  # doctest: +SKIP
    """
    url = _corpus_url(corpus)
    if out is None:
        out = os.path.join(tempfile.mkdtemp(prefix="biglda-model-"), "model.zarr")
    path = train_to_store(url, out, config, on_record=on_record, **overrides)
    return TopicModel.load(path)


def train_to_store(corpus: str, out: str, config: Any = None, *, on_record: Any = None,
                   **overrides: Any) -> str:
    """Train on the ``corpus.zarr`` at ``corpus``, write the model to ``out``; return ``out``.

    Settings as in :func:`train`. A first SIGINT stops after the current clock, commits a
    checkpoint and raises :class:`biglda.errors.Interrupted` (exit code 130 in the CLI) whose
    message says how to resume; no model is written.
    """
    from biglda.trainer.cluster import connect, load_plugins
    from biglda.trainer.config import TrainConfig, validate
    from biglda.trainer.metrics import Emitter, end_record, start_record
    from biglda.trainer.placement import balancing, plan_cluster

    cfg = TrainConfig.from_settings(config, **overrides)
    log.info("training K=%d on %s -> %s", cfg.n_topics, corpus, out)
    corpus_obj = validate(corpus, out, cfg)
    if cfg.backend == "gpu" and cfg.scheduler is None:  # the embedded workers are this machine's
        from biglda.samplers.backends import require_gpu

        require_gpu()
    run_id = uuid.uuid4().hex[:12]
    t0 = time.time()
    status = "error"
    with connect(cfg.scheduler, cfg.workers, cfg.threads_per_worker, cfg.connect_timeout,
                 backend=cfg.backend) as client:
        log.info("connected to %s in %.1f s", client.scheduler.address, time.time() - t0)
        emit = Emitter(client, on_record)
        # fail before anything starts or is written
        _, _, backends = plan_cluster(client, corpus_obj, cfg, log_choice=True)
        cfg, choice = _resolve_sampler(cfg, corpus_obj, backends)
        emit(start_record(run_id=run_id, config=cfg.as_dict(), backends=backends,
                          sampler_choice=choice,
                          balance=balancing(cfg, backends), corpus=corpus_obj,
                          corpus_url=corpus, out=out, dashboard=client.dashboard_link,
                          pages=load_plugins(client)))
        try:
            status = _run_and_save(client, corpus, corpus_obj, out, cfg, emit, run_id, t0,
                                   choice)
        except Interrupted:
            status = "interrupted"
            raise
        finally:
            emit(end_record(run_id, time.time() - t0, status, out))
    return out


def _resolve_sampler(cfg: Any, corpus: Any, backends: dict[str, str]) -> tuple[Any, Any]:
    """``cfg`` with ``sampler="auto"`` resolved, and the choice (None: a named sampler)."""
    cfg, choice = cfg.with_sampler_chosen(corpus, backends)
    if choice is not None:
        log.info("sampler auto: %s (%s)", choice["sampler"], choice["reason"])
    return cfg, choice


def _run_and_save(client: Any, corpus: str, corpus_obj: Any, out: str, cfg: Any, emit: Any,
                  run_id: str, t0: float, choice: dict | None = None) -> str:
    """Run on the connected client and save the model; the run's end status."""
    from biglda.model.store import save_model
    from biglda.samplers import doc_topic_counts
    from biglda.trainer.metrics import backends_used, history_for_store
    from biglda.trainer.run import run_training

    try:
        result = run_training(client, corpus_obj, cfg, out=out, on_record=emit.callbacks,
                              run_id=run_id)
    except KeyboardInterrupt:  # a second SIGINT: stopped at once
        raise Interrupted(_resume_hint(out, cfg, corpus_obj)) from None
    if result.stop_reason == "interrupted":  # no model: it would look finished
        raise Interrupted(_resume_hint(out, cfg, corpus_obj))
    log.info("trained in %.1f s (%s)", time.time() - t0, result.stop_reason)
    doc_ptr = corpus_obj.doc_ptr

    def n_dk_blocks() -> Iterator[np.ndarray]:
        for s in result.shards:
            ptr = np.asarray(doc_ptr[s.doc_start:s.doc_stop + 1], dtype=np.int64)
            yield doc_topic_counts(ptr - ptr[0], result.z[s.index], cfg.n_topics)

    save_model(out, n_wk=result.n_wk, n_dk=n_dk_blocks(), vocab=corpus_obj.vocab,
               doc_ids=corpus_obj.doc_ids, alpha=result.alpha, beta=cfg.beta,
               overwrite=cfg.overwrite,
               attrs={"sampler": cfg.sampler, "config": cfg.as_dict(),
                      "sampler_choice": choice or {"requested": cfg.sampler,
                                                   "sampler": cfg.sampler,
                                                   "params": dict(cfg.sampler_params),
                                                   "reason": "named by the run"},
                      "tokenizer": dict(corpus_obj.tokenizer or {}),
                      "history": history_for_store(result.history),
                      "backends": backends_used(result.history),
                      "corpus": str(corpus), "stop_reason": result.stop_reason})
    log.info("model saved at %.1f s", time.time() - t0)
    return "ok"


def _resume_hint(out: str, cfg: Any, corpus: Any) -> str:
    """One line: where training stopped and how to continue."""
    from biglda.trainer import checkpoint as ckpt

    url = ckpt.checkpoint_url(out) if cfg.checkpoint_every else None
    attrs = ckpt.latest_checkpoint(url, cfg.n_topics, corpus.n_tokens)
    if attrs is None:
        return ("interrupted: no checkpoint was written (--checkpoint-every 0 or before the "
                "first one); nothing to resume, run again")
    return (f"interrupted: checkpoint {url} holds iteration {int(attrs['clock'])}; run the same "
            f"command with --resume to continue (no model was written to {out})")
