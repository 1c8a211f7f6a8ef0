"""CPU seconds of every thread of a running training over a window, from /proc (no sampling).

py-spy's ``--idle`` samples say where a thread is, not whether it ran: on a machine whose
cores are oversubscribed (two sampling threads, two event loops and the driver on 2 cores)
a runnable thread that waits for a core shows as busy, so its "busy" share overstates its
CPU. This reads each thread's ``utime + stime`` from ``/proc/PID/task/TID/stat`` at the start
and the end of ``--seconds`` and prints the threads that used at least ``--min-share`` of a
core, and each process's total::

    .venv/bin/biglda train CORPUS ... &          # then, once it is past its start:
    .venv/bin/python pipelines/thread_cpu.py --pid DRIVER --seconds 20

``--pid``: the driver (its child processes, the nannies and the workers, are included).
Where py-spy is installed (``.venv/bin/pip install -e '.[profile]'``), ``py-spy dump`` of
each process names its threads (the OS knows them all as ``python``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

_THREAD = re.compile(r'^Thread (\d+) \(\w+\): "(.*)"', re.M)


def cpu_seconds(stat: str) -> float:
    """``utime + stime`` in seconds from one ``/proc/.../stat`` line.

    >>> cpu_seconds("7 (python x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0") * os.sysconf("SC_CLK_TCK")
    300.0
    """
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_names_from(dump: str) -> dict[int, str]:
    """``{tid: name}`` from the output of ``py-spy dump``.

    >>> thread_names_from('Thread 8 (idle): "MainThread"\\n    f (a.py:1)\\n'
    ...                   'Thread 9 (active): "1-Dask-Default-Threads-7-0"\\n')
    {8: 'MainThread', 9: '1-Dask-Default-Threads-7-0'}
    """
    return {int(tid): name for tid, name in _THREAD.findall(dump)}


def thread_names(pids: list[int]) -> dict[int, str]:
    """``{tid: name}`` of the processes' threads by ``py-spy dump``; empty without py-spy."""
    local = Path(sys.executable).with_name("py-spy")
    spy = str(local) if local.exists() else shutil.which("py-spy")
    out: dict[int, str] = {}
    for pid in pids if spy else ():
        got = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                             check=False)
        out.update(thread_names_from(got.stdout))
    return out


def snapshot(pids: list[int]) -> dict[tuple[int, int], float]:
    """CPU seconds so far of every thread of ``pids``: ``{(pid, tid): s}``."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    out[pid, int(tid)] = cpu_seconds(f.read())
            except OSError:
                continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, required=True, help="the driver's process id")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--min-share", type=float, default=0.02)
    args = ap.parse_args(argv)
    root = psutil.Process(args.pid)
    procs = [root, *root.children(recursive=True)]
    pids = [p.pid for p in procs]
    kinds = {p.pid: " ".join(p.cmdline()[1:4])[:60] for p in procs}
    names = thread_names(pids)
    before, t0 = snapshot(pids), time.monotonic()
    time.sleep(args.seconds)
    after, dt = snapshot(pids), time.monotonic() - t0
    totals: dict[int, float] = {}
    print(f"| process | thread | CPU s in {dt:.1f} s | share of a core |\n|---|---|---|---|")
    for (pid, tid), s in sorted(after.items()):
        used = s - before.get((pid, tid), 0.0)
        totals[pid] = totals.get(pid, 0.0) + used
        if used >= args.min_share * dt:
            print(f"| {pid} | {tid} {names.get(tid, '')} | {used:.2f} | {used / dt:.1%} |")
    for pid, used in totals.items():
        print(f"| {pid} {kinds[pid]} | all | {used:.2f} | {used / dt:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
