"""A sweep over a window of words (cgs, lightlda): the step of a clock whose processes share
the words.

Oracles: the invariants (only the window's tokens move, the counts equal the recount of
``z`` and the delta the change of the counts), the window's token count, and known ground
truth (windows taken in turn recover a synthetic corpus's topics and reach the log-likelihood
of whole sweeps).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_partition import _corpus, check_counts_and_delta
from test_sampler_recovery import matched_cosine

from biglda.samplers import RandomKey, count_from_z, get_sampler, init_z, joint_loglik

SAMPLERS = [("cgs", {"dense_above": 2.0}), ("cgs", {"dense_above": 0.0}), ("lightlda", {})]
IDS = ["cgs-sparse", "cgs-dense", "lightlda"]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=IDS)
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("n_topics", [6, 200], ids=["doc-counts-kept", "doc-counts-anew"])
def test_only_the_windows_tokens_move_and_the_counts_stay_the_recount(sampler, n_threads,
                                                                      n_topics):
    tokens, doc_ptr, n_words = _corpus(n_words=200)
    z = init_z(len(tokens), n_topics, RandomKey(3, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
    sampler = get_sampler(sampler[0], **sampler[1])
    assert sampler.word_windows
    windows = [(0, 3), (3, 40), (40, 200), (150, 10_000)]  # (the last past the rows: cut)
    moved_any = np.zeros(len(tokens), dtype=bool)
    with ThreadPoolExecutor(1) as pool:
        for it, (lo, hi) in enumerate(windows * 2):
            before_z, before_wk, before_k = z.copy(), n_wk.copy(), n_k.copy()
            res = sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.05, n_words,
                                RandomKey(3, it), pool=pool, n_threads=n_threads,
                                window=(lo, hi))
            inside = (tokens >= lo) & (tokens < hi)
            np.testing.assert_array_equal(z[~inside], before_z[~inside])
            moved_any |= z != before_z
            assert res.n_tokens == int(inside.sum())
            check_counts_and_delta(tokens, doc_ptr, z, n_wk, n_k, before_wk, before_k, res,
                                   n_words)
            assert np.all((res.delta_words >= lo) & (res.delta_words < min(hi, n_words)))
    assert moved_any.mean() > 0.5  # the windows did resample the corpus


def test_a_window_needs_a_kernel_that_takes_parts():
    tokens, doc_ptr, n_words = _corpus(n_docs=5)
    z = init_z(len(tokens), 3, RandomKey(0, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, 3)
    plain = get_sampler("cgs", variant="plain")
    assert not plain.word_windows
    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="all its words"):
        plain.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.05, n_words, RandomKey(0, 0),
                    pool=pool, window=(0, 5))


def test_windows_in_turn_recover_the_topics_and_reach_whole_sweeps_loglik(synthetic,
                                                                           synthetic_spec):
    """Two windows a sweep, as two processes take turns, against whole sweeps on one thread."""
    tokens, doc_ptr, phi, _ = synthetic
    spec = synthetic_spec
    n_words, n_topics, seed, iterations = spec.n_words, spec.n_topics, 8, 200
    counts = np.bincount(tokens, minlength=n_words)
    half = int(np.searchsorted(np.cumsum(counts), counts.sum() / 2))
    tail = {}
    with ThreadPoolExecutor(1) as pool:
        for windows in ([None], [(0, half), (half, n_words)]):
            sampler = get_sampler("cgs")
            z = init_z(len(tokens), n_topics, RandomKey(seed, -1))
            n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
            lls = []
            for it in range(1, iterations + 1):
                for s, window in enumerate(windows):
                    sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, spec.alpha, spec.beta,
                                  n_words, RandomKey(seed, it, 0, s), pool=pool,
                                  window=window)
                if it > iterations - 5:
                    lls.append(joint_loglik(doc_ptr, z, n_wk, n_k, spec.alpha, spec.beta,
                                            n_words) / len(tokens))
            cos = matched_cosine(phi, n_wk, spec.beta)
            assert cos > 0.98, f"windows {windows}: matched cosine {cos:.3f}"
            tail[len(windows)] = float(np.mean(lls))
    assert abs(tail[2] - tail[1]) < 0.01, f"2 windows {tail[2]:.4f} vs whole {tail[1]:.4f}"


def test_word_windows_cut_the_words_into_ranges_of_equal_tokens():
    import itertools

    from biglda.samplers.partition import word_windows

    rng = np.random.default_rng(0)
    counts = np.bincount((rng.zipf(1.3, 50_000) % 3000), minlength=3000)
    for n in (1, 2, 3, 5):
        got = word_windows(counts, n)
        assert got[0][0] == 0 and got[-1][1] == 3000 and len(got) == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(got))
        shares = [int(counts[a:b].sum()) for a, b in got]
        # each within one word's tokens of an equal share (a word is never cut)
        assert max(abs(x - counts.sum() / n) for x in shares) <= counts.max()
    assert word_windows(np.array([0, 5, 0, 0]), 3) == [(0, 1), (1, 1), (1, 4)]  # (one empty)


def test_the_processes_windows_are_of_equal_cost_as_the_sampler_weighs_words():
    """The turns' windows: of equal n_w ** word_cost_power (lightlda's rare words cost more
    a token, so their window holds fewer tokens), the same as the sampler's threads' cut."""
    from types import SimpleNamespace

    from biglda.samplers.cgs_cpu import WORD_COST_POWER as CGS_POWER
    from biglda.samplers.lightlda_cpu import WORD_COST_POWER as LIGHT_POWER
    from biglda.samplers.partition import word_windows
    from biglda.trainer.worker import Turns, _process_windows

    rng = np.random.default_rng(1)
    counts = np.bincount(np.minimum(rng.zipf(1.4, 200_000), 5000) - 1, minlength=5000)
    corpus = SimpleNamespace(word_count=counts)
    vocab = np.flatnonzero(counts)  # a process's rows: the words it holds, sorted
    spec = SimpleNamespace(n_processes=2, cfg=SimpleNamespace(turn_windows=2))
    n = Turns(2, 2).n_windows
    light, cgs = get_sampler("lightlda"), get_sampler("cgs", dense_above=2.0)
    assert (light.word_cost_power, cgs.word_cost_power) == (LIGHT_POWER, CGS_POWER) == (0.8, 1)
    for sampler in (light, cgs):
        weight = counts.astype(np.float64) ** sampler.word_cost_power
        got = _process_windows(spec, corpus, vocab, sampler)
        cut = word_windows(weight, n)
        # the windows as rows of the cache: the cut's global words, by local id
        assert got == [(int(np.searchsorted(vocab, a)), int(np.searchsorted(vocab, b)))
                       for a, b in cut]
        shares = [float(weight[a:b].sum()) for a, b in cut]
        assert max(abs(x - weight.sum() / n) for x in shares) <= weight.max()
    light_cut = word_windows(counts.astype(np.float64) ** LIGHT_POWER, n)
    token_cut = word_windows(counts, n)
    # lightlda's window of the rarest words holds fewer tokens than an equal-token cut's
    assert counts[light_cut[-1][0]:].sum() < counts[token_cut[-1][0]:].sum()
    # cgs weighs a token as a token: its windows are those of equal tokens
    assert word_windows(counts.astype(np.float64) ** cgs.word_cost_power, n) == token_cut


def test_every_window_of_an_array_keeps_its_layout():
    """Six windows a sweep (six processes' turns): the second round finds all six layouts,
    which share one copy of the array (and its words' counts); another array's layouts still
    push out the oldest array's; an array whose tokens changed gets a copy of its own."""
    tokens, doc_ptr, n_words = _corpus(n_words=200)
    z = init_z(len(tokens), 5, RandomKey(1, -1))
    n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, 5)
    sampler = get_sampler("cgs")
    layouts = sampler._layouts
    windows = [(i * 40, (i + 1) * 40) for i in range(5)] + [(0, 200)]
    with ThreadPoolExecutor(1) as pool:
        for it in range(2):
            for j, w in enumerate(windows):
                sampler.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.05, n_words,
                              RandomKey(1, it, 0, j), pool=pool, window=w)
            if it == 0:
                first = dict(layouts._items)
        assert len(layouts._items) == 6 and all(layouts._items[k] is v for k, v in first.items())
        kept = list(first.values())
        assert all(lay.tokens is kept[0].tokens and lay.n_w is kept[0].n_w for lay in kept)
        assert kept[0].tokens is not tokens
        np.testing.assert_array_equal(kept[0].tokens, tokens)
        # the same array with other words (and fewer tokens in a window): its own copy and
        # counts, not the sibling's
        changed = tokens.copy()
        changed[:50] = (changed[:50] + 1) % n_words
        tokens[:] = changed
        n_wk2, n_k2 = count_from_z(tokens, doc_ptr, z, n_words, 5)
        sampler.sweep(tokens, doc_ptr, z, n_wk2, n_k2, 0.1, 0.05, n_words, RandomKey(1, 7),
                      pool=pool, window=(0, 100))
        fresh = layouts._items[next(k for k in layouts._items if k[-1] == (0, 100))]
        assert fresh.tokens is not kept[0].tokens
        np.testing.assert_array_equal(fresh.tokens, changed)
        np.testing.assert_array_equal(fresh.n_w, np.bincount(changed, minlength=n_words))
        others = [tokens.copy() for _ in range(layouts.size)]  # (kept: distinct addresses)
        for other in others:  # other arrays: the first one's six go, at once
            sampler.sweep(other, doc_ptr, z, n_wk, n_k, 0.1, 0.05, n_words, RandomKey(1, 9),
                          pool=pool, window=(0, 200))
        assert not set(first) & set(layouts._items) and len(layouts._items) == layouts.size


def _doc_state_is_the_recount(carried, tokens, doc_ptr, z, n_topics, dcut):
    """What a sweep carries to the clock's next step holds ``z``: each document's counts
    (the dense kernel's, one array a document range) or topic lists (SparseLDA's); for
    lightlda each half's topics and, where it keeps them, its documents' counts (one array
    a document range ``dcut[i]..dcut[i + 1]``, row ``j`` its half's ``j``-th document)."""
    want = np.zeros((len(doc_ptr) - 1, n_topics), dtype=np.int64)
    np.add.at(want, (np.repeat(np.arange(len(doc_ptr) - 1), np.diff(doc_ptr)), z), 1)
    if "lightlda-halves" in carried:
        counts_of, totals = carried["lightlda-halves"]
        for half in range(2):
            np.testing.assert_array_equal(totals[half], want[half::2].sum(axis=0))
            if counts_of[half] is None:
                continue
            for i, c in enumerate(counts_of[half]):
                lo, hi = dcut[i], dcut[i + 1]
                first = lo + ((lo + half) & 1)
                docs = np.arange(first, hi, 2)
                np.testing.assert_array_equal(c[:len(docs)], want[docs])
                assert not c[len(docs):].any()
    if "cgs-doc-counts" in carried:
        np.testing.assert_array_equal(np.concatenate(carried["cgs-doc-counts"]), want)
    if "cgs-doc-lists" in carried:
        d_top, d_cnt, d_len = carried["cgs-doc-lists"]
        got = np.zeros_like(want)
        for d in range(len(doc_ptr) - 1):
            at = slice(doc_ptr[d], doc_ptr[d] + d_len[d])
            got[d, d_top[at]] = d_cnt[at]
        np.testing.assert_array_equal(got, want)


# (at 6 topics the whole shard's row density falls from 0.956 to 0.880 over the run, across
# 0.93: clock 0 dense, later clocks SparseLDA; the windows' densities range from 1.0 to 0.26)
@pytest.mark.parametrize("sampler", [*SAMPLERS, ("cgs", {"dense_above": 0.93})],
                         ids=[*IDS, "cgs-both"])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("n_topics", [6, 200], ids=["doc-counts-kept", "doc-counts-anew"])
def test_a_clocks_later_steps_follow_the_step_before(sampler, n_threads, n_topics):
    """``follows``: a clock's steps after the first take the documents' state the step before
    left instead of rebuilding it from ``z``. It holds ``z`` after every step (the
    recount), the counts stay the recount of ``z``; the dense kernel and lightlda make the
    very chain of steps that rebuild it; SparseLDA another (its lists' order); lightlda
    keeps each half's topics and, at 6 topics, its documents' counts. cgs's steps that
    follow run the kernel of the clock's first step, chosen from the whole shard (the
    windows of frequent words would choose the dense one, the others SparseLDA); without
    ``follows`` each step chooses from the whole shard. Another array or a whole sweep in
    between: rebuilt, as without ``follows``."""
    tokens, doc_ptr, n_words = _corpus(n_words=200)
    windows = [(0, 3), (3, 40), (40, 120), (120, 200)]
    runs, kinds, picked = {}, set(), {}
    for follows in (False, True):
        picked[follows] = []
        z = init_z(len(tokens), n_topics, RandomKey(4, -1))
        n_wk, n_k = count_from_z(tokens, doc_ptr, z, n_words, n_topics)
        smp = get_sampler(sampler[0], **sampler[1])
        with ThreadPoolExecutor(1) as pool:
            for clock in range(3):
                if clock == 2:  # a whole sweep between clocks: it writes z, keeps nothing
                    smp.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.05, n_words,
                              RandomKey(4, 99))
                for s, w in enumerate(windows):
                    before_wk, before_k = n_wk.copy(), n_k.copy()
                    if s == 0 or not follows:
                        z_start, wk_start, k_start = z.copy(), n_wk.copy(), n_k.copy()
                    res = smp.sweep(tokens, doc_ptr, z, n_wk, n_k, 0.1, 0.05, n_words,
                                    RandomKey(4, clock, 0, s), pool=pool,
                                    n_threads=n_threads, window=w,
                                    follows=follows and (s > 0 or clock == 2))
                    check_counts_and_delta(tokens, doc_ptr, z, n_wk, n_k, before_wk,
                                           before_k, res, n_words)
                    carried = smp._layouts._carried[1]
                    kinds |= set(carried) - {"cgs-kernel"}
                    if sampler[0] == "cgs":
                        picked[follows].append(carried["cgs-kernel"])
                        if not follows or s == 0:  # the whole shard's choice at its start
                            assert carried["cgs-kernel"] == smp._kernel(
                                tokens, doc_ptr, z_start, wk_start, k_start,
                                np.full(n_topics, 0.1), 0.05, float(n_words))
                        else:  # the kernel of the step before
                            assert carried["cgs-kernel"] == picked[follows][-2]
                    (dcut,) = {lay.dcut.tobytes(): lay.dcut
                               for lay in smp._layouts._items.values()}.values()
                    _doc_state_is_the_recount(carried, tokens, doc_ptr, z, n_topics, dcut)
        runs[follows] = (z, n_wk)
    same = all(np.array_equal(a, b) for a, b in zip(runs[False], runs[True], strict=True))
    if sampler[0] == "lightlda" or sampler[1]["dense_above"] == 0.0:
        assert same  # (counts are counts, however they were kept)
    elif n_topics == 6 and sampler[1]["dense_above"] == 2.0:
        assert not same  # SparseLDA's kept lists: another order, another exact chain
    if sampler[0] == "lightlda":
        assert kinds == {"lightlda-halves"}
    elif n_topics == 6:
        want = {"cgs-doc-counts", "cgs-doc-lists"} if sampler[1]["dense_above"] == 0.93 else (
            {"cgs-doc-counts"} if sampler[1]["dense_above"] == 0.0 else {"cgs-doc-lists"})
        assert kinds == want
        assert {f"cgs-doc-{'counts' if k == 'dense' else 'lists'}"
                for k in picked[False] + picked[True]} == want
        if sampler[1]["dense_above"] == 0.93:  # clock 0 changes kernel only without follows
            assert picked[False][:4] == ["dense"] * 3 + ["sparse"]
            assert picked[True][:4] == ["dense"] * 4
