"""maxmargin.SVC and the SMO solver against independent references."""

import contextlib
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation, qp_reference
from sklearn.datasets import load_iris, make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC as SkSVC

from maxmargin import SVC
from maxmargin.kernels import make_kernel
from maxmargin.problem import csvc_problem
from maxmargin.solvers import smo

KERNELS = [
    ("linear", {}),
    ("rbf", {"gamma": 0.5}),
    ("poly", {"gamma": 0.3, "degree": 2, "coef0": 1.0}),
    ("sigmoid", {"gamma": 0.05, "coef0": -1.0}),
]


def _data(rng, n=60, d=4, sparse=False):
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.7 * X[:, 1] + 0.6 * rng.normal(size=n) > 0, 1.0, -1.0)
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    return X, y


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernel,kw", KERNELS)
@pytest.mark.parametrize("weighted", [False, True])
def test_smo_matches_qp_reference(rng, kernel, kw, sparse, weighted):
    X, y = _data(rng, sparse=sparse)
    C = 2.0 * (rng.uniform(0.2, 3.0, size=y.shape[0]) if weighted else np.ones(y.shape[0]))
    kern = make_kernel(kernel, X=X, **kw)
    prob = csvc_problem(X, kern, y, C)
    Q, p = prob.q_matrix(), prob.p
    if kernel == "sigmoid":
        # not PSD in general: the reference needs a convex problem; check termination only
        sol = smo.solve(prob, tol=1e-6)
        assert sol.converged and np.all(sol.alpha >= 0) and np.all(sol.alpha <= C + 1e-12)
        assert abs(y @ sol.alpha) < 1e-9
        return
    sol = smo.solve(prob, tol=1e-8)
    _, ref = qp_reference(Q, p, y, C)
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert sol.objective == pytest.approx(0.5 * sol.alpha @ Q @ sol.alpha + p @ sol.alpha, rel=1e-10)
    assert kkt_violation(Q, p, y, C, sol.alpha) < 1e-7
    assert abs(y @ sol.alpha) < 1e-9
    assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= C)
    # rho lies between the KKT bounds: y_i f(x_i) >= 1 off-bound points etc.
    f = (Q @ sol.alpha) * y - sol.rho * y  # sum_j a_j y_j K_ij - rho, times y_i ... via Q
    free = (sol.alpha > 1e-8) & (sol.alpha < C - 1e-8)
    if free.any():
        margin = y * (y * (Q @ sol.alpha) * 1.0 - sol.rho)  # y_i * f(x_i)
        assert np.allclose(margin[free], 1.0, atol=1e-5)
    del f


@pytest.mark.parametrize("shrinking", [True, False])
def test_tiny_cache_and_shrinking_give_the_same_solution(rng, shrinking):
    X, y = _data(rng, n=200)
    kern = make_kernel("rbf", gamma=0.3)
    ref = smo.solve(csvc_problem(X, kern, y, 5.0), tol=1e-6)
    tiny = smo.solve(csvc_problem(X, kern, y, 5.0), tol=1e-6, cache_size=1e-3, shrinking=shrinking)
    assert tiny.objective == pytest.approx(ref.objective, rel=1e-8)
    assert tiny.extra["cache_misses"] > ref.extra["cache_misses"]


def test_cache_budget_is_honoured():
    from maxmargin.kernels.rowcache import RowCache

    c = RowCache(100_000, 8)  # 8 MB for rows of 100k doubles: 10 rows
    assert c.rows.nbytes <= 8 * 1024 * 1024
    assert RowCache(100_000, 1e-6).rows.shape[0] == 2  # the minimum of two rows


def _sk_objective(sk, kernel_fn):
    c = sk.dual_coef_
    K = kernel_fn(sk.support_vectors_)
    if c.shape[0] == 1:
        c = c.ravel()
        return 0.5 * c @ K @ c - np.abs(c).sum()
    raise AssertionError("binary only")


@pytest.mark.parametrize("kernel,kw", KERNELS[:3])
def test_against_sklearn_binary(kernel, kw):
    X, y = make_classification(400, 8, n_informative=5, random_state=3, flip_y=0.1)
    Xtr, Xte, ytr = X[:300], X[300:], y[:300]
    ours = SVC(kernel=kernel, C=3.0, **kw).fit(Xtr, ytr)
    ref = SkSVC(kernel=kernel, C=3.0, **kw).fit(Xtr, ytr)
    kern = make_kernel(kernel, X=Xtr, **kw)
    assert ours.objective_[0] == pytest.approx(_sk_objective(ref, lambda A: kern(A)), rel=1e-3)
    assert np.mean(ours.predict(Xte) == ref.predict(Xte)) >= 0.995
    # same support set, up to points at the bound tolerance
    sym = set(ours.support_) ^ set(ref.support_)
    dec = ref.decision_function(Xtr)
    for i in sym:
        assert abs(abs(dec[i]) - 1.0) < 5e-2, f"point {i} differs but is not on the margin"
    assert np.allclose(ours.intercept_, ref.intercept_, atol=5e-3)


def test_against_sklearn_multiclass_layout():
    X, y = load_iris(return_X_y=True)
    for shape in ("ovr", "ovo"):
        ours = SVC(C=10, decision_function_shape=shape, tol=1e-6).fit(X, y)
        ref = SkSVC(C=10, decision_function_shape=shape, tol=1e-6).fit(X, y)
        assert np.array_equal(ours.support_, ref.support_)
        assert np.array_equal(ours.n_support_, ref.n_support_)
        assert np.allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-3)
        assert np.allclose(ours.intercept_, ref.intercept_, atol=1e-3)
        assert np.allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-3)
        assert np.array_equal(ours.predict(X), ref.predict(X))
    lin = SVC(kernel="linear", C=1).fit(X, y)
    assert np.allclose(lin.coef_, SkSVC(kernel="linear", C=1).fit(X, y).coef_, atol=2e-3)


def test_sparse_equals_dense(rng):
    X, y = _data(rng, n=150, sparse=True)
    a = SVC(C=2, gamma=0.4, tol=1e-6).fit(X, y)
    b = SVC(C=2, gamma=0.4, tol=1e-6).fit(X.toarray(), y)
    assert np.array_equal(a.support_, b.support_)
    assert np.allclose(a.decision_function(X), b.decision_function(X.toarray()), atol=1e-5)


def test_precomputed_equals_named_kernel(rng):
    X, y = _data(rng, n=120)
    kern = make_kernel("rbf", gamma=0.7)
    named = SVC(kernel="rbf", gamma=0.7, tol=1e-6).fit(X, y)
    pre = SVC(kernel="precomputed", tol=1e-6).fit(kern(X, X), y)
    Xt = rng.normal(size=(40, X.shape[1]))
    assert np.array_equal(named.support_, pre.support_)
    assert np.allclose(named.decision_function(Xt), pre.decision_function(kern(Xt, X)), atol=1e-10)
    # a callable kernel is the same kernel again
    call = SVC(kernel=lambda A, B: kern(A, B), tol=1e-6).fit(X, y)
    assert np.allclose(named.decision_function(Xt), call.decision_function(Xt), atol=1e-10)


def test_precomputed_binary_predict_on_many_rows(rng):
    """Two classes, a precomputed kernel block past ``SMALL_BLOCK_VALUES``: the decision values are one product over
    whole kernel rows (zero off the support vectors); they equal the support vectors' columns times the
    coefficients, for dense and sparse blocks, and the labels equal LIBSVM's.  A large array with a NaN, or the
    wrong width, is refused by name."""
    from maxmargin import svm as svm_mod

    X, y = _data(rng, n=300)
    kern = make_kernel("rbf", gamma=0.5)
    K = kern(X, X)
    Xt = rng.normal(size=(1200, X.shape[1]))
    Kt = kern(Xt, X)
    clf = SVC(kernel="precomputed", C=2.0, tol=1e-6).fit(K, y)
    assert Kt.shape[0] * clf.support_.size > svm_mod.SMALL_BLOCK_VALUES
    assert clf.support_.size < X.shape[0]  # coefficients of 0 off the support vectors matter
    manual = Kt[:, clf.support_] @ clf.dual_coef_[0] + clf.intercept_[0]
    np.testing.assert_allclose(clf.decision_function(Kt), manual, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(clf.decision_function(sp.csr_matrix(Kt)), manual, rtol=1e-12, atol=1e-12)
    ref = SkSVC(kernel="precomputed", C=2.0, tol=1e-6).fit(K, y)
    assert np.mean(clf.predict(Kt) == ref.predict(Kt)) >= 0.995
    bad = Kt.copy()
    bad[700, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(bad)
    with pytest.raises(ValueError, match="column"):
        clf.predict(Kt[:, :-1])


def test_decision_function_recomputed_from_attributes(rng):
    X, y = load_iris(return_X_y=True)
    clf = SVC(kernel="rbf", gamma=0.5, C=3).fit(X, y)
    K = make_kernel("rbf", gamma=0.5)(X, clf.support_vectors_)
    starts = np.concatenate([[0], np.cumsum(clf.n_support_)])
    dec = clf.decision_function(X) if clf.decision_function_shape == "ovo" else None
    clf.set_params(decision_function_shape="ovo")
    dec = clf.decision_function(X)
    k = 0
    for a in range(3):
        for b in range(a + 1, 3):
            sa, sb = slice(starts[a], starts[a + 1]), slice(starts[b], starts[b + 1])
            manual = K[:, sa] @ clf.dual_coef_[b - 1, sa] + K[:, sb] @ clf.dual_coef_[a, sb] + clf.intercept_[k]
            assert np.allclose(manual, dec[:, k], atol=1e-12)
            k += 1
    Xb, yb = make_classification(100, 4, random_state=0)
    clf = SVC(kernel="linear").fit(Xb, yb)
    assert np.allclose(Xb @ clf.coef_.ravel() + clf.intercept_[0], clf.decision_function(Xb), atol=1e-10)
    # ||w|| from the dual objective equals ||coef_||; margin_ is the notebook's
    # minimal geometric margin min_i y_i f(x_i) / ||w||
    wn = np.linalg.norm(clf.coef_)
    assert clf.w_norm_[0] == pytest.approx(wn, rel=1e-6)
    ypm = np.where(yb == clf.classes_[1], 1.0, -1.0)
    assert clf.margin_[0] == pytest.approx(np.min(ypm * clf.decision_function(Xb)) / wn, rel=1e-3, abs=1e-6)


def test_integer_weights_equal_repeated_rows(rng):
    X, y = _data(rng, n=80)
    w = rng.integers(0, 4, size=80)
    a = SVC(C=1.5, gamma=0.5, tol=1e-7).fit(X, y, sample_weight=w)
    b = SVC(C=1.5, gamma=0.5, tol=1e-7).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert a.objective_[0] == pytest.approx(b.objective_[0], rel=1e-6)
    Xt = rng.normal(size=(50, X.shape[1]))
    assert np.allclose(a.decision_function(Xt), b.decision_function(Xt), atol=1e-4)


def test_class_weight_scales_C(rng):
    X, y = _data(rng, n=80)
    a = SVC(C=1.0, class_weight={1.0: 3.0}, tol=1e-7).fit(X, y)
    b = SVC(C=1.0, tol=1e-7).fit(X, y, sample_weight=np.where(y == 1, 3.0, 1.0))
    assert np.allclose(a.decision_function(X), b.decision_function(X), atol=1e-8)


def test_seed_003_example():
    data = np.array([[1, 1, 5], [1, 2, 4], [-1, 2, 2], [-1, 4, 4]], dtype=float)
    X, y = data[:, 1:], data[:, 0]
    clf = SVC(kernel="linear", C=1e6).fit(X, y)
    assert list(clf.predict(X)) == [1, 1, -1, -1]
    assert clf.train_error_ == 0.0


def test_added_attributes(rng):
    X, y = _data(rng, n=100)
    clf = SVC(kernel="linear", C=0.5).fit(X, y)
    assert clf.loo_bound_ == pytest.approx(len(clf.support_) / 100)
    assert clf.objective_.shape == (1,) and clf.objective_[0] < 0
    assert clf.n_iter_[0] >= 1 and clf.fit_status_ == 0
    assert 0.0 <= clf.train_error_ <= 1.0


def test_sigma_and_median_gamma(rng):
    X, y = _data(rng, n=60)
    a = SVC(sigma=2.0).fit(X, y)
    b = SVC(gamma=1 / 8).fit(X, y)
    assert np.allclose(a.decision_function(X), b.decision_function(X))
    c = SVC(gamma="median").fit(X, y)
    d = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    sigma = np.median(d[np.triu_indices(60, 1)])
    assert c._gamma == pytest.approx(1 / (2 * sigma**2))


def test_non_psd_kernel_terminates(rng):
    X, y = _data(rng, n=150)
    clf = SVC(kernel="sigmoid", gamma=2.0, coef0=1.0, C=10).fit(X, y)
    assert clf.fit_status_ == 0
    assert clf.predict(X).shape == (150,)


def test_max_iter_warns_and_model_predicts(rng):
    X, y = _data(rng, n=200)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        clf = SVC(max_iter=3).fit(X, y)
    assert clf.fit_status_ == 1 and clf.predict(X).shape == (200,)


def test_callback_and_time_limit(rng):
    X, y = _data(rng, n=300)
    seen = []

    def cb(info):
        seen.append(info)
        return False

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = SVC(C=100, callback=cb, max_iter=-1).fit(X, y)
    # a 300-point problem may finish inside the first chunk: then no callback happens
    if seen:
        assert {"iteration", "objective", "violation", "tol"} <= set(seen[0])
        assert clf.fit_status_ == 1
    assert clf.predict(X).shape == (300,)


BAD = [
    (dict(C=0), "C must be"),
    (dict(C=-1), "C must be"),
    (dict(gamma=-1.0), "gamma"),
    (dict(kernel="poly", degree=-1), "degree"),
    (dict(kernel="nope"), "kernel must be"),
    (dict(tol=0), "tol"),
    (dict(decision_function_shape="x"), "decision_function_shape"),
    (dict(formulation="x"), "formulation"),
    (dict(sigma=-1.0), "sigma"),
]


@pytest.mark.parametrize("params,msg", BAD)
def test_bad_parameters(params, msg):
    X, y = make_blobs(20, centers=2, random_state=0)
    with pytest.raises(ValueError, match=msg):
        SVC(**params).fit(X, y)


def test_bad_data():
    X, y = make_blobs(20, centers=2, random_state=0)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SVC().fit(Xn, y)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        SVC().fit(Xi, y)
    with pytest.raises(ValueError, match="one class"):
        SVC().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        SVC().fit(X, y[:-1])
    with pytest.raises(ValueError, match="0 sample"):
        SVC().fit(np.empty((0, 2)), np.empty(0))
    with pytest.raises(ValueError, match="square"):
        SVC(kernel="precomputed").fit(X, y)
    pre = SVC(kernel="precomputed").fit(X @ X.T, y)
    with pytest.raises(ValueError, match="column"):
        pre.predict(X @ X[:5].T)
    with pytest.raises(ValueError, match="kernel callable returned"):
        SVC(kernel=lambda A, B: np.ones((2, 2))).fit(X, y)
    with pytest.raises(ValueError, match="non-negative"):
        SVC().fit(X, y, sample_weight=-np.ones(20))
    with pytest.raises(ValueError, match="features"):
        SVC().fit(X, y).predict(np.ones((3, 5)))


def test_small_float64_rows_skip_validation_with_the_same_results(rng):
    """A C-ordered float64 array skips validate_data at predict time (svm._ready_rows): the same values as
    the validated route (lists, float32, Fortran order, many rows), and every other input keeps its checks."""
    import warnings

    import pandas as pd

    from maxmargin import svm as svm_mod

    X = rng.normal(size=(120, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=120) > 0).astype(int)
    Y3 = np.digitize(X[:, 1], [-0.5, 0.5])
    for labels in (y, Y3):
        est = SVC(C=2.0, probability=True, random_state=0).fit(X, labels)
        row = X[:3].astype(np.float32).astype(np.float64)  # the same values as float32
        assert svm_mod._ready_rows(row, est)
        for other in (row.tolist(), row.astype(np.float32), np.asfortranarray(row)):
            assert not svm_mod._ready_rows(other, est)
            np.testing.assert_allclose(est.decision_function(row), est.decision_function(other), rtol=1e-12)
            np.testing.assert_allclose(est.predict_proba(row), est.predict_proba(other), rtol=1e-12)
            np.testing.assert_array_equal(est.predict(row), est.predict(other))
        # one row alone (the kernel block at once) against all rows together (the fused loop for two classes)
        np.testing.assert_allclose(est.decision_function(X[:1]), est.decision_function(X)[:1], rtol=1e-10, atol=1e-12)
        with pytest.raises(ValueError, match="NaN"):
            est.predict(np.array([[np.nan, 0.0, 0.0, 0.0]]))
        with pytest.raises(ValueError, match="features"):
            est.predict(np.zeros((1, 3)))
    # fitted with feature names: an array without them warns as scikit-learn's estimators do
    named = SVC().fit(pd.DataFrame(X, columns=list("abcd")), y)
    assert not svm_mod._ready_rows(X[:2].copy(), named)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named.predict(X[:2].copy())
    assert any("feature names" in str(w.message) for w in caught)


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    # Written reason for the one expected failure: the check compares weighted and
    # repeated-row fits to rtol=1e-7, but at the default tol=1e-3 two fits agree only
    # to about the solver tolerance (scikit-learn's own SVC fails it alike).
    # test_integer_weights_equal_repeated_rows checks the equivalence at tol=1e-7.
    check_estimator(
        SVC(),
        expected_failed_checks={
            "check_sample_weight_equivalence_on_dense_data": "equal only up to the solver tolerance",
            "check_sample_weight_equivalence_on_sparse_data": "equal only up to the solver tolerance",
        },
    )
    check_estimator(SVC(tol=1e-9, kernel="linear"))


# --------------------------------------------------------------------- issue 14
@pytest.mark.parametrize(
    "make",
    [
        lambda: SVC(kernel="linear"),
        lambda: __import__("maxmargin").SVR(kernel="linear"),
        lambda: __import__("maxmargin").OneClassSVM(kernel="linear"),
        lambda: SVC(kernel=lambda A, B: np.full((A.shape[0], B.shape[0]), np.nan)),
    ],
)
def test_non_finite_kernel_values_raise_a_named_error(make):
    """Issue 14.1: data near 1e308 (or a kernel returning NaN) must not fit a constant model."""
    X = np.array([[1e308, 1e308], [9e307, 1e308], [-1e308, -1e308], [-9e307, -1e308]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    with pytest.raises(ValueError, match="non-finite kernel values"):
        make().fit(X, y)


@pytest.mark.parametrize(
    "kernel, params, scale, degree_overflow",
    [
        ("rbf", {}, 1.0, False),
        ("linear", {}, 1e60, False),
        ("sigmoid", {"gamma": 0.5, "coef0": -2.0}, 1e40, False),
        ("poly", {"degree": 3, "coef0": 1.0}, 1e20, False),
        ("poly", {"degree": 12, "coef0": 1.0}, 1e15, True),  # the argument is small, its 12th power is not
    ],
)
def test_finite_kernel_bound_skips_only_what_cannot_overflow(kernel, params, scale, degree_overflow):
    """The check of finite kernel values is skipped (svm._surely_finite) only where a bound from the data's
    largest value proves every kernel value finite; past the bound the check runs and names the overflow."""
    from maxmargin.kernels import make_kernel
    from maxmargin.svm import _surely_finite, check_finite_kernel

    X = np.random.default_rng(0).normal(size=(20, 3))
    kern = make_kernel(kernel, params.get("gamma", 0.3), params.get("degree", 3), params.get("coef0", 0.0))
    assert _surely_finite(kern, X)  # ordinary data: no check needed
    assert _surely_finite(kern, sp.csr_matrix(X)) == _surely_finite(kern, X)
    big = X * scale * 1e110  # past the bound: the check itself decides
    assert not _surely_finite(kern, big)
    with np.errstate(all="ignore"):
        K = kern(big, big)
    if np.all(np.isfinite(K)):
        check_finite_kernel(kern, big)  # finite after all: no error
    else:
        with pytest.raises(ValueError, match="non-finite kernel values"):
            check_finite_kernel(kern, big)
    if degree_overflow:
        huge = X * scale
        assert not _surely_finite(kern, huge)
        with pytest.raises(ValueError, match="non-finite kernel values"):
            check_finite_kernel(kern, huge)
    assert not _surely_finite(make_kernel(lambda A, B: A @ B.T), X)  # a callable: always checked


def test_pair_classes_are_libsvm_order_and_read_only():
    from maxmargin import votes as ovo_votes
    from maxmargin.svm import ovr_from_ovo, pair_classes

    for k in (2, 3, 7, 40):
        pa, pb = pair_classes(k)
        ra, rb = np.triu_indices(k, k=1)
        np.testing.assert_array_equal(pa, ra)
        np.testing.assert_array_equal(pb, rb)
        assert pair_classes(k)[0] is pa  # kept
        with pytest.raises(ValueError):
            pa[0] = 5
        rng = np.random.default_rng(k)
        n = 3000 if k == 40 else 4  # 40 classes: above votes.PARALLEL_MIN_VALUES, the parallel loops
        dec = rng.normal(size=(n, pa.shape[0]))
        dec[rng.random(dec.shape) < 0.05] = 0.0  # ties: a zero value votes for b in predict, for a in 'ovr'
        conf = np.zeros((n, k))
        ovr_votes = np.zeros((n, k))
        predict_votes = np.zeros((n, k))
        for p, (a, b) in enumerate(zip(ra, rb)):
            conf[:, a] += dec[:, p]
            conf[:, b] -= dec[:, p]
            ovr_votes[np.arange(n), np.where(dec[:, p] >= 0, a, b)] += 1
            predict_votes[np.arange(n), np.where(dec[:, p] > 0, a, b)] += 1
        np.testing.assert_allclose(ovr_from_ovo(dec, k), ovr_votes + conf / (3 * (np.abs(conf) + 1)), rtol=1e-13)
        np.testing.assert_array_equal(ovo_votes.labels_by_votes(dec, k), np.argmax(predict_votes, axis=1))
        # the pair values from the per-class products M[a][:, c] (see votes.py)
        M = rng.normal(size=(k, n, max(k - 1, 1)))
        intercept = rng.normal(size=pa.shape[0])
        out = ovo_votes.values_from_class_sums(M, intercept, np.empty((n, pa.shape[0])))
        np.testing.assert_array_equal(out, (M[ra, :, rb - 1] + M[rb, :, ra]).T + intercept)


def test_fused_votes_equal_the_votes_of_the_stored_values():
    """votes.labels_from_kernel / ovr_from_kernel / pair_values_from_kernel (many classes) against the values formed
    the plain way from the same kernel values: serial and parallel loops, odd row counts, exact zeros (ties)."""
    from maxmargin import votes as ovo_votes
    from maxmargin.svm import pair_classes

    for k, n in ((3, 5), (21, 7), (40, 301)):  # 40 classes x 301 rows: above PARALLEL_MIN_VALUES
        ra, rb = pair_classes(k)
        rng = np.random.default_rng(k)
        sizes = rng.integers(1, 6, size=k)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        K = rng.normal(size=(n, starts[-1]))
        CT = rng.normal(size=(starts[-1], k - 1))
        intercept = rng.normal(size=ra.shape[0])
        # the class sums N[a, r, c] and the pair values from them, in plain NumPy
        N = np.stack([K[:, starts[a] : starts[a + 1]] @ CT[starts[a] : starts[a + 1]] for a in range(k)])
        dec = (N[ra, :, rb - 1] + N[rb, :, ra]).T + intercept
        values = ovo_votes.pair_values_from_kernel(K, CT, starts, intercept, np.empty((n, ra.shape[0])))
        np.testing.assert_allclose(values, dec, rtol=1e-12, atol=1e-12)
        labels = ovo_votes.labels_from_kernel(K, CT, starts, intercept)
        np.testing.assert_array_equal(labels, ovo_votes.labels_by_votes(values, k))
        scores = ovo_votes.ovr_from_kernel(K, CT, starts, intercept)
        np.testing.assert_array_equal(scores, ovo_votes.ovr_scores(values, k))
        args = ovo_votes._fused_args(K, CT, starts, intercept)
        for par, ser, out in (
            (ovo_votes._labels_k_par, ovo_votes._labels_k_ser, np.empty(n, dtype=np.int64)),
            (ovo_votes._ovr_k_par, ovo_votes._ovr_k_ser, np.empty((n, k))),
            (ovo_votes._values_k_par, ovo_votes._values_k_ser, np.empty((n, ra.shape[0]))),
        ):
            other = out.copy()
            par(*args, out)
            ser(*args, other)
            np.testing.assert_array_equal(out, other)  # rows are independent: the same bits on any thread count


@pytest.mark.parametrize("kernel", ["rbf", "linear", "precomputed"])
@pytest.mark.parametrize("sparse", [False, True])
def test_many_classes_predict_through_class_sums_as_scikit_learn(monkeypatch, kernel, sparse):
    """From votes.FUSED_MIN_CLASSES classes the labels, the 'ovr' scores and the one-vs-one values come from each
    row's class sums (no stored pair values): the same as the route through M, and scikit-learn's labels."""
    from maxmargin import votes as ovo_votes

    rng = np.random.default_rng(5)
    k = 24
    centers = rng.normal(size=(k, 6))
    y = np.repeat(np.arange(k), 12)
    X = centers[y] + 0.9 * rng.normal(size=(y.shape[0], 6))
    Xt = centers[rng.integers(0, k, 150)] + 0.9 * rng.normal(size=(150, 6))
    if sparse and kernel != "precomputed":
        X, Xt = sp.csr_matrix(np.where(np.abs(X) < 0.3, 0, X)), sp.csr_matrix(np.where(np.abs(Xt) < 0.3, 0, Xt))
    kw = dict(kernel=kernel, C=3.0, tol=1e-7)
    A, At = (X, Xt) if kernel != "precomputed" else (X @ X.T, Xt @ X.T)
    model = SVC(**kw).fit(A, y)
    ref = SkSVC(**kw).fit(A, y)
    fused = {}
    for route in ("fused", "through M"):
        monkeypatch.setattr(ovo_votes, "FUSED_MIN_CLASSES", 20 if route == "fused" else 10**9)
        model.decision_function_shape = "ovo"
        ovo = model.decision_function(At)
        model.decision_function_shape = "ovr"
        model.break_ties = False
        labels = model.predict(At)
        scores = model.decision_function(At)
        model.break_ties = True
        tied = model.predict(At)
        model.break_ties = False
        fused[route] = (ovo, labels, scores, tied)
        np.testing.assert_array_equal(labels, model.classes_[ovo_votes.labels_by_votes(ovo, k)])
        np.testing.assert_array_equal(tied, model.classes_[np.argmax(scores, axis=1)])
    for a, b in zip(fused["fused"], fused["through M"]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    assert np.mean(fused["fused"][1] == ref.predict(At)) >= 0.99
    np.testing.assert_allclose(fused["fused"][2], ref.decision_function(At), atol=1e-4)


def test_non_finite_dual_coefficients_raise():
    from maxmargin.svm import check_finite_solution

    check_finite_solution(np.ones(3), 0.5)
    with pytest.raises(ValueError, match="dual coefficients or the intercept are not finite"):
        check_finite_solution(np.array([1.0, np.nan]), 0.0)
    with pytest.raises(ValueError, match="not finite"):
        check_finite_solution(np.ones(2), np.inf)


_TIES = [
    (np.ones((6, 2)), np.array([0, 0, 0, 1, 1, 1])),  # constant data
    (np.array([[0.0], [0.0], [1.0], [1.0]]), np.array([0, 1, 0, 1])),  # conflicting duplicates
    (np.zeros((6, 1)), np.array([0, 0, 1, 1, 2, 2])),  # three classes, every pair tied
]


@pytest.mark.parametrize(
    "X, y, kw",
    [
        (X, y, kw)
        for X, y in _TIES
        for kw in (
            {"kernel": "linear"},
            {"kernel": "linear", "break_ties": True},
            {"kernel": "linear", "decision_function_shape": "ovo"},
        )
    ]
    + [(*_TIES[0], {"kernel": "rbf"})],
)
def test_zero_decision_value_ties_follow_scikit_learn(X, y, kw):
    """Issue 14.5: where the decision value is exactly 0, predict what scikit-learn predicts."""
    ours, ref = SVC(**kw).fit(X, y), SkSVC(**kw).fit(X, y)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-12)


def test_one_blas_thread_blocks_share_one_limit_across_nesting_and_threads(monkeypatch):
    """The first block to open sets BLAS's limit, the last to close lifts it (one setting per process):
    nested blocks and blocks on the threads of one fit neither set it again nor lift it early."""
    import threading

    from maxmargin import _threads

    events = []

    class Limit:
        def __enter__(self):
            events.append("set")

        def __exit__(self, *exc):
            events.append("lifted")

    monkeypatch.setattr(_threads, "_one_thread_limit", lambda: Limit())
    with _threads.one_blas_thread():
        with _threads.one_blas_thread():
            pass
        assert events == ["set"]
    assert events == ["set", "lifted"]
    inside, release = threading.Event(), threading.Event()

    def worker():
        with _threads.one_blas_thread():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=worker)
    with _threads.one_blas_thread():
        t.start()
        inside.wait(10)
    assert events == ["set", "lifted", "set"]  # the worker's block still open: not lifted at the first's end
    release.set()
    t.join(10)
    assert events == ["set", "lifted", "set", "lifted"] and _threads._ONE["depth"] == 0


def test_one_blas_thread_holds_the_real_libraries_to_one_thread_and_gives_their_counts_back():
    """The lean hold (the libraries' own get/set calls, not threadpoolctl's ``limit``) does what ``limit`` did:
    every BLAS library on one thread inside (nested blocks too), its own count back after."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from maxmargin import _threads

    def counts():
        return [d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"]

    if not counts():
        pytest.skip("no BLAS library that threadpoolctl can see")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = counts()
        with _threads.one_blas_thread():
            assert counts() == [1] * len(before)
            with _threads.one_blas_thread():
                assert counts() == [1] * len(before)
            assert counts() == [1] * len(before)
        assert counts() == before
    assert isinstance(_threads._one_thread_limit(), _threads._BlasHeld)


def test_blas_lifted_gives_blas_its_threads_only_to_a_block_that_is_alone(monkeypatch):
    """``blas_lifted`` (a solver's large product inside its ``one_blas_thread`` block) puts BLAS's own count back
    only where that block is the only one open; a block another thread opens meanwhile holds BLAS to one thread
    again, and the lift's end does not undo that; the last block's end gives the count back."""
    import threading

    from maxmargin import _threads

    class Lib:
        num_threads = 4

        def set_num_threads(self, n):
            self.num_threads = n

    lib = Lib()
    monkeypatch.setattr(_threads, "_one_thread_limit", lambda: _threads._BlasHeld([lib]))
    with _threads.one_blas_thread():
        assert lib.num_threads == 1
        with _threads.blas_lifted():
            assert lib.num_threads == 4
        assert lib.num_threads == 1
        with _threads.one_blas_thread(), _threads.blas_lifted():  # two blocks open: no lift
            assert lib.num_threads == 1
        opened = threading.Event()

        def other():
            with _threads.one_blas_thread():
                opened.set()

        with _threads.blas_lifted():
            assert lib.num_threads == 4
            t = threading.Thread(target=other)
            t.start()
            t.join(10)
            assert opened.is_set() and lib.num_threads == 1
        assert lib.num_threads == 1
    assert lib.num_threads == 4 and _threads._ONE == {"depth": 0, "limit": None, "lifted": False}


def test_small_smo_problems_set_no_blas_limit():
    rng = np.random.default_rng(0)
    kern = make_kernel("rbf", gamma=0.5)
    small = csvc_problem(rng.normal(size=(100, 13)), kern, np.where(rng.random(100) < 0.5, 1.0, -1.0), 1.0)
    larger = csvc_problem(rng.normal(size=(2000, 13)), kern, np.where(rng.random(2000) < 0.5, 1.0, -1.0), 1.0)
    assert 100 * 100 * 13 < smo.NO_LIMIT_MAX_WORK < 2000 * 2000 * 13
    assert isinstance(smo._blas_limit(small), contextlib.nullcontext)
    assert not isinstance(smo._blas_limit(larger), contextlib.nullcontext)


@pytest.mark.parametrize("sparse", [False, True])
def test_linear_kernel_predicts_through_w_as_through_support_vectors(sparse):
    """The linear kernel's decision values come from ``x'w + b`` (svm.linear_weights) where that costs less: they
    equal the kernel sums over the support vectors written out here, for binary, 4 classes, SVR and one-class,
    dense and CSR; ``coef_`` is dense either way (it was an object array for a sparse binary fit)."""
    from maxmargin import SVR, OneClassSVM
    from maxmargin.svm import weights_pay

    def rows(A):
        return sp.csr_matrix(A) if sparse else A

    Xm, ym = make_classification(900, 12, n_informative=6, n_classes=4, flip_y=0.1, random_state=3)
    X, Xt = rows(Xm[:600]), rows(Xm[600:])
    K = np.asarray((Xt @ X.T).todense()) if sparse else Xt @ X.T  # kernel with every training row
    for labels in (ym[:600] % 2, ym[:600]):
        clf = SVC(kernel="linear", C=0.5, decision_function_shape="ovo").fit(X, labels)
        assert weights_pay("linear", Xt, clf.support_.shape[0], clf.classes_.shape[0])
        Ks = K[:, clf.support_]
        starts = np.concatenate([[0], np.cumsum(clf.n_support_)])
        dec = clf.decision_function(Xt).reshape(Xt.shape[0], -1)
        coef = clf.coef_
        assert isinstance(coef, np.ndarray) and coef.shape == (dec.shape[1], 12) and coef.dtype == np.float64
        k = 0
        for a in range(clf.classes_.shape[0]):
            for b in range(a + 1, clf.classes_.shape[0]):
                sa, sb = slice(starts[a], starts[a + 1]), slice(starts[b], starts[b + 1])
                manual = Ks[:, sa] @ clf.dual_coef_[b - 1, sa] + Ks[:, sb] @ clf.dual_coef_[a, sb] + clf.intercept_[k]
                assert np.allclose(dec[:, k], manual, rtol=1e-10, atol=1e-10)
                k += 1
        votes = clf.predict(Xt)
        assert np.mean(votes == SkSVC(kernel="linear", C=0.5).fit(X, labels).predict(Xt)) >= 0.99
    for est in (SVR(kernel="linear", C=2.0).fit(X, Xm[:600, 0] - 2 * Xm[:600, 1]), OneClassSVM(kernel="linear").fit(X)):
        manual = K[:, est.support_] @ est.dual_coef_[0] + est.intercept_[0]
        out = est.predict(Xt) if isinstance(est, SVR) else est.decision_function(Xt)
        assert np.allclose(out, manual, rtol=1e-10, atol=1e-9)
        assert isinstance(est.coef_, np.ndarray) and est.coef_.shape == (1, 12)


def test_object_string_labels_fit_as_numpy_strings(monkeypatch):
    """Text labels in an object array (a pandas column) fit as the same labels in a NumPy string array, without
    scikit-learn's check of the targets (it sorts the objects: 45 ms at 200,000 rows); objects that are not all
    strings still get the check and its errors."""
    import maxmargin.svm as svm_module

    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 3))
    yu = np.where(X[:, 0] + 0.3 * rng.normal(size=400) > 0, "spam", "ham")
    ref = SVC().fit(X, yu)
    checked = []
    real = svm_module.check_classification_targets
    monkeypatch.setattr(svm_module, "check_classification_targets", lambda y: checked.append(1) or real(y))
    est = SVC().fit(X, yu.astype(object))
    assert checked == [] and est.classes_.dtype == object and list(est.classes_) == ["ham", "spam"]
    np.testing.assert_array_equal(est.dual_coef_, ref.dual_coef_)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    with pytest.raises(ValueError, match="Unknown label type"):
        SVC().fit(X, np.where(yu == "spam", 1.5, 2.5).astype(object))
    assert checked == [1]
