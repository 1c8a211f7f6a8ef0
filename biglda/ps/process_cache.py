"""One table cache per worker process, shared by all the shards it holds and its threads.

:class:`ProcessCache` is a :class:`biglda.ps.cache.ShardCache` over the union of the process's
shards' vocabularies (their tokens concatenated, remapped once to local ids), registered with
the parameter server under its *lead* shard: one attach, then one pull and one push per table
shard per clock, whatever the number of shards and threads. The lead pushes the process's
merged delta; the other shards (``members``) push empty deltas under their own ids, so the
table's per-shard clocks, snapshots and idempotent retries work as before, and the table
trims its log by what the lead has received (see :meth:`biglda.ps.table.TableShard.attach`).
Since the lead's push holds every move of the process, the server's "take out the puller's
own moves" takes out exactly what the process cache already has.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from biglda.ps._kernels import add_coo, sum_sorted
from biglda.ps.cache import ShardCache
from biglda.ps.calls import call_all
from biglda.ps.client import TableClient

_EMPTY = np.zeros(0, dtype=np.int32)


def add_deltas(n_wk: np.ndarray, n_k: np.ndarray, deltas: Sequence[tuple[np.ndarray, ...]]
               ) -> None:
    """Add sweep deltas ``(words, topics, counts, delta_k)`` (local ids) to a table in place."""
    for words, topics, counts, dk in deltas:
        if len(words):
            add_coo(n_wk, np.asarray(words, dtype=np.int64), topics, counts)
        n_k += dk


class ProcessCache(ShardCache):
    """The cached rows of every shard a worker process holds.

    Parameters
    ----------
    lead : the shard whose identity pulls and pushes the process's delta.
    members : every shard of the process (the lead included or not).
    tokens : int32 [N] global word ids of the process's shards, concatenated.
    bounds, n_topics : as :class:`ShardCache`.
    """

    def __init__(self, lead: int, members: Sequence[int], tokens: np.ndarray,
                 bounds: np.ndarray, n_topics: int) -> None:
        super().__init__(lead, tokens, bounds, n_topics)
        self.members = tuple(int(m) for m in members if int(m) != int(lead))

    def push_all(self, tables: TableClient, clock: int,
                 deltas: Sequence[tuple[np.ndarray, ...]], timeout: float,
                 advance: int | None = None, wait: bool = True) -> int:
        """Push the process's delta of ``clock`` under the lead; return bytes sent.

        The delta is the sum of ``deltas`` (local ids); every other shard pushes an empty one.
        ``advance``: the lead's push also advances it to that clock (:meth:`ShardCache.push`);
        ``wait=False`` with it: the lead's calls and the members' are all sent, and answered
        at :meth:`ShardCache.settle`.
        """
        parts = [d for d in deltas if len(d[0])]
        if len(parts) == 1:
            words, topics, counts = parts[0][:3]
        else:  # each sweep's delta is sorted and unique (the sampler contract): merge them
            words, topics, counts = sum_sorted(parts)
        sent = self.push(tables, clock, words, topics, counts, timeout, advance=advance,
                         wait=wait or advance is None)
        self.push_members(tables, clock, timeout, wait=wait or advance is None)
        return sent

    def push_members(self, tables: TableClient, clock: int, timeout: float,
                     log: bool = True, wait: bool = True) -> None:
        """Push the other shards' (empty) deltas of ``clock``: their clocks advance on the table.

        All at once; ``wait=False``: answered at :meth:`ShardCache.settle`.
        """
        empty = [(_EMPTY, _EMPTY, _EMPTY)] * tables.n_parts
        futs = [f for m in self.members for f in tables.send_push(m, clock, empty, log=log)]
        what = f"shards {self.shard}..: the members' pushes of clock {clock}"
        if wait:
            call_all(futs, timeout, what)
        else:
            self.defer(futs, what)
