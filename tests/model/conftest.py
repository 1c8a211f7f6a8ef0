"""Model-layer fixtures: a synthetic corpus split into train/test, the true model, a model
trained by a real sampler chain (``fit_local``), and a random model."""

from __future__ import annotations

import numpy as np
import pytest

from biglda.model import TopicModel

N_TRAIN = 800


@pytest.fixture(scope="session")
def split(synthetic, synthetic_spec):
    """``{"train": (tokens, doc_ptr), "test": (tokens, doc_ptr), "vocab", "phi", "theta"}``."""
    tokens, doc_ptr, phi, theta = synthetic
    cut = doc_ptr[N_TRAIN]
    vocab = np.array([f"w{i:03d}" for i in range(synthetic_spec.n_words)])
    return {
        "train": (tokens[:cut], doc_ptr[:N_TRAIN + 1]),
        "test": (tokens[cut:], doc_ptr[N_TRAIN:] - cut),
        "vocab": vocab,
        "phi": phi,
        "theta": theta,
    }


@pytest.fixture(scope="session")
def trained(split, synthetic_spec):
    """A model from 150 collapsed Gibbs sweeps on the training documents."""
    from biglda.samplers import doc_topic_counts, fit_local

    tokens, doc_ptr = split["train"]
    k = synthetic_spec.n_topics
    fit = fit_local(tokens, doc_ptr, synthetic_spec.n_words, k, algorithm="cgs",
                    iterations=150, alpha=0.1, beta=0.05, seed=1, loglik_every=50)
    n_dk = doc_topic_counts(doc_ptr, fit.z, k)
    return TopicModel.from_counts(fit.n_wk, n_dk, split["vocab"], alpha=0.1, beta=0.05,
                                  attrs={"history": list(fit.history), "sampler": "cgs",
                                         "config": {"iterations": 150}})


@pytest.fixture(scope="session")
def truth_phi(split):
    return split["phi"]


@pytest.fixture(scope="session")
def random_phi(split):
    return np.random.default_rng(0).dirichlet(np.ones(len(split["vocab"])), size=8)


@pytest.fixture()
def small_model():
    """K = 3, V = 6, 4 documents, hand-made counts."""
    n_wk = np.array([[8, 0, 1], [6, 1, 0], [0, 9, 0], [1, 7, 0], [0, 0, 5], [0, 1, 6]])
    n_dk = np.array([[10, 1, 0], [5, 0, 0], [0, 17, 2], [0, 0, 10]])
    return TopicModel.from_counts(n_wk, n_dk, ["apple", "pear", "car", "bus", "sun", "rain"],
                                  alpha=[0.1, 0.2, 0.3], beta=0.01,
                                  doc_ids=["a", "b", "c", "d"],
                                  attrs={"tokenizer": {}, "history": [{"iteration": 1}]})
