"""Primal solvers for the linear kernel: the primal QPs (seed 002 eqs. 7, 8, 2-norm; seed 000 eq. 1),
the hinge-loss subgradient method (eq. 9) and the 0/1 random search (eq. 11)."""

import numpy as np
import pytest
import scipy.sparse as sp

from maxmargin import formulations as F
from maxmargin.kernels import make_kernel
from maxmargin.solvers import primal, qp, random_search, subgradient
from maxmargin.solvers.primal import PrimalProblem

pytest.importorskip("qpsolvers")
LIN = make_kernel("linear")


def data(n=60, d=4, seed=0, sep=1.0):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, d))
    X[:, 0] += sep * y
    return X, y


def separable(n=40, seed=0):
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n // 2), -np.ones(n - n // 2)]
    X = rng.normal(size=(n, 2)) + 3.0 * y[:, None]
    return X, y


def smo_available():
    try:
        from maxmargin.solvers import smo  # noqa: F401
    except ImportError:
        return False
    return True


needs_smo = pytest.mark.skipif(not smo_available(), reason="maxmargin.solvers.smo is not available")


# ------------------------------------------------------------------ primal QP = dual
@needs_smo
@pytest.mark.parametrize("form", ["l1", "l2"])
@pytest.mark.parametrize("C", [0.1, 3.0])
def test_primal_qp_equals_smo_w_and_b(form, C):
    X, y = data(seed=1)
    p = F.fit_binary(X, y, C, LIN, form, "primal-qp")
    d = F.fit_binary(X, y, C, LIN, form, "smo", tol=1e-8)
    np.testing.assert_allclose(p.w, d.w, atol=1e-6 * max(1.0, np.abs(d.w).max()))
    assert p.rho == pytest.approx(d.rho, abs=1e-6)
    assert p.objective == pytest.approx(d.objective, rel=1e-7)  # -P = D at the optimum (strong duality)
    assert p.extra["primal_objective"] == pytest.approx(-d.objective, rel=1e-7)
    # the multipliers of the margin constraints are the dual variables (eqs. 16, 20, 22)
    np.testing.assert_allclose(p.alpha, d.alpha, atol=1e-5 * max(1.0, C))
    np.testing.assert_array_equal(p.alpha > 0, d.alpha > 0)


@needs_smo
def test_hard_primal_equals_hard_dual():
    X, y = separable()
    p = F.fit_binary(X, y, 1.0, LIN, "hard", "primal-qp")
    d = F.fit_binary(X, y, 1.0, LIN, "hard", "smo", tol=1e-9)
    np.testing.assert_allclose(p.w, d.w, rtol=1e-6, atol=1e-9)
    assert p.rho == pytest.approx(d.rho, abs=1e-6)
    assert p.margin == pytest.approx(1.0 / np.linalg.norm(p.w))
    assert d.margin == pytest.approx(p.margin, rel=1e-6)


def test_l2_simplex_primal_equals_its_dual():
    X, y = data(seed=2)
    p = F.fit_binary(X, y, 2.0, LIN, "l2-simplex", "primal-qp")
    d = F.fit_binary(X, y, 2.0, LIN, "l2-simplex", "qp")
    np.testing.assert_allclose(p.w, d.w, atol=1e-7)
    assert p.rho == pytest.approx(d.rho, abs=1e-7)
    assert p.objective == pytest.approx(d.objective, rel=1e-7)
    # the functional margin rho_m of seed 000's primal is mu'H mu at the optimum
    assert p.extra["rho_m"] == pytest.approx(2 * d.objective, rel=1e-6)
    np.testing.assert_allclose(p.alpha, d.alpha, atol=1e-6)


def test_primal_qp_sparse_equals_dense():
    X, y = data(seed=3)
    a = primal.solve(PrimalProblem(X, y, 1.0, "l1"))
    b = primal.solve(PrimalProblem(sp.csr_matrix(X), y, 1.0, "l1"))
    np.testing.assert_allclose(a.w, b.w, atol=1e-8)
    assert a.intercept == pytest.approx(b.intercept, abs=1e-8)


def test_primal_hard_infeasible_and_not_separable():
    X, y = data(seed=4, sep=0.2)
    with pytest.raises(qp.QPInfeasibleError):
        primal.solve(PrimalProblem(X, y, 1.0, "hard"))
    with pytest.raises(F.NotSeparableError, match="not separable"):
        F.fit_binary(X, y, 1.0, LIN, "hard", "primal-qp")


def test_primal_size_limit():
    X, y = data(n=30)
    with pytest.raises(qp.QPTooLargeError, match="at most 20 training rows"):
        primal.solve(PrimalProblem(X, y, 1.0, "l1"), max_n=20)
    with pytest.raises(ValueError, match="primal QP covers"):
        primal.solve(PrimalProblem(X, y, 1.0, "zero-one"))


def test_primal_objective_formulas():
    X, y = data(n=20, seed=5)
    w, b = np.array([0.5, -0.2, 0.1, 0.0]), 0.3
    m = y * (X @ w + b)
    assert PrimalProblem(X, y, 2.0, "l1").objective(w, b) == pytest.approx(
        0.5 * w @ w + 2.0 * np.maximum(0, 1 - m).sum()
    )
    assert PrimalProblem(X, y, 2.0, "l2").objective(w, b) == pytest.approx(
        0.5 * w @ w + 1.0 * (np.maximum(0, 1 - m) ** 2).sum()
    )
    assert PrimalProblem(X, y, 2.0, "zero-one").objective(w, b) == pytest.approx(0.5 * w @ w + 2.0 * (m < 0).sum())


# ------------------------------------------------------------------ subgradient (eq. 9)
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_subgradient_reaches_the_qp_objective(C, seed):
    """Stated tolerance: relative objective error <= 2 * tol (tol = 1e-4), deterministic full batch."""
    X, y = data(n=80, d=5, seed=seed, sep=0.5)
    ref = primal.solve(PrimalProblem(X, y, C, "l1"))
    tol = 1e-4
    fit = F.fit_binary(X, y, C, LIN, "l1", "subgradient", tol=tol)
    p_star = ref.extra["primal_objective"]
    err = (fit.extra["primal_objective"] - p_star) / p_star
    assert -1e-9 <= err <= 2 * tol
    assert fit.alpha is None and fit.w is not None
    assert fit.objective == pytest.approx(-fit.extra["primal_objective"])
    # the reported objective is the primal value of (w, b)
    assert fit.extra["primal_objective"] == pytest.approx(PrimalProblem(X, y, C, "l1").objective(fit.w, -fit.rho))
    agree = np.mean(np.sign(X @ fit.w - fit.rho) == np.sign(X @ ref.w + ref.intercept))
    assert agree >= 0.95


def test_subgradient_stochastic_and_deterministic():
    X, y = data(n=100, seed=2)
    ref = primal.solve(PrimalProblem(X, y, 1.0, "l1")).extra["primal_objective"]
    a = subgradient.solve(PrimalProblem(X, y, 1.0, "l1"), batch_size=20, random_state=3, tol=1e-5)
    b = subgradient.solve(PrimalProblem(X, y, 1.0, "l1"), batch_size=20, random_state=3, tol=1e-5)
    np.testing.assert_array_equal(a.w, b.w)
    assert a.extra["primal_objective"] <= ref * 1.02
    s = subgradient.solve(PrimalProblem(X, y, 1.0, "l1"), max_iter=30, tol=0.0)
    assert s.status == "max_iter" and s.n_iter == 30


def test_best_intercept_is_the_exact_minimiser():
    rng = np.random.default_rng(6)
    for _ in range(20):
        n = 15
        m = rng.normal(size=n)
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
        c = rng.uniform(0.1, 2.0, size=n)
        b = subgradient.best_intercept(m, y, c)

        def h(t):
            return float(c @ np.maximum(0.0, 1.0 - y * (m + t)))

        kinks = y - m
        assert h(b) <= min(h(t) for t in kinks) + 1e-12
        assert h(b) <= min(h(t) for t in np.linspace(kinks.min() - 1, kinks.max() + 1, 201)) + 1e-12


def test_subgradient_rejects_other_formulations():
    X, y = data(n=10)
    with pytest.raises(ValueError, match="hinge"):
        subgradient.solve(PrimalProblem(X, y, 1.0, "l2"))


# ------------------------------------------------------------------ random search (eq. 11)
def test_random_search_zero_one_demonstration():
    X, y = data(n=60, seed=7, sep=2.0)
    C = 1.0
    fit = F.fit_binary(X, y, C, LIN, "zero-one", "random-search", random_state=0)
    again = F.fit_binary(X, y, C, LIN, "zero-one", "random-search", random_state=0)
    np.testing.assert_array_equal(fit.w, again.w)  # deterministic for a seed
    pp = PrimalProblem(X, y, C, "zero-one")
    assert fit.objective == pytest.approx(pp.objective(fit.w, -fit.rho))
    n_err = int(np.sum(y * (X @ fit.w - fit.rho) < 0))
    assert fit.extra["n_errors"] == n_err
    # it finds a low training error: the objective is C #errors + a tiny 1/2 w.w
    hinge = F.fit_binary(X, y, C, LIN, "l1", "primal-qp")
    hinge_err = int(np.sum(y * (X @ hinge.w - hinge.rho) < 0))
    assert n_err <= hinge_err + 2
    assert 0.5 * fit.w @ fit.w < C  # shrinking w is free: the search drives it towards 0
    # its margin is the definition min y f / ||w|| (no formula: nothing maximises it)
    assert fit.margin == pytest.approx(np.min(y * (X @ fit.w - fit.rho)) / np.linalg.norm(fit.w))


def test_random_search_options_and_formulation():
    X, y = data(n=20, seed=8)
    s = random_search.solve(PrimalProblem(X, y, 1.0, "zero-one"), n_candidates=100, n_starts=1, n_local=5)
    assert s.n_iter <= 100 + 5 * 64
    with pytest.raises(ValueError, match="zero-one"):
        random_search.solve(PrimalProblem(X, y, 1.0, "l1"))
