"""biglda topics / infer / evaluate / export, end to end through ``biglda.cli.main``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import biglda
from biglda.cli import main
from biglda.corpus import Tokenizer, write_corpus
from biglda.corpus.synth import SynthSpec, generate
from biglda.model.store import save_model

SPEC = SynthSpec(n_docs=400, n_words=150, n_topics=5, mean_doc_length=60, alpha=0.1,
                 beta=0.1, seed=3)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    from biglda.samplers import doc_topic_counts, fit_local

    root = tmp_path_factory.mktemp("cli-model")
    tokens, doc_ptr, _, _ = generate(SPEC)
    vocab = np.array([f"w{i}" for i in range(SPEC.n_words)])
    cut = doc_ptr[300]
    train_tok, train_ptr = tokens[:cut], doc_ptr[:301]
    fit = fit_local(train_tok, train_ptr, SPEC.n_words, SPEC.n_topics, iterations=60,
                    alpha=0.1, beta=0.1, seed=0, loglik_every=0)
    model = str(root / "model.zarr")
    save_model(model, n_wk=fit.n_wk, n_dk=doc_topic_counts(train_ptr, fit.z, SPEC.n_topics),
               vocab=vocab, doc_ids=np.arange(300), alpha=0.1, beta=0.1,
               attrs={"tokenizer": Tokenizer().settings, "sampler": "cgs"})
    # Held-out corpus with one extra word the model does not know ("zzz", 7 times).
    test_tok = np.concatenate([tokens[cut:], np.full(7, SPEC.n_words)])
    test_ptr = np.concatenate([doc_ptr[300:] - cut, [len(test_tok)]])
    test = str(root / "test.zarr")
    write_corpus(test, test_tok, test_ptr, [*vocab, "zzz"])
    docs = root / "docs.txt"
    docs.write_text("w0 w1 w2 w0\nW3, w4 and w5!\n\nw7 w7 w7\n")
    return {"root": root, "model": model, "test": test, "docs": str(docs)}


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_table_and_json(paths, capsys):
    code, out, _ = _run(capsys, "topics", paths["model"], "--top", "4")
    assert code == 0 and out.splitlines()[0].startswith("5 topics, 150 words, 300 documents")
    assert len(out.splitlines()) == 6
    code, out, _ = _run(capsys, "topics", paths["model"], "--top", "1000", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 5 and len(rows[0]["words"]) == 150  # clipped to V
    model = biglda.load(paths["model"])
    assert rows[2]["words"][:4] == [w for w, _ in model.top_words(2, 4)]


def test_infer_npy_and_csv(paths, capsys):
    out_npy = str(paths["root"] / "theta.npy")
    code, out, _ = _run(capsys, "infer", paths["model"], paths["docs"], "--out", out_npy,
                        "--iterations", "20")
    assert code == 0 and "3 documents" in out and "1 unknown tokens" in out
    theta = np.load(out_npy)
    model = biglda.load(paths["model"])
    np.testing.assert_array_equal(
        theta, model.transform(["w0 w1 w2 w0", "W3, w4 and w5!", "w7 w7 w7"], iterations=20))
    out_csv = str(paths["root"] / "theta.csv")
    code, _, _ = _run(capsys, "infer", paths["model"], paths["docs"], "--out", out_csv,
                      "--iterations", "20")
    lines = (paths["root"] / "theta.csv").read_text().splitlines()
    assert code == 0 and lines[0].startswith("doc_id,topic_0") and len(lines) == 4
    assert lines[1].split(",")[0] == "1"  # line-number ids (blank lines skipped)


def test_evaluate_reads_only_unless_saved(paths, capsys, tmp_path):
    import shutil

    model = str(tmp_path / "m.zarr")
    shutil.copytree(paths["model"], model)
    before = biglda.load(model).attrs
    code, out, _ = _run(capsys, "evaluate", model, "--test", paths["test"], "--json")
    res = json.loads(out)
    assert code == 0 and res["heldout_unknown_tokens"] == 7
    assert -6 < res["heldout_loglik_per_token"] < -3 and res["perplexity"] > 1
    assert -1 <= res["npmi"] <= 1 and 0 < res["diversity"] <= 1
    assert len(res["npmi_per_topic"]) == SPEC.n_topics
    assert biglda.load(model).attrs == before  # evaluate reads
    code, out, _ = _run(capsys, "evaluate", model, "--test", paths["test"], "--window", "10",
                        "--save")
    assert code == 0 and "perplexity" in out and "windows of 10" in out and "saved in" in out
    other = str(tmp_path / "other.zarr")
    shutil.copytree(paths["test"], other)
    assert _run(capsys, "evaluate", model, "--test", other, "--save")[0] == 0
    stored = biglda.load(model).attrs
    assert list(stored["evaluations"]) == [paths["test"], other]  # keyed by test set
    assert stored["evaluations"][paths["test"]]["coherence_window"] == 10
    assert stored["evaluation"]["test_corpus"] == other
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    out = capsys.readouterr().out
    assert "--save" in out and "Only reads the model unless --save" in " ".join(out.split())


def test_evaluate_warns_about_unknown_tokens(paths, capsys, tmp_path):
    # A test set whose words are mostly unknown to the model (as KJV is to a Linux model).
    tokens = np.arange(40, dtype=np.int32) % 8
    test = str(tmp_path / "foreign.zarr")
    write_corpus(test, tokens, np.arange(0, 41, 10), ["w0"] + [f"x{i}" for i in range(7)])
    code, _out, err = _run(capsys, "evaluate", paths["model"], "--test", test)
    assert code == 0 and "87.5% of the held-out tokens (35 of 40)" in err
    assert err.startswith("biglda: warning:") and err.count("\n") == 1
    code, _, err = _run(capsys, "evaluate", paths["model"], "--test", paths["test"])
    assert code == 0 and err == ""  # 7 unknown tokens of thousands: no warning


def test_split_then_vocab_from(paths, capsys, tmp_path):
    from biglda.corpus import Corpus

    train, test = str(tmp_path / "train.zarr"), str(tmp_path / "test.zarr")
    argv = ["split", paths["test"], "--train", train, "--test", test, "--test-fraction", "0.3",
            "--seed", "4"]
    code, out, _ = _run(capsys, *argv)
    src, tr, te = Corpus.open(paths["test"]), Corpus.open(train), Corpus.open(test)
    assert code == 0 and tr.n_docs + te.n_docs == src.n_docs and 0 < te.n_docs < src.n_docs
    assert tr.n_tokens + te.n_tokens == src.n_tokens
    assert sorted(tr.doc_ids.tolist() + te.doc_ids.tolist()) == sorted(src.doc_ids.tolist())
    first = te.doc_ids.tolist()
    code, _, err = _run(capsys, *argv)  # outputs exist: refused, nothing touched
    assert code != 0 and "already exists" in err
    assert _run(capsys, *argv, "--overwrite")[0] == 0
    assert Corpus.open(test).doc_ids.tolist() == first  # seeded
    # --vocab-from: new text gets exactly the model's words; the rest is dropped and counted
    text = tmp_path / "new.txt"
    text.write_text("w1 w2 unknownword w3\nw1 foo bar\n")
    out_corpus = str(tmp_path / "new.zarr")
    code, out, _ = _run(capsys, "ingest", str(text), "--out", out_corpus, "--vocab-from",
                        paths["model"])
    c = Corpus.open(out_corpus)
    assert code == 0 and c.n_tokens == 4 and set(c.vocab.tolist()) == {"w1", "w2", "w3"}
    assert "3 input tokens (42.9%) of words outside it dropped" in out
    code, out, err = _run(capsys, "evaluate", paths["model"], "--test", out_corpus)
    assert code == 0 and "3 unknown tokens dropped, 42.9%" in out
    assert "42.9% of the held-out tokens (3 of 7, counting those ingest --vocab-from" in err
    code, _, err = _run(capsys, "ingest", str(text), "--out", str(tmp_path / "x.zarr"),
                        "--vocab-from", str(tmp_path / "nothing.zarr"))
    assert code != 0 and err.count("\n") == 1 and "neither a biglda corpus nor a model" in err


def test_export_formats(paths, capsys):
    out = str(paths["root"] / "top.json")
    code, text, _ = _run(capsys, "export", paths["model"], "--format", "json", "--out", out,
                         "--top", "3")
    assert code == 0 and text.strip() == f"wrote {out}"
    assert len(json.loads((paths["root"] / "top.json").read_text())["topics"][0]["words"]) == 3
    code, _, _ = _run(capsys, "export", paths["model"], "--format", "npy", "--out",
                      str(paths["root"] / "dt.npy"))
    assert code == 0 and np.load(paths["root"] / "dt.npy").shape == (300, 5)


@pytest.mark.parametrize("argv, message", [
    (["topics", "{root}/nope.zarr"], "no such model"),
    (["topics", "{test}"], "not a biglda model"),
    (["topics", "{model}", "--top", "0"], "--top must be at least 1"),
    (["infer", "{model}", "{docs}", "--out", "{root}/x.txt"], "must end in .npy or .csv"),
    (["infer", "{model}", "{root}/missing.txt", "--out", "{root}/x.npy"], "missing.txt"),
    (["export", "{model}", "--format", "csv", "--out", "{docs}/x.csv"], "cannot write"),
    (["export", "{model}", "--format", "npy", "--out", "{docs}"], "already exists"),
    (["evaluate", "{model}", "--test", "{model}"], "not a biglda corpus"),
])
def test_bad_input_is_one_line(paths, capsys, argv, message):
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in argv]
    code, _, err = _run(capsys, *argv)
    assert code != 0
    assert err.count("\n") == 1 and err.startswith("biglda: error:") and message in err


def test_topics_show_learned_alpha(tmp_path, capsys):
    n_wk = np.array([[8, 0, 1], [6, 1, 0], [0, 9, 0], [1, 7, 0], [0, 0, 5], [0, 1, 6]])
    url = str(tmp_path / "asym.zarr")
    save_model(url, n_wk=n_wk, n_dk=np.array([[10, 1, 0], [5, 0, 0]]),
               vocab=np.array(["apple", "pear", "car", "bus", "sun", "rain"]),
               doc_ids=np.arange(2), alpha=np.array([0.05, 0.5, 0.25]), beta=0.01, attrs={})
    code, out, _ = _run(capsys, "topics", url, "--top", "2")
    lines = out.splitlines()
    assert code == 0 and "alpha asymmetric (learned: min 0.05, max 0.5, sum 0.8)" in lines[0]
    assert lines[1].split()[:3] == ["topic", "share", "alpha"]
    assert lines[3].split()[2] == "0.5000"  # topic 1's alpha
    code, out, _ = _run(capsys, "topics", url, "--json")
    assert [r["alpha"] for r in json.loads(out)] == [0.05, 0.5, 0.25]


def test_export_matrices_from_the_cli(paths, capsys, tmp_path):
    out = tmp_path / "tw.csv"
    code, _, _ = _run(capsys, "export", paths["model"], "--format", "csv", "--what",
                      "topic-word", "--out", str(out))
    lines = out.read_text().splitlines()
    assert code == 0 and lines[0].startswith("word,topic_0") and len(lines) == 1 + 150
    out = tmp_path / "sub" / "dt.csv"  # folders are made
    code, _, _ = _run(capsys, "export", paths["model"], "--format", "csv", "--what",
                      "doc-topic", "--out", str(out))
    lines = out.read_text().splitlines()
    assert code == 0 and lines[0].startswith("doc_id,topic_0") and len(lines) == 1 + 300
    code, _, err = _run(capsys, "export", paths["model"], "--format", "json", "--what",
                        "doc-topic", "--out", str(tmp_path / "x.json"))
    assert code != 0 and err.count("\n") == 1 and "does not hold" in err


def test_parquet_without_pyarrow_is_one_line(paths, capsys, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    out = tmp_path / "dt.parquet"
    code, _, err = _run(capsys, "export", paths["model"], "--format", "parquet", "--out",
                        str(out))
    assert code != 0 and err.count("\n") == 1 and "pip install 'biglda[parquet]'" in err
    assert not out.exists()


def test_version_dir_and_help_show_the_api_and_keep_the_import_cheap(capsys):
    import subprocess
    import sys

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == "biglda 0.1.0"
    code = ("import sys, pydoc, biglda\n"
            "print(sorted(n for n in dir(biglda) if not n.startswith('_')))\n"
            "print(sorted({'distributed', 'numba', 'sklearn'} & set(sys.modules)))\n"
            "text = pydoc.render_doc(biglda, renderer=pydoc.plaintext)\n"
            "print(all(n in text for n in ('train(', 'load(', 'TopicModel', 'LDA(', 'Corpus'))"
            ")\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[0] == str(["BigLDAError", "Corpus", "LDA", "TopicModel", "load", "train"])
    assert out[1] == "[]"  # import and dir() load nothing heavy (help() may: it documents)
    assert out[2] == "True"


def test_split_refuses_bad_fraction(paths, capsys, tmp_path):
    code, _, err = _run(capsys, "split", paths["test"], "--train", str(tmp_path / "a.zarr"),
                        "--test", str(tmp_path / "b.zarr"), "--test-fraction", "1.5")
    assert code == 2 and err == "biglda: error: test_fraction must lie in (0, 1), got 1.5\n"
    assert list(tmp_path.iterdir()) == []


def test_every_row_of_docs_errors_is_tested():
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    files = {"C": "tests/cli/test_corpus_cli.py", "M": "tests/cli/test_model_cli.py",
             "R": "tests/dashboards/test_report.py", "T": "tests/cli/test_train_cli.py",
             "I": "tests/reliability/test_interrupt.py"}
    rows = [line for line in (root / "docs/errors.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| mistake", "| ---"))]
    assert len(rows) >= 15
    for row in rows:
        cell = row.rstrip(" |").rsplit("|", 1)[-1].strip()
        key, names = cell.split(" ", 1)
        source = (root / files[key]).read_text()
        for name in re.findall(r"`(test_\w+)`", names):
            assert f"def {name}(" in source, f"docs/errors.md names {name}, not in {files[key]}"
