"""``--backend``: the GPU request without a GPU fails in one line before anything is written;
``auto`` runs the CPU sampler here and says so; the choice is made per worker.

This machine's test run has no GPU (and the simulator is off in this process): ``gpu`` must
fail with the cause :func:`biglda.samplers.backends.gpu_status` names. Where a real GPU is
present, the ``gpu`` cases check the opposite.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from biglda.cli import main
from biglda.corpus import write_corpus
from biglda.corpus.synth import SynthSpec, generate
from biglda.errors import ConfigError
from biglda.model.store import open_model_group
from biglda.samplers.backends import GpuStatus, gpu_status, pick_backend
from biglda.trainer.config import TrainConfig, validate
from biglda.trainer.run import run_training

_STATUS = gpu_status()
no_gpu = pytest.mark.skipif(_STATUS.usable, reason=f"a GPU is usable here: {_STATUS.reason}")


@pytest.fixture(scope="module")
def corpus_url(tmp_path_factory):
    spec = SynthSpec(n_docs=200, n_words=300, n_topics=4, mean_doc_length=40, seed=1)
    tokens, doc_ptr, _, _ = generate(spec)
    url = str(tmp_path_factory.mktemp("backend") / "corpus.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(spec.n_words)],
                 chunk_tokens=2048)
    return url


@no_gpu
def test_gpu_backend_without_gpu_is_one_line_and_writes_nothing(corpus_url, tmp_path, capsys):
    out = tmp_path / "model.zarr"
    metrics = tmp_path / "metrics.jsonl"
    rc = main(["train", corpus_url, "--out", str(out), "-k", "4", "--iterations", "2",
               "--workers", "1", "--backend", "gpu", "--metrics", str(metrics)])
    err = capsys.readouterr().err
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("biglda: error: backend 'gpu'")
    assert _STATUS.reason.rstrip(".") in lines[0]       # names the cause
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no model, checkpoint, metrics


@no_gpu
def test_gpu_backend_in_a_subprocess_exits_nonzero_with_one_line(corpus_url, tmp_path):
    out = tmp_path / "model.zarr"
    p = subprocess.run([sys.executable, "-m", "biglda.cli", "train", corpus_url, "--out",
                        str(out), "-k", "4", "--backend", "gpu"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and not out.exists()
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "backend 'gpu' is unavailable" in p.stderr


@no_gpu
def test_auto_runs_cpu_here_and_says_so(corpus_url, tmp_path, capsys):
    out = str(tmp_path / "model.zarr")
    metrics = tmp_path / "metrics.jsonl"
    rc = main(["train", corpus_url, "--out", out, "-k", "4", "--iterations", "3",
               "--workers", "2", "--backend", "auto", "--metrics", str(metrics)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "backend auto: cpu on 2 workers" in printed
    assert "shards balanced" not in printed       # one backend: no balancing under auto
    assert "clock spread" in printed
    records = [json.loads(x) for x in metrics.read_text().splitlines()]
    its = [r for r in records if r["type"] == "iteration"]
    assert len(its) == 3
    assert all(set(r["backends"].values()) == {"cpu"} and len(r["backends"]) == 2 for r in its)
    g = open_model_group(out)
    assert g.attrs["config"]["backend"] == "auto"
    assert set(g.attrs["backends"].values()) == {"cpu"} and len(g.attrs["backends"]) == 2


@no_gpu
def test_gpu_on_one_worker_without_gpu_fails_before_anything_is_written(local_cluster,
                                                                        corpus_url, tmp_path):
    client = local_cluster
    worker = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]
    cfg = TrainConfig(n_topics=4, iterations=2, worker_backends={worker: "gpu"})
    out = tmp_path / "model.zarr"
    with pytest.raises(ConfigError, match=f"worker {worker}: backend 'gpu' is unavailable"):
        run_training(client, validate(corpus_url, None, cfg, False), cfg, out=str(out))
    assert list(tmp_path.iterdir()) == []


def test_bad_backend_and_balance_are_config_errors(corpus_url, capsys):
    for flag, value in (("--backend", "tpu"), ("--balance", "fast")):
        assert main(["train", corpus_url, "--out", "x.zarr", "-k", "4", flag, value]) != 0
        assert f"{flag} must be one of" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="backend"):
        validate(corpus_url, None, TrainConfig(n_topics=4, iterations=1, backend="tpu"), False)
    with pytest.raises(ConfigError, match="balance"):
        validate(corpus_url, None, TrainConfig(n_topics=4, iterations=1, balance="x"), False)


def test_pick_backend_never_picks_the_simulator_under_auto():
    sim = GpuStatus(True, True, "the CUDA simulator")
    real = GpuStatus(True, False, "CUDA device 0: H100 (1 visible)", 1)
    none = GpuStatus(False, False, "no usable CUDA driver: not found")
    assert pick_backend("auto", sim) == "cpu"
    assert pick_backend("auto", real) == "gpu"
    assert pick_backend("auto", none) == "cpu"
    assert pick_backend("gpu", sim) == "gpu"      # explicit: how CI runs the kernels
    assert pick_backend("cpu", real) == "cpu"
    with pytest.raises(ConfigError, match="no usable CUDA driver: not found"):
        pick_backend("gpu", none)


def test_import_biglda_does_not_import_cuda():
    code = ("import sys, biglda, biglda.trainer.run, biglda.model.training, biglda.cli; "
            "bad = [m for m in sys.modules if m.startswith(('numba.cuda', 'cupy'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# 100 s of the CUDA simulator (a third of the fast suite's GPU time); the GPU worker path on
# the simulator stays in the fast suite through test_heterogeneous's mixed job (4 s)
@pytest.mark.slow
def test_explicit_gpu_runs_end_to_end_on_the_cuda_simulator(tmp_path):
    """How CPU-only CI runs ``--backend gpu``: the CLI with the simulator on in its environment
    (the embedded workers inherit it). Oracle: the model's n_wk rows sum to the word counts."""
    import os

    import numpy as np

    from biglda.corpus import Corpus

    spec = SynthSpec(n_docs=30, n_words=40, n_topics=3, mean_doc_length=15, seed=2)
    tokens, doc_ptr, _, _ = generate(spec)
    url = str(tmp_path / "tiny.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(spec.n_words)])
    out = str(tmp_path / "model.zarr")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    p = subprocess.run([sys.executable, "-m", "biglda.cli", "train", url, "--out", out, "-k",
                        "3", "--iterations", "2", "--workers", "1", "--backend", "gpu",
                        "--checkpoint-every", "0"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "backend gpu: gpu on 1 worker" in p.stdout
    g = open_model_group(out)
    assert list(g.attrs["backends"].values()) == ["gpu"]
    np.testing.assert_array_equal(g["n_wk"][:].sum(1), Corpus.open(url).word_count)
