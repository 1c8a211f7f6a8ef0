"""Held-out likelihood, perplexity, coherence, diversity — against slow references and truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from biglda.errors import ConfigError
from biglda.model import evaluate as ev


def _reference_completion(phi, alpha, tokens, doc_ptr, burn_in, samples, rng):
    """Document completion written plainly: O(K) Gibbs per token with NumPy's RNG."""
    total, n_scored = 0.0, 0
    k = phi.shape[0]
    for d in range(len(doc_ptr) - 1):
        doc = tokens[doc_ptr[d]:doc_ptr[d + 1]]
        observed, scored = doc[0::2], doc[1::2]
        z = np.full(len(observed), -1)
        n_dk = np.zeros(k)
        acc = np.zeros(k)
        for sweep in range(burn_in + samples):
            for i, w in enumerate(observed):
                if z[i] >= 0:
                    n_dk[z[i]] -= 1
                p = (n_dk + alpha) * phi[:, w]
                z[i] = rng.choice(k, p=p / p.sum())
                n_dk[z[i]] += 1
            if sweep >= burn_in:
                acc += n_dk
        theta = (acc / samples + alpha) / (len(observed) + alpha.sum())
        total += np.log(theta @ phi[:, scored]).sum()
        n_scored += len(scored)
    return total / n_scored


def test_completion_agrees_with_slow_numpy_reference(trained, split):
    tokens, doc_ptr = split["test"]
    sub = (tokens[:doc_ptr[30]], doc_ptr[:31])
    got = trained.heldout_loglik((*sub, split["vocab"]), burn_in=10, samples=40)
    ref = _reference_completion(trained.topic_word, trained.alpha, sub[0], sub[1], 10, 40,
                                np.random.default_rng(0))
    # Same estimator, different random streams: agree to Monte Carlo error.
    assert got.loglik_per_token == pytest.approx(ref, rel=0.01)
    assert got.n_tokens == sum((doc_ptr[d + 1] - doc_ptr[d]) // 2 for d in range(30))
    assert trained.perplexity((*sub, split["vocab"]), burn_in=10, samples=40) \
        == pytest.approx(math.exp(-got.loglik_per_token))


def test_truth_beats_trained_beats_random(trained, truth_phi, random_phi, split):
    test = split["test"] + (split["vocab"],)
    vocab = split["vocab"]
    ll = {name: ev.heldout_loglik(phi, 0.1, test, vocab=vocab).loglik_per_token
          for name, phi in [("truth", truth_phi), ("trained", trained.topic_word),
                            ("random", random_phi)]}
    assert ll["truth"] > ll["trained"] > ll["random"]
    assert ll["truth"] - ll["trained"] < 0.1  # a good fit is close to the truth
    ref = split["train"] + (vocab,)
    npmi = {name: ev.coherence(phi, vocab, ref).mean
            for name, phi in [("truth", truth_phi), ("trained", trained.topic_word),
                              ("random", random_phi)]}
    assert npmi["truth"] >= npmi["trained"] - 0.02 and npmi["trained"] > npmi["random"] + 0.2


def test_left_to_right_orders_models(trained, random_phi, split):
    tokens, doc_ptr = split["test"]
    sub = (tokens[:doc_ptr[10]], doc_ptr[:11], split["vocab"])
    good = trained.heldout_loglik(sub, method="left_to_right", particles=3)
    bad = ev.heldout_loglik(random_phi, 0.1, sub, vocab=split["vocab"], method="left_to_right",
                            particles=3)
    assert good.n_tokens == int(doc_ptr[10]) and good.loglik_per_token > bad.loglik_per_token
    with pytest.raises(ConfigError):
        trained.heldout_loglik(sub, method="magic")


def test_test_vocabulary_is_mapped_by_word_and_unknown_counted(trained, split):
    tokens, doc_ptr = split["test"]
    tokens, doc_ptr = tokens[:doc_ptr[40]], doc_ptr[:41]
    vocab = split["vocab"]
    direct = trained.heldout_loglik((tokens, doc_ptr, vocab))
    # Same documents in a corpus with its own word order and two unknown words added.
    perm = np.random.default_rng(1).permutation(len(vocab))
    other_vocab = np.concatenate([vocab[perm], ["zzz", "yyy"]])
    new_id = np.empty(len(vocab), np.int64)
    new_id[perm] = np.arange(len(vocab))
    mapped = new_id[tokens]
    # put an unknown word after every document (the known tokens keep their order)
    pieces, ptr = [], [0]
    for d in range(40):
        pieces += [mapped[doc_ptr[d]:doc_ptr[d + 1]], [len(vocab) + d % 2]]
        ptr.append(ptr[-1] + doc_ptr[d + 1] - doc_ptr[d] + 1)
    other = trained.heldout_loglik((np.concatenate(pieces), np.array(ptr), other_vocab))
    assert other.n_unknown == 40 and direct.n_unknown == 0
    assert other.loglik == pytest.approx(direct.loglik)
    assert other.n_tokens == direct.n_tokens


def _reference_coherence(top_words, docs, measure, window):
    """Brute force: sets of words per window, probabilities and pair scores."""
    windows = []
    for doc in docs:
        if not doc:
            continue
        w = len(doc) if window is None or window > len(doc) else window
        windows += [set(doc[s:s + w]) for s in range(len(doc) - w + 1)]
    n = len(windows)

    def count(*ws):
        return sum(all(x in win for x in ws) for win in windows)

    scores = []
    for top in top_words:
        vals = []
        for i in range(len(top)):
            for j in range(i + 1, len(top)):
                a, b = top[i], top[j]
                ca, cb, cab = count(a), count(b), count(a, b)
                if measure == "umass":
                    if ca:
                        vals.append(math.log((cab + 1) / ca))
                elif ca and cb:
                    if cab == 0:
                        vals.append(-1.0)
                    elif cab == n:
                        vals.append(1.0)
                    else:
                        vals.append(math.log(cab * n / (ca * cb)) / -math.log(cab / n))
        scores.append(np.mean(vals) if vals else np.nan)
    return np.array(scores)


@pytest.mark.parametrize("measure", ["npmi", "umass"])
@pytest.mark.parametrize("window", [None, 4])
def test_coherence_matches_brute_force(measure, window):
    rng = np.random.default_rng(5)
    n_words = 25
    vocab = np.array([f"v{i}" for i in range(n_words)])
    phi = rng.dirichlet(np.full(n_words, 0.3), size=4)
    lengths = rng.integers(0, 12, size=60)
    doc_ptr = np.r_[0, np.cumsum(lengths)]
    tokens = rng.integers(0, n_words - 3, doc_ptr[-1])  # the last 3 words never occur
    docs = [list(vocab[tokens[doc_ptr[d]:doc_ptr[d + 1]]]) for d in range(60)]
    got = ev.coherence(phi, vocab, (tokens, doc_ptr, vocab), measure=measure, top_n=6,
                       window=window)
    top = [[vocab[i] for i in row] for row in ev.top_word_ids(phi, 6)]
    want = _reference_coherence(top, docs, measure, window)
    np.testing.assert_allclose(got.per_topic, want, rtol=1e-12, equal_nan=True)
    assert got.n_missing_words == sum(w in {"v22", "v23", "v24"} for t in top for w in t)


def test_coherence_maps_words_and_rejects_bad_settings(small_model):
    ref = (np.array([0, 1, 0, 1, 2]), np.array([0, 2, 4, 5]), np.array(["pear", "apple", "x"]))
    s = small_model.coherence(ref, top_n=2)
    assert s.per_topic[0] == pytest.approx(1.0)  # apple & pear always together
    assert np.isnan(s.per_topic[1])  # car, bus: not in the reference corpus
    assert s.to_dict()["mean"] == pytest.approx(np.nanmean(s.per_topic))
    with pytest.raises(ConfigError):
        small_model.coherence(ref, measure="cv")
    with pytest.raises(ConfigError):
        small_model.coherence(ref, window=1)


def test_diversity_counts_distinct_top_words():
    phi = np.array([[0.5, 0.3, 0.1, 0.1], [0.5, 0.1, 0.3, 0.1], [0.1, 0.1, 0.3, 0.5]])
    assert ev.diversity(phi, top_n=2) == pytest.approx(4 / 6)
    assert ev.diversity(phi, top_n=10) == pytest.approx(4 / 12)  # clipped to V = 4


def test_scoring_refuses_bad_matrices():
    with pytest.raises(ConfigError):
        ev.heldout_loglik(np.array([[0.5, -0.5]]), 0.1, (np.array([0]), np.array([0, 1])))
    with pytest.raises(ConfigError):
        ev.heldout_loglik(np.zeros((2, 3)), 0.1, (np.array([0]), np.array([0, 1])))
