"""Ingest: every input format round-trips against a plain-Python oracle."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import numpy as np
import pytest

from biglda.corpus.ingest import ingest
from biglda.corpus.store import Corpus
from biglda.corpus.tokenizer import DEFAULT_TOKEN_PATTERN, ENGLISH_STOPWORDS, Tokenizer

WORDS = ["Zarr", "dask", "topic", "model", "the", "of", "Ünïcode", "straße", "x", "2024",
         "gibbs", "alias", "chunk", "shard", "worker", "rare1", "rare2", "a_b", "naïve"]


def _docs(n=120, seed=0):
    """Random documents over WORDS with punctuation and mixed case; Zipf-ish frequencies."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()
    docs = []
    for i in range(n):
        k = int(rng.integers(0, 12))
        words = [WORDS[j] for j in rng.choice(len(WORDS), k, p=p)]
        seps = rng.choice([" ", ", ", "; ", "-", "!  ", " (", ") "], k)
        docs.append((f"doc{i}", "".join(w + s for w, s in zip(words, seps, strict=True))))
    return docs


def _oracle(docs, *, lowercase=True, pattern=DEFAULT_TOKEN_PATTERN, stopwords=ENGLISH_STOPWORDS,
            min_df=5, max_df=1.0, max_vocab=None, min_doc_length=1, split=False):
    """Slow, obvious ingest: (doc_ids, list of word lists, vocab in id order)."""
    toks = []
    for _, text in docs:
        t = text.lower() if lowercase else text
        toks.append(t.split() if split else re.findall(pattern, t))
    wc, df = Counter(), Counter()
    for t in toks:
        wc.update(t)
        df.update(set(t))
    keep = {w for w in wc if df[w] >= min_df and w.lower() not in stopwords
            and df[w] <= max_df * len(docs)}
    if max_vocab is not None:
        keep = set(sorted(keep, key=lambda w: (-wc[w], w))[:max_vocab])
    ids, out = [], []
    for (doc_id, _), t in zip(docs, toks, strict=True):
        kept = [w for w in t if w in keep]
        if len(kept) >= min_doc_length:
            ids.append(doc_id)
            out.append(kept)
    final = Counter(w for t in out for w in t)
    vocab = sorted(final, key=lambda w: (-final[w], w))
    return ids, out, vocab


def _assert_matches(check_counts, url, oracle):
    ids, words, vocab = oracle
    c = Corpus.open(url)
    assert c.vocab.tolist() == vocab
    assert c.doc_ids.tolist() == ids
    assert [c.words(i) for i in range(c.n_docs)] == words
    check_counts(c)
    return c


def _write_tsv(path, docs, gz=False):
    data = "".join(f"{i}\t{t}\n" for i, t in docs).encode()
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_tsv_round_trip(tmp_path, gz, check_counts):
    docs = _docs()
    src = _write_tsv(tmp_path / ("d.tsv.gz" if gz else "d.tsv"), docs, gz=gz)
    stats = ingest([src], str(tmp_path / "c.zarr"))
    c = _assert_matches(check_counts, tmp_path / "c.zarr", _oracle(docs))
    assert stats.n_tokens == c.n_tokens and stats.input_docs == len(docs)
    assert c.tokenizer == Tokenizer().settings
    assert c.attrs["filters"]["min_df"] == 5 and c.attrs["source"]["format"] == ["tsv"]


def test_small_blocks_and_filters(tmp_path, check_counts):
    """Tiny raw blocks (many blocks, documents split across none), every filter on."""
    docs = _docs(300, seed=1)
    src = _write_tsv(tmp_path / "d.tsv", docs)
    opts = dict(min_df=2, max_df=0.3, max_vocab=8, min_doc_length=3)
    ingest([src], str(tmp_path / "c.zarr"), block_bytes=256, **opts)
    _assert_matches(check_counts, tmp_path / "c.zarr", _oracle(docs, **opts))


def test_no_lowercase_custom_pattern_and_stopword_file(tmp_path, check_counts):
    docs = _docs(80, seed=2)
    src = _write_tsv(tmp_path / "d.tsv", docs)
    stop = tmp_path / "stop.txt"
    stop.write_text("# my list\ndask\ntopic  # trailing comment\n")
    ingest([src], str(tmp_path / "c.zarr"), lowercase=False, token_pattern=r"[A-Za-z]+",
           stopwords=str(stop), min_df=1)
    expected = _oracle(docs, lowercase=False, pattern=r"[A-Za-z]+",
                       stopwords={"dask", "topic"}, min_df=1)
    _assert_matches(check_counts, tmp_path / "c.zarr", expected)


def test_text_format_ids_are_line_numbers(tmp_path, check_counts):
    docs = _docs(50, seed=3)
    path = tmp_path / "d.txt"
    # A blank line is skipped but still counts for the line numbers.
    path.write_text("\n".join(t for _, t in docs[:10]) + "\n\n" +
                    "\n".join(t for _, t in docs[10:]) + "\n")
    ingest([str(path)], str(tmp_path / "c.zarr"), min_df=2)
    numbered = [(str(i + 1), t) for i, (_, t) in enumerate(docs[:10])]
    numbered += [(str(i + 12), t) for i, (_, t) in enumerate(docs[10:])]
    _assert_matches(check_counts, tmp_path / "c.zarr", _oracle(numbered, min_df=2))


@pytest.mark.parametrize("with_id", [True, False])
def test_jsonl(tmp_path, with_id, check_counts):
    docs = _docs(60, seed=4)
    path = tmp_path / "d.jsonl"
    with open(path, "w") as f:
        for i, t in docs:
            f.write(json.dumps({"key": i, "body": t, "other": 1} if with_id else {"body": t}))
            f.write("\n")
    ingest([str(path)], str(tmp_path / "c.zarr"), text_field="body",
           id_field="key" if with_id else None, min_df=1)
    expected = docs if with_id else [(str(n + 1), t) for n, (_, t) in enumerate(docs)]
    _assert_matches(check_counts, tmp_path / "c.zarr", _oracle(expected, min_df=1))


def test_directory_of_txt_files(tmp_path, check_counts):
    docs = _docs(30, seed=5)
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    for n, (i, t) in enumerate(docs):
        (root / ("sub" if n % 2 else "") / f"{i}.txt").write_text(t)
    (root / "ignored.md").write_text("not a document")
    ingest([str(root)], str(tmp_path / "c.zarr"), min_df=1)
    expected = sorted(((f"sub/{i}" if n % 2 else i), t) for n, (i, t) in enumerate(docs))
    # Files are read in sorted path order.
    expected = sorted(expected, key=lambda d: str(root / (d[0] + ".txt")))
    _assert_matches(check_counts, tmp_path / "c.zarr", _oracle(expected, min_df=1))


def test_pretokenized_keeps_vocabulary_as_given(tmp_path, check_counts):
    docs = [("a", "The the THE x.y"), ("b", "x.y  the\tÜ"), ("c", "")]
    src = _write_tsv(tmp_path / "d.tsv", docs)
    ingest([src], str(tmp_path / "c.zarr"), pretokenized=True)
    c = _assert_matches(check_counts, tmp_path / "c.zarr",
                        _oracle(docs, lowercase=False, split=True, stopwords=set(), min_df=1))
    assert set(c.vocab.tolist()) == {"The", "the", "THE", "x.y", "Ü"}
    assert c.tokenizer["pretokenized"] and c.attrs["source"]["dropped_docs"] == 1


def test_several_inputs_and_memory_output(tmp_path, check_counts):
    a, b = _docs(40, seed=6), _docs(40, seed=7)
    pa, pb = tmp_path / "a.txt", tmp_path / "b.txt"
    pa.write_text("".join(t + "\n" for _, t in a))
    pb.write_text("".join(t + "\n" for _, t in b))
    url = "memory://tests/ingest-several/c.zarr"
    ingest([str(pa), str(pb)], url, min_df=3, overwrite=True)
    expected = [(f"a.txt:{n + 1}", t) for n, (_, t) in enumerate(a)]
    expected += [(f"b.txt:{n + 1}", t) for n, (_, t) in enumerate(b)]
    _assert_matches(check_counts, url, _oracle(expected, min_df=3))


def test_uci_bag_of_words(tmp_path, check_counts):
    vocab = ["apple", "banana", "cherry", "date", "unused"]
    # (doc, word, count), 1-based; doc 3 is empty, doc 5 has no entries at the end.
    entries = [(1, 1, 2), (1, 3, 1), (2, 2, 4), (2, 1, 1), (4, 3, 3), (4, 4, 1)]
    body = "".join(f"{d} {w} {n}\n" for d, w, n in entries)
    (tmp_path / "docword.toy.txt").write_text(f"5\n5\n{len(entries)}\n{body}")
    (tmp_path / "vocab.toy.txt").write_text("\n".join(vocab) + "\n")
    for block in (10, 1 << 20):  # tiny blocks split documents across blocks
        out = tmp_path / f"c{block}.zarr"
        ingest([str(tmp_path / "docword.toy.txt")], str(out), block_bytes=block)
        docs = [("1", "apple apple cherry"), ("2", "banana banana banana banana apple"),
                ("4", "cherry cherry cherry date")]
        expected = _oracle(docs, split=True, stopwords=set(), min_df=1)
        c = _assert_matches(check_counts, out, expected)
        assert c.attrs["source"]["format"] == ["uci"] and c.attrs["source"]["input_docs"] == 5


def test_parallel_equals_serial(tmp_path, check_counts):
    docs = _docs(400, seed=8)
    src = _write_tsv(tmp_path / "d.tsv", docs)
    ingest([src], str(tmp_path / "serial.zarr"), block_bytes=1024, min_df=2, jobs=1)
    stats = ingest([src], str(tmp_path / "par.zarr"), block_bytes=1024, min_df=2, jobs=2)
    assert stats.jobs == 2
    a, b = Corpus.open(str(tmp_path / "serial.zarr")), Corpus.open(str(tmp_path / "par.zarr"))
    assert a.vocab.tolist() == b.vocab.tolist()
    np.testing.assert_array_equal(a.read_tokens(0, a.n_tokens), b.read_tokens(0, b.n_tokens))
    np.testing.assert_array_equal(a.doc_ptr, b.doc_ptr)
    _assert_matches(check_counts, tmp_path / "par.zarr", _oracle(docs, min_df=2))


def test_chunked_output_and_shards(tmp_path, check_counts):
    docs = _docs(500, seed=9)
    src = _write_tsv(tmp_path / "d.tsv", docs)
    ingest([src], str(tmp_path / "c.zarr"), min_df=1, chunk_tokens=100)
    c = _assert_matches(check_counts, tmp_path / "c.zarr", _oracle(docs, min_df=1))
    assert c.chunk_tokens == 100
    shards = c.plan_shards(3)
    assert len(shards) == 3 and sum(s.n_docs for s in shards) == c.n_docs


def test_ascii_fast_path_equals_the_tokenizer(tmp_path):
    """Ingest's translate+split path for ASCII text gives Tokenizer.tokenize's tokens."""
    texts = ["a b cd_e F1 _ __ x-y 1 22 Q", "ABC\x1cdef\x0bgh\ti j", "a b c",
             "caf\u00e9 au lait x", "UPPER lower MiXeD 3d 42nd"]
    docs = [(str(i), t) for i, t in enumerate(texts)]
    for lowercase in (True, False):
        out = tmp_path / f"c{lowercase}.zarr"
        ingest([_write_tsv(tmp_path / "d.tsv", docs)], str(out), min_df=1, stopwords="none",
               lowercase=lowercase, overwrite=True)
        c = Corpus.open(str(out))
        tok = Tokenizer(lowercase=lowercase)
        expected = [tok.tokenize(t) for t in texts if tok.tokenize(t)]
        assert [c.words(i) for i in range(c.n_docs)] == expected
        assert c.doc_ids.tolist() == [str(i) for i, t in enumerate(texts) if tok.tokenize(t)]
