"""Tokenizer, stopwords, vocabulary filters, format detection."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest

from biglda.corpus.readers import detect_format, resolve_sources
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, Tokenizer, load_stopwords
from biglda.corpus.vocab import VocabFilter, frequency_order
from biglda.errors import ConfigError, InputError


def test_default_pattern_matches_regex_oracle():
    text = "Ünïcode straße, a_b x 2024 naïve—dash C++ e-mail ÉCOLE ﬁ"
    assert Tokenizer().tokenize(text) == re.findall(DEFAULT_TOKEN_PATTERN, text.lower())
    assert Tokenizer(lowercase=False).tokenize("Ab cD e") == ["Ab", "cD"]


def test_settings_round_trip():
    t = Tokenizer(lowercase=False, token_pattern=r"[a-z]+", pretokenized=False)
    t2 = Tokenizer.from_settings(t.settings)
    assert t2.settings == t.settings
    assert t2.tokenize("abc DEF ghi") == ["abc", "ghi"]
    assert Tokenizer.from_settings({}).settings == Tokenizer().settings


def test_bad_patterns():
    with pytest.raises(ConfigError, match="invalid --token-pattern"):
        Tokenizer(token_pattern="([")
    with pytest.raises(ConfigError, match="2 groups"):
        Tokenizer(token_pattern=r"(a)(b)")
    assert Tokenizer(token_pattern=r"(\w+)ing").tokenize("walking talking") == ["walk", "talk"]


def test_stopwords(tmp_path):
    assert load_stopwords("none") == (frozenset(), "none")
    words, desc = load_stopwords("english")
    assert {"the", "and", "of"} <= words and "topic" not in words and desc == "english"
    with pytest.raises(InputError, match="not found"):
        load_stopwords(str(tmp_path / "nope.txt"))


def test_vocab_filter_validation_and_order():
    for bad in (dict(min_df=0), dict(max_df=0.0), dict(max_df=1.5), dict(max_vocab=0),
                dict(min_doc_length=-1)):
        with pytest.raises(ConfigError):
            VocabFilter(**bad)
    keep = VocabFilter(min_df=1, max_vocab=2).keep(
        ["b", "a", "c", "The"], np.array([3, 3, 1, 9]), np.array([1, 1, 1, 1]), 1,
        frozenset({"the"}))
    assert keep.tolist() == [True, True, False, False]  # "The" is a stopword (lowercased)
    assert frequency_order(["b", "a", "c"], np.array([3, 3, 5])).tolist() == [2, 1, 0]


def test_detect_format(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "noext").write_text("id\ttext\n")
    (tmp_path / "j.data").write_text('{"text": "a"}\n')
    with gzip.open(tmp_path / "plain.gz", "wt") as f:
        f.write("just some text\n")
    assert detect_format(str(tmp_path / "x.jsonl")) == "jsonl"
    assert detect_format(str(tmp_path / "noext")) == "tsv"
    assert detect_format(str(tmp_path / "j.data")) == "jsonl"
    assert detect_format(str(tmp_path / "plain.gz")) == "text"
    assert detect_format(str(tmp_path)) == "dir"
    assert detect_format("docword.nips.txt.gz") == "uci"
    with pytest.raises(InputError, match="unknown input format"):
        resolve_sources([str(tmp_path / "noext")], "csv")
    (tmp_path / "docword.a.txt").write_text("1\n1\n1\n1 1 1\n")
    with pytest.raises(InputError, match="mixed"):
        resolve_sources([str(tmp_path / "docword.a.txt"), str(tmp_path / "noext")])
