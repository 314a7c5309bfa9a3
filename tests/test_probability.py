"""Probabilities: Platt scaling (Lin, Lin & Weng 2007), pairwise coupling (Wu, Lin & Weng 2004),
SVC/NuSVC(probability=True) against scikit-learn, and when predict and predict_proba agree."""

import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import load_iris, make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC as SkSVC

from maxmargin import SVC, NuSVC
from maxmargin.probability import (
    _coupling_iterative,
    pairwise_coupling,
    probabilities_from_ovo,
    sigmoid_predict,
    sigmoid_train,
)


def _platt_objective(ab, dec, t):
    u = dec * ab[0] + ab[1]
    return float(np.sum(t * u + np.logaddexp(0.0, -u)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigmoid_train_minimises_the_cross_entropy(seed):
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(300) < 0.35, 1, -1)
    dec = labels * rng.gamma(2.0, 0.7, size=300) + rng.normal(scale=1.2, size=300)
    A, B = sigmoid_train(dec, labels)
    n1, n0 = np.sum(labels > 0), np.sum(labels < 0)
    t = np.where(labels > 0, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))
    ref = minimize(_platt_objective, [0.0, 0.0], args=(dec, t), method="BFGS", options={"gtol": 1e-10}).x
    assert A == pytest.approx(ref[0], abs=1e-4) and B == pytest.approx(ref[1], abs=1e-4)
    assert A < 0  # decision values positive for label +1: P(+1) increases with them
    # separable decision values: the line search keeps everything finite
    A2, B2 = sigmoid_train(np.r_[np.full(50, 5.0), np.full(50, -5.0)], np.r_[np.ones(50), -np.ones(50)])
    assert np.isfinite(A2) and np.isfinite(B2)
    p = sigmoid_predict(np.array([-1e6, 0.0, 1e6]), -3.0, 0.5)
    assert np.all(np.isfinite(p)) and p[0] < 1e-10 and p[2] == pytest.approx(1.0)


def test_pairwise_coupling_solves_method_two():
    rng = np.random.default_rng(3)
    k, n = 5, 40
    R = np.clip(rng.uniform(size=(n, k, k)), 1e-3, 1 - 1e-3)
    for a in range(k):
        R[:, a, a] = 0.0
        for b in range(a):
            R[:, a, b] = 1 - R[:, b, a]
    P = pairwise_coupling(R)
    assert np.allclose(P.sum(axis=1), 1.0) and np.all(P >= 0)
    # the minimiser of sum_a sum_{b != a} (r_ba p_a - r_ab p_b)^2 over the simplex, independently
    for i in range(5):
        r = R[i]

        def f(p, r=r):
            return sum((r[b, a] * p[a] - r[a, b] * p[b]) ** 2 for a in range(k) for b in range(k) if a != b)

        res = minimize(
            f,
            np.full(k, 1 / k),
            constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
            bounds=[(0, 1)] * k,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert np.allclose(P[i], res.x, atol=1e-5)
    # LIBSVM's fixed-point iteration reaches the same point
    assert np.allclose(_coupling_iterative(R, max_iter=2000, eps=1e-12), P, atol=1e-8)
    # consistent pairwise probabilities r_ab = p_a / (p_a + p_b) give back p exactly
    p = rng.dirichlet(np.ones(k), size=n)
    Rc = p[:, :, None] / (p[:, :, None] + p[:, None, :])
    assert np.allclose(pairwise_coupling(Rc), p, atol=1e-10)


@pytest.mark.parametrize("k,n", [(3, 7), (7, 300), (20, 40), (60, 12)])
@pytest.mark.parametrize("route", ["elimination", "cholesky"])
def test_compiled_coupling_row_by_row_is_the_batched_system(k, n, route, monkeypatch):
    """probabilities_from_ovo couples row by row in compiled code (Gaussian elimination, or from
    COUPLING_CHOLESKY_MIN classes Q's Cholesky factor); the same numbers as pairwise_coupling's batched NumPy
    solve, serial and parallel; a row it cannot solve goes to the iteration."""
    from maxmargin import probability

    monkeypatch.setattr(probability, "COUPLING_CHOLESKY_MIN", 0 if route == "cholesky" else 1 << 30)
    rng = np.random.default_rng(k)
    n_pairs = k * (k - 1) // 2
    dec = rng.normal(size=(n, n_pairs)) * 3
    A, B = -rng.uniform(0.5, 3.0, n_pairs), rng.normal(size=n_pairs) * 0.2
    ref = pairwise_coupling(probability.pairwise_matrix(dec, A, B, k))
    for parallel_min in (0, 1 << 62):
        monkeypatch.setattr(probability, "COUPLING_PARALLEL_MIN", parallel_min)
        np.testing.assert_allclose(probabilities_from_ovo(dec, A, B), ref, rtol=1e-11, atol=1e-14)
    name = "_coupled_chol_ser" if route == "cholesky" else "_coupled_rows_ser"
    real = getattr(probability, name)

    def second_row_fails(dec, A, B, pa, pb, k, out, bad):
        real(dec, A, B, pa, pb, k, out, bad)
        out[1] = np.nan
        bad[1] = True

    monkeypatch.setattr(probability, name, second_row_fails)
    got = probabilities_from_ovo(dec, A, B)
    iterated = _coupling_iterative(probability.pairwise_matrix(dec[1:2], A, B, k))
    np.testing.assert_allclose(got[1], iterated[0] / iterated[0].sum(), rtol=1e-12)
    np.testing.assert_allclose(got[[0] + list(range(2, n))], ref[[0] + list(range(2, n))], rtol=1e-11, atol=1e-14)


def test_cholesky_coupling_of_even_odds_is_uniform():
    """Every r_ab = 1/2 (decision values 0, B = 0): the uniform distribution, no row marked for the iteration."""
    from maxmargin import probability
    from maxmargin.svm import pair_classes

    k = 17
    pa, pb = pair_classes(k)
    dec = np.zeros((3, pa.shape[0]))
    out = np.empty((3, k))
    bad = np.zeros(3, dtype=np.bool_)
    probability._coupled_chol_ser(dec, np.full(pa.shape[0], -1.0), np.zeros(pa.shape[0]), pa, pb, k, out, bad)
    assert not bad.any()
    np.testing.assert_allclose(out, 1.0 / k, rtol=1e-13)


def test_two_classes_is_the_sigmoid():
    dec = np.linspace(-3, 3, 7)[:, None]
    P = probabilities_from_ovo(dec, np.array([-2.0]), np.array([0.3]))
    assert np.allclose(P[:, 0], 1 / (1 + np.exp(-2.0 * dec[:, 0] + 0.3)))
    assert np.allclose(P.sum(axis=1), 1.0)


def _calibration_data(n_classes, seed):
    X, y = make_classification(
        900, 10, n_informative=6, n_classes=n_classes, n_clusters_per_class=1, flip_y=0.05, random_state=seed
    )
    X = StandardScaler().fit_transform(X)
    return X[:540], y[:540], X[540:], y[540:]


@pytest.mark.parametrize("n_classes", [2, 4])
def test_log_loss_close_to_sklearn(n_classes):
    Xtr, ytr, Xcal, ycal = _calibration_data(n_classes, 1)
    ours = SVC(probability=True, random_state=0).fit(Xtr, ytr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # scikit-learn 1.9 deprecates probability=True
        ref = SkSVC(probability=True, random_state=0).fit(Xtr, ytr)
        ref_loss = log_loss(ycal, ref.predict_proba(Xcal))
    P = ours.predict_proba(Xcal)
    assert P.shape == (Xcal.shape[0], n_classes)
    assert np.allclose(P.sum(axis=1), 1.0) and np.all(P >= 0)
    assert log_loss(ycal, P) <= 1.05 * ref_loss
    assert np.allclose(ours.predict_log_proba(Xcal), np.log(P))
    assert ours.probA_.shape == (n_classes * (n_classes - 1) // 2,) and np.all(ours.probA_ < 0)
    nu = NuSVC(nu=0.3, probability=True, random_state=0).fit(Xtr, ytr)
    assert np.allclose(nu.predict_proba(Xcal).sum(axis=1), 1.0)
    assert log_loss(ycal, nu.predict_proba(Xcal)) <= 1.10 * ref_loss


def test_same_random_state_same_output_and_pickle():
    Xtr, ytr, Xcal, _ = _calibration_data(3, 2)
    a = SVC(probability=True, random_state=7).fit(Xtr, ytr)
    b = SVC(probability=True, random_state=7).fit(Xtr, ytr)
    assert np.array_equal(a.probA_, b.probA_) and np.array_equal(a.probB_, b.probB_)
    assert np.array_equal(a.predict_proba(Xcal), b.predict_proba(Xcal))
    c = SVC(probability=True, random_state=8).fit(Xtr, ytr)
    assert not np.array_equal(a.probA_, c.probA_)  # other folds
    d = pickle.loads(pickle.dumps(a))
    assert np.array_equal(d.predict_proba(Xcal), a.predict_proba(Xcal))
    rs = np.random.RandomState(5)
    e = SVC(probability=True, random_state=rs).fit(Xtr, ytr)
    assert np.all(np.isfinite(e.probA_))


def test_only_with_probability_true():
    X, y = load_iris(return_X_y=True)
    clf = SVC().fit(X, y)
    assert not hasattr(clf, "predict_proba") and not hasattr(clf, "predict_log_proba")
    assert clf.probA_.shape == (0,)
    with pytest.raises(ValueError, match="predict_from_proba=True needs probability=True"):
        SVC(predict_from_proba=True).fit(X, y)
    with pytest.raises(ValueError, match="probability must be True or False"):
        SVC(probability="yes").fit(X, y)


def test_when_predict_and_argmax_proba_disagree():
    """Two classes: exactly the points whose decision value lies between 0 and B/A (documented rule)."""
    # class weights move the SVM's boundary; Platt scaling, fitted on the true frequencies, moves it back
    X, y = make_classification(1400, 5, n_informative=3, flip_y=0.1, weights=[0.8], random_state=4)
    clf = SVC(C=0.5, probability=True, random_state=0, class_weight="balanced").fit(X[:400], y[:400])
    Xt = X[400:]
    f = clf.decision_function(Xt)
    A, B = clf.probA_[0], clf.probB_[0]
    proba_label = clf.classes_[np.argmax(clf.predict_proba(Xt), axis=1)]
    disagree = clf.predict(Xt) != proba_label
    between = (np.minimum(0, B / A) < f) & (f < np.maximum(0, B / A))
    assert np.array_equal(disagree, between) and disagree.sum() > 20
    # predict_from_proba=True makes them agree, binary and multi-class
    agree = SVC(C=0.5, probability=True, random_state=0, class_weight="balanced", predict_from_proba=True).fit(
        X[:400], y[:400]
    )
    assert np.array_equal(agree.predict(Xt), proba_label)
    Xtr, ytr, Xcal, _ = _calibration_data(4, 3)
    m = SVC(probability=True, random_state=0, predict_from_proba=True).fit(Xtr, ytr)
    assert np.array_equal(m.predict(Xcal), m.classes_[np.argmax(m.predict_proba(Xcal), axis=1)])


def test_grid_search_on_log_loss_and_callback_stop():
    X, y = load_iris(return_X_y=True)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    gs = GridSearchCV(SVC(probability=True, random_state=0), {"C": [0.1, 10.0]}, scoring="neg_log_loss", cv=cv).fit(
        X, y
    )
    assert gs.best_params_["C"] == 10.0
    # a fit stopped by the callback still gives probabilities (sigmoids on the training decision values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = SVC(probability=True, callback=lambda info: False, max_iter=-1).fit(X, y)
    assert np.allclose(clf.predict_proba(X).sum(axis=1), 1.0)


def test_check_estimator_probability():
    from sklearn.utils.estimator_checks import check_estimator

    reason = (
        "sample weights vs repeated rows: the probability folds are a random permutation of the rows, "
        "so repeating rows changes the folds and the sigmoids (and gamma='scale' changes too); "
        "scikit-learn's SVC(probability=True) fails it alike"
    )
    calibrated = (
        "the check expects predictions to follow class_weight; with predict_from_proba=True they follow "
        "the probabilities, which Platt scaling calibrates on the true class frequencies, undoing most of "
        "the weights' shift (by design)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(
            SVC(probability=True, random_state=0),
            expected_failed_checks={
                "check_sample_weight_equivalence_on_dense_data": reason,
                "check_sample_weight_equivalence_on_sparse_data": reason,
            },
        )
        check_estimator(
            SVC(probability=True, random_state=0, predict_from_proba=True),
            expected_failed_checks={
                "check_sample_weight_equivalence_on_dense_data": reason,
                "check_sample_weight_equivalence_on_sparse_data": reason,
                "check_class_weight_classifiers": calibrated,
            },
        )


def test_many_sigmoids_in_one_call_equal_one_at_a_time():
    from maxmargin import probability

    rng = np.random.default_rng(5)
    decs = [rng.normal(size=n) * 2.0 for n in (3, 40, 1, 17)]
    labels = [np.where(d + rng.normal(size=d.shape[0]) > 0, 1, -1) for d in decs]
    offsets = np.concatenate([[0], np.cumsum([d.shape[0] for d in decs])])
    A, B = probability.sigmoid_train_many(np.concatenate(decs), np.concatenate(labels), offsets)
    for p, (d, lab) in enumerate(zip(decs, labels)):
        assert (A[p], B[p]) == probability.sigmoid_train(d, lab)
