"""PeakMemory: the sampler the train stage and the benchmark scripts share."""

from __future__ import annotations

import subprocess
import sys

from biglda.pipeline.memory import PeakMemory

# A child that holds ~200 MiB (touched, so resident) for a moment.
HOLD = ("import subprocess, sys, time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]);"
        " time.sleep(0.8)")


def test_a_child_tree_peak_is_seen():
    proc = subprocess.Popen([sys.executable, "-c", HOLD])
    with PeakMemory(proc.pid, interval=0.05) as mem:
        proc.wait()
    summary = mem.summary()
    assert summary["this_process_mib"] >= 190  # "self" is the watched process
    assert summary["tree_mib"] >= summary["this_process_mib"]


def test_this_process_and_its_children():
    # this process may have other children (the session's LocalCluster): the held 200 MiB
    # must be seen as the peak of the child that held it
    with PeakMemory(interval=0.05) as mem:
        child = subprocess.Popen([sys.executable, "-c", HOLD])
        assert child.wait() == 0
    summary = mem.summary()
    held = [mib for name, mib in summary["per_process_mib"].items()
            if name.split()[0] == str(child.pid)]
    assert held and held[0] >= 190, summary["per_process_mib"]
    assert summary["largest_child_mib"] >= 190
    assert summary["tree_mib"] >= summary["largest_child_mib"]
    assert any(k != "self" for k in summary["per_process_mib"])
