"""Starting a parameter server: one table-shard actor per worker and the clock actor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.ps.calls import future_results
from biglda.ps.client import AlphaClient, ClockClient, MailboxClient, PSClient, TableClient
from biglda.ps.clock import ClockServer
from biglda.ps.sizing import row_bounds
from biglda.ps.table import TableShard


@dataclass(frozen=True, eq=False)
class ParameterServer:
    """A running parameter server: its client, where its actors live, and their lifetime.

    The driver keeps this object (it owns the actors: they live while ``futures`` do) and hands
    ``client`` to the workers. ``tables``, ``clock``, ``alpha``, ``mailbox`` and ``bounds`` are
    those of ``client``.

    Parameters
    ----------
    client : PSClient
        The picklable client of the actors.
    workers : tuple of str
        Worker address of each table shard (the clock lives on the first).
    futures : tuple
        The actors' futures.
    """

    client: PSClient
    workers: tuple[str, ...]
    futures: tuple[Any, ...] = ()

    @property
    def tables(self) -> TableClient:
        """The table shards."""
        return self.client.tables

    @property
    def clock(self) -> ClockClient:
        """The SSP clock."""
        return self.client.clock

    @property
    def alpha(self) -> AlphaClient:
        """The alpha broker."""
        return self.client.alpha

    @property
    def mailbox(self) -> MailboxClient:
        """The per-clock statistics mailbox."""
        return self.client.mailbox

    @property
    def bounds(self) -> np.ndarray:
        """int64 row boundaries of the table shards."""
        return self.client.bounds

    def close(self) -> None:
        """Release the actors (they are deleted on their workers)."""
        for f in self.futures:
            f.release()


def start_parameter_server(client: Any, n_words: int, n_topics: int, n_shards: int,
                           beta: float, staleness: float, workers: list[str],
                           start_clock: int = 0, timeout: float = 60.0,
                           ahead: int = 0) -> ParameterServer:
    """Create one :class:`TableShard` per worker (row ranges of ``n_wk``) and a ClockServer.

    Parameters
    ----------
    client : distributed.Client
    n_words, n_topics : int
        V and K of the table.
    n_shards : int
        Number of worker (document) shards that push and pull.
    beta : float
        The topic-word prior (for the word log-likelihood).
    staleness : float
        The SSP bound.
    workers : list of str
        Addresses to place table shards on, one each; the clock goes on the first.
    start_clock : int
        The clock every shard starts from.
    timeout : float
        Seconds to wait for the actors.
    ahead : int
        Clocks a shard may start past the bound (1: processes taking turns,
        :class:`biglda.ps.rules.ClockRules`).

    Returns
    -------
    ParameterServer
    """
    bounds = row_bounds(n_words, len(workers))
    futs = [client.submit(TableShard, i, int(bounds[i]), int(bounds[i + 1]), n_topics,
                          n_shards, beta, actor=True, workers=[w], allow_other_workers=False,
                          pure=False)
            for i, w in enumerate(workers[:len(bounds) - 1])]
    clock_fut = client.submit(ClockServer, n_shards, staleness, start_clock, ahead, actor=True,
                              workers=[workers[0]], allow_other_workers=False, pure=False)
    actors = future_results([*futs, clock_fut], timeout, "starting the parameter server")
    return ParameterServer(client=PSClient.from_actors(actors[:-1], bounds, actors[-1]),
                           workers=tuple(workers[:len(bounds) - 1]),
                           futures=(*futs, clock_fut))
