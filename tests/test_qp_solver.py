"""The QP solver (qpsolvers + Clarabel) against cvxopt called directly, its offset, cleaning,
size limit and failure modes."""

import numpy as np
import pytest

from maxmargin.kernels import make_kernel
from maxmargin.problem import DualProblem, csvc_problem
from maxmargin.solvers import qp
from maxmargin.solvers.frank_wolfe import SimplexProblem

cvxopt = pytest.importorskip("cvxopt")
pytest.importorskip("qpsolvers")


def cvxopt_dual(Q, p, y, upper):
    """min 1/2 a'Qa + p'a, y'a = 0, 0 <= a <= upper, by cvxopt (as seeds 003 and 004 do)."""
    n = Q.shape[0]
    fin = np.isfinite(upper)
    G = np.vstack([-np.eye(n), np.eye(n)[fin]])
    h = np.r_[np.zeros(n), upper[fin]]
    cvxopt.solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    sol = cvxopt.solvers.qp(
        cvxopt.matrix(Q),
        cvxopt.matrix(p),
        cvxopt.matrix(G),
        cvxopt.matrix(h),
        cvxopt.matrix(y.reshape(1, -1)),
        cvxopt.matrix(0.0),
    )
    a = np.array(sol["x"]).ravel()
    return a, float(0.5 * a @ Q @ a + p @ a)


def data(n=50, d=3, seed=0, sep=1.0):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, d)) + sep * y[:, None] * np.r_[1.0, np.zeros(d - 1)]
    return X, y


def problems(X, y, kernel, C):
    return {
        "l1": csvc_problem(X, kernel, y, C),
        "l2": csvc_problem(X, kernel, y, C, shift=1.0 / C, hard=True),
    }


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
@pytest.mark.parametrize("C", [0.1, 10.0])
@pytest.mark.parametrize("form", ["l1", "l2"])
def test_matches_cvxopt(kernel, C, form):
    X, y = data(seed=1)
    kern = make_kernel(kernel, gamma=0.5, degree=2, coef0=1.0)
    prob = problems(X, y, kern, C)[form]
    sol = qp.solve(prob)
    Q = prob.q_matrix()
    a_ref, f_ref = cvxopt_dual(Q, prob.p, y, prob.upper)
    assert sol.objective == pytest.approx(f_ref, rel=1e-7)
    np.testing.assert_allclose(sol.alpha, a_ref, atol=1e-5 * max(1.0, a_ref.max()))
    assert sol.extra["backend"] == "clarabel"
    # feasibility, exactly on the bounds after cleaning
    assert abs(y @ sol.alpha) <= 1e-7 * max(1.0, sol.alpha.sum())
    assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= prob.upper)
    np.testing.assert_allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-10)


def test_hard_margin_matches_cvxopt_and_seed_003_example():
    # seed 003's CSV example: y,x1,x2 / 1,1,5 / 1,2,4 / -1,2,2 / -1,4,4 -> predictions 1, 1, -1, -1
    X = np.array([[1.0, 5.0], [2.0, 4.0], [2.0, 2.0], [4.0, 4.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    prob = csvc_problem(X, make_kernel("linear"), y, 1.0, hard=True)
    sol = qp.solve(prob)
    a_ref, f_ref = cvxopt_dual(prob.q_matrix(), prob.p, y, prob.upper)
    assert sol.objective == pytest.approx(f_ref, rel=1e-8)
    f = X @ (X.T @ (sol.alpha * y)) - sol.rho
    np.testing.assert_array_equal(np.sign(f), [1, 1, -1, -1])
    # "three support vectors (the last three points)"
    np.testing.assert_array_equal(sol.alpha > 0, [False, True, True, True])
    np.testing.assert_allclose(y[sol.alpha > 0] * f[sol.alpha > 0], 1.0, atol=1e-8)


@pytest.mark.parametrize("form", ["l1", "l2"])
def test_rho_is_the_kkt_offset(form):
    X, y = data(seed=2)
    C = 1.0
    prob = problems(X, y, make_kernel("rbf", gamma=1.0), C)[form]
    sol = qp.solve(prob)
    # rho is the multiplier of y'alpha = 0 (sign convention of qpsolvers: rho = -nu)
    assert sol.rho == pytest.approx(-sol.extra["eq_multiplier"][0], abs=1e-7)
    a, G = sol.alpha, sol.grad
    yG = y * G
    free = (a > 0) & (a < prob.upper)
    assert free.any()
    np.testing.assert_allclose(yG[free], sol.rho, atol=1e-7)
    # KKT at the bounds: -yG <= -rho on I_up, >= on I_low
    up = ((y > 0) & (a < prob.upper)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < prob.upper))
    assert np.max(-yG[up]) <= -sol.rho + 1e-7
    assert np.min(-yG[low]) >= -sol.rho - 1e-7
    assert sol.violation <= 1e-6


def test_simplex_problem_matches_cvxopt():
    X, y = data(seed=3)
    prob = SimplexProblem(X, make_kernel("linear"), y, 2.0)
    H = prob.q_matrix()
    n = H.shape[0]
    cvxopt.solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    ref = cvxopt.solvers.qp(
        cvxopt.matrix(H),
        cvxopt.matrix(np.zeros(n)),
        cvxopt.matrix(-np.eye(n)),
        cvxopt.matrix(np.zeros(n)),
        cvxopt.matrix(np.ones((1, n))),
        cvxopt.matrix(1.0),
    )
    mu = np.array(ref["x"]).ravel()
    sol = qp.solve(prob)
    assert sol.objective == pytest.approx(0.5 * mu @ H @ mu, rel=1e-7)
    assert sol.alpha.sum() == pytest.approx(1.0) and sol.alpha.min() >= 0
    assert sol.rho == pytest.approx(-(y @ sol.alpha))  # b = -y'mu (seed 000, eq. 7)
    assert sol.gap <= 1e-5 * sol.objective


def test_support_set_is_exact_after_cleaning():
    X, y = data(n=80, seed=4)
    prob = csvc_problem(X, make_kernel("linear"), y, 1.0)
    sol = qp.solve(prob)
    a, yG = sol.alpha, y * sol.grad
    # every zero alpha is really at the lower bound: y_i f(x_i) >= 1 there (to the QP's accuracy)
    yf = (sol.grad + 1.0) - y * sol.rho  # y_i f(x_i) = (Q alpha)_i - y_i rho
    assert np.all(yf[a == 0] >= 1 - 1e-7)
    assert np.all(yf[a == prob.upper] <= 1 + 1e-7)
    free = (a > 0) & (a < prob.upper)
    np.testing.assert_allclose(yf[free], 1.0, atol=1e-7)
    np.testing.assert_allclose(yG[free], sol.rho, atol=1e-7)


def test_clean_alpha_rules():
    upper = np.array([1.0, 1.0, 1.0, np.inf])
    a = np.array([1e-12, 0.5, 1 - 1e-12, 3.0])
    np.testing.assert_array_equal(qp.clean_alpha(a, upper), [0.0, 0.5, 1.0, 3.0])
    # complementarity: alpha_i < r_i -> 0 (r = G - y rho is the reduced gradient)
    y = np.array([1.0, 1.0, -1.0, -1.0])
    a = np.array([1e-6, 0.5, 0.5, 0.0])
    G = np.array([0.1, 0.0, 0.0, 0.2])
    out = qp.clean_alpha(a, np.full(4, 1.0), y, G)
    assert out[0] == 0.0 and out[1] == 0.5


def test_size_limit_refuses_with_a_clear_message():
    X, y = data(n=30)
    prob = csvc_problem(X, make_kernel("linear"), y, 1.0)
    with pytest.raises(qp.QPTooLargeError, match="accepts at most 20 dual variables; this problem has 30"):
        qp.solve(prob, max_n=20)
    assert qp.solve(prob, max_n=None).converged
    assert qp.MAX_QP_VARIABLES == 3000
    with pytest.raises(qp.QPTooLargeError, match="solver='smo'"):
        qp.check_size(3001)


def test_unbounded_hard_margin_dual_raises():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2))
    y = np.where(rng.random(30) < 0.5, 1.0, -1.0)
    prob = csvc_problem(X, make_kernel("linear"), y, 1.0, hard=True)
    with pytest.raises(qp.QPUnboundedError, match="unbounded"):
        qp.solve(prob)


@pytest.mark.parametrize("backend", ["osqp", "cvxopt"])
def test_fallback_backends_agree(backend):
    X, y = data(n=40, seed=6)
    prob = csvc_problem(X, make_kernel("linear"), y, 1.0)
    ref = qp.solve(prob, backend="clarabel")
    sol = qp.solve(prob, backend=backend)
    assert sol.extra["backend"] == backend
    assert sol.objective == pytest.approx(ref.objective, rel=1e-5)


def test_unknown_backend_fails_clearly():
    X, y = data(n=10)
    with pytest.raises(qp.QPError, match="no QP backend"):
        qp.solve(csvc_problem(X, make_kernel("linear"), y, 1.0), backend="gurobi")


def test_nu_constraints_hold_per_class_sums():
    X, y = data(n=40, seed=7)
    n = y.size
    alpha0 = np.where(y > 0, 0.3 / (y > 0).sum(), 0.3 / (y < 0).sum())
    prob = DualProblem(
        X=X,
        kernel=make_kernel("linear"),
        y=y,
        p=np.zeros(n),
        upper=np.full(n, 1.0 / n),
        index=np.arange(n),
        shift=np.zeros(n),
        alpha0=alpha0,
        nu_constraints=True,
    )
    sol = qp.solve(prob)
    assert sol.alpha[y > 0].sum() == pytest.approx(0.3, abs=1e-8)
    assert sol.alpha[y < 0].sum() == pytest.approx(0.3, abs=1e-8)
