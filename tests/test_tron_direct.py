"""The Newton method's direct steps on few weights (``tron.DIRECT_MAX_WEIGHTS``): the Hessian kept by the rows that
enter or leave the active set, the Cholesky direction, the exact line search, and whole fits against Clarabel,
LIBLINEAR and the CG steps' own optimum."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from test_dual_primal import _squared_qp

from maxmargin import LinearSVC, LinearSVR
from maxmargin.solvers import tron
from maxmargin.solvers._linear_common import linear_data


def _hessian_numpy(X, z, bias):
    """I + X~^T diag(z) X~ (X~: X with the bias column where ``bias`` > 0), dense."""
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if bias > 0:
        Xd = np.hstack([Xd, np.full((Xd.shape[0], 1), bias)])
    return np.eye(Xd.shape[1]) + Xd.T @ (z[:, None] * Xd)


def _unsorted_with_repeats(rng, n, d):
    """CSR rows whose column numbers are not increasing and where some column is stored twice."""
    rows, cols, vals = [], [], []
    for i in range(n):
        k = int(rng.integers(1, 6))
        c = list(rng.choice(d, size=k, replace=False))
        if rng.random() < 0.5:
            c.append(c[0])  # stored twice: the product adds both values
        c = c[::-1]
        rows += [i] * len(c)
        cols += c
        vals += list(rng.normal(size=len(c)))
    indptr = np.searchsorted(np.asarray(rows), np.arange(n + 1))
    return sp.csr_matrix((np.asarray(vals), np.asarray(cols, dtype=np.int32), indptr), shape=(n, d))


@pytest.mark.parametrize("kind", ["sorted", "unit", "unsorted", "dense"])
@pytest.mark.parametrize("bias", [0.0, 1.5])
def test_hessian_kept_by_the_changed_rows_matches_numpy(kind, bias):
    rng = np.random.default_rng(3)
    n, d = 60, 9
    if kind == "unsorted":
        X = _unsorted_with_repeats(rng, n, d)
        assert not X.has_sorted_indices
    elif kind == "dense":
        X = rng.normal(size=(n, d))
        X[rng.random(X.shape) < 0.3] = 0.0
    else:
        X = sp.random(n, d, density=0.4, random_state=4, format="csr")
        if kind == "unit":
            X.data[:] = 1.0
    if sp.issparse(X):
        ld = linear_data(X, bias)
        ld.indices, ld.data, ld.indptr = X.indices, X.data, X.indptr  # (the rows exactly as made above)
    else:
        ld = linear_data(X, bias)
    args = ld.args() + (bool(ld.unit),)
    m = ld.n_weights
    H = np.eye(m)
    zH = np.zeros(n)
    fstate = np.zeros(8)
    z = np.where(rng.random(n) < 0.5, 2.0 * rng.uniform(0.5, 2.0, n), 0.0)
    for step in range(6):
        tron._hessian_to(H, zH, z, *args, fstate)
        want = _hessian_numpy(X, z, bias)
        got = np.triu(H) + np.triu(H, 1).T
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(zH, z)
        # a few rows leave or enter (the changes' path), then many (the build from scratch)
        flip = rng.random(n) < (0.1 if step % 2 == 0 else 0.8)
        z = np.where(flip, np.where(z > 0, 0.0, 2.0 * rng.uniform(0.5, 2.0, n)), z)


def test_direct_direction_solves_and_refuses_an_indefinite_matrix():
    rng = np.random.default_rng(5)
    m = 40
    R = rng.normal(size=(3 * m, m))
    A = np.eye(m) + R.T @ R
    g = rng.normal(size=m)
    s = np.empty(m)
    L = np.empty((m, m))
    assert tron._direct_direction(np.triu(A), L, g, s)
    np.testing.assert_allclose(A @ s, -g, rtol=1e-9, atol=1e-9)
    B = np.eye(m)
    B[7, 7] = -1.0
    assert not tron._direct_direction(B, L, g, s)


@pytest.mark.parametrize("kind, eps", [(0, 0.0), (1, 0.3)])
def test_exact_length_minimises_the_line(kind, eps):
    rng = np.random.default_rng(6)
    n = 300
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0) if kind == 0 else rng.normal(size=n)
    C = rng.uniform(0.1, 3.0, n)
    o = rng.normal(size=n)
    xs = rng.normal(size=n) * 0.5
    xs[rng.random(n) < 0.2] = 0.0
    w = rng.normal(size=8)
    s = rng.normal(size=8)

    def phi(t):
        loss = 0.0
        for i in range(n):
            r, _ = tron._residual(o[i] + t * xs[i], y[i], kind, eps)
            loss += C[i] * r * r
        return 0.5 * (w + t * s) @ (w + t * s) + loss

    # a descent direction: make phi'(0) < 0 by the sign of s
    if (phi(1e-6) - phi(0.0)) > 0:
        s, xs = -s, -xs
    t = tron._exact_length(o, xs, y, C, kind, eps, float(w @ s), float(s @ s))
    ref = minimize_scalar(phi, bounds=(0.0, 50.0), method="bounded", options={"xatol": 1e-12})
    assert t > 0
    assert phi(t) <= ref.fun + 1e-9 * max(1.0, abs(ref.fun))
    assert t == pytest.approx(ref.x, rel=1e-5, abs=1e-7)


def _one_hot(n, levels, seed):
    """Rows of one-hot categorical attributes (a9a's and mushrooms' kind) and a noisy planted score."""
    rng = np.random.default_rng(seed)
    cols, off, score = [], 0, np.zeros(n)
    for L in levels:
        v = rng.choice(L, size=n, p=rng.dirichlet(np.ones(L)))
        score += rng.normal(size=L)[v]
        cols.append(off + v)
        off += L
    C = np.stack(cols, 1)
    X = sp.csr_matrix((np.ones(C.size), C.ravel(), np.arange(0, C.size + 1, C.shape[1])), shape=(n, off))
    y = np.where(score + 0.7 * rng.normal(size=n) > np.median(score), 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("seed", [0, 1])
def test_direct_steps_reach_the_reference_optimum(seed):
    """A tight tol on one-hot rows: the direct steps engage, take fewer Newton iterations than LIBLINEAR's CG steps,
    and end at Clarabel's optimum (both methods, relative 1e-6), with a vanishing gradient (KKT)."""
    X, y = _one_hot(600, [3, 5, 4, 6, 2, 7], seed)
    C = np.full(X.shape[0], 0.8)
    ld = linear_data(X, 1.0)
    direct = tron.solve(ld, y, C, tol=1e-10, parallel=False)
    plain = tron.solve(ld, y, C, tol=1e-10, parallel=False, direct=False)
    assert direct.direct_steps > 0 and plain.direct_steps == 0
    assert direct.status == "converged" and direct.n_iter < plain.n_iter
    best = _squared_qp(X.toarray(), y, C)
    assert direct.objective == pytest.approx(best, rel=1e-6)
    assert plain.objective == pytest.approx(best, rel=1e-6)
    Xb = np.hstack([X.toarray(), np.ones((X.shape[0], 1))])
    r = np.maximum(0.0, 1.0 - y * (Xb @ direct.w))
    grad = direct.w - 2.0 * Xb.T @ (C * y * r)
    assert np.linalg.norm(grad) <= 1e-8 * np.linalg.norm(2.0 * Xb.T @ (C * y))


def test_direct_steps_against_liblinear_and_the_estimator():
    liblinear = pytest.importorskip("liblinear.liblinearutil")
    X, y = _one_hot(1500, [4, 6, 3, 8, 5, 2, 9], 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearSVC(dual=False, tol=1e-8, C=0.5, random_state=0).fit(X, y)
    prob = liblinear.problem(y, X)
    model = liblinear.train(prob, liblinear.parameter("-s 2 -c 0.5 -e 1e-8 -B 1 -q"))
    w_lib = np.array([model.w[j] for j in range(X.shape[1] + 1)]) * (1 if model.label[0] == 1 else -1)
    Xb = np.hstack([X.toarray(), np.ones((X.shape[0], 1))])

    def f(w):
        r = np.maximum(0.0, 1.0 - y * (Xb @ w))
        return 0.5 * w @ w + 0.5 * r @ r

    w_ours = np.concatenate([est.coef_.ravel(), est.intercept_])
    assert est.objective_[0] == pytest.approx(f(w_ours), rel=1e-10)
    assert est.objective_[0] == pytest.approx(f(w_lib), rel=1e-7)
    assert np.mean(np.sign(Xb @ w_ours) == np.sign(Xb @ w_lib)) >= 0.995


def test_direct_steps_squared_epsilon_insensitive():
    """LinearSVR's squared epsilon-insensitive primal on few features: direct steps and Clarabel's optimum."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(400, 6))
    y = X @ rng.normal(size=6) + 0.5 * rng.normal(size=400) + 2.0
    C = np.full(400, 1.3)
    ld = linear_data(X, 1.0)
    fit = tron.solve(ld, y, C, kind="squared_epsilon_insensitive", epsilon=0.2, tol=1e-12, parallel=False)
    plain = tron.solve(
        ld, y, C, kind="squared_epsilon_insensitive", epsilon=0.2, tol=1e-12, parallel=False, direct=False
    )
    best = _squared_qp(X, y, C, epsilon=0.2)
    assert fit.status == "converged" and fit.objective == pytest.approx(best, rel=1e-7)
    assert plain.objective == pytest.approx(best, rel=1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearSVR(loss="squared_epsilon_insensitive", epsilon=0.2, dual=False, C=1.3, tol=1e-12).fit(X, y)
    assert est.objective_[0] == pytest.approx(best, rel=1e-7)


def test_no_direct_steps_over_the_weight_limit(monkeypatch):
    """More weights than ``DIRECT_MAX_WEIGHTS``: LIBLINEAR's iterates, bit for bit the same as with the steps off."""
    X, y = _one_hot(500, [4, 6, 3, 8], 2)
    ld = linear_data(X, 1.0)
    C = np.ones(500)
    monkeypatch.setattr(tron, "DIRECT_MAX_WEIGHTS", ld.n_weights - 1)
    over = tron.solve(ld, y, C, tol=1e-10, parallel=False)
    off = tron.solve(ld, y, C, tol=1e-10, parallel=False, direct=False)
    assert over.direct_steps == 0
    assert over.n_iter == off.n_iter and over.cg_iter == off.cg_iter
    np.testing.assert_array_equal(over.w, off.w)
