"""A Dask actor call from one worker process to another: its round trip, by what the callee does.

Every call of the trainer's clock (wait, pull, a window's posts, push, tick) is one such
call. Two worker processes of an embedded cluster, a no-op actor on the second; the first
calls it ``--calls`` times, empty and carrying ``--megabytes`` of int32, while the second's
task thread is idle, runs a ``nogil`` numba loop (a sampling kernel), or runs Python code
(holding the GIL). Prints the median and 90th percentile in ms::

    .venv/bin/python pipelines/bench_actor_rtt.py

``--paths``: instead, the same no-op call (callee idle) by three paths, with the caller
process's CPU a call: the actor call, a handler registered on the callee's Dask worker and
called through the caller worker's ``rpc`` pool (Dask's comm without the actor machinery:
no executor hop on the callee), and a raw asyncio stream between the two event loops
(length-prefixed pickle, protocol 5; no Dask at all)::

    .venv/bin/python pipelines/bench_actor_rtt.py --paths
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import struct
import time

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _spin(n):
    s = 0.0
    for i in range(n):
        s += np.sqrt(i * 1.0)
    return s


class Noop:
    """The callee: answers at once."""

    def f(self, x=None):
        return 1


def _busy(kind: str, seconds: float) -> int:
    """Keep the task thread busy for ``seconds``: a nogil numba loop or Python code."""
    t, k = time.time(), 0
    while time.time() - t < seconds:
        if kind == "nogil":
            _spin(2_000_000)
        else:
            s = 0
            for i in range(100_000):
                s += i
        k += 1
    return k


def _calls(actor, n: int, entries: int) -> tuple[float, float]:
    x = np.zeros(entries, dtype=np.int32) if entries else None
    out = []
    for _ in range(n):
        t = time.perf_counter()
        actor.f(x).result()
        out.append(time.perf_counter() - t)
    return float(np.median(out)) * 1e3, float(np.percentile(out, 90)) * 1e3


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _raw_serve(reader, writer) -> None:
    """The callee's side of the raw stream: answer each message with 1."""
    try:
        while True:
            (n,) = struct.unpack("<Q", await reader.readexactly(8))
            pickle.loads(await reader.readexactly(n))
            out = pickle.dumps(1)
            writer.write(struct.pack("<Q", len(out)) + out)
            await writer.drain()
    except asyncio.IncompleteReadError:
        pass


def _serve_paths() -> int:
    """On the callee: register the no-op handler and start the raw server; its port."""
    from distributed import get_worker
    from distributed.utils import sync

    w = get_worker()

    async def noop(x=None):
        return 1

    w.handlers["bench_noop"] = noop

    async def start() -> int:
        w._bench_server = await asyncio.start_server(_raw_serve, "127.0.0.1", 0)
        return w._bench_server.sockets[0].getsockname()[1]

    return sync(w.loop, start)


def _call_paths(actor, callee: str, port: int, n: int, entries: int
                ) -> dict[str, tuple[float, float, float]]:
    """On the caller: ``{path: (median ms, 90th percentile ms, caller CPU ms a call)}``."""
    from distributed import get_worker
    from distributed.utils import sync

    w = get_worker()
    x = np.zeros(entries, dtype=np.int32) if entries else None
    rpc = w.rpc(callee)
    stream = {}

    async def connect() -> None:
        stream["rw"] = await asyncio.open_connection("127.0.0.1", port)

    async def raw() -> object:
        reader, writer = stream["rw"]
        body = pickle.dumps(x, protocol=5)
        writer.write(struct.pack("<Q", len(body)) + body)
        await writer.drain()
        (m,) = struct.unpack("<Q", await reader.readexactly(8))
        return pickle.loads(await reader.readexactly(m))

    sync(w.loop, connect)
    paths = {"actor": lambda: actor.f(x).result(),
             "worker rpc handler": lambda: sync(w.loop, lambda: rpc.bench_noop(x=x)),
             "raw asyncio stream": lambda: sync(w.loop, raw)}
    out = {}
    for name, fn in paths.items():
        for _ in range(10):  # (warm: connections made)
            fn()
        times, c0 = [], _cpu()
        for _ in range(n):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out[name] = (float(np.median(times)) * 1e3, float(np.percentile(times, 90)) * 1e3,
                     (_cpu() - c0) / n * 1e3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--megabytes", type=float, default=2.4)
    ap.add_argument("--paths", action="store_true",
                    help="compare the actor call with a worker rpc handler and a raw stream")
    args = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    entries = int(args.megabytes * 1e6 / 4)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        first, second = list(client.scheduler_info()["workers"])
        actor = client.submit(Noop, actor=True, workers=[second]).result()
        if args.paths:
            port = client.submit(_serve_paths, workers=[second], pure=False).result()
            print("| path | payload | median ms | 90th percentile ms | caller CPU ms a call |\n"
                  "|---|---|---|---|---|")
            for payload in (0, entries):
                got = client.submit(_call_paths, actor, second, port, args.calls, payload,
                                    workers=[first], pure=False).result()
                for name, (med, p90, cpu) in got.items():
                    print(f"| {name} | {4 * payload / 1e6:.1f} MB | {med:.2f} | {p90:.2f} "
                          f"| {cpu:.2f} |", flush=True)
            return 0
        client.submit(_spin, 10, workers=[second]).result()  # (compiled there first)
        print("| the callee's task thread | payload | median ms | 90th percentile ms |\n"
              "|---|---|---|---|")
        for kind in ("idle", "nogil", "python"):
            for payload in (0, entries):
                busy = None
                if kind != "idle":
                    busy = client.submit(_busy, kind, 6.0, workers=[second], pure=False)
                    time.sleep(0.5)
                med, p90 = client.submit(_calls, actor, args.calls, payload, workers=[first],
                                         pure=False).result()
                if busy is not None:
                    busy.result()
                print(f"| {kind} | {4 * payload / 1e6:.1f} MB | {med:.2f} | {p90:.2f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
