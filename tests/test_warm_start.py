"""Solver control for every estimator: warm starts (multipliers and kept kernel rows), the
feasible-start repair, callbacks and time limits."""

import pickle
import time
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification
from sklearn.exceptions import ConvergenceWarning

from maxmargin import SVC, SVR, NuSVC, NuSVR, OneClassSVM
from maxmargin.kernels import make_kernel
from maxmargin.problem import DualProblem, csvc_problem, nu_svc_problem
from maxmargin.solvers import smo


def _grid(est, X, y, Cs):
    out = []
    for C in Cs:
        est.set_params(C=C).fit(X, y)
        out.append((np.atleast_1d(est.objective_).copy(), int(np.sum(est.n_iter_))))
    return out


def test_svc_warm_start_grid_reaches_cold_objectives_in_fewer_iterations():
    X, y = make_classification(600, 8, n_informative=5, flip_y=0.05, random_state=0)
    Cs = np.logspace(-1, 2, 6)
    cold = _grid(SVC(gamma=0.1, tol=1e-5), X, y, Cs)
    warm_est = SVC(gamma=0.1, tol=1e-5, warm_start=True)
    warm = _grid(warm_est, X, y, Cs)
    for (oc, _), (ow, _) in zip(cold, warm):
        assert ow == pytest.approx(oc, rel=1e-5)
    assert warm[0][1] == cold[0][1]  # the first fit has nothing to start from
    # fewer SMO steps over the grid (about 5-25%: at large C most multipliers must move anyway;
    # the time saved comes mostly from the kernel rows kept between fits, see the next tests)
    assert sum(w[1] for w in warm[1:]) < sum(c[1] for c in cold[1:])
    assert warm[1][1] < cold[1][1]
    # the same C again: the previous solution is already optimal
    assert warm_est.fit(X, y).n_iter_[0] <= 2
    # a slightly different gamma: a different problem, still the same optimum as a cold start
    g_cold = SVC(gamma=0.11, C=Cs[-1], tol=1e-5).fit(X, y)
    g_warm = warm_est.set_params(gamma=0.11).fit(X, y)
    assert g_warm.objective_[0] == pytest.approx(g_cold.objective_[0], rel=1e-5)
    assert g_warm.n_iter_[0] < g_cold.n_iter_[0]


def test_svc_warm_start_multiclass_weights_and_fallbacks():
    X, y = load_iris(return_X_y=True)
    est = SVC(C=1.0, tol=1e-6, warm_start=True).fit(X, y)
    for C in (3.0, 0.3):
        cold = SVC(C=C, tol=1e-6).fit(X, y)
        warm = est.set_params(C=C).fit(X, y)
        assert np.allclose(warm.objective_, cold.objective_, rtol=1e-6)
        assert np.allclose(warm.decision_function(X), cold.decision_function(X), atol=1e-4)
    # new per-sample weights: the old multipliers are clipped into the new box
    w = np.tile([1.0, 0.2, 3.0], 50)
    assert np.allclose(
        est.fit(X, y, sample_weight=w).objective_, SVC(C=0.3, tol=1e-6).fit(X, y, sample_weight=w).objective_, rtol=1e-6
    )
    # other rows or classes: a cold start, no error
    assert est.fit(X[:120], y[:120]).classes_.shape == (3,)
    assert est.fit(X[:100], y[:100]).classes_.shape == (2,)


def test_svr_warm_start():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    z = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=500)
    Cs = [0.3, 1.0, 3.0, 10.0, 30.0]
    cold = _grid(SVR(gamma=0.5, epsilon=0.05, tol=1e-5), X, z, Cs)
    warm = _grid(SVR(gamma=0.5, epsilon=0.05, tol=1e-5, warm_start=True), X, z, Cs)
    for (oc, _), (ow, _) in zip(cold, warm):
        assert ow == pytest.approx(oc, rel=1e-5)
    assert sum(w[1] for w in warm[1:]) < sum(c[1] for c in cold[1:])


def test_kernel_rows_are_kept_between_warm_fits():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=300) > 0, 1.0, -1.0)
    kern = make_kernel("rbf", gamma=0.2)
    pool = smo.KernelRowPool(200)
    with smo.kernel_row_pool(pool):
        first = smo.solve(csvc_problem(X, kern, y, 1.0), tol=1e-6)
        again = smo.solve(csvc_problem(X.copy(), kern, y, 10.0), tol=1e-6)  # same data, other C
        other = smo.solve(csvc_problem(X + 1e-3, kern, y, 1.0), tol=1e-6)  # other data: its own cache
    # rows computed whole are reused; only rows computed partially (while shrunk) are recomputed
    assert first.extra["cache_misses"] > 0 and again.extra["cache_misses"] < 0.1 * first.extra["cache_misses"]
    assert other.extra["cache_misses"] > 0 and len(pool.entries) == 2
    assert again.objective == pytest.approx(smo.solve(csvc_problem(X, kern, y, 10.0), tol=1e-6).objective, rel=1e-9)
    # the budget is honoured: a pool too small keeps nothing, and the results do not change
    small = smo.KernelRowPool(0.01)
    with smo.kernel_row_pool(small):
        assert smo.solve(csvc_problem(X, kern, y, 1.0), tol=1e-6).objective == pytest.approx(first.objective)
    assert not small.entries
    # the estimator keeps its pool between fits but never pickles or clones it
    est = SVC(gamma=0.2, warm_start=True).fit(X, y)
    assert est._kernel_pool.nbytes() > 0
    assert "_kernel_pool" not in pickle.loads(pickle.dumps(est)).__dict__
    assert len(pickle.dumps(est)) < 200_000
    assert not hasattr(clone(est), "_kernel_pool")
    assert not hasattr(SVC(gamma=0.2).fit(X, y), "_kernel_pool")


def test_initial_alpha_repairs_feasibility():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    kern = make_kernel("rbf", gamma=0.5)
    prob = csvc_problem(X, kern, y, 1.0)
    prob.alpha0 = rng.uniform(0, 3.0, size=40)  # outside the box and off y'a = 0
    a = smo.initial_alpha(prob)
    assert np.all(a >= 0) and np.all(a <= 1.0) and abs(y @ a) < 1e-12
    prob.upper = np.full(40, np.inf)  # unbounded side (l2 / hard margin)
    a = smo.initial_alpha(prob)
    assert np.all(a >= 0) and abs(y @ a) < 1e-9
    one = DualProblem(
        X=X,
        kernel=kern,
        y=np.ones(40),
        p=np.zeros(40),
        upper=np.ones(40),
        index=np.arange(40),
        shift=np.zeros(40),
        delta=10.0,
        alpha0=np.full(40, 0.9),
    )
    a = smo.initial_alpha(one)
    assert a.sum() == pytest.approx(10.0) and np.all(a <= 1)
    nu = nu_svc_problem(X, kern, y, 0.5)
    nu.alpha0 = nu.alpha0 * 3.0  # class sums 3x too large; clipping at 1 changes them
    a = smo.initial_alpha(nu)
    assert np.all(a <= 1) and a[y > 0].sum() == pytest.approx(min(3 * 10.0, (y > 0).sum()))
    with pytest.raises(ValueError, match="needs a feasible alpha0"):
        nu.alpha0 = None
        smo.initial_alpha(nu)
    with pytest.raises(ValueError, match="shape"):
        prob.alpha0 = np.zeros(3)
        smo.initial_alpha(prob)


def _slow_data(n):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))
    z = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.3 * rng.normal(size=n)
    return X, z


@pytest.mark.parametrize(
    "make",
    [
        lambda: (SVR(C=1000.0, epsilon=0.01, gamma=2.0, solver="smo"), "z"),
        lambda: (SVR(C=1000.0, epsilon=0.01, gamma=2.0, solver="batched"), "z"),
        lambda: (NuSVR(C=1000.0, nu=0.5, gamma=2.0), "z"),
        lambda: (OneClassSVM(nu=0.01, gamma=5.0, solver="smo"), None),
        lambda: (NuSVC(nu=0.05, gamma=2.0), "sign"),
        lambda: (SVC(C=1000.0, gamma=2.0, probability=True, solver="smo"), "sign"),
    ],
)
def test_callback_stop_gives_a_usable_model(make, monkeypatch):
    from maxmargin.solvers import batched

    monkeypatch.setattr(batched, "REPORT_SECONDS", 0.0)  # the batched solver's first report comes after one round
    est, target = make()
    X, z = _slow_data(2000)
    y = {"z": z, "sign": z > 0, None: None}[target]
    seen = []

    def cb(info):
        seen.append(info)
        return False

    est.set_params(callback=cb)
    with pytest.warns(ConvergenceWarning, match="callback"):
        est.fit(X, y)
    assert len(seen) == 1  # stopped at the first call
    info = seen[0]
    assert {"iteration", "objective", "violation", "tol", "subproblem", "n_subproblems", "elapsed"} <= set(info)
    assert info["iteration"] >= 1 and info["violation"] > info["tol"]
    if getattr(est, "solver", "smo") == "smo":
        assert info["iteration"] == 2000  # SMO's first chunk (the batched solver reports every ~0.2 s)
    assert est.fit_status_ == 1
    pred = est.predict(X[:50])
    assert pred.shape == (50,) and np.all(np.isfinite(pred.astype(float)))
    # a callback returning None lets the fit finish
    calls = []
    est.set_params(callback=lambda info: calls.append(info["iteration"]))
    est.fit(X, y)
    assert est.fit_status_ == 0 and calls == sorted(calls)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (SVR(C=1e4, epsilon=0.01, gamma=2.0, solver="smo"), "z"),
        lambda: (SVR(C=1e4, epsilon=0.01, gamma=2.0, solver="batched"), "z"),
        lambda: (NuSVR(C=1e4, nu=0.5, gamma=2.0), "z"),
    ],
)
def test_time_limit_is_honoured(make):
    est, _ = make()
    X, z = _slow_data(6000)  # SVR: 3.4 s batched, 9.5 s SMO without a limit (session 48; 3,000 rows took 0.38 s)
    est.set_params(time_limit=0.3)
    with pytest.warns(ConvergenceWarning, match="time_limit"):
        t = time.perf_counter()
        est.fit(X, z)
        elapsed = time.perf_counter() - t
    assert est.fit_status_ == 1
    # the solver checks the clock between chunks sized to ~0.2 s; setup and the model take a little more
    assert elapsed < 0.3 + 0.6, elapsed
    assert np.all(np.isfinite(est.predict(X[:20])))


@pytest.mark.parametrize("Est", [SVR, NuSVR, OneClassSVM, NuSVC])
def test_bad_solver_options(Est):
    X, z = _slow_data(30)
    y = z > 0 if Est is NuSVC else z
    with pytest.raises(ValueError, match="time_limit"):
        Est(time_limit=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="callback"):
        Est(callback=3).fit(X, y)
    with pytest.raises(ValueError, match="cache_size"):
        Est(cache_size=0).fit(X, y)


def test_verbose_prints(capsys):
    X, z = _slow_data(100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SVR(verbose=True).fit(X, z)
    assert "[smo]" in capsys.readouterr().out
