"""maxmargin.SVR (and the shared regression machinery) against independent references:
the QP reference on the 2n-variable dual, scikit-learn's SVR, and cross-checks between paths."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation, qp_reference
from sklearn.datasets import load_diabetes, make_regression
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVR as SkSVR

from maxmargin import SVR, NuSVR
from maxmargin.kernels import make_kernel
from maxmargin.problem import svr_problem
from maxmargin.solvers import smo

KERNELS = [
    ("linear", {}),
    ("rbf", {"gamma": 0.5}),
    ("poly", {"gamma": 0.3, "degree": 2, "coef0": 1.0}),
]


def _data(rng, n=60, d=3, sparse=False):
    X = rng.normal(size=(n, d))
    z = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    if sparse:
        X[rng.random(X.shape) < 0.4] = 0.0
        X = sp.csr_matrix(X)
    return X, z


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernel,kw", KERNELS)
@pytest.mark.parametrize("weighted", [False, True])
def test_svr_dual_matches_qp_reference(rng, kernel, kw, sparse, weighted):
    X, z = _data(rng, sparse=sparse)
    C = 3.0 * (rng.uniform(0.2, 2.0, size=z.shape[0]) if weighted else np.ones(z.shape[0]))
    prob = svr_problem(X, make_kernel(kernel, X=X, **kw), z, C, 0.1)
    sol = smo.solve(prob, tol=1e-8)
    Q, p = prob.q_matrix(), prob.p
    _, ref = qp_reference(Q, p, prob.y, prob.upper)
    assert sol.converged
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert kkt_violation(Q, p, prob.y, prob.upper, sol.alpha) < 1e-7
    assert abs(prob.y @ sol.alpha) < 1e-9
    n = z.shape[0]
    # alpha_i alpha_i^* = 0 at the optimum (epsilon > 0): one of the pair is zero
    assert np.max(np.minimum(sol.alpha[:n], sol.alpha[n:])) < 1e-9
    # the estimator reports the same optimum and its f(x) = beta' K - rho
    est = SVR(kernel=kernel, C=3.0, epsilon=0.1, tol=1e-8, **kw).fit(X, z, sample_weight=C / 3.0)
    assert est.objective_ == pytest.approx(ref, rel=1e-6)
    beta = sol.alpha[:n] - sol.alpha[n:]
    K = make_kernel(kernel, X=X, **kw)(X, X)
    assert np.allclose(est.predict(X), K @ beta - sol.rho, atol=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_batched_solver_serves_svr(rng, sparse):
    """The batched working-set solver on the same 2n-variable dual (index = [0..n-1, 0..n-1])."""
    X, z = _data(rng, n=150, sparse=sparse)
    w = rng.uniform(0.5, 2.0, size=150)
    smo_fit = SVR(C=3.0, gamma=0.5, epsilon=0.05, tol=1e-8).fit(X, z, sample_weight=w)
    batched = SVR(C=3.0, gamma=0.5, epsilon=0.05, tol=1e-8, solver="batched").fit(X, z, sample_weight=w)
    prob = svr_problem(X, make_kernel("rbf", gamma=0.5), z, 3.0 * w, 0.05)
    _, ref = qp_reference(prob.q_matrix(), prob.p, prob.y, prob.upper)
    assert batched.objective_ == pytest.approx(ref, rel=1e-6)
    assert np.allclose(batched.predict(X), smo_fit.predict(X), atol=1e-5)
    auto = SVR(C=3.0, gamma=0.5, solver="auto").fit(X, z)  # 300 variables: SMO
    assert auto.objective_ == pytest.approx(SVR(C=3.0, gamma=0.5).fit(X, z).objective_)
    with pytest.raises(ValueError, match="cannot be solved by solver='frank-wolfe'"):
        SVR(solver="frank-wolfe").fit(X, z)
    with pytest.raises(ValueError, match="solver must be one of"):
        SVR(solver="newton").fit(X, z)


def _sk_svr_objective(sk, kern, z, epsilon):
    b = sk.dual_coef_.ravel()
    K = kern(sk.support_vectors_)
    return 0.5 * b @ K @ b + epsilon * np.abs(b).sum() - z[sk.support_] @ b


@pytest.mark.parametrize("kernel,kw", KERNELS)
def test_svr_against_sklearn(kernel, kw):
    X, y = make_regression(400, 6, n_informative=4, noise=5.0, random_state=1)
    y = (y - y.mean()) / y.std()
    Xtr, Xte, ytr = X[:300], X[300:], y[:300]
    ours = SVR(kernel=kernel, C=5.0, epsilon=0.1, **kw).fit(Xtr, ytr)
    ref = SkSVR(kernel=kernel, C=5.0, epsilon=0.1, **kw).fit(Xtr, ytr)
    kern = make_kernel(kernel, X=Xtr, **kw)
    assert ours.objective_ == pytest.approx(_sk_svr_objective(ref, kern, ytr, 0.1), rel=1e-3)
    diff = np.abs(ours.predict(Xte) - ref.predict(Xte))
    assert np.mean(diff <= 1e-2) >= 0.995
    assert ours.intercept_[0] == pytest.approx(ref.intercept_[0], abs=1e-2)
    assert ours.intercept_.shape == (1,) and ours.dual_coef_.shape == (1, ours.support_.shape[0])
    assert ours.n_support_.shape == (1,) and ours.n_support_[0] == ours.support_.shape[0]
    assert isinstance(ours.n_iter_, int) and ours.fit_status_ == 0
    if kernel == "linear":
        assert np.allclose(ours.coef_, ref.coef_, atol=1e-2)


def test_svr_diabetes_like_sklearn():
    X, y = load_diabetes(return_X_y=True)
    ours = SVR(C=100.0, epsilon=5.0, gamma="scale").fit(X, y)
    ref = SkSVR(C=100.0, epsilon=5.0, gamma="scale").fit(X, y)
    kern = make_kernel("rbf", gamma="scale", X=X)
    assert ours.objective_ == pytest.approx(_sk_svr_objective(ref, kern, y, 5.0), rel=1e-3)
    diff = np.abs(ours.predict(X) - ref.predict(X))
    assert np.mean(diff <= 0.01 * y.std()) >= 0.995
    assert ours.score(X, y) == pytest.approx(ref.score(X, y), abs=1e-3)


def test_sparse_precomputed_and_callable_equal_dense(rng):
    X, z = _data(rng, n=120, sparse=True)
    a = SVR(C=2, gamma=0.4, tol=1e-7).fit(X, z)
    Xd = X.toarray()
    b = SVR(C=2, gamma=0.4, tol=1e-7).fit(Xd, z)
    assert np.array_equal(a.support_, b.support_)
    assert np.allclose(a.predict(X), b.predict(Xd), atol=1e-6)
    assert sp.issparse(a.support_vectors_)
    kern = make_kernel("rbf", gamma=0.4)
    pre = SVR(kernel="precomputed", C=2, tol=1e-7).fit(kern(Xd, Xd), z)
    Xt = rng.normal(size=(30, 3))
    assert np.allclose(pre.predict(kern(Xt, Xd)), b.predict(Xt), atol=1e-6)
    call = SVR(kernel=lambda A, B: kern(A, B), C=2, tol=1e-7).fit(Xd, z)
    assert np.allclose(call.predict(Xt), b.predict(Xt), atol=1e-6)


def test_integer_weights_equal_repeated_rows(rng):
    X, z = _data(rng, n=70)
    w = rng.integers(0, 4, size=70)
    a = SVR(C=1.5, gamma=0.5, tol=1e-9).fit(X, z, sample_weight=w)
    b = SVR(C=1.5, gamma=0.5, tol=1e-9).fit(np.repeat(X, w, axis=0), np.repeat(z, w))
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-7)
    Xt = rng.normal(size=(40, 3))
    assert np.allclose(a.predict(Xt), b.predict(Xt), atol=1e-6)
    assert not np.isin(np.flatnonzero(w == 0), a.support_).any()


def test_epsilon_tube_and_pickle(rng):
    X, z = _data(rng, n=200)
    est = SVR(C=10.0, epsilon=0.2, gamma=0.5, tol=1e-6).fit(X, z)
    res = z - est.predict(X)
    inside = np.abs(res) < 0.2 - 1e-4
    # points strictly inside the tube are not support vectors; points outside are (at the bound)
    assert not np.isin(np.flatnonzero(inside), est.support_).any()
    outside = np.flatnonzero(np.abs(res) > 0.2 + 1e-4)
    coef = dict(zip(est.support_, est.dual_coef_[0]))
    assert all(abs(abs(coef[i]) - 10.0) < 1e-9 for i in outside)
    # a huge epsilon leaves no support vector: f = -rho, the middle of the targets' range
    flat = SVR(epsilon=100.0).fit(X, z)
    assert flat.support_.shape[0] == 0 and np.allclose(flat.predict(X), flat.intercept_[0])
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict(X), est.predict(X))


BAD = [
    (dict(epsilon=-0.1), "epsilon must be"),
    (dict(epsilon=np.inf), "epsilon must be"),
    (dict(epsilon="x"), "epsilon must be"),
    (dict(C=0), "C must be"),
    (dict(C=-1.0), "C must be"),
    (dict(tol=0), "tol"),
    (dict(max_iter=0), "max_iter"),
    (dict(gamma=-1.0), "gamma"),
    (dict(kernel="nope"), "kernel must be"),
    (dict(warm_start="yes"), "warm_start"),
]


@pytest.mark.parametrize("params,msg", BAD)
def test_bad_parameters(params, msg):
    X, z = make_regression(20, 3, random_state=0)
    with pytest.raises(ValueError, match=msg):
        SVR(**params).fit(X, z)


def test_bad_data():
    X, z = make_regression(20, 3, random_state=0)
    with pytest.raises(ValueError, match="non-negative"):
        SVR().fit(X, z, sample_weight=-np.ones(20))
    with pytest.raises(ValueError, match="non-zero"):
        SVR().fit(X, z, sample_weight=np.zeros(20))
    with pytest.raises(ValueError, match="square"):
        SVR(kernel="precomputed").fit(X, z)
    with pytest.raises(ValueError, match="features"):
        SVR().fit(X, z).predict(np.ones((2, 5)))


def test_pipeline_grid_search_cross_val():
    X, y = load_diabetes(return_X_y=True)
    cv = KFold(3, shuffle=True, random_state=0)
    pipe = make_pipeline(StandardScaler(), SVR())
    gs = GridSearchCV(pipe, {"svr__C": [1.0, 100.0], "svr__epsilon": [1.0, 10.0]}, cv=cv).fit(X, y)
    assert gs.best_params_["svr__C"] == 100.0 and gs.best_score_ > 0.3
    assert cross_val_score(NuSVR(C=100.0), X, y, cv=cv).mean() > 0.3


def test_check_estimator_svr():
    from sklearn.utils.estimator_checks import check_estimator

    reason = (
        "sample weights vs repeated rows: gamma='scale' depends on the repeated rows, and the default "
        "tol=1e-3 gives agreement to about the tolerance, not 1e-7 (scikit-learn's SVR fails it alike); "
        "test_integer_weights_equal_repeated_rows checks the equivalence with a fixed gamma at tol=1e-9"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(
            SVR(),
            expected_failed_checks={
                "check_sample_weight_equivalence_on_dense_data": reason,
                "check_sample_weight_equivalence_on_sparse_data": reason,
            },
        )
        check_estimator(SVR(gamma=1.0, tol=1e-10))  # weights = repeated rows, to 1e-7


@pytest.mark.parametrize("estimator", ["SVR", "NuSVR", "OneClassSVM"])
def test_predict_on_sparse_rows_through_the_fused_loop(estimator, monkeypatch):
    """Sparse rows predict through engine.kernel_times (no kernel block stored) once rows x support vectors pass
    SMALL_BLOCK_VALUES: the same values as the kernel blocks (the route below that size), and scikit-learn's."""
    import sklearn.svm

    import maxmargin
    from maxmargin import regression

    rng = np.random.default_rng(11)
    X = sp.random(900, 400, density=0.03, random_state=3, format="csr")
    y = np.asarray(X[:, :20].sum(axis=1)).ravel() + 0.05 * rng.normal(size=900)
    kw = {"SVR": dict(C=3.0, epsilon=0.01), "NuSVR": dict(C=3.0, nu=0.5), "OneClassSVM": dict(nu=0.2)}[estimator]
    kw["tol"] = 1e-8
    ours = getattr(maxmargin, estimator)(**kw)
    ref = getattr(sklearn.svm, estimator)(**kw)
    if estimator == "OneClassSVM":
        ours.fit(X), ref.fit(X)
    else:
        ours.fit(X, y), ref.fit(X, y)
    assert X.shape[0] * ours.support_.shape[0] > regression.SMALL_BLOCK_VALUES
    fused = ours.decision_function(X) if estimator == "OneClassSVM" else ours.predict(X)
    monkeypatch.setattr(regression, "SMALL_BLOCK_VALUES", 1 << 62)  # the kernel blocks
    blocks = ours.decision_function(X) if estimator == "OneClassSVM" else ours.predict(X)
    np.testing.assert_allclose(fused, blocks, rtol=1e-12, atol=1e-12)
    expected = ref.decision_function(X) if estimator == "OneClassSVM" else ref.predict(X)
    np.testing.assert_allclose(fused, expected, rtol=1e-5, atol=1e-5)
