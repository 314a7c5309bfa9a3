"""The nu-variant of SMO (two equality constraints), NuSVC and NuSVR against
independent references: a QP solver with both constraints, scikit-learn, and the
C-SVC that nu-SVC is equivalent to."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, make_classification, make_regression
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import NuSVC as SkNuSVC
from sklearn.svm import NuSVR as SkNuSVR

from maxmargin import SVC, NuSVC, NuSVR
from maxmargin.kernels import make_kernel
from maxmargin.problem import nu_svc_problem, nu_svr_problem
from maxmargin.solvers import batched, smo

#: both solvers with a nu-variant; the batched one also with a working set smaller than n
NU_SOLVERS = {
    "smo": smo.solve,
    "batched": batched.solve,
    "batched-q8": lambda prob, **kw: batched.solve(prob, working_set_size_=8, **kw),
}


def qp_reference_nu(Q, p, y, upper, sums):
    """min 1/2 a'Qa + p'a with sum_{y=+1} a = sums[0], sum_{y=-1} a = sums[1], 0 <= a <= upper
    (an interior-point QP solver: Clarabel, or CVXOPT where Clarabel stops short of 'Solved')."""
    qpsolvers = pytest.importorskip("qpsolvers")
    n = Q.shape[0]
    A = np.vstack([(y > 0).astype(float), (y < 0).astype(float)])
    qp = qpsolvers.Problem(
        sp.csc_matrix(0.5 * (Q + Q.T) + 1e-12 * np.eye(n)),
        p,
        A=sp.csc_matrix(A),
        b=np.asarray(sums, dtype=float),
        lb=np.zeros(n),
        ub=np.asarray(upper, dtype=float),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = qpsolvers.solve_problem(qp, solver="clarabel", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        if not sol.found:
            pytest.importorskip("cvxopt")
            qp.P, qp.A = qp.P.toarray(), qp.A.toarray()
            sol = qpsolvers.solve_problem(qp, solver="cvxopt", abstol=1e-12, reltol=1e-12, feastol=1e-12)
    assert sol.found, "the reference QP solvers failed"
    a = sol.x
    return a, float(0.5 * a @ Q @ a + p @ a)


def _class_data(rng, n=70, d=4, sparse=False):
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.7 * X[:, 1] + 0.6 * rng.normal(size=n) > 0, 1.0, -1.0)
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    return X, y


KERNELS = [("linear", {}), ("rbf", {"gamma": 0.5}), ("poly", {"gamma": 0.3, "degree": 2, "coef0": 1.0})]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernel,kw", KERNELS)
@pytest.mark.parametrize("nu", [0.4, 0.7])
@pytest.mark.parametrize("solver", sorted(NU_SOLVERS))
def test_nu_solver_matches_qp_reference(rng, kernel, kw, sparse, nu, solver):
    X, y = _class_data(rng, sparse=sparse)
    w = rng.uniform(0.5, 2.0, size=y.shape[0])
    prob = nu_svc_problem(X, make_kernel(kernel, X=X, **kw), y, nu, w)
    sums = (prob.alpha0[y > 0].sum(), prob.alpha0[y < 0].sum())
    assert sums[0] == pytest.approx(nu * w.sum() / 2) and sums[1] == pytest.approx(nu * w.sum() / 2)
    sol = NU_SOLVERS[solver](prob, tol=1e-8)
    Q = prob.q_matrix()
    _, ref = qp_reference_nu(Q, prob.p, y, w, sums)
    assert sol.converged
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert sol.objective == pytest.approx(0.5 * sol.alpha @ Q @ sol.alpha, rel=1e-10)
    # both equality constraints held, the box respected
    assert sol.alpha[y > 0].sum() == pytest.approx(sums[0], rel=1e-12)
    assert sol.alpha[y < 0].sum() == pytest.approx(sums[1], rel=1e-12)
    assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= w)
    # per-class KKT: free variables of a class share one gradient value r_c
    G = Q @ sol.alpha
    for c in (1.0, -1.0):
        free = (y == c) & (sol.alpha > 1e-9) & (sol.alpha < w - 1e-9)
        if free.sum() > 1:
            assert np.ptp(G[free]) < 1e-6


@pytest.mark.parametrize("shrinking", [True, False])
def test_nu_solver_shrinking_and_tiny_cache(rng, shrinking):
    X, y = _class_data(rng, n=250)
    prob = nu_svc_problem(X, make_kernel("rbf", gamma=0.3), y, 0.3)
    ref = smo.solve(prob, tol=1e-7)
    tiny = smo.solve(prob, tol=1e-7, cache_size=1e-3, shrinking=shrinking)
    assert tiny.objective == pytest.approx(ref.objective, rel=1e-8)
    assert tiny.extra["r"] == pytest.approx(ref.extra["r"], rel=1e-4)


@pytest.mark.parametrize("kernel,kw", KERNELS[:2])
@pytest.mark.parametrize("solver", sorted(NU_SOLVERS))
def test_nu_svr_solver_matches_qp_reference(rng, kernel, kw, solver):
    X = rng.normal(size=(50, 3))
    z = X @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=50)
    C = 2.0 * rng.uniform(0.5, 1.5, size=50)
    prob = nu_svr_problem(X, make_kernel(kernel, X=X, **kw), z, C, 0.4)
    sol = NU_SOLVERS[solver](prob, tol=1e-8)
    Q = prob.q_matrix()
    sums = (prob.alpha0[:50].sum(), prob.alpha0[50:].sum())
    _, ref = qp_reference_nu(Q, prob.p, prob.y, prob.upper, sums)
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert sol.alpha[:50].sum() == pytest.approx(sums[0]) and sol.alpha[50:].sum() == pytest.approx(sums[1])


def _sk_dual_objective(sk, kern):
    c = np.asarray(sk.dual_coef_).ravel()
    return 0.5 * c @ kern(sk.support_vectors_) @ c


@pytest.mark.parametrize("kernel,kw", KERNELS)
def test_nusvc_against_sklearn_binary(kernel, kw):
    X, y = make_classification(400, 8, n_informative=5, random_state=3, flip_y=0.1)
    Xtr, Xte, ytr = X[:300], X[300:], y[:300]
    # nu well above the margin-error rate (flip_y=0.1): below it r -> 0 and C = 1/r explodes for
    # every solver (LIBSVM then needs 10^8 iterations), a regime where no two solvers agree
    ours = NuSVC(nu=0.5, kernel=kernel, **kw).fit(Xtr, ytr)
    ref = SkNuSVC(nu=0.5, kernel=kernel, **kw).fit(Xtr, ytr)
    kern = make_kernel(kernel, X=Xtr, **kw)
    assert ours.objective_[0] == pytest.approx(_sk_dual_objective(ref, kern), rel=1e-3)
    assert ours.objective_[0] == pytest.approx(_sk_dual_objective(ours, kern), rel=1e-9)
    assert np.mean(ours.predict(Xte) == ref.predict(Xte)) >= 0.995
    scale = np.abs(ref.decision_function(Xtr)).max()
    assert np.allclose(ours.intercept_, ref.intercept_, atol=5e-3 * max(scale, 1))
    assert np.allclose(ours.decision_function(Xte), ref.decision_function(Xte), atol=5e-3 * max(scale, 1))


def test_nusvc_against_sklearn_multiclass_and_weights():
    X, y = load_iris(return_X_y=True)
    w = np.tile([1.0, 2.0, 0.5], 50)
    ours = NuSVC(nu=0.2, tol=1e-6, decision_function_shape="ovo").fit(X, y, sample_weight=w)
    ref = SkNuSVC(nu=0.2, tol=1e-6, decision_function_shape="ovo").fit(X, y, sample_weight=w)
    assert np.array_equal(ours.support_, ref.support_)
    assert np.array_equal(ours.n_support_, ref.n_support_)
    assert np.allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-3 * np.abs(ref.dual_coef_).max())
    assert np.allclose(ours.intercept_, ref.intercept_, atol=1e-3)
    assert np.array_equal(ours.predict(X), ref.predict(X))


def test_nusvc_is_csvc_with_c_equal_one_over_r(rng):
    """Dividing the nu-solution by r gives the C-SVC solution for C = 1/r (LIBSVM's rescaling)."""
    X, y = _class_data(rng, n=120)
    nu = NuSVC(nu=0.4, gamma=0.5, tol=1e-8).fit(X, y)
    C = np.abs(nu.dual_coef_).max()  # some multipliers sit at the bound 1/r
    c = SVC(C=C, gamma=0.5, tol=1e-8).fit(X, y)
    assert np.allclose(nu.decision_function(X), c.decision_function(X), atol=1e-5)
    assert nu.objective_[0] == pytest.approx(0.5 * nu.w_norm_[0] ** 2, rel=1e-9)  # p = 0: 1/2 ||w||^2


def test_nu_bounds_the_fractions(rng):
    X, y = _class_data(rng, n=300)
    for nu in (0.1, 0.3, 0.6):
        clf = NuSVC(nu=nu, gamma=0.5, tol=1e-6).fit(X, y)
        frac_sv = clf.support_.shape[0] / 300
        # margin errors (y f < 1; the rescaled margin is 1, up to the solver's tolerance scaled by 1/r)
        margin_err = np.mean(np.where(y == clf.classes_[1], 1, -1) * clf.decision_function(X) < 1 - 1e-3)
        c = np.abs(clf.dual_coef_[0])
        at_bound = np.sum(c >= c.max() * (1 - 1e-9)) / 300
        assert margin_err <= at_bound <= nu + 1e-9
        assert frac_sv >= nu - 1e-9


def test_nusvr_against_sklearn():
    X, y = make_regression(300, 5, noise=10, random_state=0)
    y = y / y.std()
    for kernel in ("rbf", "linear"):
        ours = NuSVR(nu=0.3, C=3.0, kernel=kernel).fit(X[:250], y[:250])
        ref = SkNuSVR(nu=0.3, C=3.0, kernel=kernel).fit(X[:250], y[:250])
        kern = make_kernel(kernel, X=X[:250])
        c = ref.dual_coef_.ravel()
        sk_obj = 0.5 * c @ kern(ref.support_vectors_) @ c - y[:250][ref.support_] @ c
        assert ours.objective_ == pytest.approx(sk_obj, rel=1e-3)
        diff = np.abs(ours.predict(X[250:]) - ref.predict(X[250:]))
        assert np.mean(diff < 1e-2) >= 0.995
        assert ours.intercept_[0] == pytest.approx(ref.intercept_[0], abs=1e-2)
        # the tube found by the solver: about a fraction nu of points outside it
        res = np.abs(y[:250] - ours.predict(X[:250]))
        assert np.mean(res > ours.epsilon_ + 1e-3) <= 0.3 + 0.02


def test_infeasible_nu_is_a_clear_error():
    X, y = make_classification(60, 4, weights=[0.8], random_state=0)
    frac = 2 * min(np.mean(y == 0), np.mean(y == 1))
    with pytest.raises(ValueError, match=r"nu=0\.9 is infeasible.*nu <= 2 min"):
        NuSVC(nu=0.9).fit(X, y)
    NuSVC(nu=0.95 * frac).fit(X, y)  # just below the limit works
    w = np.where(y == 1, 10.0, 1.0)  # weights change the class sizes
    with pytest.raises(ValueError, match="infeasible"):
        NuSVC(nu=0.95 * frac).fit(X, y, sample_weight=1 / w)


@pytest.mark.parametrize("Est", [NuSVC, NuSVR])
@pytest.mark.parametrize("nu", [0, -0.1, 1.01, np.inf, "half", True])
def test_bad_nu(Est, nu):
    X, y = make_classification(40, 4, random_state=0)
    with pytest.raises(ValueError, match=r"nu must be a number in \(0, 1\]"):
        Est(nu=nu).fit(X, y)


def test_nusvc_sparse_precomputed_and_pickle(rng):
    import pickle

    X, y = _class_data(rng, n=100, sparse=True)
    a = NuSVC(nu=0.3, gamma=0.4, tol=1e-7).fit(X, y)
    b = NuSVC(nu=0.3, gamma=0.4, tol=1e-7).fit(X.toarray(), y)
    assert np.array_equal(a.support_, b.support_)
    # equal up to the solver's tolerance, magnified by the 1/r rescaling
    assert np.allclose(a.decision_function(X), b.decision_function(X.toarray()), atol=1e-4)
    kern = make_kernel("rbf", gamma=0.4)
    Xd = X.toarray()
    pre = NuSVC(nu=0.3, kernel="precomputed", tol=1e-7).fit(kern(Xd, Xd), y)
    assert np.allclose(pre.decision_function(kern(Xd, Xd)), b.decision_function(Xd), atol=1e-4)
    c = pickle.loads(pickle.dumps(a))
    assert np.array_equal(c.predict(X), a.predict(X))


def test_nusvc_in_grid_search_and_pipeline():
    X, y = load_iris(return_X_y=True)
    gs = GridSearchCV(make_pipeline(StandardScaler(), NuSVC()), {"nusvc__nu": [0.1, 0.3]}, cv=3).fit(X, y)
    assert gs.best_score_ > 0.9
    cv = KFold(3, shuffle=True, random_state=0)
    assert cross_val_score(NuSVR(), X[:, :3], X[:, 3], cv=cv).mean() > 0.8


def test_check_estimator_nusvc_nusvr():
    from sklearn.utils.estimator_checks import check_estimator

    weights_reason = (
        "sample weights vs repeated rows: gamma='scale' depends on the repeated rows, and the "
        "default tol=1e-3 gives agreement to about the tolerance, not 1e-7 "
        "(test_integer_weights_equal_repeated_rows_nu checks it with a fixed gamma)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(
            NuSVR(),
            expected_failed_checks={
                "check_sample_weight_equivalence_on_dense_data": weights_reason,
                "check_sample_weight_equivalence_on_sparse_data": weights_reason,
            },
        )
        infeasible = (
            "the check's weights make one class far lighter than the other, so nu=0.5 is "
            "infeasible (nu <= 2 min(n_a, n_b)/(n_a + n_b)) and fit raises ValueError, as it should"
        )
        check_estimator(
            NuSVC(),
            expected_failed_checks={
                "check_sample_weight_equivalence_on_dense_data": infeasible,
                "check_sample_weight_equivalence_on_sparse_data": infeasible,
                "check_class_weight_classifiers": infeasible,
            },
        )


def test_integer_weights_equal_repeated_rows_nu(rng):
    X, y = _class_data(rng, n=60)
    w = rng.integers(0, 4, size=60)
    a = NuSVC(nu=0.3, gamma=0.5, tol=1e-9).fit(X, y, sample_weight=w)
    b = NuSVC(nu=0.3, gamma=0.5, tol=1e-9).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    Xt = rng.normal(size=(30, X.shape[1]))
    assert np.allclose(a.decision_function(Xt), b.decision_function(Xt), atol=1e-5)
    z = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=60)
    c = NuSVR(nu=0.3, gamma=0.5, tol=1e-9).fit(X, z, sample_weight=w)
    d = NuSVR(nu=0.3, gamma=0.5, tol=1e-9).fit(np.repeat(X, w, axis=0), np.repeat(z, w))
    assert np.allclose(c.predict(Xt), d.predict(Xt), atol=1e-5)


def test_nu_svc_on_tiny_kernel_values_does_not_divide_by_zero():
    """Issue 14 (found by tests/test_properties.py): r * r underflowed to 0 for kernel values near 1e-200."""
    from maxmargin import NuSVC

    X = np.array([[-2e-100], [-1e-100]])
    clf = NuSVC(nu=0.1, kernel="linear").fit(X, [0, 1])
    assert np.all(np.isfinite(clf.objective_))
    np.testing.assert_array_equal(clf.predict(X), [0, 1])


@pytest.mark.parametrize("kind", ["nu-svc", "nu-svc-sparse", "nu-svr"])
def test_starting_gradient_by_kernel_rows_equals_blocks_and_q(rng, kind):
    """Small starts take kernel rows through the row cache (smo.INIT_ROWS_MAX_VALUES), larger ones kernel
    blocks: both give G = Q alpha + p and Gbar (the bounded multipliers' part) of the problem's own Q."""
    from maxmargin.kernels.rowcache import RowCache, kernel_data

    if kind == "nu-svr":
        X = rng.normal(size=(60, 3))
        prob = nu_svr_problem(X, make_kernel("rbf", gamma=0.5), X @ np.array([1.0, -2.0, 0.5]), 2.0, 0.37)
    else:
        X, y = _class_data(rng, n=80, sparse=kind.endswith("sparse"))
        prob = nu_svc_problem(X, make_kernel("rbf", gamma=0.5), y, 0.6, rng.uniform(0.5, 2.0, size=80))
    alpha, U = smo.initial_alpha(prob), np.asarray(prob.upper, dtype=np.float64)
    if kind == "nu-svr":  # its start cancels on every data row (alpha = alpha*): any point of the box will do
        alpha = np.where(rng.random(U.shape[0]) < 0.3, U, rng.uniform(0.0, 1.0, U.shape[0]) * U)
    assert np.any(alpha >= U) and np.any((alpha > 0) & (alpha < U))  # both sums have terms
    args = (prob, alpha, prob.y, prob.p, U, prob.shift, np.asarray(prob.index, dtype=np.int64))
    kd, cache = kernel_data(prob.X, prob.kernel), RowCache(prob.X.shape[0], 1.0)
    G_rows, Gbar_rows = smo.init_gradient(*args, cache, kd)
    assert cache.counters[3] > 0  # the rows were computed into the cache
    G_blocks, Gbar_blocks = smo.init_gradient(*args)
    Q = prob.q_matrix()
    np.testing.assert_allclose(G_rows, Q @ alpha + prob.p, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(G_rows, G_blocks, rtol=1e-12, atol=1e-12)
    bounded = np.where(alpha >= U, U, 0.0)
    np.testing.assert_allclose(Gbar_rows, Q @ bounded, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Gbar_rows, Gbar_blocks, rtol=1e-12, atol=1e-12)


def _rho_nu_reference(y, G, alpha, U):
    """LIBSVM's Solver_NU::calculate_rho in NumPy (the compiled smo.compute_rho_nu's reference)."""
    rs = []
    for c in (1.0, -1.0):
        cls = y == c
        up, low = cls & (alpha >= U), cls & (alpha <= 0)
        free = cls & ~up & ~low
        if free.any():
            rs.append(G[free].mean())
            continue
        ub = G[low].min() if low.any() else np.inf
        lb = G[up].max() if up.any() else -np.inf
        rs.append((ub + lb) / 2 if np.isfinite(ub) and np.isfinite(lb) else (ub if np.isfinite(ub) else lb))
    return (rs[0] - rs[1]) / 2, (rs[0] + rs[1]) / 2


@pytest.mark.parametrize("case", ["free", "bounded", "one-side", "zero-bound"])
def test_compute_rho_nu_is_libsvms_rule(rng, case):
    n = 40
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    U = rng.uniform(0.5, 2.0, size=n)
    G = rng.normal(size=n)
    alpha = rng.uniform(0.0, 1.0, size=n) * U
    if case != "free":  # no free multiplier: the middle of the bounded ones' interval
        alpha = np.where(rng.random(n) < 0.5, U, 0.0)
    if case == "one-side":  # class +1 all at zero: the end of the interval that exists
        alpha[y > 0] = 0.0
    if case == "zero-bound":  # U = 0: at both bounds at once (LIBSVM counts it on both sides)
        U[:6] = 0.0
        alpha[:6] = 0.0
    got = smo.compute_rho_nu(y, G, alpha, U)
    np.testing.assert_allclose(got, _rho_nu_reference(y, G, alpha, U), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    "case", ["narrow rows on demand", "wide dense blocks", "sparse", "weights", "duplicates", "linear kernel"]
)
def test_compiled_nu_pairs_equal_the_registry_route_and_libsvm(monkeypatch, case):
    """The nu-variant in compiled code (pair_smo.pair_smo_nu from LIBSVM's start, scaled by 1/r in ovo) gives the
    registry's model (dual coefficients, offsets, objective, ||w||, margin) at a tight tol, and LIBSVM's labels."""
    from maxmargin.solvers import ovo

    rng = np.random.default_rng(7)
    k, per, d = 5, 40, 6
    if case == "wide dense blocks":
        d = ovo.LAZY_MAX_DENSE_D + 16  # rows above it: the pairs on the classes' blocks, not rows on demand
    centers = rng.normal(size=(k, d)) * 2.0
    y = np.repeat(np.arange(k), per)
    X = centers[y] + rng.normal(size=(k * per, d))
    kw = dict(nu=0.3, tol=1e-10, gamma=0.5 / d)
    fit_kw = {}
    if case == "sparse":
        X = sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0))
    elif case == "weights":
        fit_kw["sample_weight"] = rng.uniform(0.5, 2.0, size=y.shape[0])
    elif case == "duplicates":
        X = np.repeat(X[::2], 2, axis=0)  # identical rows of one class, merged (dedup.py) and split again
    elif case == "linear kernel":
        kw = dict(nu=0.3, tol=1e-10, kernel="linear")
    compiled = NuSVC(**kw).fit(X, y, **fit_kw)
    monkeypatch.setattr(NuSVC, "_pairs_compile", lambda self: False)
    registry = NuSVC(**kw).fit(X, y, **fit_kw)
    monkeypatch.undo()
    if case != "duplicates":  # (a merged group's multiplier is split among its rows by dedup.py's rule)
        np.testing.assert_array_equal(compiled.support_, registry.support_)
        np.testing.assert_allclose(compiled.dual_coef_, registry.dual_coef_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(compiled.intercept_, registry.intercept_, rtol=1e-6, atol=1e-7)
    for name in ("objective_", "w_norm_", "margin_"):
        np.testing.assert_allclose(getattr(compiled, name), getattr(registry, name), rtol=1e-6, atol=1e-7)
    assert np.all(np.isnan(compiled.duality_gap_)) and np.all(np.isnan(registry.duality_gap_))
    assert compiled.fit_status_ == 0
    compiled.decision_function_shape = registry.decision_function_shape = "ovo"
    dec = compiled.decision_function(X)
    np.testing.assert_allclose(dec, registry.decision_function(X), rtol=1e-6, atol=1e-6)
    ref = SkNuSVC(decision_function_shape="ovo", **kw).fit(X, y, **fit_kw)
    assert np.mean(compiled.predict(X) == ref.predict(X)) >= 0.99
    if case in ("narrow rows on demand", "wide dense blocks", "sparse", "weights"):
        # (with a linear kernel on 6 features the offsets of LIBSVM's solution and ours may differ: no free
        # multipliers in a class, the middle of an interval that differs with the solution's bound set)
        np.testing.assert_allclose(dec, ref.decision_function(X), atol=1e-4)


def test_compiled_nu_pairs_without_a_margin_name_the_problem():
    """A pair with r <= 0 (identical classes: w = 0) leaves the compiled route; the registry names the problem."""
    X = np.ones((12, 2))
    y = np.repeat([0, 1, 2], 4)
    with pytest.raises(ValueError, match="found no margin"):
        NuSVC(nu=0.5).fit(X, y)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_margin_within_tol_is_never_silent(n_classes):
    """Two classes drawn from one distribution (linear kernel, nu = 0.3): their reduced hulls overlap and r is the
    solver's rounding, ~0 of either sign.  The fit raises (r <= 0) or warns (0 < r <= tol), by the registry (two
    classes) or the compiled route (a third class far away); it never returns that model silently.  Separated
    classes fit without a word."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 5))
    y = np.arange(600) % 2
    if n_classes == 3:
        X = np.vstack([X, rng.normal(size=(300, 5)) + 8.0])
        y = np.concatenate([y, np.full(300, 2)])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            fit = NuSVC(kernel="linear", nu=0.3).fit(X, y)
        except ValueError as error:
            assert "found no margin" in str(error)
        else:
            assert fit.classes_.shape[0] == n_classes
            assert any(
                "nu-SVC's margin r =" in str(w.message) and "between classes 0 and 1" in str(w.message) for w in seen
            )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NuSVC(kernel="linear", nu=0.3).fit(X + 3.0 * y[:, None], y)


@pytest.mark.parametrize("Est,kw", [(SVC, {}), (NuSVC, {"nu": 0.05})])
def test_compiled_pairs_stopped_by_max_iter_warn(Est, kw):
    """The compiled one-vs-one route (ovo.solve_pairs) reports a pair that ran into max_iter as not converged, as
    the pair-by-pair route does: ConvergenceWarning naming max_iter, fit_status_ 1 (before session 29: silent)."""
    from sklearn.datasets import make_blobs
    from sklearn.exceptions import ConvergenceWarning

    X, y = make_blobs(2000, 8, centers=20, cluster_std=2.5, random_state=7)
    with pytest.warns(ConvergenceWarning, match=r"\(max_iter;"):
        model = Est(max_iter=3, **kw).fit(X, y)
    assert model.fit_status_ == 1
    assert model.n_iter_.max() == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert Est(**kw).fit(X, y).fit_status_ == 0
