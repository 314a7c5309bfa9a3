"""The interior point for the linear kernel (solvers/ipm.py): against an independent QP solver, SMO and
scikit-learn; the routing of solver='auto'."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation, qp_reference
from sklearn.datasets import make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC as SkSVC
from sklearn.svm import SVR as SkSVR

import maxmargin
from maxmargin import formulations as F
from maxmargin.kernels.objects import make_kernel
from maxmargin.problem import svr_problem
from maxmargin.solvers import ipm


def noisy(n=1200, d=10, seed=3, flip=0.1):
    X, y = make_classification(n, d, n_informative=min(5, d - 2), flip_y=flip, random_state=seed)
    return StandardScaler().fit_transform(X), np.where(y > 0, 1.0, -1.0)


@pytest.mark.parametrize("case", ["l1", "l1-weighted", "l2", "hard", "one-class"])
def test_interior_point_matches_the_reference_qp(case):
    """The Newton iterations alone reach the reference QP's objective (1e-8 relative) on each kind of dual it takes:
    box bounds (per-sample), a diagonal shift (2-norm), no upper bound (hard margin), y'a = delta != 0."""
    rng = np.random.default_rng(0)
    X, y = noisy(n=150, d=4, seed=1)
    n = y.shape[0]
    U, shift, p, delta = np.full(n, 2.0), np.zeros(n), -np.ones(n), 0.0
    if case == "l1-weighted":
        U = rng.uniform(0.1, 5.0, n)
    elif case == "l2":
        U, shift = np.full(n, np.inf), np.full(n, 0.5)
    elif case == "hard":
        X = X + 4.0 * y[:, None] * np.r_[1.0, 0, 0, 0]  # separable
        U = np.full(n, np.inf)
    elif case == "one-class":
        y, p, U, delta = np.ones(n), np.zeros(n), np.ones(n), 0.3 * n
    V = y[:, None] * X
    a, steps = ipm.interior_point(V, y, p, U, shift, delta)
    assert a is not None and steps < ipm.MAX_NEWTON
    Q = V @ V.T + np.diag(shift)
    _, ref = qp_reference(Q, p, y, U, delta)
    obj = 0.5 * a @ Q @ a + p @ a
    assert obj == pytest.approx(ref, rel=1e-8, abs=1e-9)
    assert abs(y @ a - delta) < 1e-7 * max(1.0, delta)
    assert np.all(a >= 0) and np.all(a <= U)


@pytest.mark.parametrize("seed, n, d, C", [(4, 300, 4, 1e3), (1, 300, 4, 1e5), (3, 600, 6, 1e5)])
def test_large_C_keeps_the_interior_points_start(seed, n, d, C):
    """Large C on weighted overlapping rows, where the factor of I + V'E^-1 V failed near the end before the
    proximal term (ipm.REG) and SMO ran from zero: the interior point gives a start, SMO finishes it in a few
    hundred steps, and the objective is the reference QP's."""
    X, y = make_classification(n, d, n_informative=4, n_redundant=0, flip_y=0.1, random_state=seed)
    X, y = StandardScaler().fit_transform(X), np.where(y > 0, 1.0, -1.0)
    U = C * np.random.default_rng(seed).uniform(0.5, 2.0, n)
    V = y[:, None] * X
    a, steps = ipm.interior_point(V, y, -np.ones(n), U, np.zeros(n), 0.0)
    assert a is not None
    fit = F.fit_binary(X, y, U, make_kernel("linear", X=X), "l1", "ipm")
    assert fit.extra["newton_steps"] == steps and fit.n_iter - steps < 1000
    _, ref = qp_reference(V @ V.T, -np.ones(n), y, U)
    assert fit.objective == pytest.approx(ref, rel=1e-7)


@pytest.mark.parametrize("C", [0.05, 1.0, 20.0])
def test_svc_by_ipm_equals_smo_and_libsvm(C):
    """SVC(kernel='linear', solver='ipm'): the objective of SMO run to a tight tolerance, the KKT conditions
    within tol, scikit-learn's (LIBSVM's) decision values and predictions."""
    X, y = noisy(n=1200, d=10)
    fit = maxmargin.SVC(kernel="linear", C=C, solver="ipm").fit(X, y)
    tight = maxmargin.SVC(kernel="linear", C=C, solver="smo", tol=1e-6).fit(X, y)
    assert fit.objective_[0] == pytest.approx(tight.objective_[0], rel=1e-6)
    ref = SkSVC(kernel="linear", C=C, tol=1e-6).fit(X, y)
    np.testing.assert_allclose(fit.decision_function(X), ref.decision_function(X), atol=2e-3)
    assert np.mean(fit.predict(X) == ref.predict(X)) >= 0.999
    # KKT of the solution as returned: the maximal violating pair below tol
    kern = make_kernel("linear", X=X)
    res = F.fit_binary(X, y, C, kern, "l1", "ipm")
    assert res.solver == "ipm" and res.converged
    a = res.alpha
    V = y[:, None] * X
    assert kkt_violation(V @ V.T, -np.ones(len(y)), y, np.full(len(y), C), a) <= 1e-3
    assert abs(a @ y) < 1e-9 * C * len(y)


def test_auto_takes_the_interior_point_for_linear_kernels_on_few_features():
    """solver='auto': the linear kernel on few features and at least MIN_VARIABLES rows goes to 'ipm' (SMO within
    a budget first); an easy problem stays with SMO's solution; other kernels, narrow problems and wide features
    do not."""
    X, y = noisy(n=ipm.MIN_VARIABLES + 200, d=8)
    lin = make_kernel("linear", X=X)
    hard = F.fit_binary(X, y, 10.0, lin, "l1", "auto")
    assert hard.solver == "ipm" and hard.extra["newton_steps"] > 0
    assert hard.extra["smo_budget_steps"] == max(ipm.SMO_FIRST_MIN, ipm.SMO_FIRST_PER_D * X.shape[1])
    smo = F.fit_binary(X, y, 10.0, lin, "l1", "smo", tol=1e-6)
    assert hard.objective == pytest.approx(smo.objective, rel=1e-6)
    far = np.where(y[:, None] > 0, 5.0, -5.0) + 0.1 * X  # SMO converges within the budget
    easy = F.fit_binary(far, y, 1.0, make_kernel("linear", X=far), "l1", "auto")
    assert easy.solver == "ipm" and "newton_steps" not in easy.extra
    assert F.fit_binary(X, y, 1.0, make_kernel("rbf", gamma=0.1), "l1", "auto").solver != "ipm"
    assert F.fit_binary(X[:500], y[:500], 1.0, lin, "l1", "auto").solver != "ipm"
    wide = np.hstack([X] * 9)[:, : ipm.MAX_FEATURES + 1]
    assert F.fit_binary(wide, y, 1.0, make_kernel("linear", X=wide), "l1", "auto").solver != "ipm"


@pytest.mark.parametrize("workers", [1, 2])
def test_multiclass_and_sparse_and_weights_through_auto(workers, monkeypatch):
    """Multi-class one-vs-one pairs of at least MIN_PAIR_ROWS rows take the interior point under 'auto' (not the
    compiled SMO route), on one core or two (with two, one worker's compiled route once took them: 3 classes of
    2,000 rows, 10 features, 30x the time); CSR input and sample weights give the dense fit's model; LIBSVM
    agrees."""
    import maxmargin.svm as svm_module
    from maxmargin.solvers import ovo

    compiled = []
    solve_pairs = ovo.solve_pairs
    monkeypatch.setattr(svm_module, "cores", lambda: workers)
    monkeypatch.setattr(
        ovo,
        "solve_pairs",
        lambda bd, y, C, pairs, **kw: compiled.append(len(pairs)) or solve_pairs(bd, y, C, pairs, **kw),
    )
    X, y = make_classification(3600, 6, n_informative=4, n_classes=3, flip_y=0.1, random_state=5)
    X = StandardScaler().fit_transform(X)
    w = np.random.default_rng(1).uniform(0.5, 2.0, X.shape[0])
    fit = maxmargin.SVC(kernel="linear", C=5.0).fit(X, y, sample_weight=w)
    assert compiled == []
    assert np.all(fit.n_iter_ < 2000)  # SMO alone: 10^4-10^5 steps a pair
    ref = SkSVC(kernel="linear", C=5.0, tol=1e-6).fit(X, y, sample_weight=w)
    assert np.mean(fit.predict(X) == ref.predict(X)) >= 0.995
    np.testing.assert_allclose(fit.intercept_, ref.intercept_, atol=5e-3)
    csr = maxmargin.SVC(kernel="linear", C=5.0).fit(sp.csr_matrix(X), y, sample_weight=w)
    np.testing.assert_allclose(csr.decision_function(X), fit.decision_function(X), atol=2e-3)  # both within tol


def test_svr_and_a_failed_factor():
    """Epsilon-SVR's dual (2n variables) by the interior point equals LIBSVM's; a failed Cholesky factor falls
    back to SMO from zero, same model."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(700, 5))
    z = X @ np.arange(1.0, 6.0) + rng.normal(scale=2.0, size=700)
    fit = maxmargin.SVR(kernel="linear", C=10.0, epsilon=0.5).fit(X, z)
    ref = SkSVR(kernel="linear", C=10.0, epsilon=0.5, tol=1e-6).fit(X, z)
    np.testing.assert_allclose(fit.predict(X), ref.predict(X), atol=5e-3 * np.abs(z).max())
    Xc, yc = noisy(n=1100, d=6)
    kern = make_kernel("linear", X=Xc)
    good = F.fit_binary(Xc, yc, 3.0, kern, "l1", "ipm")
    original = ipm.interior_point
    try:
        ipm.interior_point = lambda *a, **k: (None, 1)
        failed = F.fit_binary(Xc, yc, 3.0, kern, "l1", "ipm")
    finally:
        ipm.interior_point = original
    assert failed.extra["newton_steps"] == 1 and failed.converged
    assert failed.objective == pytest.approx(good.objective, rel=1e-5)


@pytest.mark.parametrize("shared", [False, True])
def test_features_of_shared_rows_equal_the_stacked_matrix(shared):
    """:class:`ipm.Features` on data rows that variables share (SVR: two a row) gives the products, the rank-n
    update and the largest row norm of the stacked, signed matrix V."""
    rng = np.random.default_rng(5)
    Phi = rng.normal(size=(30, 4))
    rows = np.concatenate([np.arange(30), rng.permutation(30)[:20]]) if shared else rng.permutation(30)
    sign = np.where(rng.random(rows.size) < 0.5, -1.0, 1.0)
    V = sign[:, None] * Phi[rows]
    feats = ipm.Features(Phi, rows, sign) if shared else ipm.Features(V)
    u, r, e = rng.normal(size=4), rng.normal(size=rows.size), rng.random(rows.size)
    assert feats.shape == V.shape
    np.testing.assert_allclose(feats.dot(u), V @ u, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(feats.tdot(r), V.T @ r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.triu(feats.gram(e)), np.triu(V.T @ (e[:, None] * V)), rtol=1e-12, atol=1e-12)
    assert feats.largest_square_norm() == pytest.approx(float((V * V).sum(axis=1).max()), rel=1e-14)


def test_svr_poly_by_ipm_shares_its_rows_and_matches_the_qp():
    """SVR's interior point on the polynomial features of its data rows (each shared by two variables) ends at the
    reference QP's objective, and solver='auto' gives SMO a budget scaled by rows per variable (half for SVR)."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(ipm.MIN_VARIABLES // 2 + 100, 3))
    z = X @ np.array([1.0, -2.0, 0.5]) + X[:, 0] * X[:, 1] + rng.normal(scale=0.5, size=X.shape[0])
    kern = make_kernel("poly", degree=2, gamma=0.5, coef0=1.0)
    prob = svr_problem(X, kern, z, 1000.0, 0.3)
    feats = ipm._features(prob)
    assert feats.rows is not None and feats.Phi.shape[0] == X.shape[0]
    sol = ipm.solve(prob, tol=1e-6)
    assert sol.extra["newton_steps"] > 0
    _, ref = qp_reference(prob.q_matrix(), prob.p, prob.y, prob.upper)
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    auto = ipm.solve(prob, smo_first=True, first_solver="batched", tol=1e-3)
    D = ipm.feature_dimension(kern, 3)
    assert auto.extra["smo_budget_steps"] == max(ipm.SMO_FIRST_MIN, ipm.POLY_FIRST_PER_D2 * D * D // 2)


def test_ipm_needs_the_linear_kernel():
    X, y = noisy(n=60, d=4)
    with pytest.raises(ValueError, match="linear kernel only"):
        maxmargin.SVC(kernel="rbf", solver="ipm").fit(X, y)


# ----------------------------------------------------------- the polynomial kernel through its explicit features
@pytest.mark.parametrize(
    "gamma, coef0, degree", [(0.3, 0.0, 2), (0.3, 1.5, 2), (0.2, 0.7, 3), (1.0, 0.0, 1), (0.5, 2.0, 4)]
)
def test_feature_map_gives_the_polynomial_kernel(gamma, coef0, degree):
    X = np.random.default_rng(0).normal(size=(40, 5))
    kern = make_kernel("poly", gamma=gamma, coef0=coef0, degree=degree)
    Phi = ipm.feature_map(X, kern)
    assert Phi.shape == (40, ipm.feature_dimension(kern, 5))
    np.testing.assert_allclose(Phi @ Phi.T, kern(X, X), rtol=1e-12, atol=1e-10)
    np.testing.assert_array_equal(ipm.feature_map(sp.csr_matrix(X), kern), Phi)


@pytest.mark.parametrize("coef0, C", [(0.0, 100.0), (1.0, 10.0)])
def test_poly_svc_by_ipm_equals_the_reference_qp_and_libsvm(coef0, C):
    """SVC(kernel='poly', degree=2, solver='ipm'): the Newton steps on the explicit features, then SMO on the
    kernel's own rows: the reference QP's objective, LIBSVM's decision values."""
    X, y = noisy(n=400, d=5)
    kw = dict(kernel="poly", degree=2, gamma=0.2, coef0=coef0, C=C)
    fit = F.fit_binary(X, y, C, make_kernel("poly", degree=2, gamma=0.2, coef0=coef0), "l1", "ipm")
    assert fit.solver == "ipm" and fit.extra["newton_steps"] > 0 and fit.converged
    Q = y[:, None] * y[None, :] * make_kernel("poly", degree=2, gamma=0.2, coef0=coef0)(X, X)
    _, ref = qp_reference(Q, -np.ones(len(y)), y, np.full(len(y), C))
    assert fit.objective == pytest.approx(ref, rel=1e-6)
    model = maxmargin.SVC(solver="ipm", **kw).fit(X, y)
    sk = SkSVC(tol=1e-6, **kw).fit(X, y)
    np.testing.assert_allclose(model.decision_function(X), sk.decision_function(X), atol=5e-3)


def test_auto_takes_the_interior_point_for_hard_poly_problems_only():
    """solver='auto' with the polynomial kernel: the solver it would take first, within POLY_FIRST_PER_D2 * D^2
    steps; a hard problem (large C on overlapping classes) then goes to the Newton steps, an easy one keeps its
    solution; SVR likewise.  Kernels without a small feature map never do."""
    X, y = noisy(n=ipm.MIN_VARIABLES + 500, d=4)
    hard = F.fit_binary(X, y, 1000.0, make_kernel("poly", degree=2, gamma=0.25), "l1", "auto")
    assert hard.solver == "ipm" and hard.extra["newton_steps"] > 0
    D = ipm.feature_dimension(make_kernel("poly", degree=2, gamma=0.25), 4)
    assert hard.extra["smo_budget_steps"] == max(ipm.SMO_FIRST_MIN, ipm.POLY_FIRST_PER_D2 * D * D)
    ref = SkSVC(kernel="poly", degree=2, gamma=0.25, C=1000.0, tol=1e-6).fit(X, y)
    model = maxmargin.SVC(kernel="poly", degree=2, gamma=0.25, C=1000.0).fit(X, y)
    assert np.mean(model.predict(X) == ref.predict(X)) >= 0.995
    Xc, yc = noisy(n=ipm.MIN_VARIABLES + 500, d=4, flip=0.0)
    far = Xc + 3.0 * yc[:, None]  # well separated (coef0 > 0: x and -x differ), SMO converges within the budget
    easy = F.fit_binary(far, yc, 1000.0, make_kernel("poly", degree=2, gamma=0.25, coef0=1.0), "l1", "auto")
    assert "newton_steps" not in easy.extra and easy.converged
    assert not ipm.pays_poly(X, make_kernel("poly", degree=2, gamma=0.25, coef0=-1.0), X.shape[0])
    assert not ipm.pays_poly(np.hstack([X] * 10), make_kernel("poly", degree=3, gamma=0.25), X.shape[0])
    z = X @ np.arange(1.0, 5.0) + np.random.default_rng(0).normal(size=X.shape[0])
    svr = maxmargin.SVR(kernel="poly", degree=2, gamma=0.25, C=1000.0, epsilon=0.5).fit(X, z)
    sk_svr = SkSVR(kernel="poly", degree=2, gamma=0.25, C=1000.0, epsilon=0.5, tol=1e-6).fit(X, z)
    np.testing.assert_allclose(svr.predict(X), sk_svr.predict(X), atol=1e-2 * np.abs(z).max())


def test_ipm_refuses_kernels_without_a_small_feature_map():
    X, y = noisy(n=60, d=30)
    with pytest.raises(ValueError, match="coef0 >= 0"):
        maxmargin.SVC(kernel="poly", coef0=-1.0, solver="ipm").fit(X, y)
    with pytest.raises(ValueError, match="at most 256 explicit features"):
        maxmargin.SVC(kernel="poly", degree=3, solver="ipm").fit(X, y)
