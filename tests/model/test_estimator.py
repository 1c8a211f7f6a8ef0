"""biglda.train and the scikit-learn-style LDA estimator, on a real 2-worker cluster."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import biglda
from biglda.corpus import Corpus, write_corpus
from biglda.corpus.synth import SynthSpec, generate
from biglda.errors import ConfigError

SPEC = SynthSpec(n_docs=300, n_words=120, n_topics=4, mean_doc_length=80, alpha=0.1,
                 beta=0.1, seed=11)


@pytest.fixture(scope="module")
def data():
    tokens, doc_ptr, phi, _theta = generate(SPEC)
    rows = np.repeat(np.arange(SPEC.n_docs), np.diff(doc_ptr))
    x = sp.csr_matrix((np.ones(len(tokens)), (rows, tokens)),
                      shape=(SPEC.n_docs, SPEC.n_words + 1))  # the last column never occurs
    return tokens, doc_ptr, phi, x


def _best_match(est: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """For each true topic, the highest cosine similarity with an estimated topic."""
    a = truth / np.linalg.norm(truth, axis=1, keepdims=True)
    b = est / np.linalg.norm(est, axis=1, keepdims=True)
    return (a @ b.T).max(axis=1)


def test_train_returns_the_trained_model(data, tmp_path, local_cluster):
    tokens, doc_ptr, phi, _ = data
    url = str(tmp_path / "c.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(SPEC.n_words)])
    corpus = Corpus.open(url)
    model = biglda.train(corpus, n_topics=4, out=str(tmp_path / "m.zarr"), iterations=30,
                         sampler="cgs", alpha=0.1, beta=0.1, scheduler=local_cluster)
    assert isinstance(model, biglda.TopicModel) and model.url == str(tmp_path / "m.zarr")
    assert model.n_tokens == corpus.n_tokens and model.n_docs == corpus.n_docs
    assert len(model.history) == 30
    np.testing.assert_array_equal(model.doc_ids, np.asarray(corpus.doc_ids).astype(object))
    # Topics in the model's word ids vs the truth mapped to them by spelling.
    truth = phi[:, [int(w[1:]) for w in model.vocab]]
    assert _best_match(model.topic_word, truth).min() > 0.9


def test_lda_estimator(data, local_cluster):
    _, _, phi, x = data
    lda = biglda.LDA(n_components=4, iterations=40, sampler="cgs", alpha=0.1, beta=0.1,
                     scheduler=local_cluster, transform_iterations=20)
    assert lda.get_params()["n_components"] == 4 and not hasattr(lda, "components_")
    with pytest.raises(ConfigError, match="not fitted"):
        lda.transform(x)
    assert lda.fit(x) is lda
    assert lda.components_.shape == (4, SPEC.n_words + 1)
    np.testing.assert_allclose(lda.components_[:, -1], 0.1)  # unseen column: only the prior
    assert lda.n_features_in_ == SPEC.n_words + 1
    assert lda.vocabulary_[:3].tolist() == ["w0", "w1", "w2"]
    assert lda.get_feature_names_out().tolist() == ["lda0", "lda1", "lda2", "lda3"]
    comp = lda.components_[:, :-1] / lda.components_[:, :-1].sum(axis=1, keepdims=True)
    assert _best_match(comp, phi).min() > 0.9
    theta = lda.transform(x[:20])
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    # fold-in mixtures agree with the training mixtures of the same documents
    np.testing.assert_allclose(theta, lda.model_.doc_topic[:20], atol=0.2)
    assert np.isfinite(lda.score(x[:20])) and lda.perplexity(x[:20]) > 1
    with pytest.raises((ValueError, biglda.BigLDAError), match="features"):
        lda.transform(x[:, :10])
    with pytest.raises(ConfigError):
        biglda.LDA(n_components=0).fit(x)


def test_biglda_train_stays_callable_after_the_trainer_is_imported():
    import biglda.model.training
    import biglda.trainer.run  # the trainer is a package of its own name

    assert biglda.train is biglda.model.training.train
    assert callable(biglda.train)


def test_estimator_works_without_sklearn():
    """scikit-learn is optional: with it blocked, LDA still imports, clones by parameters and
    names its output columns."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['sklearn'] = None\n"
        "import biglda\n"
        "lda = biglda.LDA(n_components=3, iterations=5)\n"
        "assert lda.get_params()['n_components'] == 3\n"
        "assert lda.set_params(n_components=4).n_components == 4\n"
        "print(repr(lda))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "LDA(n_components=4, iterations=5)"
