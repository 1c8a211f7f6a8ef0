"""Nanny preload of the embedded cluster's worker processes (``preload_nanny``).

Each worker of the embedded cluster is a ``distributed.Nanny`` in a process of its own
(:func:`biglda.trainer.cluster.start_local_cluster`), started with ``python -m dask spec``: no
``multiprocessing`` spawn re-imports the driver's ``__main__``. This preload makes it a good
child of the driver: it ignores SIGINT (a Ctrl-C is the driver's to handle, which stops with a
checkpoint) and it dies, with its worker, when the driver is gone (a SIGKILLed driver leaves
no orphans).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

DRIVER_PID = "BIGLDA_DRIVER_PID"


def dask_setup(nanny: Any) -> None:
    """Ignore SIGINT; watch the driver (``$BIGLDA_DRIVER_PID``) and exit when it is gone."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    driver = int(os.environ.get(DRIVER_PID) or 0)
    if driver:
        threading.Thread(target=_watch, args=(driver,), name="biglda-driver-watch",
                         daemon=True).start()


def _watch(driver: int, every_s: float = 0.5) -> None:
    """Kill this process and its children once its parent is no longer ``driver``."""
    while os.getppid() == driver:
        time.sleep(every_s)
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            child.kill()
    finally:
        os._exit(1)
