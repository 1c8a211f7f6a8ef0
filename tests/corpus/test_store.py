"""The corpus.zarr format: writing, reading, validation, shard planning."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import zarr

from biglda.corpus import (
    CORPUS_FORMAT_VERSION,
    Corpus,
    CorpusWriter,
    Shard,
    is_corpus,
    plan_shard_bounds,
    write_corpus,
)
from biglda.corpus.shards import TOLERANCE
from biglda.errors import FormatError, OutputExistsError


def _random_corpus(rng, n_docs, n_words, mean_len, empty_share=0.0):
    lengths = rng.poisson(mean_len, n_docs)
    lengths[rng.random(n_docs) < empty_share] = 0
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, n_words, doc_ptr[-1]).astype(np.int32)
    return tokens, doc_ptr


def test_write_corpus_round_trip_orders_by_frequency(memory_url, check_counts):
    vocab = ["apple", "never", "kiwi", "fig"]
    tokens = np.array([0, 2, 2, 3, 2, 0], dtype=np.int32)
    doc_ptr = np.array([0, 3, 3, 6])
    remap = write_corpus(memory_url, tokens, doc_ptr, vocab, doc_ids=["x", "y", "z"])
    c = Corpus.open(memory_url)
    assert (c.n_docs, c.n_tokens, c.n_words) == (3, 6, 3)
    assert c.vocab.tolist() == ["kiwi", "apple", "fig"]  # 3, 2, 1 occurrences
    assert remap.tolist() == [1, -1, 0, 2]
    assert c.doc_ids.tolist() == ["x", "y", "z"]
    assert c.word_count.tolist() == [3, 2, 1]
    assert c.doc_freq.tolist() == [2, 2, 1]
    # Same words, same order, new ids.
    for i in range(3):
        old = tokens[doc_ptr[i]:doc_ptr[i + 1]]
        assert [str(w) for w in c.vocab[c.doc(i)]] == [vocab[t] for t in old]
    assert c.attrs["format"] == "biglda-corpus"
    assert c.attrs["format_version"] == CORPUS_FORMAT_VERSION
    check_counts(c)


def test_multi_chunk_reads_and_pickle(memory_url, check_counts):
    rng = np.random.default_rng(0)
    tokens, doc_ptr = _random_corpus(rng, 200, 50, 20, empty_share=0.1)
    remap = write_corpus(memory_url, tokens, doc_ptr, [f"w{i}" for i in range(50)],
                         chunk_tokens=256)
    c = Corpus.open(memory_url)
    assert c.chunk_tokens == 256
    new = remap[tokens]
    np.testing.assert_array_equal(c.read_tokens(0, c.n_tokens), new)
    np.testing.assert_array_equal(c.read_tokens(100, 900), new[100:900])
    for i in (0, 5, 199, -1):
        j = i % 200
        np.testing.assert_array_equal(c.doc(i), new[doc_ptr[j]:doc_ptr[j + 1]])
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.n_tokens == c.n_tokens and c2.url == c.url
    with pytest.raises(IndexError):
        c.read_tokens(0, c.n_tokens + 1)
    check_counts(c)


def test_write_corpus_refuses_existing_output(memory_url):
    write_corpus(memory_url, np.array([0], np.int32), np.array([0, 1]), ["a"])
    with pytest.raises(OutputExistsError):
        write_corpus(memory_url, np.array([0], np.int32), np.array([0, 1]), ["a"])
    write_corpus(memory_url, np.array([0, 0], np.int32), np.array([0, 2]), ["b"], overwrite=True)
    assert Corpus.open(memory_url).n_tokens == 2


def test_local_path(tmp_path):
    url = str(tmp_path / "c.zarr")
    write_corpus(url, np.array([1, 0, 1], np.int32), np.array([0, 1, 3]), ["a", "b"])
    c = Corpus.open(url)
    assert c.vocab.tolist() == ["b", "a"] and c.doc(1).tolist() == [1, 0]
    assert is_corpus(url) and not is_corpus(str(tmp_path / "missing.zarr"))


# ------------------------------------------------------------------------- refusing stores


def test_open_refuses_non_corpus_stores(memory_url, tmp_path):
    with pytest.raises(FormatError, match=r"does not exist|not a biglda corpus"):
        Corpus.open(str(tmp_path / "nothing.zarr"))
    g = zarr.open_group(memory_url, mode="w")
    g.attrs["format"] = "biglda-model"
    with pytest.raises(FormatError, match=r"not a biglda corpus .format='biglda-model'"):
        Corpus.open(memory_url)
    plain = tmp_path / "plain.txt"
    plain.write_text("hello\n")
    with pytest.raises(FormatError):
        Corpus.open(str(plain))


def test_open_refuses_other_version_and_damage(memory_url):
    write_corpus(memory_url, np.array([0, 1], np.int32), np.array([0, 2]), ["a", "b"])
    g = zarr.open_group(memory_url, mode="a")
    g.attrs["format_version"] = 99
    with pytest.raises(FormatError, match="format version 99") as err:
        Corpus.open(memory_url)
    assert "\n" not in str(err.value)
    g.attrs["format_version"] = CORPUS_FORMAT_VERSION
    g.attrs["n_tokens"] = 5
    with pytest.raises(FormatError, match="damaged"):
        Corpus.open(memory_url)
    g.attrs["n_tokens"] = 2
    del g["doc_freq"]
    with pytest.raises(FormatError, match="missing doc_freq"):
        Corpus.open(memory_url)


def test_writer_checks_sizes(memory_url):
    w = CorpusWriter(memory_url, n_docs=2, n_tokens=3, vocab=["a"], word_count=[3],
                     doc_freq=[2])
    w.append_docs(np.zeros(1, np.int32), np.array([1]), ["d0"])
    with pytest.raises(ValueError, match="rows written"):
        w.close()
    # Attributes are written last: the unfinished store does not open as a corpus.
    with pytest.raises(FormatError):
        Corpus.open(memory_url)


# ------------------------------------------------------------------------- shard planning


def _check_shards(shards, doc_ptr, n_shards, chunk, tolerance=TOLERANCE):
    n_docs, n_tokens = len(doc_ptr) - 1, int(doc_ptr[-1])
    assert 1 <= len(shards) <= n_shards
    assert [s.index for s in shards] == list(range(len(shards)))
    assert shards[0].doc_start == 0 and shards[-1].doc_stop == n_docs
    for a, b in itertools.pairwise(shards):
        assert a.doc_stop == b.doc_start and a.token_stop == b.token_start  # contiguous
    for s in shards:
        assert s.n_docs > 0
        assert s.token_start == doc_ptr[s.doc_start] and s.token_stop == doc_ptr[s.doc_stop]
    if len(shards) < n_shards:
        return
    ideal = n_tokens / n_shards
    max_len = int(np.diff(doc_ptr).max())
    for j, s in enumerate(shards[1:], start=1):
        # As designed: the document boundary nearest to the chunk boundary nearest the
        # balanced position when that is within tolerance, else nearest the balanced one.
        balanced = j * ideal
        snapped = min(round(balanced / chunk) * chunk, n_tokens)
        target = snapped if abs(snapped - balanced) <= tolerance * ideal else balanced
        assert abs(s.token_start - target) == np.abs(doc_ptr - target).min()
    for s in shards:
        assert abs(s.n_tokens - ideal) <= 2 * tolerance * ideal + max_len


@pytest.mark.parametrize("n_shards", [1, 2, 3, 7, 16])
@pytest.mark.parametrize("chunk", [64, 1000, 1 << 20])
def test_plan_shards_invariants(n_shards, chunk):
    rng = np.random.default_rng(n_shards * 1000 + chunk)
    for _ in range(5):
        _, doc_ptr = _random_corpus(rng, int(rng.integers(1, 400)), 10, 30, empty_share=0.05)
        if doc_ptr[-1] == 0:
            continue
        bounds = plan_shard_bounds(doc_ptr, n_shards, chunk)
        shards = [Shard(i, int(a), int(b), int(doc_ptr[a]), int(doc_ptr[b]))
                  for i, (a, b) in enumerate(itertools.pairwise(bounds))]
        _check_shards(shards, doc_ptr, n_shards, chunk)


def test_plan_shards_aligns_when_chunks_are_small():
    """>= 100 chunks per shard: every boundary is the document boundary nearest a chunk boundary."""
    rng = np.random.default_rng(11)
    _, doc_ptr = _random_corpus(rng, 5000, 10, 40)
    chunk = 100  # ~1,250 chunks, 4 shards: ~310 chunks a shard
    bounds = plan_shard_bounds(doc_ptr, 4, chunk)
    for b in bounds[1:-1]:
        nearest_chunk = round(doc_ptr[b] / chunk) * chunk
        assert abs(doc_ptr[b] - nearest_chunk) == np.abs(doc_ptr - nearest_chunk).min()
        assert abs(doc_ptr[b] - nearest_chunk) <= 40 * 3


def test_plan_shards_balanced_on_a_stored_corpus(memory_url):
    rng = np.random.default_rng(3)
    tokens, doc_ptr = _random_corpus(rng, 3000, 100, 50)
    write_corpus(memory_url, tokens, doc_ptr, [f"w{i}" for i in range(100)], chunk_tokens=4096)
    c = Corpus.open(memory_url)
    shards = c.plan_shards(4)
    assert len(shards) == 4
    _check_shards(shards, c.doc_ptr, 4, 4096)
    sizes = np.array([s.n_tokens for s in shards])
    assert sizes.max() / sizes.min() < 1.2
    seen = []
    for s in shards:
        toks, ptr = c.read_shard(s)
        assert ptr[0] == 0 and ptr[-1] == len(toks) == s.n_tokens
        seen.append(toks)
        assert pickle.loads(pickle.dumps(s)) == s
    np.testing.assert_array_equal(np.concatenate(seen), c.read_tokens(0, c.n_tokens))


def test_plan_shards_small_cases():
    assert plan_shard_bounds(np.array([0, 5, 9]), 4, 100).tolist() == [0, 1, 2]  # D < shards
    assert plan_shard_bounds(np.array([0]), 3, 100).tolist() == [0]  # no documents
    # One huge document cannot be split: fewer shards, never an empty one.
    assert plan_shard_bounds(np.array([0, 1, 1000, 1001]), 3, 10).tolist() in ([0, 1, 2, 3],
                                                                                  [0, 2, 3])
    with pytest.raises(Exception, match="at least 1"):
        plan_shard_bounds(np.array([0, 1]), 0, 10)
