"""Crammer-Singer's interior point (solvers/cs_ipm.py): the Newton steps against cvxopt on the same dual, the
switch on unscaled data against an independent primal QP and LIBLINEAR, and the paths around it (no watch at
max_iter <= 300, a failed interior point, samples of no weight)."""

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine

import maxmargin
from maxmargin.solvers import crammer_singer, cs_ipm
from maxmargin.solvers._linear_common import linear_data

cvxopt = pytest.importorskip("cvxopt")
qpsolvers = pytest.importorskip("qpsolvers")


def _cvxopt_qp(P, q, G, h):
    cvxopt.solvers.options.update(show_progress=False, abstol=1e-11, reltol=1e-11, feastol=1e-11)
    sol = cvxopt.solvers.qp(*(cvxopt.matrix(np.asarray(a, dtype=float)) for a in (P, q, G, h)))
    assert sol["status"] == "optimal"
    return np.array(sol["x"]).ravel()


def _primal_qp(V, y, k, C):
    """The Crammer-Singer primal as a QP in (W, xi), solved by Clarabel: min 1/2 |W|^2 + sum C_i xi_i with
    xi_i >= 1 + (w_m - w_{y_i}).v_i for m != y_i and xi_i >= 0.  Returns (W (k, r), objective)."""
    n, r = V.shape
    nv = k * r + n
    P = np.zeros((nv, nv))
    P[: k * r, : k * r] = np.eye(k * r)
    P[k * r :, k * r :] = 1e-12 * np.eye(n)
    q = np.concatenate([np.zeros(k * r), C])
    rows, h = [], []
    for i in range(n):
        for m in range(k):
            if m == y[i]:
                continue
            g = np.zeros(nv)
            g[m * r : (m + 1) * r] += V[i]
            g[y[i] * r : (y[i] + 1) * r] -= V[i]
            g[k * r + i] = -1.0
            rows.append(g)
            h.append(-1.0)
        g = np.zeros(nv)
        g[k * r + i] = -1.0
        rows.append(g)
        h.append(0.0)
    x = qpsolvers.solve_qp(
        P, q, G=np.array(rows), h=np.array(h), solver="clarabel", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10
    )
    W = x[: k * r].reshape(k, r)
    S = V @ W.T
    marg = 1.0 - (np.arange(k)[None, :] == y[:, None]) + S - S[np.arange(n), y][:, None]
    return W, 0.5 * float((W * W).sum()) + float(C @ marg.max(axis=1))


def _dual_objective(V, y, k, beta):
    W = V.T @ cs_ipm._alpha(beta, y, cs_ipm._others(y, k), k)
    return 0.5 * float((W * W).sum()) - float(beta.sum()), W.T


@pytest.mark.parametrize("route", ["numpy", "compiled"])
@pytest.mark.parametrize("data", ["iris", "wine"])
def test_newton_steps_reach_the_qp_optimum(data, route, monkeypatch):
    """cs_qp (NumPy) and _cs_ipm (compiled) on 70 scaled rows against cvxopt on the same dual in beta (bounds and
    per-sample sums): the same objective to 1e-6, the same class weights (unique: the objective is 1-strongly convex
    in W, so |W - W*|^2 <= 2 (f - f*): an objective 1e-7 off allows ~5e-4) to 1e-3 of their largest."""
    X, y = (load_iris if data == "iris" else load_wine)(return_X_y=True)
    idx = np.random.default_rng(0).choice(y.shape[0], 70, replace=False)
    X, y = X[idx] / X.std(axis=0), y[idx]
    k = 3
    V = np.hstack([X, np.ones((70, 1))])
    C = np.full(70, 1.0)
    C[::5] = 3.0
    if route == "numpy":
        monkeypatch.setattr(cs_ipm, "COMPILED", False)
    assert cs_ipm._compiled(70, k, V.shape[1]) == (route == "compiled")
    beta, steps = cs_ipm._interior(V, y, k, C, -1.0)
    assert beta is not None and steps < 40
    beta = cs_ipm._feasible(beta, C)
    # the reference: U^T explicit, H = U U^T, G = [-I; per-sample sums]
    others = cs_ipm._others(y, k)
    N = 70 * (k - 1)
    UT = np.zeros((k * V.shape[1], N))
    r = V.shape[1]
    for i in range(70):
        for j in range(k - 1):
            UT[others[i, j] * r : (others[i, j] + 1) * r, i * (k - 1) + j] -= V[i]
            UT[y[i] * r : (y[i] + 1) * r, i * (k - 1) + j] += V[i]
    G = np.vstack([-np.eye(N), np.kron(np.eye(70), np.ones((1, k - 1)))])
    ref = _cvxopt_qp(UT.T @ UT + 1e-12 * np.eye(N), -np.ones(N), G, np.concatenate([np.zeros(N), C]))
    f, W = _dual_objective(V, y, k, beta)
    f_ref, W_ref = _dual_objective(V, y, k, ref.reshape(70, k - 1))
    assert f == pytest.approx(f_ref, rel=1e-6)
    np.testing.assert_allclose(W, W_ref, atol=1e-3 * np.abs(W_ref).max())


def test_unscaled_wine_reaches_the_optimum():
    """Unscaled wine (columns from 0.1 to 1,680): the epochs stall far from the optimum (after 1,000: 65-80 against
    9.32); the fit switches to the interior point and ends at the primal QP's optimum (Clarabel) to 1e-5, below
    LIBLINEAR's own objective, with coef_ equal to the QP's weights."""
    X, y = load_wine(return_X_y=True)
    m = maxmargin.LinearSVC(multi_class="crammer_singer", random_state=0).fit(X, y)
    V = np.hstack([X, np.ones((X.shape[0], 1))])
    W_ref, f_ref = _primal_qp(V, y, 3, np.ones(X.shape[0]))
    assert float(np.ravel(m.objective_)[0]) == pytest.approx(f_ref, rel=1e-5)
    assert m.n_iter_ < 1000
    np.testing.assert_allclose(np.hstack([m.coef_, m.intercept_[:, None]]), W_ref, atol=1e-3 * np.abs(W_ref).max())
    liblinear = pytest.importorskip("liblinear.liblinearutil")
    model = liblinear.train(y.astype(float), X, "-s 4 -c 1 -B 1 -q")
    W_ll = np.array([[model.get_decfun_coef(f + 1, c) for f in range(X.shape[1] + 1)] for c in range(3)])
    labels = list(model.get_labels())
    W_ll = W_ll[np.argsort(labels)]
    S = V @ W_ll.T
    marg = 1.0 - (np.arange(3)[None, :] == y[:, None]) + S - S[np.arange(y.shape[0]), y][:, None]
    f_ll = 0.5 * float((W_ll * W_ll).sum()) + float(marg.max(axis=1).sum())
    assert float(np.ravel(m.objective_)[0]) < f_ll


def test_no_watch_at_or_below_300_epochs():
    """max_iter <= 300 (LIBLINEAR's dual cap): no watch, the epochs alone, bit for bit crammer_singer.solve."""
    X, y = load_wine(return_X_y=True)
    ld = linear_data(X, 1.0)
    C = np.ones(y.shape[0])
    a = cs_ipm.solve(ld, y, 3, C, tol=0.1, max_iter=300, seed=3)
    b = crammer_singer.solve(ld, y, 3, C, tol=0.1, max_iter=300, seed=3)
    assert a.interior_steps == 0 and a.status == b.status == "max_iter"
    np.testing.assert_array_equal(a.w, b.w)


def test_a_failed_interior_point_leaves_the_epochs(monkeypatch):
    """Where the interior point fails, the epochs go on from the stall to max_iter, as without the switch, and the
    weights stay those of the dual variables."""
    X, y = load_wine(return_X_y=True)
    ld = linear_data(X, 1.0)
    C = np.ones(y.shape[0])
    monkeypatch.setattr(cs_ipm, "scaled_qp", lambda *a: (None, 7))
    fit = cs_ipm.solve(ld, y, 3, C, tol=0.1, max_iter=1000, seed=0)
    assert fit.interior_steps == 7 and fit.status == "max_iter"
    V = np.hstack([X, np.ones((X.shape[0], 1))])
    np.testing.assert_allclose(fit.w, (V.T @ fit.dual).T, rtol=1e-8, atol=1e-8 * np.abs(fit.w).max())


def test_samples_of_no_weight_keep_zero_multipliers():
    """Samples with C = 0 stay out of the interior point (their multipliers 0) and the result is the QP optimum of
    the other samples."""
    X, y = load_wine(return_X_y=True)
    ld = linear_data(X, 1.0)
    C = np.ones(y.shape[0])
    C[::4] = 0.0
    fit = cs_ipm.solve(ld, y, 3, C, tol=0.1, max_iter=1000, seed=0)
    assert fit.interior_steps > 0
    assert np.all(fit.dual[::4] == 0.0)
    keep = C > 0
    V = np.hstack([X, np.ones((X.shape[0], 1))])
    _, f_ref = _primal_qp(V[keep], y[keep], 3, C[keep])
    assert fit.objective == pytest.approx(f_ref, rel=1e-5)


def test_switch_price():
    """The watch: none at max_iter <= 300 or where the interior point would not fit; a deadline that the estimate
    runs past says no switch."""
    X, y = load_wine(return_X_y=True)
    ld = linear_data(X, 1.0)
    assert cs_ipm._watch(ld, 3, 300, True) is None
    assert cs_ipm._watch(ld, 3, 1000, False) is None
    assert cs_ipm._watch(linear_data(np.ones((10, cs_ipm.MAX_ORDER)), 1.0), 3, 1000, True) is None
    stall = cs_ipm._watch(ld, 3, 1000, True, deadline=0.0)  # (perf_counter is past 0 already)
    watch = stall(lambda: (5.0, 0.1, 178, lambda: 1.0))
    assert not watch.worth(100, 178, 900.0, False)
    watch = cs_ipm._watch(ld, 3, 1000, True)(lambda: (5.0, 0.1, 178, lambda: 0.9))
    assert watch.worth(100, 178, 900.0, False)
    watch = cs_ipm._watch(ld, 3, 1000, True)(lambda: (5.0, 0.1, 178, lambda: 0.1))
    assert not watch.worth(100, 178, 900.0, False)  # near the optimum: the epochs go on
