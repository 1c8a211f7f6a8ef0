"""Run a command in a child process and measure it: exit status, wall time, peak memory.

Used by the ``compare`` stage (one process per system) and ``scaling.py``. The summed RSS of
the child's process tree is sampled by the package's one sampler,
``biglda.pipeline.memory.PeakMemory``.
"""

from __future__ import annotations

import os
import subprocess
import time

import psutil

from biglda.pipeline.memory import PeakMemory


def run_measured(cmd: list[str], limit: float, log_path: str,
                 env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``; return its exit status, wall seconds and peak memory (MiB).

    ``maxrss_mib``: ``ru_maxrss`` of the child (the largest single process of its tree,
    reaped children included), read by ``/usr/bin/time`` when it exists: a child forked
    from this (large) process would inherit this process's high-water mark through exec.
    ``tree_rss_mib``: peak of the summed RSS of the child and all its descendants, sampled
    every 0.25 s (pages shared between processes count once per process).
    """
    rss_file = log_path + ".maxrss"
    if os.path.exists("/usr/bin/time"):
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd]
    t0 = time.perf_counter()
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
    killed = False
    with PeakMemory(proc.pid, interval=0.25) as mem:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > limit and not killed:
                killed = True
                for p in psutil.Process(proc.pid).children(recursive=True):
                    p.kill()
                proc.kill()
            time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    maxrss_kib = usage.ru_maxrss
    try:
        with open(rss_file) as f:
            maxrss_kib = int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return {"returncode": proc.returncode, "killed": killed,
            "wall_s": time.perf_counter() - t0, "maxrss_mib": maxrss_kib / 1024,
            "tree_rss_mib": mem.tree_mib}
