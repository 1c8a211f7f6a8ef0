"""Pipelines: stages run once, rerun exactly when their parameters or inputs change, and
errors are one line that leaves no record of success.

The oracle for "what reran" is the stage records (``.stages/<stage>.json``: their mtimes
and the ``finished`` time inside) and a counter file that a script stage appends to.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from biglda import pipeline as pl
from biglda.cli import main
from biglda.corpus import Corpus

# A script stage: appends its name to runs.log, writes out.txt from its params.
SCRIPT = textwrap.dedent("""
    import argparse, json, os, sys
    ap = argparse.ArgumentParser()
    ap.add_argument("--params"); ap.add_argument("--out")
    a = ap.parse_args()
    p = json.load(open(a.params))
    with open(os.path.join(p["run_dir"], "runs.log"), "a") as f:
        f.write(p["stage"] + "\\n")
    if p.get("fail"):
        sys.exit(3)
    from biglda.corpus import Corpus
    n = Corpus.open(p["corpus"]).n_docs if "corpus" in p else 0
    with open(os.path.join(a.out, "out.txt"), "w") as f:
        f.write(f"{p.get('value')} {n}\\n")
""")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


@pytest.fixture
def chain(tmp_path):
    """synth -> split -> count (a script reading the training part)."""
    (tmp_path / "count.py").write_text(SCRIPT)
    return _write(tmp_path / "chain.toml", """
        [pipeline]
        name = "chain"
        run_dir = "run"

        [stages.synth]
        n_docs = 60
        n_words = 40
        n_topics = 3
        mean_doc_length = 12
        seed = 3

        [stages.split]
        test_fraction = 0.25

        [stages.count]
        kind = "script"
        script = "count.py"
        corpus = "@split.train"
        value = 1
        outputs = ["out.txt"]
    """)


def _records(p: pl.Pipeline) -> dict[str, float]:
    out = {}
    for st in p.stages:
        with open(p.record_path(st)) as f:
            out[st.name] = json.load(f)["finished"]
    return out


def _runs(p: pl.Pipeline) -> list[str]:
    with open(os.path.join(p.run_dir, "runs.log")) as f:
        return f.read().split()


def test_second_run_skips_and_changes_rerun_downstream_only(chain):
    p = pl.load_pipeline(chain)
    first = pl.run_pipeline(p)
    assert [r.status for r in first] == ["ran"] * 3
    rec1 = _records(p)
    mtimes = {s.name: os.stat(p.record_path(s)).st_mtime_ns for s in p.stages}

    second = pl.run_pipeline(pl.load_pipeline(chain))
    assert [r.status for r in second] == ["skipped"] * 3
    assert _records(p) == rec1
    assert {s.name: os.stat(p.record_path(s)).st_mtime_ns for s in p.stages} == mtimes
    assert _runs(p) == ["count"]

    # A parameter of the last stage: only that stage.
    p2 = pl.load_pipeline(chain, overrides=["count.value=2"])
    assert [r.status for r in pl.run_pipeline(p2)] == ["skipped", "skipped", "ran"]
    assert _read(p.artifact("count", "out")).split()[0] == "2"

    # A parameter in the middle: that stage and the ones reading its outputs, not upstream.
    p3 = pl.load_pipeline(chain, overrides=["count.value=2", "split.test_fraction=0.5"])
    assert [s.name for s, ok, _ in pl.plan(p3) if not ok] == ["split", "count"]
    assert [r.status for r in pl.run_pipeline(p3)] == ["skipped", "ran", "ran"]
    rec3 = _records(p3)
    assert rec3["synth"] == rec1["synth"]
    assert Corpus.open(p3.artifact("split", "test")).n_docs > 20  # half of 60, not a quarter
    assert _runs(p) == ["count", "count", "count"]

    # --force reruns everything; an output deleted or edited by hand reruns its stage.
    assert [r.status for r in pl.run_pipeline(p3, force=True)] == ["ran"] * 3
    os.remove(p3.artifact("count", "out"))
    assert [r.status for r in pl.run_pipeline(p3)] == ["skipped", "skipped", "ran"]
    with open(p3.artifact("count", "out"), "a") as f:
        f.write("edited\n")
    assert pl.stage_state(p3, p3.stages[2]) == (False, "output out.txt changed since it was "
                                                       "written")
    assert [r.status for r in pl.run_pipeline(p3)] == ["skipped", "skipped", "ran"]


def test_stage_selection_runs_what_it_needs(chain):
    p = pl.load_pipeline(chain)
    res = pl.run_pipeline(p, stages=["split"])
    assert [(r.name, r.status) for r in res] == [("synth", "ran"), ("split", "ran")]
    assert not os.path.exists(p.record_path("count"))
    with pytest.raises(pl.PipelineError, match="no stage named 'nope'"):
        pl.run_pipeline(p, stages=["nope"])


def test_failing_stage_leaves_no_record(chain):
    p = pl.load_pipeline(chain)
    pl.run_pipeline(p)
    assert os.path.exists(p.record_path("count"))
    bad = pl.load_pipeline(chain, overrides=["count.fail=true"])
    with pytest.raises(pl.PipelineError, match=r"stage 'count' \(script\) failed: .*status 3"):
        pl.run_pipeline(bad)
    assert not os.path.exists(p.record_path("count"))  # the old success is gone too
    assert os.path.exists(p.record_path("split"))
    # An API stage failing with a user error: same, and the next good run redoes it.
    bad = pl.load_pipeline(chain, overrides=["split.test_fraction=1.5"])
    with pytest.raises(pl.PipelineError, match="test_fraction must lie in"):
        pl.run_pipeline(bad)
    assert not os.path.exists(p.record_path("split"))
    res = pl.run_pipeline(pl.load_pipeline(chain))
    assert [r.status for r in res] == ["skipped", "ran", "ran"]


def test_one_run_per_run_directory(chain):
    p = pl.load_pipeline(chain)
    lock = os.path.join(p.run_dir, pl.RECORD_DIR, "lock")
    os.makedirs(os.path.dirname(lock))
    with open(lock, "w") as f:
        f.write(str(os.getpid()))  # a live process holds it
    with pytest.raises(pl.PipelineError, match="another run is using"):
        pl.run_pipeline(p, stages=["synth"])
    assert not os.path.exists(p.record_path("synth"))
    with open(lock, "w") as f:
        f.write("999999999")  # no such process: taken over, and released at the end
    assert [r.status for r in pl.run_pipeline(p, stages=["synth"])] == ["ran"]
    assert not os.path.exists(lock)


@pytest.mark.parametrize("text, needle", [
    (None, "no such pipeline file"),
    ("[stages.a\n", "invalid TOML"),
    ("[pipeline]\nname = 'x'\n", "no stages"),
    ("[stages.a]\nkind = 'bake'\n", "unknown kind 'bake'"),
    ("[stages.train]\nn_topics = 3\n", "needs 'corpus'"),
    ("[stages.train]\ncorpus = '@later'\nn_topics = 3\n[stages.later]\nkind = 'synth'\n",
     "'later' is declared later"),
    ("[stages.s]\nkind = 'synth'\n[stages.train]\ncorpus = '@s.model'\nn_topics = 3\n",
     "has no output 'model'"),
    ("[stages.synth]\nn_docs = 5\ncolour = 'red'\n", "unknown parameter(s) colour"),
])
def test_bad_pipeline_is_one_line(tmp_path, capsys, text, needle):
    path = tmp_path / "p.toml"
    if text is not None:
        path.write_text(text)
    code = main(["pipeline", "run", str(path)])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.startswith("biglda: error: ") and needle in err
    rec = tmp_path / "runs" / "p" / ".stages"
    assert not rec.exists() or not any(rec.iterdir())


def test_cli_run_show_list(chain, capsys):
    assert main(["pipeline", "run", chain, "--set", "count.value=7"]) == 0
    out = capsys.readouterr().out
    assert "[synth] running synth (never ran)" in out and "3 stages run, 0 up to date" in out
    assert main(["pipeline", "run", chain, "--set", "count.value=7"]) == 0
    assert "0 stages run, 3 up to date" in capsys.readouterr().out
    assert main(["pipeline", "show", chain]) == 0
    out = capsys.readouterr().out
    assert "synth (synth) [done]" in out and "count (script) [to run: parameters" in out
    assert main(["pipeline", "list", os.path.dirname(chain)]) == 0
    assert "chain.toml" in capsys.readouterr().out
    assert main(["pipeline", "run", chain, "--set", "nope"]) != 0
    assert "expected STAGE.KEY=VALUE" in capsys.readouterr().err


def test_train_evaluate_report_on_a_synthetic_corpus(tmp_path, capsys, local_cluster):
    """The real train stage once (on the shared cluster, as on a user's scheduler): recovery
    of the true topics, then a full skip."""
    toml = _write(tmp_path / "t.toml", f"""
        [stages.synth]
        n_docs = 200
        n_words = 60
        n_topics = 3
        mean_doc_length = 30
        beta = 0.05
        seed = 2

        [stages.split]
        test_fraction = 0.2

        [stages.train]
        n_topics = 3
        iterations = 30
        scheduler = "{local_cluster.scheduler.address}"
        checkpoint_every = 0

        [stages.evaluate]
        truth = "@synth"
    """)
    assert main(["pipeline", "run", toml]) == 0
    out = capsys.readouterr().out
    assert "[train] iteration 1/30: LL/token" in out and "[train] iteration 30/30" in out
    p = pl.load_pipeline(toml)
    ev = json.loads(_read(p.artifact("evaluate")))
    assert ev["recovery"]["mean_cosine"] > 0.9 > ev["recovery"]["random_mean_cosine"]
    assert ev["heldout_loglik_per_token"] < 0 and -1 <= ev["npmi"] <= 1
    assert len(_read(p.artifact("train", "metrics")).splitlines()) >= 30
    capsys.readouterr()
    assert main(["pipeline", "run", toml]) == 0
    assert "0 stages run, 4 up to date" in capsys.readouterr().out


def test_compare_stage_reports_every_system(tmp_path):
    """The comparison's plumbing with no peer needed: random topics are trained in their own
    process, scored by biglda's evaluator at each budget; a missing peer is a row, not a gap."""
    import importlib.util

    toml = _write(tmp_path / "c.toml", f"""
        [pipeline]
        root = "{os.getcwd()}"
        run_dir = "{tmp_path / 'run'}"

        [stages.synth]
        n_docs = 80
        n_words = 30
        n_topics = 3
        mean_doc_length = 10

        [stages.split]
        test_fraction = 0.25

        [stages.compare]
        topics = [3]
        budgets = [0.1, 0.2]
        systems = ["random", "gensim", "biglda"]
        setup = false
        peers_dir = "{tmp_path / 'no-peers'}"
        burn_in = 2
        samples = 2
    """)
    p = pl.load_pipeline(toml)
    assert [r.status for r in pl.run_pipeline(p)] == ["ran"] * 3
    res = json.loads(_read(p.artifact("compare", "results")))
    rows = {r["system"]: r for r in res["results"]}
    # biglda runs through the same train() a user calls, with its defaults (a default init
    # train() no longer knew once failed every biglda system); a sweep takes longer than
    # these tiny budgets, which the status says, but never "failed". The other biglda
    # systems, ~8 s each here, are this run with other arguments
    # (test_compare_gives_each_biglda_system_its_arguments).
    status = rows["biglda"]["status"]
    assert status == "ok" or status.startswith("over budget"), status
    assert rows["biglda"]["checkpoints"][-1]["heldout_ll_per_token"] < 0
    rnd = rows["random"]
    assert rnd["status"] == "ok" and [c["budget"] for c in rnd["checkpoints"]] == [0.1, 0.2]
    assert rnd["checkpoints"][0]["heldout_ll_per_token"] < 0 and rnd["maxrss_mib"] > 0
    if importlib.util.find_spec("gensim") is None:
        assert rows["gensim"]["status"].startswith("not installed")
    else:  # (the test extra brings it, with pyLDAvis): trained and scored like the others
        status = rows["gensim"]["status"]
        assert status == "ok" or status.startswith("over budget"), status
        assert rows["gensim"]["checkpoints"][-1]["heldout_ll_per_token"] < 0
    table = _read(p.artifact("compare", "table"))
    assert "| 3 | random |" in table and "| 3 | gensim |" in table


def test_compare_gives_each_biglda_system_its_arguments(tmp_path, pipeline_script, monkeypatch):
    """Each biglda system of the compare stage is run_biglda with the settings its name says
    (pipelines/compare.py: its defaults, that sampler, that init, processes of one thread).
    The compare stage's test trains the default one end to end, and
    tests/samplers/test_auto.py trains with init="sequential" through the same train()."""
    import sys

    import numpy as np

    from biglda.corpus import write_corpus

    peers = pipeline_script("peers")
    url = str(tmp_path / "c.zarr")
    write_corpus(url, np.array([0, 1, 1, 0], np.int32), np.array([0, 2, 4], np.int64),
                 ["a", "b"])
    seen = {}
    monkeypatch.setattr(peers, "run_biglda",
                        lambda job, clock, **kw: seen.__setitem__(job["system"], kw))
    monkeypatch.setattr(sys, "path", list(sys.path))  # worker_main appends the peers' folder
    for system in peers.SYSTEMS:
        if system.startswith("biglda"):
            job = tmp_path / f"{system}.json"
            job.write_text(json.dumps({"system": system, "train": url, "budgets": [1.0],
                                       "dir": str(tmp_path), "peers_dir": str(tmp_path)}))
            assert peers.worker_main(str(job)) == 0
    assert seen == {"biglda": {"sampler": "auto"}, "biglda-processes": {"processes": True},
                    "biglda-cgs": {"sampler": "cgs"}, "biglda-lightlda": {"sampler": "lightlda"},
                    "biglda-warplda": {"sampler": "warplda"},
                    "biglda-random-init": {"init": "random"},
                    "biglda-sequential-init": {"init": "sequential"}}


@pytest.mark.parametrize("setting, needle", [
    ("staleness = 'soon'", "staleness must be a whole number of clocks or inf, got 'soon'"),
    ("sampler = 'lightlda'\n        sampler_params = { mh_steps = 0 }",
     "sampler_params: mh_steps must be >= 1"),
    ("sampler = 'lightlda'\n        sampler_params = { bogus = 1 }",
     "sampler 'lightlda' has no parameter 'bogus'"),
    ("sampler_params = { mh_steps = 1 }", "sampler_params need a named sampler"),
    ("topics = 3", "unknown parameter(s) topics"),
])
def test_train_stage_settings_are_checked_by_their_declaration(tmp_path, capsys, setting,
                                                               needle):
    toml = _write(tmp_path / "t.toml", f"""
        [stages.synth]
        n_docs = 20
        n_words = 10
        n_topics = 2
        mean_doc_length = 5
        seed = 1

        [stages.train]
        corpus = "@synth"
        n_topics = 2
        {setting}
        """)
    assert main(["pipeline", "run", toml]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_ingest_stage_takes_ngrams_and_vocab_from(tmp_path):
    """The ingest stage's keys are ingest's parameters: ``ngrams``, and ``vocab_from`` as
    ``biglda ingest --vocab-from`` (the source's words and tokenizer; other words dropped)."""
    (tmp_path / "train.tsv").write_text("a\tred fish blue fish\nb\tred fish two\n")
    (tmp_path / "test.tsv").write_text("c\tRED fish green\n")
    path = _write(tmp_path / "p.toml", """
        [stages.ingest]
        input = "train.tsv"
        min_df = 1
        stopwords = "none"
        ngrams = 2

        [stages.held]
        kind = "ingest"
        input = "test.tsv"
        vocab_from = "@ingest"
    """)
    p = pl.load_pipeline(path)
    assert p.stages[1].deps == ["ingest"]
    pl.run_pipeline(p)
    train = Corpus.open(p.artifact("ingest"))
    assert "red fish" in set(map(str, train.vocab)) and train.tokenizer["ngrams"] == 2
    held = Corpus.open(p.artifact("held"))
    assert sorted(held.words(0)) == ["fish", "red", "red fish"]
    assert held.attrs["filters"]["unknown_tokens"] == 2  # "green", "fish green"
