"""Calls to actors and futures with a timeout and a clear :class:`ClusterError`.

A call to an actor whose worker was lost otherwise hangs forever; every call made by the
trainer goes through :func:`call` / :func:`call_all`, which turn a timeout or a lost
connection into one line that says which call failed and why.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from biglda.errors import ClusterError

_LOST = (OSError, EOFError, ConnectionError)


def _fail(what: str, exc: BaseException, timeout: float) -> ClusterError:
    if isinstance(exc, TimeoutError):
        return ClusterError(f"{what}: no answer within {timeout:g} s (a worker may have been lost)")
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return ClusterError(f"{what}: {type(exc).__name__}: {first_line}")


def call(actor_future: Any, timeout: float, what: str,
         check: Callable[[], None] | None = None, every: float = 1.0) -> Any:
    """``actor_future.result(timeout)``, raising :class:`ClusterError` on timeout or a lost worker.

    ``check``: called every ``every`` seconds while there is no answer; it raises to give up
    early. A call to an actor on a dead worker otherwise fails only once Dask stops retrying
    the connection (``distributed.comm.timeouts.connect``, 30 s by default), whereas the
    scheduler knows a worker is gone at once (the driver checks that).
    """
    deadline = time.monotonic() + timeout
    try:
        if check is not None:
            while True:
                left = deadline - time.monotonic()
                try:
                    return actor_future.result(timeout=max(0.001, min(every, left)))
                except TimeoutError:
                    if left <= every:
                        raise
                check()
        return actor_future.result(timeout=timeout)
    except (TimeoutError, *_LOST) as exc:
        raise _fail(what, exc, timeout) from None
    except RuntimeError as exc:  # distributed: "Worker holding Actor was lost"
        if "lost" in str(exc).lower():
            raise _fail(what, exc, timeout) from None
        raise


def call_all(actor_futures: Sequence[Any], timeout: float, what: str,
             check: Callable[[], None] | None = None) -> list[Any]:
    """Results of several actor calls issued together, all within one ``timeout``."""
    deadline = time.monotonic() + timeout
    out = []
    for fut in actor_futures:
        out.append(call(fut, max(0.001, deadline - time.monotonic()), what, check))
    return out


def future_results(futures: Sequence[Any], timeout: float, what: str) -> list[Any]:
    """Results of Dask futures within ``timeout``, else :class:`ClusterError`."""
    deadline = time.monotonic() + timeout
    out = []
    for fut in futures:
        try:
            out.append(fut.result(timeout=max(0.001, deadline - time.monotonic())))
        except (TimeoutError, *_LOST) as exc:
            raise _fail(what, exc, timeout) from None
    return out


class _Done:
    """A future that already holds its value (what :class:`InProcess` calls answer)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self, timeout: float | None = None) -> Any:
        return self.value


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """One event loop on a daemon thread, for :class:`InProcess`'s coroutine methods."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="biglda-inprocess-loop",
                             daemon=True).start()
            _LOOP = loop
        return _LOOP


class InProcess:
    """An object whose method calls answer like actor calls: a future with the result.

    Lets the clients (:mod:`biglda.ps.client`) drive actors in this process — unit tests and
    benchmarks of the server's work without a cluster. Arrays are passed by reference, not
    serialized: copy what the caller may change afterwards. A sync method runs at once, in
    the caller's thread; a coroutine method on one event loop of a background thread (as a
    worker runs an actor's, so one that waits for another call's effect can be answered).

    Examples
    --------
    >>> InProcess([3, 1]).count(3).result()
    1
    """

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        """Forward to the object; a method's result comes back as a done future."""
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: asyncio.run_coroutine_threadsafe(
                attr(*args, **kwargs), _background_loop())
        return lambda *args, **kwargs: _Done(attr(*args, **kwargs))


class SameProcess:
    """An actor of this worker process, called without the comm.

    A Dask actor call from a task goes through the worker's RPC even when the actor lives in
    the same process: its arguments are pickled and sent over loopback TCP to itself (times
    of both ways: ``pipelines/bench_push.py``, pipelines/README.md). Dask runs every sync
    actor method on one dedicated thread (``executors["actor"]``) and every ``async`` one on
    the worker's event loop; this does the same without the round trip: a sync method is
    submitted to that thread (keeping its one-at-a-time order with the calls that come
    through Dask), a coroutine method is scheduled on that loop (the clock's waits and
    ticks). Arguments pass by reference: a caller must not change an array or dict it passed
    afterwards (the trainer's sweep deltas and clock statistics are fresh each clock), nor
    one it got back. Never call it from the event loop's own thread (it would wait on
    itself); the trainer calls from its task threads.
    """

    def __init__(self, obj: Any, executor: Any, loop: Any = None) -> None:
        self._obj = obj
        self._executor = executor
        self._loop = loop  # the worker's asyncio loop (coroutine methods)

    def __getattr__(self, name: str) -> Any:
        """Forward a method call to the actor's thread or loop; return its (concurrent) future."""
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr
        if inspect.iscoroutinefunction(attr):
            if self._loop is None:
                raise RuntimeError(f"{type(self._obj).__name__}.{name} is a coroutine: "
                                   "it needs the worker's event loop")
            return lambda *args, **kwargs: asyncio.run_coroutine_threadsafe(
                attr(*args, **kwargs), self._loop)
        return lambda *args, **kwargs: self._executor.submit(attr, *args, **kwargs)


def same_process(handle: Any) -> Any:
    """Return :class:`SameProcess` for an actor handle of this worker process, else the handle.

    Only a Dask actor handle held inside the worker that runs the actor qualifies; anything
    else (another process's actor, an :class:`InProcess` object, no worker) is returned as is.
    """
    try:
        from distributed import get_worker

        worker = get_worker()
    except ValueError:  # not in a worker
        return handle
    address = getattr(handle, "_address", None)
    key = getattr(handle, "_key", None)
    executor = getattr(worker, "executors", {}).get("actor")
    actors = getattr(getattr(worker, "state", None), "actors", {})
    if address != worker.address or key not in actors or executor is None:
        return handle
    return SameProcess(actors[key], executor, getattr(worker.loop, "asyncio_loop", None))
