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
    write_corpus(test, test_tok, test_ptr, list(vocab) + ["zzz"])
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


def test_evaluate_prints_and_stores(paths, capsys):
    code, out, _ = _run(capsys, "evaluate", paths["model"], "--test", paths["test"], "--json")
    res = json.loads(out)
    assert code == 0 and res["heldout_unknown_tokens"] == 7
    assert -6 < res["heldout_loglik_per_token"] < -3 and res["perplexity"] > 1
    assert -1 <= res["npmi"] <= 1 and 0 < res["diversity"] <= 1
    stored = biglda.load(paths["model"]).attrs["evaluation"]
    assert stored["perplexity"] == pytest.approx(res["perplexity"])
    code, out, _ = _run(capsys, "evaluate", paths["model"], "--test", paths["test"],
                        "--window", "10")
    assert code == 0 and "perplexity" in out and "windows of 10" in out


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
