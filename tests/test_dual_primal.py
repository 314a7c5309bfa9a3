"""Squared-loss dual solvers that hand over to the primal Newton method when they stall (LIBLINEAR >= 2.42):
the switched solution against liblinear-official and against TRON alone, the recovered dual variables, and
the cases where no switch may happen."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import seed_liblinear
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning

from maxmargin import LinearSVC, LinearSVR
from maxmargin.solvers import dual_cd, dual_primal, tron
from maxmargin.solvers._linear_common import all_dots, linear_data

liblinearutil = pytest.importorskip("liblinear.liblinearutil")


def _unscaled(n=1500, seed=0):
    """Unscaled, shifted features: the dual coordinate descent needs far more than 300 epochs here (measured: not
    converged after 100,000 at tol 0.1)."""
    X, y = make_classification(n, 8, n_informative=6, flip_y=0.1, random_state=seed)
    return X * 20 + 5, np.where(y == 1, 1.0, -1.0)


def _svc_objective(w, X, y, C):
    xi = np.maximum(0.0, 1.0 - y * (X @ w[:-1] + w[-1]))
    return 0.5 * w @ w + C * xi @ xi


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_switched_classifier_matches_liblinear(sparse):
    """LinearSVC(dual=True) on data where the dual stalls: after 300 epochs the primal Newton method finishes,
    as liblinear-official's -s 1 does; the objectives agree and the model is converged."""
    X, y = _unscaled()
    Xin = sp.csr_matrix(X) if sparse else X
    est = LinearSVC(dual=True, C=1.0, tol=0.1, random_state=0).fit(Xin, y)
    assert est.n_iter_ > dual_primal.DUAL_EPOCHS  # the epochs and then the Newton iterations
    assert est.fit_status_ == 0
    assert np.isnan(est.duality_gap_).all()  # no dual certificate after a switch
    seed_liblinear()
    m = liblinearutil.train(y, sp.csr_matrix(X), "-s 1 -c 1 -e 0.1 -B 1 -q")
    w_ll = np.r_[np.asarray(m.get_decfun()[0]), m.get_decfun()[1]]
    sign = 1.0 if m.get_labels()[0] == 1 else -1.0
    ours = _svc_objective(np.r_[est.coef_.ravel(), est.intercept_], X, y, 1.0)
    theirs = _svc_objective(sign * w_ll, X, y, 1.0)
    np.testing.assert_allclose(est.objective_[0], ours, rtol=1e-9)
    assert abs(ours - theirs) / theirs < 1e-4, (ours, theirs)
    # and the dual solver alone, 300 epochs, is far from it
    alone = dual_cd.solve_svc(linear_data(X, 1.0), y, np.ones_like(y), squared=True, tol=0.1, max_iter=300, seed=0)
    assert alone.status == "max_iter" and alone.objective > ours * (1 + 1e-3)


def test_switch_reaches_the_primal_optimum_and_recovers_alpha():
    """Forced early (dual_epochs=5): the result equals TRON's from zero at a tight tol, and the recovered
    alpha = 2 C xi gives back w = sum alpha_i y_i x_i (the stationarity condition) to the solver's accuracy."""
    X, y = _unscaled(800, seed=1)
    ld = linear_data(X, 1.0)
    C = np.full(y.shape[0], 0.7)
    fit = dual_primal.l2_svc(ld, y, C, tol=1e-6, max_iter=1000, dual_epochs=5, seed=0)
    assert fit.switched and fit.converged
    ref = tron.solve(ld, y, C, kind="squared_hinge", tol=1e-9, max_iter=1000)
    np.testing.assert_allclose(fit.objective, ref.objective, rtol=1e-9)
    # the objective is 1-strongly convex: f(w) - f* >= ||w - w*||^2 / 2, so equal objectives pin w down
    assert np.linalg.norm(fit.w - ref.w) < 1e-3
    np.testing.assert_allclose(fit.dual, 2 * C * np.maximum(0, 1 - y * all_dots(fit.w, *ld.args())))
    Xb = np.c_[X, np.ones(len(y))]
    # the primal gradient is w - sum alpha_i y_i x_i: TRON stopped when its norm fell below 1e-7 (0.1 * tol) times
    # min(#pos, #neg) / n times its norm at w = 0, which is ||2 sum C_i y_i x_i||
    g0 = np.linalg.norm((2 * C * y) @ Xb)
    assert np.linalg.norm(fit.w - (fit.dual * y) @ Xb) <= 1e-7 * g0
    assert fit.gap is None


def test_switched_regressor_matches_tron():
    X, yr = make_regression(600, 6, noise=5.0, random_state=2)
    X = X * 20 + 5
    ld = linear_data(X, 1.0)
    C = np.ones(yr.shape[0])
    fit = dual_primal.l2_svr(ld, yr, C, 0.5, tol=1e-3, max_iter=1000, dual_epochs=2, seed=0)
    assert fit.switched and fit.converged and fit.n_iter > 2
    ref = tron.solve(ld, yr, C, kind="squared_epsilon_insensitive", epsilon=0.5, tol=1e-10, max_iter=1000)
    np.testing.assert_allclose(fit.objective, ref.objective, rtol=1e-7)
    r = yr - all_dots(fit.w, *ld.args())
    np.testing.assert_allclose(fit.dual, 2 * C * np.sign(r) * np.maximum(0, np.abs(r) - 0.5))
    # through the estimator, the dual named
    est = LinearSVR(loss="squared_epsilon_insensitive", dual=True, epsilon=0.5, tol=1e-3, random_state=0).fit(X, yr)
    assert est.fit_status_ == 0


def test_no_switch_when_the_dual_converges_or_max_iter_is_small():
    X, y = make_classification(400, 5, random_state=3)
    y = np.where(y == 1, 1.0, -1.0)
    ld = linear_data(X, 1.0)
    fit = dual_primal.l2_svc(ld, y, np.ones_like(y), tol=0.1, max_iter=1000, seed=0)
    assert not fit.switched and fit.converged and fit.gap is not None  # well scaled: the dual alone
    Xu, yu = _unscaled(600, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="max_iter"):
            LinearSVC(dual=True, max_iter=100, random_state=0).fit(Xu, yu)  # a small max_iter: the dual, stopped
    est = LinearSVC(dual=True, max_iter=100, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(Xu, yu)
    assert est.n_iter_ == 100 and np.isfinite(est.duality_gap_).all()


def test_callback_stop_in_the_dual_phase_does_not_switch():
    X, y = _unscaled(600, seed=5)
    ld = linear_data(X, 1.0)
    fit = dual_primal.l2_svc(ld, y, np.ones_like(y), tol=0.1, max_iter=1000, seed=0, callback=lambda info: False)
    assert fit.status == "callback" and not fit.switched
