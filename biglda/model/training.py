"""The training job: validate, connect, run on Dask, save ``model.zarr``.

:func:`train` is ``biglda.train``: it returns a :class:`TopicModel`. :func:`train_to_store`
is the job behind it (and behind ``biglda train``): every setting and input is checked up
front, so a bad one fails in one line before anything is started or written; then it connects
to a scheduler or starts an embedded ``LocalCluster``, runs
:func:`biglda.trainer.run.run_training` and writes the model atomically.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from biglda.errors import BigLDAError, InputError, Interrupted
from biglda.io import check_writable
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
          progress: bool | None = None, ingest: dict | None = None,
          **overrides: Any) -> TopicModel:
    """Train LDA on a corpus with the Dask trainer and return the model.

    Works from a plain script (no ``if __name__ == "__main__":`` guard needed), from
    ``python -c`` and from a notebook: the embedded cluster's workers never re-import the
    caller's ``__main__``.

    Parameters
    ----------
    corpus : Corpus, str or iterable of str
        A :class:`biglda.corpus.Corpus`, the URL of a ``corpus.zarr``, or the texts
        themselves (a list or any iterable of strings, for small corpora): they are
        ingested to a temporary ``corpus.zarr`` first, with ``ingest`` as the options of
        :func:`biglda.corpus.ingest` (default: its defaults, e.g. ``min_df=5``).
    out : str, optional
        Where to write ``model.zarr`` (any fsspec URL). Default: a new temporary
        directory, kept (the model reads its doc-topic table from it lazily) and named in
        a log line; a failed call removes it.
    config : biglda.trainer.config.TrainConfig, optional
        The settings; ``overrides`` replace some of them.
    on_record : callable or list of callables, optional
        Receive every metrics record (docs/contracts.md).
    progress : bool, optional
        Show a progress bar (tqdm if installed, else rich). Default: in a notebook only.
    ingest : dict, optional
        Options of :func:`biglda.corpus.ingest` when ``corpus`` is texts.
    **overrides
        Settings by name (:class:`biglda.trainer.config.TrainConfig`): ``n_topics`` (needed
        unless ``config`` has it), ``iterations``, ``sampler``, ``sampler_params``, ``alpha``,
        ``beta``, ``workers``, ``staleness``, ``seed``, ``scheduler`` (an address or a
        ``Client``), ``backend``... A bad value is a ConfigError naming the setting.

    Examples
    --------
    >>> model = biglda.train("runs/demo/corpus.zarr", n_topics=20)  # doctest: +SKIP
    >>> model.top_words(0)  # doctest: +SKIP
    >>> model = biglda.train(["a text about cats", "one about dogs"], n_topics=2,
    ...                      ingest={"min_df": 1})  # doctest: +SKIP
    """
    import shutil

    texts = _texts_of(corpus)
    kept = None if out is not None else tempfile.mkdtemp(prefix="biglda-model-")
    scratch = tempfile.mkdtemp(prefix="biglda-corpus-") if texts is not None else None
    target = out if out is not None else os.path.join(str(kept), "model.zarr")
    callbacks = list(on_record) if isinstance(on_record, list | tuple) else (
        [on_record] if on_record is not None else [])
    bar = _progress_bar(progress)
    if bar is not None:
        callbacks.append(bar)
    try:
        if texts is not None:
            url = _ingest_texts(texts, os.path.join(str(scratch), "corpus.zarr"), ingest or {})
        else:
            url = _corpus_url(corpus)
        path = train_to_store(url, target, config, on_record=callbacks or None, **overrides)
        model = TopicModel.load(path)
    except BaseException:
        if kept is not None:  # a failed call leaves no empty model folder behind
            shutil.rmtree(kept, ignore_errors=True)
        raise
    finally:
        if bar is not None:
            bar.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if kept is not None:
        log.warning("biglda.train: model kept at %s (pass out= to choose where)", path)
    return model


def _texts_of(corpus: Any) -> list[str] | None:
    """Return the texts of ``corpus`` when it is an iterable of strings (else None: a store)."""
    if isinstance(corpus, str | bytes | os.PathLike) or hasattr(corpus, "url"):
        return None
    if not hasattr(corpus, "__iter__"):
        return None
    texts = list(corpus)
    bad = next((t for t in texts if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(f"texts must be strings, got a {type(bad).__name__}")
    if not texts:
        raise InputError("no texts to train on (an empty iterable)")
    return texts


def _ingest_texts(texts: list[str], url: str, options: dict) -> str:
    """Write ``texts`` as a JSONL file and ingest it to ``url``; return ``url``."""
    import json

    from biglda.corpus.ingest import ingest

    path = os.path.join(os.path.dirname(url), "texts.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    ingest(path, url, **{"format": "jsonl", "jobs": 1, **options})
    os.remove(path)
    return url


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's ``ZMQInteractiveShell``)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def _progress_bar(progress: bool | None) -> Any:
    """Return a metrics-record callback drawing a progress bar, or None.

    None when ``progress`` is False, or when it is None outside a notebook.
    """
    if progress is None:
        progress = _in_notebook()
    return _ProgressBar() if progress else None


class _ProgressBar:
    """Show iterations done, LL/token and tokens/s from the records.

    Drawn by tqdm (``tqdm.auto``: a widget in a notebook) when installed, else by rich.
    """

    def __init__(self) -> None:
        self._bar: Any = None
        self._rich: Any = None

    def __call__(self, rec: dict) -> None:
        kind = rec.get("type")
        if kind == "start":
            self._open(int((rec.get("config") or {}).get("iterations") or 0) or None)
        elif kind == "iteration" and (self._bar is not None or self._rich is not None):
            desc = f"LL/token {rec['ll_per_token']:.4f}, {rec['tokens_per_s']:,.0f} tokens/s"
            if self._bar is not None:
                self._bar.n = int(rec["iteration"])
                self._bar.set_postfix_str(desc, refresh=False)
                self._bar.refresh()
            else:
                progress, task = self._rich
                progress.update(task, completed=int(rec["iteration"]), description=desc)

    def _open(self, total: int | None) -> None:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            from rich.progress import Progress

            progress = Progress()
            self._rich = (progress, progress.add_task("training", total=total))
            progress.start()
        else:
            self._bar = tqdm(total=total, desc="training", unit="it")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._rich is not None:
            self._rich[0].stop()
        self._bar = self._rich = None


def train_to_store(corpus: str, out: str, config: Any = None, *, on_record: Any = None,
                   **overrides: Any) -> str:
    """Train on the ``corpus.zarr`` at ``corpus``, write the model to ``out``; return ``out``.

    Settings as in :func:`train`. A first SIGINT stops after the current clock, commits a
    checkpoint and raises :class:`biglda.errors.Interrupted` (exit code 130 in the CLI) whose
    message says how to resume; no model is written.
    """
    from biglda.trainer.cluster import connect, load_plugins
    from biglda.trainer.config import TrainConfig, validate
    from biglda.trainer.layout import choose_layout
    from biglda.trainer.metrics import Emitter, end_record, start_record
    from biglda.trainer.placement import balancing, plan_cluster

    cfg = TrainConfig.from_settings(config, **overrides)
    log.info("training K=%d on %s -> %s", cfg.n_topics, corpus, out)
    corpus_obj = validate(corpus, out, cfg)
    check_writable(out)  # before a cluster starts
    if cfg.backend == "gpu" and cfg.scheduler is None:  # the embedded workers are this machine's
        from biglda.samplers.backends import require_gpu

        require_gpu()
    run_id = uuid.uuid4().hex[:12]
    t0 = time.time()
    status = "error"
    sampler = _cpu_sampler(cfg, corpus_obj)
    layout = None if cfg.scheduler is not None else choose_layout(
        cfg.workers, cfg.threads_per_worker, cfg.backend, sampler, cfg.takes_turns(sampler))
    with connect(cfg.scheduler, layout.processes if layout else cfg.workers,
                 layout.threads if layout else (cfg.threads_per_worker or 1),
                 cfg.connect_timeout, backend=cfg.backend) as client:
        log.info("connected to %s in %.1f s", client.scheduler.address, time.time() - t0)
        emit = Emitter(client, on_record)
        # fail before anything starts or is written
        _, _, backends = plan_cluster(client, corpus_obj, cfg, log_choice=True)
        cfg, choice = _resolve_sampler(cfg, corpus_obj, backends)
        emit(start_record(run_id=run_id, config=cfg.as_dict(), backends=backends,
                          sampler_choice=choice,
                          layout=layout.as_dict() if layout else None,
                          balance=balancing(cfg, backends), corpus=corpus_obj,
                          corpus_url=corpus, out=out, dashboard=client.dashboard_link,
                          pages=load_plugins(client)))
        try:
            status = _run_and_save(client, corpus, corpus_obj, out, cfg, emit, run_id, t0,
                                   choice)
        except Interrupted:
            status = "interrupted"
            raise
        except OSError as exc:  # a full disk, a folder gone read-only: one line
            if exc.errno not in _WRITE_ERRORS:
                raise
            _drop_uncommitted_checkpoint(out, cfg)
            raise BigLDAError(f"cannot write {out}: {exc.strerror or exc}") from None
        finally:
            emit(end_record(run_id, time.time() - t0, status, out))
    return out


# errno values of a write that cannot succeed (as opposed to a bug): full disk, quota,
# read-only filesystem, no permission, a file where a folder should be
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                 errno.ENOTDIR, errno.EFBIG}


def _drop_uncommitted_checkpoint(out: str, cfg: Any) -> None:
    """Remove the checkpoint store of a run that failed before committing any clock.

    Such a store cannot be resumed from; a committed one stays for ``--resume``.
    """
    import contextlib

    import zarr

    from biglda.io import remove
    from biglda.trainer import checkpoint as ckpt

    if not cfg.checkpoint_every or cfg.resume:
        return
    url = ckpt.checkpoint_url(out)
    with contextlib.suppress(Exception):
        clock: Any = zarr.open_group(url, mode="r").attrs.get("clock", -1)
        if int(clock) < 0:
            remove(url)


def _cpu_sampler(cfg: Any, corpus: Any) -> str:
    """Return the sampler a CPU run uses (``auto`` resolved as on CPU workers): its layout's."""
    if cfg.sampler != "auto":
        return str(cfg.sampler)
    from biglda.samplers.auto import choose_sampler

    return choose_sampler(cfg.n_topics, corpus.n_tokens, corpus.n_docs, corpus.n_words).sampler


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

    assert result.alpha is not None, "a finished run carries its final alpha"
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
