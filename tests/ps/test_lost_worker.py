"""A call to an actor whose worker died must fail with one clear ClusterError, not hang."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from biglda.errors import ClusterError
from biglda.ps import call, start_parameter_server


def test_call_to_an_actor_on_a_lost_worker_is_a_cluster_error():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", host="127.0.0.1") as cluster, \
            Client(cluster, direct_to_workers=True) as client:
        workers = sorted(client.scheduler_info()["workers"])
        ps = start_parameter_server(client, 20, 4, 1, 0.1, staleness=0, workers=workers)
        # a wait that outlives the caller's timeout is a timeout, said in one line
        with pytest.raises(ClusterError, match="no answer within"):
            call(ps.clock.actor.wait(0, 0, timeout=5.0), 0.5, "waiting for clock 0")
        victim = ps.workers[0]  # holds table shard 0 and the clock
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # the nanny restarts a worker without the actors
        t0 = time.monotonic()
        with pytest.raises(ClusterError) as err:
            ps.tables.push_to(0, 0, 0, np.array([0], np.int32), np.array([0], np.int32),
                              np.array([1], np.int32), timeout=3.0)
        assert time.monotonic() - t0 < 10
        assert "push of clock 0 to table shard 0" in str(err.value) and "\n" not in str(err.value)
