"""The client goes away: Ctrl-C (SIGINT to the process group, as a terminal sends it) stops
``biglda train`` cleanly; a SIGKILLed client leaves a checkpoint that ``--resume`` continues.

Both through a real ``biglda train`` subprocess with its embedded cluster. Oracles: the
exit code and the one-line message, no model written by the interrupted run, and after the
resume the model's table equals the recount of the final checkpoint's z (the resumed run's
final state) — the parameter server rebuilt from z and nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from biglda.corpus import Corpus
from biglda.samplers import count_from_z
from biglda.trainer import checkpoint as ckpt

K = 8


def _cmd(corpus, out, iterations, *extra):
    return [sys.executable, "-m", "biglda.cli", "-q", "train", corpus, "--out", out, "-k", str(K),
            "--iterations", str(iterations), "--sampler", "cgs", "--workers", "2",
            "--shards", "2", "--checkpoint-every", "2", *extra]


def _start_and_wait_for_checkpoint(corpus, out, at_least=4, timeout=90.0):
    """Start a long run in its own process group; return it once a checkpoint >= at_least."""
    proc = subprocess.Popen(_cmd(corpus, out, 100000), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ck = ckpt.checkpoint_url(out)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if zarr.open_group(ck, mode="r").attrs.get("clock", -1) >= at_least:
                return proc
        except Exception:  # not created yet
            pass
        if proc.poll() is not None:
            raise AssertionError(f"train exited early: {proc.communicate()}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    raise AssertionError("no checkpoint in time")


def _resume_and_check(corpus, out, clock):
    """Resume to ``clock + 3`` iterations; the model equals the recount of the final z."""
    target = clock + 3
    done = subprocess.run(_cmd(corpus, out, target, "--resume"), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    c = Corpus.open(corpus)
    attrs = ckpt.open_checkpoint(ckpt.checkpoint_url(out), K, c.n_tokens)
    assert attrs["clock"] == target  # the final state is committed too
    z = np.concatenate([ckpt.read_z(ckpt.checkpoint_url(out), attrs, a, b)
                        for a, b in attrs["shards"]])
    n_wk, n_k = count_from_z(c.read_tokens(0, c.n_tokens), c.doc_ptr, z, c.n_words, K)
    model = zarr.open_group(out, mode="r")
    np.testing.assert_array_equal(np.asarray(model["n_wk"]), n_wk)
    np.testing.assert_array_equal(np.asarray(model["n_k"]), n_k)
    history = model.attrs["history"]
    assert [h["iteration"] for h in history] == list(range(1, target + 1))


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_client_interrupted_then_resumed(synth_url, tmp_path, sig):
    out = str(tmp_path / "model.zarr")
    proc = _start_and_wait_for_checkpoint(synth_url, out)
    os.killpg(proc.pid, getattr(signal, sig))  # the whole group, as Ctrl-C or a crash does
    _, err = proc.communicate(timeout=60)
    ck = ckpt.checkpoint_url(out)
    clock = zarr.open_group(ck, mode="r").attrs["clock"]
    assert clock >= 4
    assert not os.path.exists(out)  # never a model that looks finished
    if sig == "SIGINT":
        assert proc.returncode == 130
        last = [line for line in err.splitlines() if line.startswith("biglda:")]
        assert len(last) == 1, err
        assert f"holds iteration {clock}" in last[0] and "--resume" in last[0]
        assert "Traceback" not in err
    else:
        assert proc.returncode == -signal.SIGKILL
    _resume_and_check(synth_url, out, clock)
