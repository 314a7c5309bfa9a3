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
    args = ld.args() + (bool(ld.unit), False)
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


def _random_problem(rng, kind):
    """Rows of one of four kinds nobody tuned on (correlated Gaussian, columns scaled over e^-3..e^3, 80% zeros as
    CSR, one-hot) and a planted score with noise."""
    n, d = int(rng.integers(150, 400)), int(rng.integers(4, 30))
    if kind == "onehot":
        levels = rng.integers(2, 6, size=max(2, d // 4))
        codes = np.stack([rng.integers(0, L, n) for L in levels], 1) + np.r_[0, np.cumsum(levels)[:-1]]
        X = sp.csr_matrix(
            (np.ones(codes.size), codes.ravel(), np.arange(0, codes.size + 1, codes.shape[1])), shape=(n, levels.sum())
        )
        score = X @ rng.normal(size=X.shape[1])
    else:
        X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.4 * rng.normal(size=(d, d)) / np.sqrt(d))
        if kind == "scaled":
            X *= np.exp(rng.uniform(-3, 3, d))
        if kind == "sparse":
            X[rng.random(X.shape) < 0.8] = 0.0
            X = sp.csr_matrix(X)
        score = X @ rng.normal(size=d)
    score = np.asarray(score).ravel()
    return X, (score - score.mean()) / (score.std() + 1e-12) + rng.uniform(0.1, 1.0) * rng.normal(size=n)


@pytest.mark.parametrize("seed", range(8))
def test_direct_steps_from_the_first_iteration_on_random_problems(seed, monkeypatch):
    """The switch forced after the first iteration (``DIRECT_SWITCH`` 0, ``DIRECT_MIN_CG`` 0), so that the kept
    Hessian, the Cholesky steps and the exact line search carry whole fits: random rows of four kinds, per-row C
    over three decades (sample weights), classification and regression (the bias a feature) -- Clarabel's
    optimum (relative 1e-7) and a vanishing gradient.  (Session 68 ran 300 such problems against the
    steps-off fit at tol 1e-10, with float32 input, multi-class, intercept scaling and warm starts along C paths:
    no difference beyond the tolerances.)"""
    monkeypatch.setattr(tron, "DIRECT_SWITCH", 0.0)
    monkeypatch.setattr(tron, "DIRECT_MIN_CG", 0)
    rng = np.random.default_rng(100 + seed)
    X, score = _random_problem(rng, ["gauss", "scaled", "sparse", "onehot"][seed % 4])
    n = X.shape[0]
    C = np.exp(rng.uniform(np.log(0.01), np.log(10.0), n)) * float(np.exp(rng.uniform(-2, 2)))
    regression = seed >= 4
    y = score * 3.0 if regression else np.where(score > np.median(score), 1.0, -1.0)
    eps = 0.1 if regression else None
    bias = 1.0
    ld = linear_data(X, bias)
    kind = "squared_epsilon_insensitive" if regression else "squared_hinge"
    fit = tron.solve(ld, y, C, kind=kind, epsilon=eps or 0.0, tol=1e-12, parallel=False)
    assert fit.direct_steps > 0 and fit.status == "converged"
    Xd = X.toarray() if sp.issparse(X) else X
    best = _squared_qp(Xd, y, C, epsilon=eps)
    assert fit.objective == pytest.approx(best, rel=1e-7)
    Xb = np.hstack([Xd, np.ones((n, 1))])
    o = Xb @ fit.w
    if regression:
        r = np.sign(o - y) * np.maximum(np.abs(o - y) - eps, 0.0)
        grad = fit.w + 2.0 * Xb.T @ (C * r)
        g0 = 2.0 * Xb.T @ (C * np.sign(y) * np.maximum(np.abs(y) - eps, 0.0))
    else:
        r = np.maximum(0.0, 1.0 - y * o)
        grad = fit.w - 2.0 * Xb.T @ (C * y * r)
        g0 = 2.0 * Xb.T @ (C * y)
    assert np.linalg.norm(grad) <= 1e-8 * np.linalg.norm(g0)
