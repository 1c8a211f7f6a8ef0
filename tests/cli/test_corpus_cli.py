"""CLI: ``biglda ingest``, ``info``, ``datasets synth`` end to end, and every bad input."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

from biglda.cli import main
from biglda.corpus import Corpus, write_corpus

TEXT = "".join(f"d{i}\tzarr chunks store arrays; dask schedules tasks {i % 3}x\n"
               for i in range(12))


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _assert_one_line_error(rc, err, *needles):
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("biglda: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def _assert_nothing_left(out_path):
    assert not os.path.exists(out_path)
    parent = os.path.dirname(out_path)
    base = os.path.basename(out_path)
    assert not [n for n in os.listdir(parent) if n.startswith(f".{base}.")]


@pytest.fixture
def tsv(tmp_path):
    path = tmp_path / "docs.tsv"
    path.write_text(TEXT)
    return path


def test_ingest_info_round_trip(tmp_path, tsv, capsys):
    out = tmp_path / "c.zarr"
    rc, stdout, err = _run(capsys, "ingest", str(tsv), "--out", str(out), "--min-df", "2")
    assert rc == 0 and err == ""
    assert "12 documents" in stdout
    c = Corpus.open(str(out))
    assert c.n_docs == 12
    assert c.vocab[0] in {"zarr", "chunks", "store", "arrays", "dask", "schedules", "tasks"}
    rc, stdout, _ = _run(capsys, "info", str(out), "--top", "3")
    assert rc == 0
    for needle in ("documents:", "12", "tokens:", "vocabulary:", "chunking:", "doc length:",
                   "most frequent words", "rank"):
        assert needle in stdout
    assert str(c.vocab[2]) in stdout
    # --overwrite replaces; a different setting shows up.
    rc, _, _ = _run(capsys, "ingest", str(tsv), "--out", str(out), "--overwrite",
                    "--min-df", "1", "--stopwords", "none")
    assert rc == 0 and Corpus.open(str(out)).attrs["filters"]["stopwords"] == "none"


def test_datasets_synth_and_info(tmp_path, capsys):
    out = tmp_path / "s.zarr"
    rc, stdout, err = _run(capsys, "datasets", "synth", "--out", str(out), "--docs", "50",
                           "--vocab", "80", "--topics", "4", "--doc-length", "20", "--seed", "1")
    assert rc == 0, err
    from biglda.corpus.synth import load_truth

    phi, theta = load_truth(str(out))
    c = Corpus.open(str(out))
    assert phi.shape == (4, c.n_words) and theta.shape == (50, 4)
    rc, stdout, _ = _run(capsys, "info", str(out))
    assert rc == 0 and "synthetic:" in stdout and "K=4" in stdout
    rc, _, err = _run(capsys, "datasets", "synth", "--out", str(out))
    _assert_one_line_error(rc, err, "already exists")
    rc, _, err = _run(capsys, "datasets", "synth", "--out", str(tmp_path / "x.zarr"),
                      "--topics", "0")
    _assert_one_line_error(rc, err, "--topics")


# ----------------------------------------------------------------------------- bad inputs


def _bad(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


BAD_CASES = {
    "missing": (lambda p: str(p / "nope.tsv"), [], ["nope.tsv", "not found"]),
    "directory-as-file": (lambda p: str(p), ["--format", "tsv"], ["is a directory"]),
    "empty": (lambda p: _bad(p, "empty.tsv", b""), [], ["no documents", "empty"]),
    "blank-lines-only": (lambda p: _bad(p, "blank.txt", b"\n\n  \n"), [], ["no documents"]),
    "binary": (lambda p: _bad(p, "blob.tsv", b"a\tb\n\x00\x01\x02\xff\xfe"), [],
               ["blob.tsv:2", "binary"]),
    "not-utf8": (lambda p: _bad(p, "latin.tsv", "a\tok\nb\tcaf\xe9\n".encode("latin-1")), [],
                 ["latin.tsv:2", "not valid UTF-8", "0xe9"]),
    "no-tab": (lambda p: _bad(p, "x.tsv", b"a\tfine\njust text\n"), [], ["x.tsv:2", "no TAB"]),
    "damaged-gzip": (lambda p: _bad(p, "d.tsv.gz", gzip.compress(b"a\tb\n" * 1000)[:40]), [],
                     ["d.tsv.gz", "damaged gzip"]),
    "jsonl-no-text-field": (lambda p: _bad(p, "d.jsonl", b'{"id": 1, "body": "x"}\n'), [],
                            ["d.jsonl:1", "no field 'text'", "--text-field"]),
    "jsonl-not-json": (lambda p: _bad(p, "d.jsonl", b'{"text": "a"}\nnot json\n'), [],
                       ["d.jsonl:2", "not a JSON object"]),
    "empty-vocabulary": (lambda p: _bad(p, "d.tsv", b"a\tthe of and\nb\tunique words\n"), [],
                         ["vocabulary is empty", "--min-df"]),
    "bad-pattern": (lambda p: _bad(p, "d.tsv", b"a\tx\n"), ["--token-pattern", "(["],
                    ["--token-pattern"]),
    "missing-stopword-file": (lambda p: _bad(p, "d.tsv", b"a\tx\n"),
                              ["--stopwords", "/nonexistent/stop.txt"], ["stopword file"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, capsys, case):
    make, extra, needles = BAD_CASES[case]
    src = make(tmp_path)
    out = str(tmp_path / "out" / "c.zarr")
    os.makedirs(os.path.dirname(out))
    rc, _stdout, err = _run(capsys, "ingest", src, "--out", out, *extra)
    _assert_one_line_error(rc, err, *needles)
    _assert_nothing_left(out)


def _uci(tmp_path, header, body, vocab):
    (tmp_path / "docword.t.txt").write_text(header + body)
    (tmp_path / "vocab.t.txt").write_text(vocab)
    return str(tmp_path / "docword.t.txt")


@pytest.mark.parametrize(("header", "body", "vocab", "needles"), [
    ("2\n3\n5\n", "1 1 2\n1 2 1\n2 3 1\n", "a\nb\nc\n", ["NNZ=5", "3 entries"]),
    ("2\n3\n2\n", "1 1 2\n3 2 1\n", "a\nb\nc\n", ["outside the header"]),
    ("2\n4\n1\n", "1 1 2\n", "a\nb\nc\n", ["3 words", "W=4"]),
    ("2\n3\n2\n", "2 1 2\n1 2 1\n", "a\nb\nc\n", ["sorted by docID"]),
    ("2\nthree\n", "", "a\n", ["UCI header"]),
    ("2\n3\n1\n", "1 1\n", "a\nb\nc\n", ["UCI lines are"]),
])
def test_bad_uci(tmp_path, capsys, header, body, vocab, needles):
    src = _uci(tmp_path, header, body, vocab)
    out = str(tmp_path / "c.zarr")
    rc, _, err = _run(capsys, "ingest", src, "--out", out)
    _assert_one_line_error(rc, err, *needles)
    _assert_nothing_left(out)


def test_uci_missing_vocab(tmp_path, capsys):
    (tmp_path / "docword.t.txt").write_text("1\n1\n1\n1 1 1\n")
    rc, _, err = _run(capsys, "ingest", str(tmp_path / "docword.t.txt"), "--out",
                      str(tmp_path / "c.zarr"))
    _assert_one_line_error(rc, err, "vocab.t.txt not found")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_input(tmp_path, capsys, tsv):
    tsv.chmod(0)
    rc, _, err = _run(capsys, "ingest", str(tsv), "--out", str(tmp_path / "c.zarr"))
    _assert_one_line_error(rc, err, "not readable")


def test_output_exists_without_overwrite(tmp_path, capsys, tsv):
    out = tmp_path / "c.zarr"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    rc, _, err = _run(capsys, "ingest", str(tsv), "--out", str(out))
    _assert_one_line_error(rc, err, "already exists", "--overwrite")
    assert (out / "precious.txt").read_text() == "keep me"


def test_interrupted_ingest_leaves_nothing(tmp_path, capsys, tsv, monkeypatch):
    from biglda.corpus import writer

    def interrupt(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer.CorpusWriter, "close", interrupt)
    out = str(tmp_path / "c.zarr")
    rc, _, err = _run(capsys, "ingest", str(tsv), "--out", out, "--min-df", "1")
    assert rc == 130 and "interrupted" in err
    _assert_nothing_left(out)


def test_info_refuses_non_corpus_and_other_version(tmp_path, capsys):
    rc, _, err = _run(capsys, "info", str(tmp_path / "missing.zarr"))
    _assert_one_line_error(rc, err, "missing.zarr")
    g = zarr.open_group(str(tmp_path / "model.zarr"), mode="w")
    g.attrs["format"] = "biglda-model"
    rc, _, err = _run(capsys, "info", str(tmp_path / "model.zarr"))
    _assert_one_line_error(rc, err, "not a biglda corpus")
    url = str(tmp_path / "old.zarr")
    write_corpus(url, np.array([0], np.int32), np.array([0, 1]), ["a"])
    zarr.open_group(url, mode="a").attrs["format_version"] = 0
    rc, _, err = _run(capsys, "info", url)
    _assert_one_line_error(rc, err, "format version 0")


def test_subprocess_error_has_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "biglda.cli", "ingest", str(tmp_path / "missing.txt"), "--out",
         str(tmp_path / "c.zarr")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"biglda: error: input {tmp_path / 'missing.txt'} not found"]
    assert not (tmp_path / "c.zarr").exists()


def test_unreadable_input_reported(tmp_path, capsys, tsv, monkeypatch):
    """The permission check, also when running as root (who can read anything)."""
    import biglda.corpus.readers as readers

    monkeypatch.setattr(readers.os, "access", lambda path, mode: False)
    rc, _, err = _run(capsys, "ingest", str(tsv), "--out", str(tmp_path / "c.zarr"))
    _assert_one_line_error(rc, err, "not readable", "docs.tsv")


def test_unwritable_out_is_refused_before_work(tmp_path, capsys, tsv):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = str(blocker / "sub" / "c.zarr")  # a file stands where a folder must be
    rc, _, err = _run(capsys, "ingest", str(tsv), "--out", out, "--min-df", "1")
    _assert_one_line_error(rc, err, "cannot write", "Not a directory")


def test_ingest_makes_missing_folders(tmp_path, capsys, tsv):
    out = tmp_path / "new" / "deeper" / "c.zarr"
    rc, _, _ = _run(capsys, "ingest", str(tsv), "--out", str(out), "--min-df", "1")
    assert rc == 0 and Corpus.open(str(out)).n_docs == 12


def test_full_disk_during_ingest_is_one_line_and_leaves_nothing(tmp_path, capsys, tsv,
                                                                monkeypatch):
    import errno

    from biglda.corpus import ingest as ingest_mod

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ingest_mod.CorpusWriter, "append_docs", full)
    out = str(tmp_path / "c.zarr")
    rc, _, err = _run(capsys, "ingest", str(tsv), "--out", out, "--min-df", "1")
    _assert_one_line_error(rc, err, "cannot write", "No space left on device")
    _assert_nothing_left(out)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs (needs root and mount; skipped where either is missing)."""
    where = tmp_path / "tiny"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no mount command")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True, timeout=20)


def test_full_disk_on_a_real_tiny_filesystem(tmp_path, capsys, tiny_tmpfs):
    big = tmp_path / "big.txt"
    rng = np.random.default_rng(0)
    words = np.array([f"word{i}" for i in range(3000)])
    big.write_text("\n".join(" ".join(rng.choice(words, 50)) for _ in range(3000)))
    out = str(tiny_tmpfs / "c.zarr")
    rc, _, err = _run(capsys, "ingest", str(big), "--out", out, "--min-df", "1")
    _assert_one_line_error(rc, err, "cannot write", "No space left on device")
    assert os.listdir(tiny_tmpfs) == []


def test_stopwords_repeat_and_combine(tmp_path, capsys, tsv):
    extra = tmp_path / "extra.txt"
    extra.write_text("zarr\n# a comment\ndask\n")
    out = str(tmp_path / "c.zarr")
    rc, _, _ = _run(capsys, "ingest", str(tsv), "--out", out, "--min-df", "1",
                    "--stopwords", "english", "--stopwords", str(extra))
    c = Corpus.open(out)
    words = set(c.vocab.tolist())
    assert rc == 0 and not words & {"zarr", "dask"}  # the file's words
    from biglda.corpus.tokenizer import load_stopwords


    union, desc = load_stopwords(["english", str(extra)])
    assert {"the", "zarr", "dask"} <= union and desc == f"english+file:{extra}"
    assert c.attrs["filters"]["stopwords"] == desc and not words & union


def test_ngrams_like_sklearn_ngram_range(tmp_path, capsys):
    docs = tmp_path / "d.txt"
    docs.write_text("new york subway is late\nthe new york subway\nnew york of the city\n")
    out = str(tmp_path / "c.zarr")
    rc, _, _ = _run(capsys, "ingest", str(docs), "--out", out, "--min-df", "2", "--ngrams", "2")
    c = Corpus.open(out)
    words = set(c.vocab.tolist())
    # unigrams and bigrams in >= 2 documents; bigrams ending/starting in a stopword go
    assert rc == 0 and words == {"new", "york", "subway", "new york", "york subway"}
    assert c.tokenizer["ngrams"] == 2
    rc, _, err = _run(capsys, "ingest", str(docs), "--out", str(tmp_path / "x.zarr"),
                      "--ngrams", "9")
    _assert_one_line_error(rc, err, "--ngrams must be a whole number from 1 to 5")
