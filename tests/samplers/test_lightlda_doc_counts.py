"""lightlda keeps its documents' topic counts as int16 where every document is short enough
(half the bytes of int32: a cheaper sweep), else int32; the chain is the same either way."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import biglda.samplers.lightlda_cpu as light
from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z


def test_the_counts_are_int16_while_no_document_has_more_than_32767_tokens():
    def dtype(lengths):
        return light._no_doc_counts(np.concatenate([[0], np.cumsum(lengths)])).dtype

    assert dtype([3, 32_767, 0]) == np.int16
    assert dtype([3, 32_768, 0]) == np.int32  # a topic's count could pass int16's 32,767
    assert dtype([]) == np.int16  # (no documents)


def _chain(tokens, doc_ptr, n_words, n_topics, pool, n_threads, dtype, monkeypatch):
    with monkeypatch.context() as m:
        if dtype is not None:  # force the counts' dtype
            m.setattr(light, "_no_doc_counts", lambda _: light._NO_DOC_COUNTS[np.dtype(dtype)])
        z = init_z(len(tokens), n_topics, RandomKey(3, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        sampler = get_sampler("lightlda")
        for it in range(3):
            sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, n_words, RandomKey(3, it),
                          pool=pool, n_threads=n_threads)
    return z, n_wk, n_k


@pytest.mark.parametrize("n_threads, kept", [(1, False), (2, False), (2, True)],
                         ids=["one-thread", "two-threads", "two-threads-kept-counts"])
def test_int16_and_int32_counts_give_the_same_chain(n_threads, kept, monkeypatch):
    # 400 documents of up to 20 tokens at K = 300: on two threads their counts are kept
    # through the steps by the size rule's budget (KEPT_DOC_COUNT_ENTRIES), or, without it,
    # counted block by block (_keeps_doc_counts)
    if not kept:
        monkeypatch.setattr(light, "KEPT_DOC_COUNT_ENTRIES", 0)
    rng = np.random.default_rng(5)
    doc_ptr = np.concatenate([[0], np.cumsum(rng.integers(1, 20, size=400))]).astype(np.int64)
    tokens = (rng.zipf(1.4, size=int(doc_ptr[-1])) % 80).astype(np.int32)
    k = 300
    assert light._keeps_doc_counts(400, k, len(tokens), n_threads) == kept
    with ThreadPoolExecutor(1) as pool:
        got = {dtype: _chain(tokens, doc_ptr, 80, k, pool, n_threads, dtype, monkeypatch)
               for dtype in (np.int32, np.int16, None)}
    for dtype in (np.int16, None):  # (None: the sampler's own choice, int16 here)
        for a, b in zip(got[np.int32], got[dtype], strict=True):
            np.testing.assert_array_equal(a, b)
    z, n_wk, n_k = got[None]
    want_wk, want_k = count_from_z(tokens, doc_ptr, z, 80, k)
    np.testing.assert_array_equal(n_wk, want_wk)
    np.testing.assert_array_equal(n_k, want_k)
    assert not np.array_equal(z, init_z(len(tokens), k, RandomKey(3, -1)))  # (it moved)


def test_a_document_longer_than_int16_takes_int32_counts_and_stays_exact_in_its_counts():
    # one document of 40,000 tokens: a topic's count in it may pass int16's 32,767, so the
    # sampler takes int32, and its counts stay the recount of z
    doc_ptr = np.array([0, 40_000, 40_010], dtype=np.int64)
    tokens = (np.arange(40_010) % 7).astype(np.int32)
    assert light._no_doc_counts(doc_ptr).dtype == np.int32
    z = init_z(len(tokens), 2, RandomKey(1, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, 7, 2)
    sampler = get_sampler("lightlda")
    for it in range(2):
        sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.01, 7, RandomKey(1, it))
    want_wk, want_k = count_from_z(tokens, doc_ptr, z, 7, 2)
    np.testing.assert_array_equal(n_wk, want_wk)
    np.testing.assert_array_equal(n_k, want_k)
    assert np.all((z >= 0) & (z < 2))
