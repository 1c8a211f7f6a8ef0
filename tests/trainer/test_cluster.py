"""The embedded cluster's worker processes: started without re-importing ``__main__`` (see
tests/model/test_training_script.py), and gone with the driver.

Oracle: the process table. A SIGKILLed driver cannot close its cluster; its nannies notice
that their parent is gone and take their workers with them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import psutil

SCRIPT = """
import os, sys, time
from biglda.trainer.cluster import connect
with connect(workers=2) as client:
    pids = [*client.run(os.getpid).values(), *client.run(os.getpid, nanny=True).values()]
    open(sys.argv[1], "w").write(" ".join(map(str, pids)))
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_worker_processes_die_with_a_killed_driver(tmp_path):
    pid_file = tmp_path / "pids"
    driver = subprocess.Popen([sys.executable, "-c", SCRIPT, str(pid_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert driver.poll() is None and time.monotonic() < deadline, "no cluster started"
            time.sleep(0.2)
        pids = [int(p) for p in pid_file.read_text().split()]
        assert len(pids) == 4 and all(_alive(p) for p in pids)
        # the nannies are not the driver's process group: a Ctrl-C there is the driver's
        assert all(os.getpgid(p) != os.getpgid(driver.pid) for p in pids)
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)]


def _intervals(client) -> list[tuple[float, str]]:
    """(tick interval s, profile interval) of the scheduler, each worker and each nanny."""
    import dask

    def of(dask_worker) -> tuple[float, str]:
        return dask_worker._tick_interval, dask.config.get("distributed.worker.profile.interval")

    sched = client.cluster.scheduler
    return [(sched._tick_interval, dask.config.get("distributed.worker.profile.interval")),
            *client.run(of).values(), *client.run(of, nanny=True).values()]


def test_embedded_cluster_ticks_slower_unless_the_user_set_it():
    """Every server of the embedded cluster, the in-process scheduler too, ticks at 500 ms
    (Dask's 20 ms cost ~4% of a core: biglda.trainer.cluster); a user's interval is kept."""
    import dask
    import distributed  # noqa: F401  (its config defaults, before they are set here)

    from biglda.trainer.cluster import connect

    with dask.config.set({"distributed.admin.tick.interval": "20ms",
                          "distributed.worker.profile.interval": "10ms"}):
        with connect(workers=1) as client:
            got = _intervals(client)
        assert [t for t, _ in got] == [0.5, 0.5, 0.5]
        assert [p for _, p in got[1:]] == ["1s", "1s"]  # the workers' profiler
    with dask.config.set({"distributed.admin.tick.interval": "50ms",
                          "distributed.worker.profile.interval": "200ms"}):
        with connect(workers=1) as client:
            got = _intervals(client)
        assert [t for t, _ in got] == [0.05, 0.05, 0.05]
        assert [p for _, p in got[1:]] == ["200ms", "200ms"]



def _worker(client, gone: str | None = None) -> tuple[str, int, int] | None:
    """(address, pid, its nanny's pid) of the cluster's one worker, or None while it has none.

    ``gone``: the address of a worker killed just now, which the scheduler may still list
    for a moment; it is never asked (a call to it waits out Dask's 30 s connect timeout).
    """
    workers = [a for a in client.scheduler_info(n_workers=-1)["workers"] if a != gone]
    if not workers:
        return None
    addr = workers[0]
    try:
        pid = client.run(os.getpid, workers=[addr])[addr]
        nanny = next(iter(client.run(os.getpid, nanny=True).values()))
    except Exception:  # gone between the calls
        return None
    return addr, pid, nanny


def _next_worker(client, before: tuple, deadline: float) -> tuple:
    while True:
        now = _worker(client, gone=before[0])
        if now is not None:
            return now
        assert time.monotonic() < deadline, "no worker came back"
        time.sleep(0.05)


def test_a_worker_lost_twice_in_a_row_is_kept():
    """A worker lost twice in a row, its nanny slow to bring it back the second time, is
    still the cluster's once it is back: Dask's SpecCluster closed the nanny when the first
    loss's timer (``lost-worker-timeout`` after it) found no worker of that name, though one
    had come back in between and was lost again (a chaos run lost a worker so). The nanny
    is stopped (SIGSTOP) from before the second loss until after the first timer, then
    restarts its worker well within the second loss's timeout."""
    import signal

    import dask

    from biglda.trainer.cluster import connect

    timeout = 6.0
    with dask.config.set({"distributed.deploy.lost-worker-timeout": timeout}), \
            connect(workers=1) as client:
        first = _worker(client)
        assert first is not None
        t0 = time.monotonic()
        os.kill(first[1], signal.SIGKILL)  # the first loss: its timer runs out at t0 + 6 s
        back = _next_worker(client, first, t0 + timeout / 2)  # the nanny restarts it at once
        time.sleep(max(0.0, t0 + timeout / 2 - time.monotonic()))
        os.kill(back[2], signal.SIGSTOP)  # the nanny cannot restart it this time...
        try:
            os.kill(back[1], signal.SIGKILL)  # ...the second loss (its timer: t0 + 9 s)
            time.sleep(max(0.0, t0 + timeout + 0.5 - time.monotonic()))
            assert _worker(client) is None  # the first timer ran out with none of its name
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(back[2], signal.SIGCONT)  # (a closed nanny is gone already)
        _next_worker(client, back, t0 + 1.5 * timeout - 0.5)  # back before the second timer
        time.sleep(max(0.0, t0 + 1.5 * timeout + 0.5 - time.monotonic()))  # both timers out
        assert _worker(client) is not None
        assert len(client.cluster.workers) == 1  # its nanny is still the cluster's
