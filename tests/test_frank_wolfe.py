"""Frank-Wolfe for the L2-SVM on the simplex (seed 000): Listing 3 exactly, every step rule
against an independent QP (cvxopt), the duality-gap certificate, and the memory contract."""

import numpy as np
import pytest
import scipy.spatial as spt

from maxmargin.kernels import Kernel, make_kernel
from maxmargin.solvers.frank_wolfe import STEPS, SimplexProblem, solve

cvxopt = pytest.importorskip("cvxopt")


# ---------------------------------------------------------------- the document's code
# Seed 000 stores points as the *columns* of matX; these are Listings 1-5 with that convention.
def computeLinearKernelMatrix(matX):
    return matX.T @ matX


def computeLinearKernelVector(vecX, matX):
    if vecX.ndim == 1:
        vecX = np.reshape(vecX, (-1, 1))
    return vecX.T @ matX


def squaredEDM(matX, matY):
    return spt.distance.cdist(matX.T, matY.T, "sqeuclidean")


def computeGaussianKernelMatrix(matX, sigma=1.0):
    return np.exp(-0.5 * squaredEDM(matX, matX) / sigma**2)


def fwL2SVM(matH, tmax=1000):
    m, n = matH.shape
    matI = np.eye(n)
    vecM = np.ones(n) / n
    for t in range(tmax):
        indx = np.argmin(matH @ vecM)
        vecM += 2 / (t + 2) * (matI[indx] - vecM)
    return vecM


def fwL2SVM_V2(matH, tmax=1000):
    n = matH.shape[0]
    vecM = np.ones(n) / n
    for t in range(tmax):
        indx = np.argmin(matH @ vecM)
        vecM -= 2 / (t + 2) * vecM
        vecM[indx] += 2 / (t + 2)
    return vecM


def trainL2SVM_H(matK, vecY, C):
    matY = np.outer(vecY, vecY)
    matG = matK * matY
    return matG + matY + np.eye(matK.shape[0]) / C


def runL2SVM(matXtst, matXs, vecYs, vecMs):
    bias = -vecYs @ vecMs
    vecK = computeLinearKernelVector(matXtst, matXs)
    return np.sign((vecK * vecYs) @ vecMs - bias)


# ---------------------------------------------------------------- helpers
def simplex_reference(H):
    """min 1/2 mu'H mu, 1'mu = 1, mu >= 0 with cvxopt (independent of maxmargin)."""
    n = H.shape[0]
    cvxopt.solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    sol = cvxopt.solvers.qp(
        cvxopt.matrix(H),
        cvxopt.matrix(np.zeros(n)),
        cvxopt.matrix(-np.eye(n)),
        cvxopt.matrix(np.zeros(n)),
        cvxopt.matrix(np.ones((1, n))),
        cvxopt.matrix(1.0),
    )
    mu = np.array(sol["x"]).ravel()
    return mu, float(0.5 * mu @ H @ mu)


def data(n=60, d=2, seed=0, shift=1.5):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, d)) + shift * y[:, None]
    return X, y


class RecordingKernel(Kernel):
    """A linear kernel that records the shape of every block it computes."""

    name, code = "linear", 0

    def __init__(self):
        self.shapes = []

    def _from_dot(self, D, X, Z):
        self.shapes.append(D.shape)
        return np.asarray(D, dtype=np.float64)

    def _diag_from_sq(self, sq):
        return sq


# ---------------------------------------------------------------- Listing 3, exactly
@pytest.mark.parametrize("kernel", ["linear", "gaussian"])
@pytest.mark.parametrize("T", [1, 2, 7, 50, 400])
def test_listing3_iterates_reproduced_exactly(kernel, T):
    X, y = data(n=40, seed=3)
    C = 100.0  # Listing 1's default
    matX = X.T
    if kernel == "linear":
        matK = computeLinearKernelMatrix(matX)
        kern = make_kernel("linear")
    else:
        matK = computeGaussianKernelMatrix(matX, 2.0)  # sigma = 2, as in seed 000's figure
        kern = make_kernel("rbf", sigma=2.0, X=X)
    matH = trainL2SVM_H(matK, y, C)
    ref = fwL2SVM(matH, tmax=T)
    sol = solve(SimplexProblem(X, kern, y, C), step="2/(t+2)", tol=0.0, max_iter=T)
    assert sol.n_iter == T
    np.testing.assert_array_equal(sol.alpha, ref)
    # the memory-lean variant of the listing computes the same iterates up to rounding
    np.testing.assert_allclose(fwL2SVM_V2(matH, tmax=T), ref, rtol=0, atol=1e-12)


def test_listing5_predictions_and_bias():
    X, y = data(n=50, seed=4)
    Xt, _ = data(n=30, seed=5)
    C = 10.0
    prob = SimplexProblem(X, make_kernel("linear"), y, C)
    sol = solve(prob, step="2/(t+2)", tol=0.0, max_iter=300)
    mu = sol.alpha
    assert sol.rho == pytest.approx(-(y @ mu))  # b = -y'mu (eq. 7), rho = b
    supps = mu > 0
    pred_doc = runL2SVM(Xt.T, X.T[:, supps], y[supps], mu[supps])
    f = Xt @ X.T @ (mu * y) - sol.rho
    np.testing.assert_array_equal(np.sign(f), pred_doc)


# ---------------------------------------------------------------- every step rule vs the QP
@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_steps_reach_the_qp_optimum_with_a_certified_gap(step, kernel):
    X, y = data(n=40, seed=7, shift=1.0)
    C = 1.0
    kern = make_kernel(kernel, gamma=0.5)
    prob = SimplexProblem(X, kern, y, C)
    mu_ref, f_ref = simplex_reference(prob.q_matrix())
    tol = 1e-4
    sol = solve(prob, step=step, tol=tol, max_iter=300_000)
    if step == "line-search" and not sol.converged:
        # plain FW with line search zig-zags (sublinear); it still must be close
        assert sol.objective <= f_ref * (1 + 1e-3)
        return
    assert sol.converged, sol.status
    assert sol.gap <= tol * sol.objective  # the stopping test, relative
    assert sol.violation == pytest.approx(sol.gap / sol.objective)
    assert f_ref - 1e-12 <= sol.objective <= f_ref + sol.gap + 1e-12  # the gap is a certificate
    assert abs(sol.objective - f_ref) <= 1e-3 * f_ref
    assert sol.alpha.min() >= 0 and sol.alpha.sum() == pytest.approx(1.0, abs=1e-12)
    H = prob.q_matrix()
    np.testing.assert_allclose(sol.grad, H @ sol.alpha, rtol=0, atol=1e-10)


@pytest.mark.parametrize("step", ["away", "pairwise"])
def test_away_and_pairwise_converge_linearly_and_find_the_support(step):
    X, y = data(n=60, seed=8, shift=1.0)
    prob = SimplexProblem(X, make_kernel("linear"), y, 1.0)
    mu_ref, f_ref = simplex_reference(prob.q_matrix())
    sol = solve(prob, step=step, tol=1e-10)
    assert sol.converged
    assert sol.n_iter < 20_000  # linear rate; '2/(t+2)' needs millions for 1e-10
    assert sol.extra["drop_steps"] >= 0
    support_ref = mu_ref > 1e-6 * mu_ref.max()
    np.testing.assert_array_equal(sol.alpha > 0, support_ref)
    np.testing.assert_allclose(sol.alpha, mu_ref, atol=1e-5)


def test_uniform_start_and_vertex_start():
    X, y = data(n=30, seed=9)
    prob = SimplexProblem(X, make_kernel("linear"), y, 1.0)
    s1 = solve(prob, step="pairwise", start="uniform", tol=1e-8)
    s2 = solve(prob, step="pairwise", start="vertex", tol=1e-8)
    assert s1.extra["start"] == "uniform" and s2.extra["start"] == "vertex"
    assert s1.objective == pytest.approx(s2.objective, rel=1e-7)
    assert solve(prob, step="2/(t+2)", tol=0, max_iter=3).extra["start"] == "uniform"


# ---------------------------------------------------------------- memory and cost
def test_one_kernel_row_per_iteration_and_nothing_n_by_n():
    X, y = data(n=80, seed=10)
    kern = RecordingKernel()
    prob = SimplexProblem(X, kern, y, 1.0)
    sol = solve(prob, step="pairwise", tol=1e-6, cache_size=0.001)  # a cache of 2 columns
    n = X.shape[0]
    assert sol.converged
    assert all(not (r == n and c == n) for r, c in kern.shapes), "an n x n block was formed"
    rows = [r for r, c in kern.shapes if c == n]
    assert rows and max(rows) <= 1  # columns come one at a time
    assert sol.extra["cache_misses"] >= 1


def test_tiny_cache_gives_the_same_iterates():
    X, y = data(n=50, seed=11)
    prob = SimplexProblem(X, make_kernel("rbf", gamma=1.0), y, 2.0)
    a = solve(prob, step="away", tol=1e-8, cache_size=200)
    b = solve(prob, step="away", tol=1e-8, cache_size=0.001)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    assert b.extra["cache_misses"] > a.extra["cache_misses"]


def test_precomputed_kernel_equals_linear():
    X, y = data(n=40, seed=12)
    lin = solve(SimplexProblem(X, make_kernel("linear"), y, 1.0), step="pairwise", tol=1e-9)
    pre = solve(SimplexProblem(X @ X.T, make_kernel("precomputed"), y, 1.0), step="pairwise", tol=1e-9)
    assert pre.objective == pytest.approx(lin.objective, rel=1e-9)
    np.testing.assert_allclose(pre.alpha, lin.alpha, atol=1e-9)


def test_sparse_input():
    import scipy.sparse as sp

    X, y = data(n=40, seed=13)
    dense = solve(SimplexProblem(X, make_kernel("linear"), y, 1.0), step="pairwise", tol=1e-9)
    sparse = solve(SimplexProblem(sp.csr_matrix(X), make_kernel("linear"), y, 1.0), step="pairwise", tol=1e-9)
    assert sparse.objective == pytest.approx(dense.objective, rel=1e-9)


# ---------------------------------------------------------------- control
def test_max_iter_callback_and_time_limit():
    X, y = data(n=40, seed=14)
    prob = SimplexProblem(X, make_kernel("linear"), y, 1.0)
    s = solve(prob, step="2/(t+2)", tol=1e-12, max_iter=50)
    assert s.status == "max_iter" and not s.converged and s.n_iter == 50
    seen = []

    def cb(info):
        seen.append(info)
        return False

    s = solve(prob, step="2/(t+2)", tol=1e-12, max_iter=10_000, callback=cb, callback_info={"subproblem": 0}, chunk=100)
    assert s.status == "callback" and s.n_iter == 100
    assert {"iteration", "objective", "violation", "tol", "elapsed", "subproblem"} <= set(seen[0])
    s = solve(prob, step="2/(t+2)", tol=1e-15, max_iter=10**9, time_limit=0.05)
    assert s.status == "time_limit"
    assert s.gap == pytest.approx(float(s.grad @ s.alpha - s.grad.min()))


def test_bad_arguments():
    X, y = data(n=10)
    prob = SimplexProblem(X, make_kernel("linear"), y, 1.0)
    with pytest.raises(ValueError, match="step must be one of"):
        solve(prob, step="1/t")
    with pytest.raises(ValueError, match="start"):
        solve(prob, start="middle")
    with pytest.raises(ValueError, match="C must be positive"):
        SimplexProblem(X, make_kernel("linear"), y, 0.0)
