"""``biglda.LDA`` as a scikit-learn estimator: scikit-learn's own checks, pipelines, grid
search, clone and ``set_output``, all training on one module-scoped 2-worker cluster."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import biglda

# Few sweeps: the checks fit a few hundred times.
FAST = {"iterations": 3, "transform_iterations": 4, "n_components": 3}

# No check is skipped. (scikit-learn's subset/order invariance checks fit n_components=1;
# test_transform_of_a_row_does_not_depend_on_its_neighbours covers K > 1.)


@pytest.fixture(scope="module")
def address(local_cluster):
    return local_cluster.scheduler.address


@parametrize_with_checks([biglda.LDA(**FAST)])
def test_sklearn_estimator_checks(estimator, check, address):
    estimator.set_params(scheduler=address)
    check(estimator)


DOCS = (["apple pear banana fruit juice", "pear apple fruit salad banana",
         "banana fruit apple pear smoothie"] * 6
        + ["car bus train road traffic", "train bus station car road",
           "road traffic car bus truck"] * 6)


def test_pipeline_fit_transform_score(address):
    pipe = make_pipeline(CountVectorizer(), biglda.LDA(n_components=2, iterations=30,
                                                       scheduler=address, random_state=1))
    theta = pipe.fit(DOCS).transform(DOCS)
    assert theta.shape == (len(DOCS), 2)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.isfinite(pipe.score(DOCS))
    lda = pipe[-1]
    assert lda.get_feature_names_out().tolist() == ["lda0", "lda1"]
    assert pipe.get_feature_names_out().tolist() == ["lda0", "lda1"]
    # the two themes land in different topics
    assert theta[0].argmax() != theta[-1].argmax()


def test_grid_search_scores_are_real(address):
    search = GridSearchCV(
        make_pipeline(CountVectorizer(), biglda.LDA(iterations=20, scheduler=address)),
        {"lda__n_components": [2, 5]}, cv=KFold(2, shuffle=True, random_state=0))
    search.fit(DOCS)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and scores[0] != scores[1]
    assert search.best_params_["lda__n_components"] == [2, 5][int(np.argmax(scores))]


def test_clone_and_set_output_pandas(address):
    pd = pytest.importorskip("pandas")
    lda = biglda.LDA(n_components=2, iterations=10, alpha=0.3, scheduler=address)
    twin = clone(lda)
    assert twin is not lda and twin.get_params() == lda.get_params()
    # CountVectorizer has no set_output (its output is sparse): set it on the LDA step
    pipe = make_pipeline(CountVectorizer(), lda.set_output(transform="pandas"))
    out = pipe.fit(DOCS).transform(DOCS)
    assert isinstance(out, pd.DataFrame) and out.columns.tolist() == ["lda0", "lda1"]


def test_transform_takes_pretokenized_documents(address):
    vec = CountVectorizer()
    x = vec.fit_transform(DOCS)
    lda = biglda.LDA(n_components=2, iterations=30, scheduler=address,
                     vocabulary=vec.get_feature_names_out()).fit(x)
    words = [d.split() for d in DOCS[:3]]
    np.testing.assert_allclose(lda.transform(words), lda.transform(x[:3]))


def test_asymmetric_alpha_is_trained_with(address):
    x = CountVectorizer().fit_transform(DOCS)
    lda = biglda.LDA(n_components=2, iterations=5, scheduler=address,
                     alpha=np.array([0.2, 0.5])).fit(x)
    np.testing.assert_allclose(lda.model_.alpha, [0.2, 0.5])
    with pytest.raises(biglda.BigLDAError, match="alpha must be a number or 2 numbers"):
        biglda.LDA(n_components=2, alpha=[0.1, 0.2, 0.3]).fit(x)
    with pytest.raises(biglda.BigLDAError, match="alpha must be positive"):
        biglda.LDA(n_components=2, alpha=[0.1, -1]).fit(x)


def test_transform_of_a_row_does_not_depend_on_its_neighbours(address):
    """Each row's fold-in stream is keyed by the row itself, so subsets, reordering and
    duplicates give the same mixture for a row (scikit-learn's subset invariance, K > 1)."""
    x = CountVectorizer().fit_transform(DOCS)
    lda = biglda.LDA(n_components=3, iterations=20, transform_iterations=30,
                     scheduler=address).fit(x)
    full = lda.transform(x)
    np.testing.assert_array_equal(lda.transform(x[5:9]), full[5:9])
    order = np.random.default_rng(0).permutation(x.shape[0])
    np.testing.assert_array_equal(lda.transform(x[order]), full[order])
    np.testing.assert_array_equal(full[0], full[3])  # DOCS repeats: equal rows, equal mixtures
    assert np.isfinite(lda.score(x[5:9]))
