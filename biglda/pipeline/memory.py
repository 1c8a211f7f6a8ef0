"""Peak memory of a process tree, sampled by a background thread.

One sampler for the package and the scripts in ``pipelines/``: the ``train`` stage measures
this process and the embedded cluster's workers; a benchmark measures a child process it
started (``PeakMemory(proc.pid)``). Resident set sizes are sampled every ``interval``
seconds, so a peak shorter than that can be missed; pages shared between processes count
once per process in the tree total.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psutil


class PeakMemory:
    """Peak RSS (MiB) of a process and of each of its descendants, and of their sum.

    ``peaks`` maps ``"self"`` (the watched process) and ``"PID NAME"`` (each descendant
    seen) to its peak; ``tree_mib`` is the peak of the summed RSS of the whole tree.

    Examples
    --------
    >>> with PeakMemory(interval=0.01) as mem:
    ...     pass
    >>> mem.summary()["this_process_mib"] > 0
    True
    """

    def __init__(self, pid: int | None = None, interval: float = 1.0) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.interval = interval
        self.peaks: dict[str, float] = {}
        self.tree_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakMemory:
        """Start sampling in a background thread."""
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop sampling and wait for the thread (the peaks are final after this)."""
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while True:
            self._sample(root)
            if self._stop.wait(self.interval):
                return

    def _sample(self, root: psutil.Process) -> None:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = [root]
        total = 0.0
        for proc in procs:
            try:
                name = "self" if proc.pid == root.pid else f"{proc.pid} {proc.name()}"
                rss = proc.memory_info().rss / 2**20
            except psutil.Error:
                continue
            total += rss
            self.peaks[name] = max(self.peaks.get(name, 0.0), rss)
        self.tree_mib = max(self.tree_mib, total)

    def summary(self) -> dict[str, Any]:
        """``this_process_mib``, ``largest_child_mib``, ``tree_mib`` and ``per_process_mib``."""
        children = {k: v for k, v in self.peaks.items() if k != "self"}
        return {"this_process_mib": self.peaks.get("self", 0.0),
                "largest_child_mib": max(children.values(), default=0.0),
                "tree_mib": self.tree_mib,
                "per_process_mib": self.peaks}
