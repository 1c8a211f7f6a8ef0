"""The Dask cluster of a run: connect or start one, watch its workers, catch SIGINT.

:func:`connect` gives a client: the caller's, one connected to a scheduler address, or an
embedded cluster (:func:`start_local_cluster`: one worker per core, or one per GPU, each a
nanny process of its own that never re-imports the caller's ``__main__``). The embedded
workers ignore SIGINT, so a Ctrl-C reaches the driver only, which stops cleanly with a checkpoint
(:func:`interrupt_flag`). :func:`check_workers` and friends tell the driver that a worker it
uses left the cluster (:class:`biglda.errors.WorkerLost`), the start of a recovery.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from biglda.errors import ClusterError, WorkerLost

log = logging.getLogger("biglda.train")

# Dask memory management for the workers of the embedded cluster. The parameter-server
# actors hold the table outside Dask's data store, so spilling cannot shrink them, and a
# nanny that terminates a worker at 95% of its limit would kill a table shard. The table and
# caches are sized up front (``check_table_fits``: at most half of the smallest limit), so the
# workers are told never to terminate or pause themselves; spilling of task results stays on.
EMBEDDED_MEMORY_CONFIG = {
    "distributed.worker.memory.terminate": False,
    "distributed.worker.memory.pause": False,
}

# Dask's statistical profiler samples every thread's stack, holding the GIL, each 10 ms by
# default. A sampling thread takes the GIL between the parts of a sweep, so every sample
# stalls the threads that end a part meanwhile, and the more threads the more stall. At
# 100 ms the workers' CPU besides the kernels fell by 4-7% on two cores; on 16 a 1 x 16
# warplda run still went 60.7 -> 70.8 M tokens/s with the profiler (nearly) off (pipelines/
# README.md, "Dask's profiler and the clock in the worker's own process", "Sixth session").
# At 1 s the dashboard's profile keeps working, with a sample a second. A value the user
# configured is kept.
EMBEDDED_PROFILE_INTERVAL = "1s"
_DASK_PROFILE_INTERVAL = "10ms"  # distributed's default
# Every Dask server (the scheduler, each nanny and each worker) wakes its event loop every
# 20 ms by default to time it (``distributed.admin.tick.interval``; a loop late by more than
# ``tick.limit``, 3 s, is logged as unresponsive). An idle embedded cluster of one worker
# spent 4.9-5.4% of a core, 1.4-1.5% at 500 ms; in a 1 x 2 training run the threads besides
# the two sampling ones fell from 12.2-12.9% of a core to 8.4-8.9%, CPU the sampling threads
# lack where they hold both cores (pipelines/README.md, "Fourteenth session"). A 500 ms tick
# still catches a loop blocked for 3 s. A value the user configured is kept.
EMBEDDED_TICK_INTERVAL = "500ms"
_DASK_TICK_INTERVAL = "20ms"  # distributed's default


def embedded_timing_config() -> dict[str, str]:
    """Return the embedded cluster's profiler and tick intervals where the user kept Dask's.

    >>> import dask, distributed
    >>> with dask.config.set({"distributed.admin.tick.interval": "20ms"}):
    ...     embedded_timing_config()["distributed.admin.tick.interval"]
    '500ms'
    >>> with dask.config.set({"distributed.admin.tick.interval": "50ms"}):
    ...     "distributed.admin.tick.interval" in embedded_timing_config()
    False
    """
    import dask

    ours = {"distributed.worker.profile.interval": (_DASK_PROFILE_INTERVAL,
                                                    EMBEDDED_PROFILE_INTERVAL),
            "distributed.admin.tick.interval": (_DASK_TICK_INTERVAL, EMBEDDED_TICK_INTERVAL)}
    return {key: value for key, (default, value) in ours.items()
            if dask.config.get(key, default) == default}



@contextlib.contextmanager
def connect(scheduler: Any = None, workers: int | None = None, threads_per_worker: int = 1,
            timeout: float = 10.0, backend: str = "cpu") -> Iterator[Any]:
    """Return a client: the given one, one connected to ``scheduler``, or an embedded cluster's.

    The embedded cluster has ``workers`` CPU workers (default one per core). With
    ``backend`` "gpu" or "auto" and CUDA devices here (a real GPU: the simulator does not
    count), it has one worker per GPU with one thread instead (``CUDA_VISIBLE_DEVICES`` set
    to its device), plus under "auto" ``workers`` CPU workers (default: the cores left),
    which see no GPU. With backend "cpu" no GPU is looked for.
    """
    from distributed import Client

    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler  # a Client the caller owns
        return
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=timeout, direct_to_workers=True)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} within "
                               f"{timeout:g} s ({type(exc).__name__})") from None
        except (ValueError, TypeError) as exc:  # not an address: "unknown address scheme"
            raise ClusterError(f"cannot connect to the Dask scheduler {scheduler!r}: "
                               f"{exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    tpw = max(1, threads_per_worker)
    n_gpus = local_gpus(backend)
    if n_gpus:
        n_cpu = 0 if backend == "gpu" else (
            int(workers) if workers else max(0, (os.cpu_count() or 1) // tpw - n_gpus))
        log.info("embedded cluster: %d GPU worker(s) (one per GPU, 1 thread) and %d CPU "
                 "worker(s)", n_gpus, n_cpu)
        cluster = start_local_cluster(
            n_cpu, tpw, [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(n_gpus)],
            cpu_env={"CUDA_VISIBLE_DEVICES": ""}, timeout=max(60.0, timeout))
    else:
        n = int(workers) if workers else max(1, (os.cpu_count() or 1) // tpw)
        cluster = start_local_cluster(n, threads_per_worker)
    client = Client(cluster, direct_to_workers=True)
    try:
        yield client
    finally:
        client.close()
        cluster.close()



def local_gpus(backend: str) -> int:
    """CUDA devices the embedded cluster gives a worker each (0 for "cpu" or no real GPU).

    Imports numba.cuda (through :func:`biglda.samplers.backends.gpu_status`) only when
    ``backend`` is not "cpu"; ``import biglda`` never does.
    """
    if backend == "cpu":
        return 0
    from biglda.samplers.backends import gpu_status

    status = gpu_status()
    return status.n_devices if status.usable and not status.simulator else 0



def start_local_cluster(n_workers: int, threads_per_worker: int = 1,
                        single_envs: list[dict[str, str]] | None = None,
                        cpu_env: dict[str, str] | None = None, timeout: float = 60.0) -> Any:
    """Start the embedded cluster on loopback.

    It has ``n_workers`` workers, plus one single-thread worker per environment in
    ``single_envs`` (a GPU worker: ``CUDA_VISIBLE_DEVICES``; in the tests, a worker on the
    CUDA simulator: ``NUMBA_ENABLE_CUDASIM=1``).

    The scheduler runs in this process; every worker is a ``distributed.Nanny`` in a process
    of its own started by ``python -m dask spec`` (:func:`_nanny_process_class`), never by a
    ``multiprocessing`` spawn, which re-imports the caller's ``__main__``: a plain script that
    calls ``biglda.train`` at top level (no ``if __name__ == "__main__":``), a notebook and
    ``python -c`` all work. The environment reaches the worker process before it imports numba.
    ``cpu_env``: the environment of the ``n_workers`` workers. The memory limit is the
    machine's, shared equally by all workers.
    """
    import dask
    from distributed import Scheduler, SpecCluster
    from distributed.system import MEMORY_LIMIT

    cluster_class = restart_tolerant(SpecCluster)

    single_envs = list(single_envs or [])
    n_total = n_workers + len(single_envs)
    # the nannies read the memory thresholds when they start (EMBEDDED_MEMORY_CONFIG says why)
    # a nanny forks its worker process: it has imported distributed already (the start of a
    # worker costs no second interpreter start and import), and it holds no CUDA context or
    # numba state a fork could break (the worker imports numba after the fork)
    timing = embedded_timing_config()
    with dask.config.set({**EMBEDDED_MEMORY_CONFIG, **timing,
                          "distributed.worker.multiprocessing-method": "fork"}):
        inherited = {k: v for k, v in dask.config.global_config.items() if k != "logging"}
        config = dask.config.serialize(inherited)
    common = {"memory_limit": int(MEMORY_LIMIT // max(1, n_total)), "config": config,
              "timeout": timeout}
    nanny = _nanny_process_class()
    workers: dict[Any, dict[str, Any]] = {i: {"cls": nanny,
                   "options": {**common, "nthreads": threads_per_worker,
                               "env": dict(cpu_env or {})}} for i in range(n_workers)}
    for i, env in enumerate(single_envs):
        workers[f"single-{i}"] = {"cls": nanny, "options": {
            **common, "nthreads": 1, "env": {**(cpu_env or {}), **env}}}
    scheduler = {"cls": Scheduler, "options": {
        "host": "127.0.0.1", "port": 0, "protocol": "tcp://", "dashboard": True,
        "dashboard_address": "127.0.0.1:0"}}
    # the worker processes ignore SIGINT and sit in sessions of their own, so a Ctrl-C
    # (sent to the terminal's process group) reaches the driver only, which stops cleanly with
    # a checkpoint; they exit when the driver is gone (biglda.trainer.cluster_preload)
    # the scheduler, in this process, reads its tick interval when it starts
    with ignore_sigint(), dask.config.set(timing):
        cluster = cluster_class(workers=workers, scheduler=scheduler,
                                silence_logs=logging.WARN, name="biglda")
    try:
        _wait_started(cluster, n_total, timeout)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _wait_started(cluster: Any, n: int, timeout: float) -> None:
    """Wait until ``n`` workers joined ``cluster``'s scheduler.

    A worker process that exits first, or the timeout, is a :class:`ClusterError`.
    """
    deadline = time.monotonic() + timeout
    while len(cluster.scheduler.workers) < n:
        dead = [w.process.returncode for w in cluster.workers.values()
                if w.process is not None and w.process.returncode is not None]
        if dead:
            raise ClusterError(f"a worker process of the embedded cluster exited while "
                               f"starting (exit code {dead[0]})")
        if time.monotonic() > deadline:
            raise ClusterError(f"the embedded cluster started {len(cluster.scheduler.workers)} "
                               f"of {n} workers in {timeout:g} s")
        time.sleep(0.02)


@functools.cache
def restart_tolerant(cluster_class: type) -> type:
    """Return a subclass of a ``SpecCluster`` class that keeps a worker its nanny restarted.

    ``SpecCluster`` closes the worker (the nanny) of a name that the scheduler has no worker
    of ``distributed.deploy.lost-worker-timeout`` (15 s) after a worker of that name was
    lost. A nanny restarts its lost worker within seconds, but if the restarted worker is
    lost too and its own replacement has not joined yet when the first timer runs out, the
    nanny was closed for good: a chaos run went on with one worker fewer, its chain another
    (pipelines/README.md, "Sixteenth session"). Here the check after each loss is whether
    a worker of that name joined since, so only a worker that does not come back within
    the timeout (one that fails to start) is closed. (It overrides the private
    ``_update_worker_status`` of ``distributed.deploy``; tests/trainer/test_cluster.py
    kills a worker twice to check it.)
    """
    import asyncio

    import dask
    from dask.utils import parse_timedelta
    from distributed.deploy.cluster import Cluster

    class RestartTolerant(cluster_class):  # type: ignore[misc,valid-type]
        def _update_worker_status(self, op: str, msg: Any) -> None:
            joins = self.__dict__.setdefault("_biglda_joins", {})
            if op == "add":
                for info in msg.get("workers", {}).values():
                    joins[info.get("name")] = joins.get(info.get("name"), 0) + 1
            elif op == "remove" and msg in self.scheduler_info.get("workers", {}):
                name = self.scheduler_info["workers"][msg]["name"]
                seen = joins.get(name, 0)

                def close_if_not_back() -> None:
                    if joins.get(name, 0) == seen and name in self.workers:
                        self._futures.add(asyncio.ensure_future(self.workers[name].close()))
                        del self.workers[name]

                delay = parse_timedelta(dask.config.get("distributed.deploy.lost-worker-timeout"))
                asyncio.get_running_loop().call_later(delay, close_if_not_back)
                Cluster._update_worker_status(self, op, msg)  # not SpecCluster's timer
                return
            super()._update_worker_status(op, msg)

    name = f"RestartTolerant{cluster_class.__name__}"
    RestartTolerant.__name__ = RestartTolerant.__qualname__ = name
    return RestartTolerant


@functools.cache
def _nanny_process_class() -> type:
    """Return a ``SpecCluster`` worker class: ``python -m dask spec ADDR`` running a Nanny.

    It runs one ``distributed.Nanny`` (the pattern of
    ``distributed.deploy.subprocess.SubprocessWorker``).

    ``env`` is added to the process's environment; ``config`` (``dask.config.serialize``)
    becomes its Dask config. Built on first use: distributed is imported only when a
    cluster starts.
    """
    import asyncio
    import json
    import subprocess
    import sys

    import psutil
    from distributed.deploy.spec import ProcessInterface

    from biglda.trainer.cluster_preload import DRIVER_PID

    class NannyProcess(ProcessInterface):
        def __init__(self, scheduler: str, name: Any = None, env: dict | None = None,
                     config: str = "", timeout: float = 60.0, **opts: Any) -> None:
            self.scheduler_address, self.name = scheduler, name
            self.env, self.config, self.opts = dict(env or {}), config, opts
            self.timeout = timeout
            self.process: asyncio.subprocess.Process | None = None
            super().__init__()

        async def start(self) -> None:
            spec = {"cls": "distributed.Nanny", "opts": {
                "name": self.name, "host": "127.0.0.1", "death_timeout": self.timeout,
                "preload_nanny": ["biglda.trainer.cluster_preload"],
                "silence_logs": logging.WARNING, **self.opts}}
            # the nanny and its worker log warnings and errors only, as a LocalCluster's
            # (silence_logs), unless the environment says otherwise
            # the driver's import path, as multiprocessing's spawn passes it: functions and
            # classes of the caller's own modules (a script's folder, a test's) unpickle there
            path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
            env = {"DASK_LOGGING__DISTRIBUTED": "warning", **os.environ, **self.env,
                   DRIVER_PID: str(os.getpid()), "DASK_INTERNAL_INHERIT_CONFIG": self.config,
                   "PYTHONPATH": path}
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "dask", "spec", self.scheduler_address,
                "--spec", json.dumps(spec), env=env, stdin=subprocess.DEVNULL,
                start_new_session=True)
            await super().start()

        async def close(self) -> None:
            if self.process is not None and self.process.returncode is None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    for child in psutil.Process(self.process.pid).children(recursive=True):
                        with contextlib.suppress(psutil.NoSuchProcess):
                            child.kill()
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
            await super().close()

    NannyProcess.__name__ = NannyProcess.__qualname__ = "NannyProcess"
    return NannyProcess



def load_plugins(client: Any) -> list[str]:
    """Call ``register(client)`` of every ``biglda.plugins`` entry point; return page URLs.

    A failing plugin is a warning in the log, never an error of the run.
    """
    from importlib.metadata import entry_points

    urls = []
    for ep in entry_points(group="biglda.plugins"):
        try:
            url = ep.load()(client)
        except Exception as exc:  # a plugin must never break training
            log.warning("plugin %s failed: %s: %s", ep.name, type(exc).__name__, exc)
            continue
        if url:
            log.info("plugin %s: %s", ep.name, url)
            urls.append(str(url))
    return urls



def worker_slots(client: Any, timeout: float) -> list[tuple[str, int, int]]:
    """``(address, nthreads, memory_limit)`` of every worker, waiting up to ``timeout`` for one."""
    deadline = time.monotonic() + timeout
    while True:
        info = client.scheduler_info(n_workers=-1)["workers"]
        if info:
            return sorted((a, int(w.get("nthreads", 1)), int(w.get("memory_limit") or 0))
                          for a, w in info.items())
        if time.monotonic() > deadline:
            raise ClusterError(f"the Dask cluster has no workers (waited {timeout:g} s)")
        time.sleep(0.2)



def live_workers(client: Any) -> set[str]:
    """Addresses of the workers the scheduler knows now (a fresh query).

    Where the query fails (OSError), Dask's ``scheduler_info`` answers with the client's
    cached identity, which its periodic updates keep without workers (distributed
    2026.8): callers that conclude a loss from it confirm with a second query
    (:func:`check_workers`) or wait for the loss (:func:`wait_for_loss`).
    """
    return set(client.scheduler_info(n_workers=-1)["workers"])



def check_workers(client: Any, used: set[str], confirm_s: float = 2.0) -> None:
    """Raise :class:`WorkerLost` if a worker in ``used`` is no longer in the cluster.

    A worker missing from one answer is asked about again ``confirm_s`` later and counts as
    lost only if it is still missing: one scheduler answer can leave out workers whose
    processes, actors and tasks run on, and a recovery started on it finds nothing lost and
    costs a restart from the last checkpoint (pipelines/README.md, the 100M-token run).
    """
    lost = used - live_workers(client)
    if lost and confirm_s > 0:
        time.sleep(confirm_s)
        lost &= used - live_workers(client)
    if lost:
        raise WorkerLost(f"lost worker(s) {', '.join(sorted(lost))}")



def wait_for_loss(client: Any, used: set[str], timeout: float) -> set[str]:
    """Return the workers of ``used`` gone from the scheduler, waiting up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        lost = used - live_workers(client)
        if lost or time.monotonic() >= deadline:
            return lost
        time.sleep(0.1)



def wait_for_workers(client: Any, n: int, timeout: float) -> None:
    """Wait up to ``timeout`` s for ``n`` workers (a nanny's replacement); never raises."""
    deadline = time.monotonic() + timeout
    while len(live_workers(client)) < n and time.monotonic() < deadline:
        time.sleep(0.2)



@contextlib.contextmanager
def ignore_sigint() -> Iterator[None]:
    """Ignore SIGINT while worker processes are started (they inherit it across exec).

    Python leaves SIGINT ignored in a process that starts with it ignored, so the workers of
    the embedded cluster do not die of the Ctrl-C meant for the driver. Main thread only.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)



class InterruptFlag:
    """Set by the first SIGINT; a second SIGINT raises KeyboardInterrupt (hard stop)."""

    def __init__(self) -> None:
        self.set = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.set:
            raise KeyboardInterrupt
        self.set = True
        log.warning("interrupt: stopping after the current clock and writing a checkpoint "
                    "(interrupt again to stop at once)")



@contextlib.contextmanager
def interrupt_flag() -> Iterator[InterruptFlag]:
    """Catch SIGINT as a flag while the driver runs (main thread only; restored after)."""
    flag = InterruptFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, flag._handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
