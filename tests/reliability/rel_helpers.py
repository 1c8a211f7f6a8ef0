"""Helpers of the reliability tests: the recount oracle and a real kill of a worker process."""

from __future__ import annotations

import os
import signal

import numpy as np


def recount_table(corpus_url: str, z_by_shard: dict, shards, n_topics: int):
    """``(n_wk, n_k)`` recounted from every shard's z: the oracle of the parameter server."""
    from biglda.corpus import Corpus
    from biglda.samplers import count_from_z

    corpus = Corpus.open(corpus_url)
    z = np.concatenate([z_by_shard[s.index] for s in shards])
    tokens = corpus.read_tokens(0, corpus.n_tokens)
    return count_from_z(tokens, corpus.doc_ptr, z, corpus.n_words, n_topics)


def kill_worker(client, address: str, sig: int = signal.SIGKILL) -> int:
    """Send ``sig`` to the process of the worker at ``address``; return its pid."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, sig)
    return pid


def worker_addresses(client, n: int | None = None) -> list[str]:
    """The workers' addresses, sorted, asked of the scheduler now (``n``: first wait up to
    60 s for that many, e.g. for a nanny's replacement of a worker an earlier test killed).

    Not ``client.scheduler_info()``: when its query fails it returns the client's cached
    identity, whose periodic updates carry no workers (distributed 2026.8).
    """
    if n is not None:
        client.wait_for_workers(n, timeout=60)
    return sorted(client.nthreads())
