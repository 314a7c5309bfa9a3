"""The batched working-set solver against SMO and the QP reference."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation, qp_reference

from maxmargin import SVC
from maxmargin.kernels import exp_nonpos, make_kernel
from maxmargin.problem import DualProblem, csvc_problem, svr_problem
from maxmargin.solvers import batched, smo


def _data(rng, n=120, d=4, sparse=False, dup=0):
    X = rng.normal(size=(n, d))
    if dup:
        X[-dup:] = X[:dup]  # duplicate points (same and opposite labels)
    y = np.where(X[:, 0] + 0.6 * X[:, 1] + 0.7 * rng.normal(size=n) > 0, 1.0, -1.0)
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    return X, y


FORMS = {
    "l1": lambda X, k, y, C: csvc_problem(X, k, y, C),
    "l2": lambda X, k, y, C: csvc_problem(X, k, y, C, shift=1.0 / C, hard=True),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize(
    "kernel,kw", [("linear", {}), ("rbf", {"gamma": 0.5}), ("poly", {"gamma": 0.4, "degree": 2, "coef0": 1.0})]
)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("q", [8, 32, 1000])
def test_matches_qp_and_smo(rng, form, kernel, kw, sparse, q):
    X, y = _data(rng, sparse=sparse)
    C = rng.uniform(0.3, 4.0, size=y.shape[0])  # per-sample weights
    k = make_kernel(kernel, X=X, **kw)
    prob = FORMS[form](X, k, y, C)
    sol = batched.solve(prob, tol=1e-8, working_set_size_=q)
    assert sol.converged
    Q = prob.q_matrix()
    _, ref = qp_reference(Q, prob.p, y, prob.upper)
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert kkt_violation(Q, prob.p, y, prob.upper, sol.alpha) < 1e-7
    assert abs(y @ sol.alpha) < 1e-9
    assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= prob.upper)
    assert np.allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-8)
    ref_smo = smo.solve(FORMS[form](X, k, y, C), tol=1e-8)
    assert sol.rho == pytest.approx(ref_smo.rho, abs=1e-5)


@pytest.mark.parametrize("shrinking", [True, False])
def test_duplicates_and_shrinking(rng, shrinking):
    X, y = _data(rng, n=400, dup=40)
    k = make_kernel("rbf", gamma=1.0)
    a = batched.solve(csvc_problem(X, k, y, 10.0), tol=1e-7, working_set_size_=64, shrinking=shrinking)
    b = smo.solve(csvc_problem(X, k, y, 10.0), tol=1e-7)
    assert a.converged
    assert a.objective == pytest.approx(b.objective, rel=1e-6)


def test_non_psd_kernel_terminates(rng):
    X, y = _data(rng, n=300)
    k = make_kernel("sigmoid", gamma=2.0, coef0=1.0)
    sol = batched.solve(csvc_problem(X, k, y, 10.0), tol=1e-3, working_set_size_=32)
    assert sol.status in ("converged", "stalled")
    assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= 10.0 + 1e-12)
    assert abs(y @ sol.alpha) < 1e-8


def test_two_variables_per_point_like_svr(rng):
    """The index map (several variables on one data row) as epsilon-SVR uses it."""
    n = 80
    X = rng.normal(size=(n, 3))
    z = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    eps, C = 0.1, 2.0
    k = make_kernel("rbf", gamma=0.5)
    prob = DualProblem(
        X=X,
        kernel=k,
        y=np.r_[np.ones(n), -np.ones(n)],
        p=np.r_[eps - z, eps + z],
        upper=np.full(2 * n, C),
        index=np.r_[np.arange(n), np.arange(n)],
        shift=np.zeros(2 * n),
    )
    sol = batched.solve(prob, tol=1e-8, working_set_size_=16)
    Q = prob.q_matrix()
    _, ref = qp_reference(Q, prob.p, prob.y, prob.upper)
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert sol.objective == pytest.approx(smo.solve(prob, tol=1e-8).objective, rel=1e-8)


def test_warm_start_reaches_the_same_point(rng):
    X, y = _data(rng, n=300)
    k = make_kernel("rbf", gamma=0.5)
    cold = batched.solve(csvc_problem(X, k, y, 1.0), tol=1e-6, working_set_size_=32)
    prob = csvc_problem(X, k, y, 2.0)
    prob.alpha0 = cold.alpha
    warm = batched.solve(prob, tol=1e-6, working_set_size_=32)
    ref = batched.solve(csvc_problem(X, k, y, 2.0), tol=1e-6, working_set_size_=32)
    assert warm.objective == pytest.approx(ref.objective, rel=1e-7)
    assert warm.n_iter < ref.n_iter


def test_callback_time_limit_and_max_iter(rng):
    X, y = _data(rng, n=2000)
    k = make_kernel("rbf", gamma=0.5)
    sol = batched.solve(csvc_problem(X, k, y, 100.0), tol=1e-6, working_set_size_=16, max_iter=50)
    assert sol.status == "max_iter" and not sol.converged and sol.n_iter <= 50


def test_estimator_uses_it_and_agrees_with_smo(rng):
    X, y = _data(rng, n=600)
    a = SVC(C=3.0, gamma=0.5, solver="batched", tol=1e-6).fit(X, y)
    b = SVC(C=3.0, gamma=0.5, solver="smo", tol=1e-6).fit(X, y)
    assert a.objective_[0] == pytest.approx(b.objective_[0], rel=1e-6)
    assert np.mean(a.predict(X) == b.predict(X)) >= 0.995
    # multi-class through the estimator
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    a = SVC(C=3.0, solver="batched", tol=1e-6).fit(X, y3)
    b = SVC(C=3.0, solver="smo", tol=1e-6).fit(X, y3)
    assert np.allclose(a.objective_, b.objective_, rtol=1e-6)


# ------------------------------------------------------------------ kernel-row back ends
def _kernel_row_cases():
    """Data that takes each path of KernelRows: the compiled loop (<= 8 features),
    BLAS chunks (dense), sparse rows (CSR of low density), the high-dimensional
    sparse product, and the fused rebuild loop (dense <= 64 features)."""
    rng = np.random.default_rng(7)
    dense_small = rng.normal(size=(300, 5))
    dense_mid = rng.normal(size=(300, 20))
    dense_wide = rng.normal(size=(300, 90))
    sparse_low = sp.random(300, 60, density=0.1, format="csr", random_state=3)
    sparse_low.data = rng.normal(size=sparse_low.nnz)
    sparse_high = sp.random(300, 5000, density=0.01, format="csr", random_state=4)
    return {
        "dense_small": dense_small,
        "dense_mid": dense_mid,
        "dense_wide": dense_wide,
        "sparse_low": sparse_low,
        "sparse_high": sparse_high,
    }


KERNELS = [
    ("linear", {}),
    ("rbf", {"gamma": 0.05}),
    ("poly", {"gamma": 0.3, "degree": 3, "coef0": 1.0}),
    ("poly", {"gamma": 0.3, "degree": 0, "coef0": 2.0}),
    ("sigmoid", {"gamma": 0.01, "coef0": -0.5}),
]


@pytest.mark.parametrize("case", sorted(_kernel_row_cases()))
@pytest.mark.parametrize("kernel,kw", KERNELS)
def test_kernel_rows_match_the_kernel(case, kernel, kw):
    X = _kernel_row_cases()[case]
    k = make_kernel(kernel, **kw)
    kr = batched.KernelRows(X, k)
    if case == "sparse_low":
        assert kr.Xs is not None  # the sparse-row path is the one under test
    idx = np.array([0, 5, 17, 299, 42])
    full = k(X[idx], X)
    out = np.full((7, X.shape[0]), np.nan)
    kr.compute(idx, out, dest=np.array([6, 0, 3, 1, 2]))
    np.testing.assert_allclose(out[[6, 0, 3, 1, 2]], full, rtol=1e-12, atol=1e-12)
    # restricted to some columns (a shrunk problem)
    cols = np.array([1, 2, 3, 50, 51, 200, 298])
    kr.set_columns(cols)
    out2 = np.zeros((5, X.shape[0]))
    kr.compute(idx, out2)
    np.testing.assert_allclose(out2[:, : cols.size], full[:, cols], rtol=1e-12, atol=1e-12)
    # the gradient rebuild: K(X[targets], X[rows]) @ coef
    rows = np.arange(0, 300, 3)
    targets = np.arange(1, 300, 2)
    coef = np.random.default_rng(1).normal(size=rows.size)
    np.testing.assert_allclose(kr.times(rows, coef, targets), k(X[targets], X[rows]) @ coef, rtol=1e-10, atol=1e-10)


def test_compiled_exp_is_within_one_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            [0.0, -0.0, -1e-300, -1e-12, -0.5 * np.log(2), -700.0, -707.9],
            -rng.exponential(3.0, size=5000),
            -rng.uniform(0, 700, size=5000),
        ]
    )
    o = x.copy()
    exp_nonpos(o, np.empty(x.size))
    ref = np.exp(x)
    assert np.all(np.abs(o - ref) <= np.spacing(ref))
    # below -708 (never a kernel value that matters) exactly 0, never a subnormal number; -708 itself is normal
    o = np.array([-708.0, -708.0001, -720.0, -750.0, -1e6, -np.inf])
    exp_nonpos(o, np.empty(o.size))
    assert abs(o[0] - np.exp(-708.0)) <= np.spacing(np.exp(-708.0)) and np.all(o[1:] == 0.0)


def test_wide_sparse_rows_on_threads_match_the_kernel(monkeypatch):
    """The inverted-index rows of wide sparse data on Numba's threads (the work threshold set to 0 so that
    the parallel loops run on this small matrix): rows into their destinations, rows against a subset of
    the columns, the gradient rebuild and kernel_times."""
    from maxmargin.kernels import engine

    monkeypatch.setattr(engine, "PARALLEL_MIN_WORK", 0)
    X = _kernel_row_cases()["sparse_high"]
    k = make_kernel("rbf", gamma=0.3)
    kr = batched.KernelRows(X, k)
    assert kr.path == "wide"
    idx = np.array([3, 3, 250, 0, 77])  # a row twice
    out = np.full((6, X.shape[0]), np.nan)
    kr.compute(idx, out, dest=np.array([5, 1, 0, 2, 4]))
    np.testing.assert_allclose(out[[5, 1, 0, 2, 4]], k(X[idx], X), rtol=1e-12, atol=1e-12)
    assert np.isnan(out[3]).all()  # rows not named are left alone
    cols = np.arange(10, 300, 7)
    kr.set_columns(cols)
    out = np.zeros((5, X.shape[0]))
    kr.compute(idx, out)
    np.testing.assert_allclose(out[:, : cols.size], k(X[idx], X[cols]), rtol=1e-12, atol=1e-12)
    rows, targets = np.arange(0, 300, 2), np.arange(1, 300, 4)
    coef = np.linspace(-1.0, 1.0, rows.size)
    ref = k(X[targets], X[rows]) @ coef
    np.testing.assert_allclose(kr.times(rows, coef, targets), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(engine.kernel_times(k, X[targets], X[rows], coef), ref, rtol=1e-10, atol=1e-10)


def test_dense_rows_in_even_chunks(monkeypatch):
    """Fewer than EVEN_BELOW chunks of CHUNK columns are cut into a multiple of CHUNKS_MULTIPLE of like width
    (the cut from the number of columns alone), and the rows so computed on threads are the kernel's."""
    from maxmargin.kernels import engine

    for n in (1000, 1024, 3000, 5000, 16000, 16385, 50000):
        w = engine.chunk_width(n)
        nch = -(-n // w)
        assert w <= engine.CHUNK and (nch - 1) * w < n
        if n >= engine.CHUNKS_MULTIPLE * engine.MIN_CHUNK and -(-n // engine.CHUNK) < engine.EVEN_BELOW:
            assert nch % engine.CHUNKS_MULTIPLE == 0 and w >= engine.MIN_CHUNK
        else:
            assert w == engine.CHUNK
    monkeypatch.setattr(engine, "PARALLEL_MIN_WORK", 0)
    rng = np.random.default_rng(5)
    for d in (5, 40):  # the narrow loop and the BLAS chunks
        X = rng.normal(size=(1100, d))
        k = make_kernel("rbf", gamma=0.1)
        kr = batched.KernelRows(X, k)
        idx = np.array([0, 7, 1099])
        out = np.zeros((3, 1100))
        kr.compute(idx, out)
        np.testing.assert_allclose(out, k(X[idx], X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["sparse_low", "sparse_high", "dense_mid"])
def test_solver_on_each_row_path_matches_qp(case):
    X = _kernel_row_cases()[case][:150]
    rng = np.random.default_rng(2)
    y = np.where(rng.random(150) < 0.5, 1.0, -1.0)
    k = make_kernel("rbf", gamma=0.05)
    prob = csvc_problem(X, k, y, 2.0)
    sol = batched.solve(prob, tol=1e-8, working_set_size_=16)
    Q = prob.q_matrix()
    _, ref = qp_reference(Q, prob.p, y, prob.upper)
    assert sol.converged
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert kkt_violation(Q, prob.p, y, prob.upper, sol.alpha) < 1e-7
    assert np.allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-8)


# ------------------------------------------------------------------ the nu-variant
def test_nu_estimators_take_the_batched_solver(rng):
    from sklearn.datasets import make_regression

    from maxmargin import NuSVC, NuSVR

    X, y = _data(rng, n=300)
    a = NuSVC(nu=0.3, solver="batched", tol=1e-7).fit(X, y)
    b = NuSVC(nu=0.3, solver="smo", tol=1e-7).fit(X, y)
    da, db = a.decision_function(X), b.decision_function(X)
    np.testing.assert_allclose(da, db, atol=1e-4 * np.abs(db).max())  # both at tol 1e-7, then scaled by 1/r
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-6)
    assert np.array_equal(a.predict(X), b.predict(X))
    Xr, yr = make_regression(200, 4, noise=5.0, random_state=0)
    a = NuSVR(nu=0.4, C=10.0, solver="batched", tol=1e-7).fit(Xr, yr)
    b = NuSVR(nu=0.4, C=10.0, solver="smo", tol=1e-7).fit(Xr, yr)
    np.testing.assert_allclose(a.predict(Xr), b.predict(Xr), atol=1e-4 * np.abs(yr).max())
    assert a.epsilon_ == pytest.approx(b.epsilon_, abs=1e-5)
    with pytest.raises(ValueError, match="solver"):
        NuSVC(solver="frank-wolfe").fit(X, y)
    with pytest.raises(ValueError, match="solver"):
        NuSVR(solver="subgradient").fit(Xr, yr)


@pytest.mark.parametrize("form", [*sorted(FORMS), "nu"])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_growing_working_set_reaches_the_qp_solution(rng, monkeypatch, form, sparse):
    """Without working_set_size_ the set starts at START_SLOTS and doubles; made small here so that
    it grows several times on a problem with many support vectors (C large, noisy labels)."""
    from maxmargin.problem import nu_svc_problem

    monkeypatch.setattr(batched, "START_SLOTS", 4)
    monkeypatch.setattr(batched, "SV_PER_SLOT", 2)
    X, y = _data(rng, n=240, sparse=sparse)
    k = make_kernel("rbf", X=X, gamma=0.5)

    def problem():
        return nu_svc_problem(X, k, y, 0.4) if form == "nu" else FORMS[form](X, k, y, 10.0)

    prob = problem()
    sol = batched.solve(prob, tol=1e-8)
    assert sol.converged
    assert 4 < sol.extra["working_set_size"] <= 240
    Q = prob.q_matrix()
    assert np.allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-8)
    if form == "nu":  # two equality constraints: SMO's nu solver is the reference here
        assert sol.objective == pytest.approx(smo.solve(problem(), tol=1e-8).objective, rel=1e-6)
    else:
        _, ref = qp_reference(Q, prob.p, y, prob.upper)
        assert sol.objective == pytest.approx(ref, rel=1e-6)
        assert kkt_violation(Q, prob.p, y, prob.upper, sol.alpha) < 1e-7


def test_an_easy_problem_keeps_the_small_working_set(rng):
    """Two far-apart clouds: a handful of support vectors, so the set never doubles (q would be
    1024 from the start otherwise) and the solution is SMO's."""
    n = 3000
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.normal(size=(n, 2)) + 3.0 * y[:, None]
    k = make_kernel("linear", X=X)
    sol = batched.solve(csvc_problem(X, k, y, 1.0), tol=1e-6)
    assert sol.converged
    assert sol.extra["working_set_size"] == batched.START_SLOTS
    assert batched.working_set_size(n, n, 200.0) == 1024
    ref = smo.solve(csvc_problem(X, k, y, 1.0), tol=1e-6)
    assert sol.objective == pytest.approx(ref.objective, rel=1e-6)
    assert np.count_nonzero(sol.alpha) < 10


@pytest.mark.parametrize("kind", ["svc", "svr"])
def test_rebuild_from_the_changes_since_each_shrink(kind, monkeypatch):
    """Shrunk variables get their gradient back from the multipliers changed since they were
    dropped (SVR: two variables per data row); the result is the minimiser, with G = Q alpha + p.
    A fixed seed: on some draws the whole rebuild is the cheaper one, and this test needs the other."""
    rng = np.random.default_rng(4)
    n = 700
    X = rng.normal(size=(n, 3))
    k = make_kernel("rbf", gamma=0.7)
    if kind == "svc":
        y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.4 * rng.normal(size=n) > 0, 1.0, -1.0)
        prob = csvc_problem(X, k, y, 2.0)
    else:
        z = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n)
        prob = svr_problem(X, k, z, 0.5, 0.05)
    sol = batched.solve(prob, tol=1e-7, working_set_size_=32)
    assert sol.converged
    assert sol.extra["delta_rebuilds"] >= 1  # the path under test ran
    Q = prob.q_matrix()
    assert np.allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-8)
    _, ref = qp_reference(Q, prob.p, prob.y, prob.upper)
    assert sol.objective == pytest.approx(ref, rel=1e-7)
    assert kkt_violation(Q, prob.p, prob.y, prob.upper, sol.alpha) < 1e-6
    # a log past its memory bound is given up: whole rebuilds, the same minimiser
    monkeypatch.setattr(batched, "LOG_MAX_PER_VAR", 0)
    whole = batched.solve(prob, tol=1e-7, working_set_size_=32)
    assert whole.converged and whole.extra["delta_rebuilds"] == 0 and whole.extra["rebuilds"] >= 1
    assert whole.objective == pytest.approx(ref, rel=1e-7)
    assert np.allclose(whole.grad, Q @ whole.alpha + prob.p, atol=1e-8)


def _svc_or_svr(kind, seed, n=600, epsilon=0.05):
    """A C-SVC or an SVR problem on 600 dense rows of 12 features (the dense path, BLAS chunks)."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(n, 4)), 0.1 * rng.normal(size=(n, 8))])
    k = make_kernel("rbf", gamma=0.8)
    if kind == "svc":
        y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
        return csvc_problem(X, k, y, 4.0)
    z = np.sin(2 * X[:, 0]) * X[:, 1] + 0.2 * rng.normal(size=n)
    return svr_problem(X, k, z, 2.0, epsilon)


@pytest.mark.parametrize("kind", ["svc", "svr"])
def test_kept_rows_save_kernel_passes_and_leave_the_minimiser(kind, monkeypatch):
    """Rows kept after their member left the working set (KEEP_ROWS, opened at once with KEEP_AFTER = 0): a
    member that comes back reads its row from there, through shrinking (the kept rows follow the columns) and
    the unshrinking (they are dropped); SVR's two variables of a data row share one row.  The minimiser is the
    QP's, with fewer rows computed than without them (KEEP_MIN_FEATURES lowered: these rows are cheap)."""
    prob = _svc_or_svr(kind, 6)
    monkeypatch.setattr(batched, "KEEP_AFTER", 0.0)
    monkeypatch.setattr(batched, "KEEP_MIN_FEATURES", 1)
    kept = batched.solve(prob, tol=1e-7, working_set_size_=24)
    monkeypatch.setattr(batched, "KEEP_ROWS", False)
    plain = batched.solve(prob, tol=1e-7, working_set_size_=24)
    assert kept.converged and plain.converged
    assert kept.extra["rows_computed"] < plain.extra["rows_computed"]
    assert kept.extra["rebuilds"] >= 1  # shrinking ran, and the rows followed the columns
    Q = prob.q_matrix()
    _, ref = qp_reference(Q, prob.p, prob.y, prob.upper)
    assert kept.objective == pytest.approx(ref, rel=1e-7)
    assert np.allclose(kept.grad, Q @ kept.alpha + prob.p, atol=1e-8)
    assert kkt_violation(Q, prob.p, prob.y, prob.upper, kept.alpha) < 1e-6


def _assert_qp_minimiser(prob, sol):
    """``sol`` is the QP reference's minimiser of ``prob`` (objective, gradient, KKT conditions)."""
    Q = prob.q_matrix()
    _, ref = qp_reference(Q, prob.p, prob.y, prob.upper)
    assert sol.objective == pytest.approx(ref, rel=1e-7)
    assert np.allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-8)
    assert kkt_violation(Q, prob.p, prob.y, prob.upper, sol.alpha) < 1e-6


@pytest.mark.parametrize("kind", ["svc", "svr"])
@pytest.mark.parametrize("keep", [True, False])
def test_the_working_set_follows_the_active_columns(kind, keep, monkeypatch):
    """FOLLOW_ACTIVE: with cache_size holding 64 rows of the whole width, q grows once shrinking leaves half the
    columns or fewer (the rows move to a narrower store), and returns to 64 when the active set grows past the
    store's width again (the unshrinking); the minimiser is the QP's and the same as without (SVR: two variables
    of a data row share a column; ``keep``: rows kept beside the working set, KEEP_ROWS with KEEP_MIN_FEATURES
    lowered)."""
    prob = _svc_or_svr(kind, 7, n=1200, epsilon=0.3)  # (SVR: a wide tube, few enough support vectors)
    if keep:
        monkeypatch.setattr(batched, "KEEP_AFTER", 0.0)
        monkeypatch.setattr(batched, "KEEP_MIN_FEATURES", 1)
    cache = 64 * 8 * 1200 / 2**20  # q = 64 over every column (cache_size in MB)
    sol = batched.solve(prob, tol=1e-7, cache_size=cache)
    monkeypatch.setattr(batched, "FOLLOW_ACTIVE", False)
    fixed = batched.solve(prob, tol=1e-7, cache_size=cache)
    assert sol.converged and fixed.converged
    assert sol.extra["q_changes"] >= 2 and "q_changes" not in fixed.extra  # grown, and back at the unshrinking
    assert sol.extra["rebuilds"] >= 1
    _assert_qp_minimiser(prob, sol)
    assert sol.objective == pytest.approx(fixed.objective, rel=1e-8)


def test_grad0_skips_the_first_pass_and_is_checked(rng):
    X, y = _data(rng, n=300)
    k = make_kernel("rbf", gamma=0.5)
    prob = csvc_problem(X, k, y, 1.0)
    start = smo.solve(csvc_problem(X, k, y, 1.0), tol=1e-1)  # a feasible, unfinished start
    Q = prob.q_matrix()
    warm = DualProblem(**{**prob.__dict__, "alpha0": start.alpha})
    sol = batched.solve(warm, tol=1e-8, grad0=Q @ start.alpha + prob.p)
    ref = batched.solve(warm, tol=1e-8)
    assert sol.converged and sol.extra["rebuilds"] == ref.extra["rebuilds"] - 1
    assert sol.objective == pytest.approx(ref.objective, rel=1e-10)
    assert np.allclose(sol.grad, Q @ sol.alpha + prob.p, atol=1e-8)
    with pytest.raises(ValueError, match="grad0 must hold 300 finite values"):
        batched.solve(warm, grad0=np.zeros(5))


@pytest.mark.parametrize("rebuild", ["delta", "whole"])
def test_linear_term_on_demand(rng, monkeypatch, rebuild):
    """p_of: the linear term computed only when the solver needs it -- a whole rebuild of shrunk gradients
    (forced here by an empty change log), a callback; the iterates are those with p given, the objective
    NaN when p was never needed; p_of without grad0 is refused."""
    X, y = _data(rng, n=300)
    k = make_kernel("rbf", gamma=0.5)
    prob = csvc_problem(X, k, y, 1.0)
    start = smo.solve(csvc_problem(X, k, y, 1.0), tol=1e-1)
    Q = prob.q_matrix()
    warm = DualProblem(**{**prob.__dict__, "alpha0": start.alpha})
    g0 = Q @ start.alpha + prob.p
    if rebuild == "whole":
        monkeypatch.setattr(batched, "LOG_MAX_PER_VAR", 0)
    calls = []

    def p_of():
        calls.append(1)
        return prob.p

    blind = DualProblem(**{**warm.__dict__, "p": np.full(300, np.nan)})  # a placeholder that must not be read
    sol = batched.solve(blind, tol=1e-8, working_set_size_=16, grad0=g0, p_of=p_of)
    ref = batched.solve(warm, tol=1e-8, working_set_size_=16, grad0=g0)
    assert ref.extra["rebuilds"] >= 1 and (ref.extra["delta_rebuilds"] >= 1) == (rebuild == "delta")
    np.testing.assert_array_equal(sol.alpha, ref.alpha)
    assert len(calls) == (0 if rebuild == "delta" else 1)
    if calls:
        assert sol.objective == ref.objective
    else:
        assert np.isnan(sol.objective)
    with pytest.raises(ValueError, match="p_of .* needs grad0"):
        batched.solve(blind, p_of=p_of)


def test_shared_rows_are_read_not_computed_and_leave_the_minimiser():
    """shared_rows: kernel rows computed before over a larger set of rows (a probability fold's problem over its
    training rows reads the full fit's support vectors' rows, probability.HeldRows): the rows it holds are
    gathered onto the active columns, through shrinking, and serve the gradient rebuilds; the rows it lacks are
    computed.  The minimiser is the QP's, with fewer rows computed; a malformed triple is refused."""
    from maxmargin.kernels.engine import KernelRows

    rng = np.random.default_rng(8)
    N = 700
    X = np.hstack([rng.normal(size=(N, 4)), 0.1 * rng.normal(size=(N, 8))])
    k = make_kernel("rbf", gamma=0.8)
    y_all = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    train = np.sort(rng.choice(N, size=560, replace=False))
    prob = csvc_problem(X[train], k, y_all[train], 4.0)
    held = np.sort(rng.choice(N, size=350, replace=False))  # rows of S: half of them training rows
    S = np.empty((held.size, N))
    KernelRows(X, k).compute(held, S)
    slot = np.full(N, -1, dtype=np.int64)
    slot[held] = np.arange(held.size)
    shared = batched.solve(prob, tol=1e-7, working_set_size_=32, shared_rows=(S, slot[train], train))
    plain = batched.solve(prob, tol=1e-7, working_set_size_=32)
    assert shared.converged and plain.converged
    assert shared.extra["rows_shared"] > 0 and shared.extra["rebuilds"] >= 1
    assert shared.extra["rows_computed"] < plain.extra["rows_computed"]
    Q = prob.q_matrix()
    _, ref = qp_reference(Q, prob.p, prob.y, prob.upper)
    assert shared.objective == pytest.approx(ref, rel=1e-7)
    assert np.allclose(shared.grad, Q @ shared.alpha + prob.p, atol=1e-8)
    assert kkt_violation(Q, prob.p, prob.y, prob.upper, shared.alpha) < 1e-6
    with pytest.raises(ValueError, match="shared_rows must be"):
        batched.solve(prob, shared_rows=(S, slot, train))


@pytest.mark.parametrize("kind", ["svc", "svr"])
def test_rows_over_every_column_leave_the_minimiser(kind, monkeypatch):
    """FULL_COLUMNS (dear rows, room for kept rows): every row over every column whatever the active set -- the
    shrinks gather and compact nothing, the unshrinking drops no kept row, the rebuilds read the kept rows of
    the changed variables; SVR's two variables of a data row share its row.  Same minimiser as the QP's and as
    the rows that follow the active columns (thresholds lowered: these rows are cheap)."""
    prob = _svc_or_svr(kind, 9)
    monkeypatch.setattr(batched, "KEEP_AFTER", 0.0)
    monkeypatch.setattr(batched, "KEEP_MIN_FEATURES", 1)
    monkeypatch.setattr(batched, "FULL_MIN_FEATURES", 1)
    calls = []
    real = batched.KernelRows.set_columns
    monkeypatch.setattr(batched.KernelRows, "set_columns", lambda self, cols: (calls.append(cols), real(self, cols)))
    full = batched.solve(prob, tol=1e-7, working_set_size_=24)
    assert all(c is None for c in calls)  # the columns never change
    import numba

    from maxmargin.kernels import engine

    for mod, name in ((batched, "PARALLEL_MIN_WORK"), (engine, "PARALLEL_MIN_WORK"), (batched, "REFRESH_PARALLEL_MIN")):
        monkeypatch.setattr(mod, name, 1)  # every loop that can run on threads does
    full = batched.solve(prob, tol=1e-7, working_set_size_=24)
    numba.set_num_threads(1)
    try:
        one = batched.solve(prob, tol=1e-7, working_set_size_=24)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert one.alpha.tobytes() == full.alpha.tobytes()  # the same iterates on one thread and on all
    monkeypatch.setattr(batched, "FULL_COLUMNS", False)
    calls.clear()
    follow = batched.solve(prob, tol=1e-7, working_set_size_=24)
    assert any(c is not None for c in calls)  # shrinking restricted the columns of the other run
    assert full.converged and follow.converged and full.extra["rebuilds"] >= 1
    _assert_qp_minimiser(prob, full)
    assert full.objective == pytest.approx(follow.objective, rel=1e-9)


def _inner_smo_reference(KB, ws, y, U, QD, shift, alpha, Gl, eps, max_iter):
    """The working-set SMO written plainly: I_up / I_low by branches on each member, the first variable the last
    member with the largest -y G, the second by LIBSVM's gain with ties to the later member."""
    q, it, first = ws.size, 0, -1.0
    while it < max_iter:
        up = [s for s in range(q) if (alpha[ws[s]] < U[ws[s]] if y[ws[s]] > 0 else alpha[ws[s]] > 0)]
        low = [s for s in range(q) if (alpha[ws[s]] > 0 if y[ws[s]] > 0 else alpha[ws[s]] < U[ws[s]])]
        if not up:
            break
        gmax = max(-y[ws[s]] * Gl[s] for s in up)
        si = max(s for s in up if -y[ws[s]] * Gl[s] == gmax)
        i = ws[si]
        gmax2, best, sj = -np.inf, -np.inf, -1
        for s in low:
            val = y[ws[s]] * Gl[s]
            gmax2 = max(gmax2, val)
            b = gmax + val
            if b > 0:
                a = QD[i] + QD[ws[s]] - 2.0 * KB[si, s]
                gain = b * b / (a if a > 0 else batched.TAU)
                if gain >= best:
                    best, sj = gain, s
        viol = gmax + gmax2
        first = viol if first < 0 else first
        if viol < eps or sj < 0:
            break
        j = ws[sj]
        quad = QD[i] + QD[j] - 2.0 * KB[si, sj]
        quad = quad if quad > 0 else batched.TAU
        ai, aj = smo.pair_step(y[i] != y[j], alpha[i], alpha[j], Gl[si], Gl[sj], U[i], U[j], quad)
        dai, daj = ai - alpha[i], aj - alpha[j]
        alpha[i], alpha[j] = ai, aj
        for s in range(q):
            Gl[s] += y[ws[s]] * (KB[si, s] * (dai * y[i]) + KB[sj, s] * (daj * y[j]))
        Gl[si] += shift[i] * dai
        Gl[sj] += shift[j] * daj
        it += 1
    return it, first


@pytest.mark.parametrize("q", [1, 3, 7, 40, 101])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_inner_smo_takes_the_plain_rules_steps(q, ties, seed):
    """The inner SMO's flagged scans in four chains take the same steps as the plain rules, bit for bit: members
    at either bound, infinite bounds, a shift, and (``ties``) integer data whose gradients and gains tie."""
    rng = np.random.default_rng([q, ties, seed])
    n = 3 * q + 5
    X = rng.integers(-2, 3, size=(q, 3)).astype(float) if ties else rng.normal(size=(q, 3))
    KB = X @ X.T + (1.0 if ties else 0.0)
    ws = rng.permutation(n)[:q].astype(np.int64)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    U = rng.choice([1.0, 2.0, np.inf], size=n)
    QD = np.zeros(n)
    QD[ws] = np.diag(KB)
    shift = np.where(rng.random(n) < 0.3, 0.5, 0.0)
    alpha = np.where(rng.random(n) < 0.3, np.minimum(U, 1.0), 0.0)
    Gl = (rng.integers(-3, 4, size=q) if ties else rng.normal(size=q)).astype(float)
    a1, g1, a2, g2 = alpha.copy(), Gl.copy(), alpha.copy(), Gl.copy()
    got = batched._inner_smo(KB, ws, y, U, QD, shift, a1, g1, 1e-3, 500)
    want = _inner_smo_reference(KB, ws, y, U, QD, shift, a2, g2, 1e-3, 500)
    assert got[0] == want[0] and (got[0] > 0 or q <= 3)
    assert got[1] == want[1]
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(g1, g2)
