"""``biglda train`` end to end: an embedded cluster, a real multi-process cluster
(``dask scheduler`` + two ``dask worker`` processes on loopback), and bad inputs that must give
one stderr line, a non-zero exit, no traceback and no output.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from biglda.cli import main
from biglda.corpus import Corpus, write_corpus
from biglda.corpus.synth import SynthSpec, generate
from biglda.model.store import open_model_group


@pytest.fixture(scope="module")
def corpus_url(tmp_path_factory):
    """A synthetic corpus with a large vocabulary (so a huge K overflows a small worker)."""
    spec = SynthSpec(n_docs=300, n_words=3000, n_topics=4, mean_doc_length=60, seed=3,
                     beta=0.5, zipf_s=0.5)
    tokens, doc_ptr, _, _ = generate(spec)
    url = str(tmp_path_factory.mktemp("cli") / "corpus.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(spec.n_words)],
                 chunk_tokens=4096)
    return url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_model(out: str, corpus_url: str, n_topics: int, iterations: int) -> None:
    g = open_model_group(out)
    corpus = Corpus.open(corpus_url)
    n_wk = g["n_wk"][:]
    assert n_wk.shape == (corpus.n_words, n_topics)
    # invariants of any z: rows sum to the word counts, n_dk rows to the document lengths
    np.testing.assert_array_equal(n_wk.sum(1), corpus.word_count)
    np.testing.assert_array_equal(g["n_dk"][:].sum(1), np.diff(corpus.doc_ptr))
    assert len(g.attrs["history"]) == iterations
    assert g.attrs["tokenizer"] == corpus.tokenizer


def test_train_embedded_cluster(corpus_url, tmp_path, capsys):
    out = str(tmp_path / "model.zarr")
    metrics = tmp_path / "metrics.jsonl"
    rc = main(["train", corpus_url, "--out", out, "-k", "4", "--iterations", "3",
               "--workers", "2", "--metrics", str(metrics), "--checkpoint-every", "2"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "dashboard: http" in printed and f"model written to {out}" in printed
    _check_model(out, corpus_url, 4, 3)
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    its = [r for r in records if r["type"] == "iteration"]
    assert [r["iteration"] for r in its] == [1, 2, 3]
    assert records[0]["type"] == "start" and records[-1]["type"] == "end"
    assert records[-1]["status"] == "ok"
    for key in ("ll_per_token", "tokens_per_s", "tokens_per_s_per_worker", "clocks",
                "clock_spread", "bytes_pushed", "bytes_pulled", "bytes_early_sent",
                "bytes_early_received", "accept_rate", "eta_s",
                "ps_overhead", "top_words", "run_id", "elapsed", "n_iterations"):
        assert key in its[-1]
    assert len(its[-1]["tokens_per_s_per_worker"]) == 2
    # resume to 5 iterations from the checkpoint of clock 3 (written at the end of the run)
    rc = main(["--quiet", "train", corpus_url, "--out", out, "-k", "4", "--iterations", "5",
               "--workers", "2", "--resume", "--overwrite", "--checkpoint-every", "2"])
    assert rc == 0 and capsys.readouterr().out == ""
    _check_model(out, corpus_url, 4, 5)


def _bad(args, capsys, out):
    rc = main(["train", *args])
    err = capsys.readouterr().err
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("biglda: error: "), err
    assert "Traceback" not in err
    assert not os.path.exists(out)
    assert not os.path.exists(out.replace(".zarr", ".checkpoint.zarr"))
    return lines[0]


@pytest.mark.parametrize("extra, message", [
    (["-k", "1"], "--topics must be >= 2"),
    (["-k", "2147483648"], "--topics must be <= 2147483647"),
    (["-k", "many"], "--topics must be an integer"),
    (["--iterations", "0"], "--iterations must be"),
    (["--sampler", "gibbs"], "--sampler must be one of"),
    (["--alpha", "-1"], "--alpha must be > 0"),
    (["--staleness", "1.5"], "--staleness must be a whole number"),
    (["--backend", "tpu"], "--backend must be one of cpu, gpu, auto"),
    (["--balance", "fast"], "--balance must be one of auto, throughput, none"),
    (["--sampler", "lightlda", "--sampler-param", "bogus=1"],
     "--sampler-param: sampler 'lightlda' has no parameter"),
    (["--sampler-param", "mh_steps=1"], "--sampler-param need a named sampler"),
    (["--sampler-param", "mh_steps"], "--sampler-param expects KEY=VALUE"),
    (["--resume"], "cannot resume"),
    (["--comm-budget", "-1"], "--comm-budget must be >= 0"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--comm-budget", "5", "--rounds", "1"], "--rounds must be >= 2 with --comm-budget"),
])
def test_bad_settings(corpus_url, tmp_path, capsys, extra, message):
    out = str(tmp_path / "m.zarr")
    args = [corpus_url, "--out", out, "-k", "4", "--iterations", "2", *extra]
    assert message in _bad(args, capsys, out)


def test_bad_corpus(tmp_path, capsys):
    out = str(tmp_path / "m.zarr")
    _bad([str(tmp_path / "missing.zarr"), "--out", out, "-k", "4"], capsys, out)
    (tmp_path / "text.txt").write_text("not a corpus")
    _bad([str(tmp_path / "text.txt"), "--out", out, "-k", "4"], capsys, out)


def test_output_exists(corpus_url, tmp_path, capsys):
    out = tmp_path / "m.zarr"
    out.mkdir()
    (out / "keep").write_text("x")
    rc = main(["train", corpus_url, "--out", str(out), "-k", "4"])
    assert rc != 0 and "already exists" in capsys.readouterr().err
    assert (out / "keep").read_text() == "x"


def test_unreachable_scheduler(corpus_url, tmp_path, capsys):
    out = str(tmp_path / "m.zarr")
    t0 = time.monotonic()
    line = _bad([corpus_url, "--out", out, "-k", "4", "--connect-timeout", "2",
                 "--scheduler", f"tcp://127.0.0.1:{_free_port()}"], capsys, out)
    assert "cannot reach the Dask scheduler" in line
    assert time.monotonic() - t0 < 30


@pytest.fixture(scope="module")
def dask_cluster():
    """``dask scheduler`` and two ``dask worker --nthreads 1`` processes on loopback."""
    from distributed import Client

    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    bindir = os.path.dirname(sys.executable)
    procs = [subprocess.Popen(
        [os.path.join(bindir, "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--dashboard-address", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(2):
            procs.append(subprocess.Popen(
                [os.path.join(bindir, "dask"), "worker", addr, "--nthreads", "1",
                 "--memory-limit", "1GB", "--host", "127.0.0.1", "--no-dashboard"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(addr, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()  # a worker closing gracefully can take longer; it is only ours
                p.wait(timeout=10)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "biglda.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_train_on_a_multi_process_cluster(dask_cluster, corpus_url, tmp_path):
    out = str(tmp_path / "model.zarr")
    proc = _cli("train", corpus_url, "--out", out, "-k", "4", "--iterations", "4",
                "--scheduler", dask_cluster, "--shards", "3")
    assert proc.returncode == 0, proc.stderr
    assert "dashboard:" in proc.stdout and f"model written to {out}" in proc.stdout
    _check_model(out, corpus_url, 4, 4)
    history = open_model_group(out).attrs["history"]
    assert len(history[-1]["tokens_per_s_per_worker"]) == 2


def test_table_too_large_for_the_workers(dask_cluster, corpus_url, tmp_path):
    out = str(tmp_path / "model.zarr")
    proc = _cli("train", corpus_url, "--out", out, "-k", "65000", "--iterations", "2",
                "--scheduler", dask_cluster)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not fit" in lines[0] and "fits" in lines[0], proc.stderr
    assert not os.path.exists(out)


def test_unwritable_out_is_refused_before_a_cluster_starts(corpus_url, tmp_path, capsys,
                                                           monkeypatch):
    from biglda.trainer import cluster

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started for an unwritable --out")

    monkeypatch.setattr(cluster, "start_local_cluster", no_cluster)
    (tmp_path / "a-file").write_text("x")
    out = str(tmp_path / "a-file" / "sub" / "m.zarr")
    line = _bad([corpus_url, "--out", out, "-k", "4"], capsys, out)
    assert line == f"biglda: error: cannot write {out}: Not a directory"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a read-only folder is writable")
        out = str(ro / "m.zarr")
        line = _bad([corpus_url, "--out", out, "-k", "4"], capsys, out)
        assert line == f"biglda: error: cannot write {out}: Permission denied"
    finally:
        ro.chmod(0o700)


def test_full_disk_during_train_is_one_line_and_leaves_nothing(corpus_url, tmp_path, capsys,
                                                               monkeypatch, local_cluster):
    import errno

    from biglda.model import store

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store, "save_model", full)
    out = str(tmp_path / "m.zarr")
    # (on the shared cluster: test_train_embedded_cluster starts the CLI's own)
    rc = main(["-q", "train", corpus_url, "--out", out, "-k", "4", "--iterations", "1",
               "--scheduler", local_cluster.scheduler.address, "--checkpoint-every", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"biglda: error: cannot write {out}: No space left on device\n"
    assert not os.path.exists(out)


def test_scheduler_with_an_unknown_scheme_is_one_line(corpus_url, tmp_path, capsys):
    out = str(tmp_path / "m.zarr")
    line = _bad([corpus_url, "--out", out, "-k", "4", "--scheduler", "foo://x"], capsys, out)
    assert line.startswith("biglda: error: cannot connect to the Dask scheduler 'foo://x': "
                           "unknown address scheme 'foo'")


def test_progress_lines_without_a_tty_stop_reason_and_metrics_appended_on_resume(
        corpus_url, tmp_path, capsys, local_cluster):
    """stderr not a TTY (capsys): progress lines, not a bar; the stop reason is printed; a
    resumed run appends to --metrics; a finished model continues with --resume --overwrite.
    (On the shared cluster: test_train_embedded_cluster starts the CLI's own.)"""
    out = str(tmp_path / "m.zarr")
    metrics = tmp_path / "metrics.jsonl"
    base = ["train", corpus_url, "--out", out, "-k", "4",
            "--scheduler", local_cluster.scheduler.address,
            "--checkpoint-every", "1", "--metrics", str(metrics)]
    assert main([*base, "--iterations", "2"]) == 0
    cap = capsys.readouterr()
    assert "iteration 2/2  LL/token" in cap.err  # the last iteration always gets its line
    assert "stopped: all 2 iterations done" in cap.out
    ck = out.replace(".zarr", ".checkpoint.zarr")
    assert f"checkpoint {ck} kept: to continue this model" in cap.out
    assert main([*base, "--iterations", "4", "--resume", "--overwrite"]) == 0
    assert "stopped: all 4 iterations done" in capsys.readouterr().out
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["iteration"] for r in records if r["type"] == "iteration"] == [1, 2, 3, 4]
    assert [r["type"] for r in records].count("start") == 2
    _check_model(out, corpus_url, 4, 4)


def test_the_eta_is_from_the_clocks_after_the_first(corpus_url, tmp_path, capsys,
                                                    local_cluster):
    # the first clock compiles kernels (17 s of the demo's 25 s on a fresh install): its line
    # has no ETA, and each later record's is the clocks since the first's mean, times what is
    # left (the metrics' elapsed times are the oracle)
    metrics = tmp_path / "metrics.jsonl"
    assert main(["train", corpus_url, "--out", str(tmp_path / "m.zarr"), "-k", "4",
                 "--iterations", "6", "--scheduler", local_cluster.scheduler.address,
                 "--metrics", str(metrics)]) == 0
    first = capsys.readouterr().err.splitlines()
    assert any(line.startswith("iteration 1/6 ") and line.endswith("ETA -") for line in first)
    its = [r for r in map(json.loads, metrics.read_text().splitlines())
           if r["type"] == "iteration"]
    t1 = its[0]["elapsed"]
    for r in its[1:]:
        i = r["iteration"]
        assert r["eta_s"] == pytest.approx((6 - i) * (r["elapsed"] - t1) / (i - 1), abs=1e-6)


def test_stop_reason_tol(corpus_url, tmp_path, capsys, local_cluster):
    out = str(tmp_path / "m.zarr")
    assert main(["train", corpus_url, "--out", out, "-k", "4",
                 "--scheduler", local_cluster.scheduler.address,
                 "--iterations", "50", "--tol", "1", "--checkpoint-every", "0"]) == 0
    printed = capsys.readouterr().out
    # the stop reaches the shards a few clocks later (they may run ahead of the driver)
    attrs = open_model_group(out).attrs
    n = len(attrs["history"])
    assert attrs["stop_reason"] == "tol"
    assert f"stopped: --tol 1 reached at iteration {n} (" in printed
    assert "checkpoint" not in printed.split("model written")[1]


def test_full_disk_on_a_real_tiny_filesystem_during_train(corpus_url, tmp_path, capsys):
    """A 12 KiB tmpfs: the first checkpoint (written by a worker) fills it."""
    where = tmp_path / "tiny"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(where)],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no mount command")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        out = str(where / "m.zarr")
        rc = main(["-q", "train", corpus_url, "--out", out, "-k", "4", "--iterations", "2",
                   "--workers", "1", "--checkpoint-every", "1"])
        err = capsys.readouterr().err
        assert rc == 2 and err == f"biglda: error: cannot write {out}: No space left on device\n"
        assert os.listdir(where) == []  # no model, no checkpoint that cannot be resumed
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, timeout=20)
