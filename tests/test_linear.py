"""LinearSVC / LinearSVR: objectives and weights against liblinear-official, scikit-learn and an independent QP;
scikit-learn's estimator checks; errors; callback, time limit and warm start; model files both ways."""

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import seed_liblinear
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

import maxmargin
from maxmargin import LinearSVC, LinearSVR

liblinearutil = pytest.importorskip("liblinear.liblinearutil")

SVC_COMBOS = [
    ("l2", "squared_hinge", True, "ovr"),
    ("l2", "squared_hinge", False, "ovr"),
    ("l2", "hinge", True, "ovr"),
    ("l1", "squared_hinge", False, "ovr"),
    ("l2", "squared_hinge", True, "crammer_singer"),
]
LL_SOLVER = {
    ("l2", "squared_hinge", True, "ovr"): 1,
    ("l2", "squared_hinge", False, "ovr"): 2,
    ("l2", "hinge", True, "ovr"): 3,
    ("l1", "squared_hinge", False, "ovr"): 5,
    ("l2", "squared_hinge", True, "crammer_singer"): 4,
}


def _data(n_classes, n=150, d=8, seed=0):
    X, y = make_classification(
        n,
        d,
        n_informative=min(5, d - 1),
        n_redundant=1 if d > 5 else 0,
        n_classes=n_classes,
        n_clusters_per_class=1,
        class_sep=0.8,
        random_state=seed,
    )
    return X, y


# --------------------------------------------------------------------------- an independent primal objective


def primal_svc(penalty, loss, multi_class, X, y, coef, intercept, C, sw=None, cw=None, B=1.0):
    """LIBLINEAR's objective in numpy, written from the formulas (bias feature B included in the norm)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    classes = np.unique(y)
    k = classes.shape[0]
    idx = np.searchsorted(classes, y)
    sw = np.ones(len(y)) if sw is None else sw
    cw = np.ones(k) if cw is None else cw
    coef = np.atleast_2d(coef)
    icpt = np.broadcast_to(np.asarray(intercept, dtype=float), (coef.shape[0],))
    W = np.hstack([coef, (icpt / B)[:, None]])
    Xb = np.hstack([X, np.full((len(y), 1), B)])
    if multi_class == "crammer_singer":
        if k == 2:
            raise NotImplementedError
        scores = Xb @ W.T
        own = scores[np.arange(len(y)), idx]
        marg = 1.0 + scores - own[:, None]
        marg[np.arange(len(y)), idx] = 0.0
        return [0.5 * np.sum(W * W) + np.sum(C * sw * cw[idx] * marg.max(axis=1))]
    out = []
    problems = [(1, W[0])] if k == 2 else list(enumerate(W))
    for m, w in problems:
        yy = np.where(idx == m, 1.0, -1.0)
        Ci = C * sw * (cw[idx] if k == 2 else np.where(idx == m, cw[m], 1.0))
        xi = np.maximum(0.0, 1.0 - yy * (Xb @ w))
        loss_v = xi if loss == "hinge" else xi * xi
        reg = np.abs(w).sum() if penalty == "l1" else 0.5 * w @ w
        out.append(reg + Ci @ loss_v)
    return out


def primal_svr(loss, X, y, coef, intercept, C, eps, sw=None, B=1.0):
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    sw = np.ones(len(y)) if sw is None else sw
    w = np.append(coef, np.asarray(intercept).ravel()[0] / B)
    r = np.maximum(0.0, np.abs(np.hstack([X, np.full((len(y), 1), B)]) @ w - y) - eps)
    return 0.5 * w @ w + C * sw @ (r if loss == "epsilon_insensitive" else r * r)


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def _agree(a, b):
    return float(np.mean(a == b))


def _agree_decisive(est, X, other):
    """Agreement of predictions on the points whose top two scores differ (Crammer-Singer solutions put
    training points exactly on ties between classes)."""
    d = est.decision_function(X)
    if d.ndim == 1:
        keep = np.abs(d) > 1e-6
    else:
        top = np.sort(d, axis=1)
        keep = top[:, -1] - top[:, -2] > 1e-6
    return _agree(est.predict(X)[keep], np.asarray(other)[keep])


# --------------------------------------------------------------------------- against liblinear-official


def _liblinear(X, y, solver, C=1.0, eps=1e-7, extra=""):
    seed_liblinear()
    m = liblinearutil.train(
        np.asarray(y, dtype=float), sp.csr_matrix(X), f"-s {solver} -c {C} -e {eps} -B 1 -q {extra}"
    )
    return m


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("combo", SVC_COMBOS, ids=lambda c: "-".join(map(str, c)))
def test_svc_matches_liblinear(combo, sparse):
    penalty, loss, dual, mc = combo
    n_classes = 3
    X, y = _data(n_classes)
    cw = {0: 1.0, 1: 2.0, 2: 0.5}
    Xin = sp.csr_matrix(X) if sparse else X
    # liblinear-official stops its dual solvers after 1000 epochs (compiled in; "reaching max number of
    # iterations"): with the hinge loss a small C and tol 1e-6 keep it within them, so that it really converges
    C = 0.01 if loss == "hinge" else 0.5
    est = LinearSVC(
        penalty=penalty,
        loss=loss,
        dual=dual,
        multi_class=mc,
        C=C,
        tol=1e-7,
        max_iter=200000,
        class_weight=cw,
        random_state=0,
    ).fit(Xin, y)
    wflags = " ".join(f"-w{c} {v}" for c, v in cw.items())
    m = _liblinear(X, y, LL_SOLVER[combo], C=C, eps=1e-6 if loss == "hinge" else 1e-7, extra=wflags)
    ref = maxmargin.load_liblinear_model  # read liblinear's weights through our reader (tested below, too)
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ll.model")
        liblinearutil.save_model(path, m)
        ll = ref(path)
    cwv = np.array([cw[c] for c in est.classes_])
    ours = primal_svc(penalty, loss, mc, X, y, est.coef_, est.intercept_, C, cw=cwv)
    theirs = primal_svc(penalty, loss, mc, X, y, ll.coef_, ll.intercept_, C, cw=cwv)
    np.testing.assert_allclose(est.objective_, ours, rtol=1e-9)  # what we report is the objective
    for a, b in zip(ours, theirs):
        assert a <= b * (1 + 1e-6), (a, b)
        assert _rel(a, b) < 1e-4, (a, b)
    assert _agree_decisive(est, X, ll.predict(X)) >= 0.995
    p_ll, _, _ = liblinearutil.predict(y.astype(float), sp.csr_matrix(X), m, "-q")
    assert _agree_decisive(est, X, p_ll) >= 0.995


@pytest.mark.parametrize("dense", [False, True], ids=["csr", "dense"])
@pytest.mark.parametrize("k", [12, 70])
def test_crammer_singer_shrinking_on_many_classes(k, dense):
    """Crammer-Singer's shrinking (classes at their bound leave a sample's list, samples with one class left leave
    the epoch; LIBLINEAR's scheme) on many classes: 12 (few classes left in play, their weights gathered; sorted
    sub-problems) and 70 (the largest values moved to the front one at a time, SELECT_MIN_CLASSES).  It ends at
    LIBLINEAR's objective at a tight tol; at a loose tol it stops sooner, within 5% of the minimum.  Dense rows
    run the class-major epochs (CLASS_MAJOR: a vector-lane product a class), CSR rows the feature-major ones."""
    from maxmargin.solvers import crammer_singer

    assert (k >= crammer_singer.SELECT_MIN_CLASSES) == (k == 70)
    rng = np.random.default_rng(k)
    n, d = 10 * k, 40
    X = sp.random(n, d, density=0.3, format="csr", random_state=k)
    if dense:
        X = X.toarray()
        X[X == 0] = 0.01 * rng.normal(size=int(np.count_nonzero(X == 0)))  # dense enough to stay dense
    y = np.asarray(X @ rng.normal(size=(d, k)) + 0.2 * rng.normal(size=(n, k))).argmax(axis=1)
    y[:k] = np.arange(k)  # every class present
    C = 0.5
    est = LinearSVC(multi_class="crammer_singer", C=C, tol=1e-6, max_iter=100000, random_state=0).fit(X, y)
    m = _liblinear(X, y, 4, C=C, eps=1e-6)
    if dense:
        assert crammer_singer._epochs_cm.signatures  # dense rows ran the class-major epochs
    coef = np.zeros((k, d + 1))
    W = np.ctypeslib.as_array(m.w, shape=((d + 1) * k,)).reshape(d + 1, k).T
    labels = list(m.get_labels())
    coef[:] = W[[labels.index(c) for c in est.classes_]]
    ours = primal_svc("l2", "squared_hinge", "crammer_singer", X, y, est.coef_, est.intercept_, C)[0]
    theirs = primal_svc("l2", "squared_hinge", "crammer_singer", X, y, coef[:, :-1], coef[:, -1], C)[0]
    np.testing.assert_allclose(est.objective_, ours, rtol=1e-9)
    assert _rel(ours, theirs) < 1e-5, (ours, theirs)
    loose = LinearSVC(multi_class="crammer_singer", C=C, tol=0.1, random_state=0).fit(X, y)
    assert loose.n_iter_ < est.n_iter_
    assert loose.objective_[0] <= ours * 1.05


@pytest.mark.parametrize("snap", [True, False])
def test_crammer_singer_sets_a_multiplier_a_rounding_error_off_its_bound_on_it(snap, monkeypatch):
    """A sample's own multiplier a rounding error (1e-13) below C_i counts its own class as movable, so its
    violation is the gap to its own score; the sub-problem's step back to C_i is below the 1e-12 a change must
    reach.  Crammer-Singer sets such a value on its bound (SNAP_TO_BOUND): from the optimum with one bound sample
    moved 1e-13 off, it converges at once; without it (the loop before session 57, compiled here with the
    constant off) that violation stays and the solver runs into max_iter."""
    from maxmargin._jit import with_constants
    from maxmargin.solvers import crammer_singer
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(57)
    n, d, k = 300, 6, 4
    X = sp.random(n, d, density=0.5, format="csr", random_state=57)
    y = np.asarray(X @ rng.normal(size=(d, k)) + 0.5 * rng.normal(size=(n, k))).argmax(axis=1)
    ld = linear_data(X, 1.0)
    C = np.full(n, 0.5)
    best = crammer_singer.solve(ld, y, k, C, tol=1e-10, max_iter=100000, seed=0)
    alpha = best.dual.copy()
    rows = np.arange(n)
    W = np.asarray(best.w)
    S = np.asarray(sp.hstack([X, np.ones((n, 1))]).tocsr() @ W.T) + 1.0
    S[rows, y] -= 1.0
    gap = S.max(axis=1) - S[rows, y]
    at_bound = np.flatnonzero((alpha[rows, y] == C) & (gap > 0.3))
    assert at_bound.size  # bound samples whose own score trails another class's by more than tol
    i = at_bound[0]
    other = np.flatnonzero((np.arange(k) != y[i]) & (alpha[i] < 0))[0]
    alpha[i, other] += 1e-13  # the others' sum, and so the own multiplier, 1e-13 off C
    if not snap:  # (CSR rows: the record loop)
        plain = with_constants(crammer_singer._epochs_rec.py_func, "_nosnap", {"SNAP_TO_BOUND": False})
        monkeypatch.setattr(crammer_singer, "_epochs_rec", plain)
    fit = crammer_singer.solve(ld, y, k, C, tol=0.1, max_iter=50, seed=0, alpha0=alpha)
    if snap:
        assert fit.status == "converged" and fit.n_iter <= 3, (fit.status, fit.n_iter)
        assert fit.dual[i, y[i]] == C[i]
        assert abs(fit.objective - best.objective) <= 1e-6 * abs(best.objective)
    else:
        assert fit.status == "max_iter" and fit.violation > 0.3


@pytest.mark.parametrize(
    "plan, weights",
    [((0, 0, 0), False), ((2, 1, 0), False), ((3, 2, 3), False), ((2, 1, 0), True)],
    ids=["none", "plain", "staged", "plain-weights"],
)
@pytest.mark.parametrize("k", [3, 9, 70])
def test_crammer_singer_records_take_the_arrays_iterates(k, plan, weights, monkeypatch):
    """Crammer-Singer on CSR rows through one record a sample (crammer_singer._epochs_rec: scalars, multipliers
    and list of classes side by side; with each prefetch scheme -- the plain and staged ones ask for the next
    sample's rows of weights too (AHEAD_ALL, its cold-share rule lifted) -- and with the weights of the next
    sample's classes in play asked for (AHEAD_FEW, here on small weights); 70 classes take the partial selection of
    the sub-problem; rows of odd and even lengths, whose scores add two values at a time)
    takes the same iterates as the loop over the per-sample arrays, bit for bit -- from a cold and from a warm
    start, with empty rows and unequal C_i -- and LIBLINEAR's objective."""
    from maxmargin.solvers import crammer_singer
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(k)
    n, d = 60 * k, 50
    keep = np.ones(n)
    keep[:3] = 0.0  # empty rows: their records hold no row
    X = sp.diags(keep) @ sp.random(n, d, density=0.08, format="csr", random_state=k)
    X = sp.csr_matrix(X)
    X.eliminate_zeros()
    y = np.asarray(X @ rng.normal(size=(d, k)) + 0.3 * rng.normal(size=(n, k))).argmax(axis=1)
    y[:k] = np.arange(k)
    ld = linear_data(X, 1.0)
    monkeypatch.setattr(crammer_singer, "prefetch_plan", lambda ld, **kw: plan)
    monkeypatch.setattr(crammer_singer, "WEIGHTS_AHEAD_BYTES", 0 if weights else 1 << 62)
    monkeypatch.setattr(crammer_singer, "AHEAD_ALL_COLD", 0.0)  # (these few columns all fit in the L2)
    C = rng.uniform(0.3, 1.0, size=n)
    fits = []
    tol = 1e-4 if k < 64 else 1e-2  # (70 classes: ~200 epochs to 1e-2, thousands to 1e-4)
    for width in (crammer_singer.REC_MAX_CLASSES, 0):  # records, then the per-sample arrays
        monkeypatch.setattr(crammer_singer, "REC_MAX_CLASSES", width)
        cold = crammer_singer.solve(ld, y, k, C, tol=tol, max_iter=5000, seed=5)
        warm = crammer_singer.solve(ld, y, k, 0.7 * C, tol=tol, max_iter=5000, seed=6, alpha0=cold.dual)
        fits.append((cold, warm))
    for a, b in zip(*fits):
        np.testing.assert_array_equal(a.w, b.w)
        np.testing.assert_array_equal(a.dual, b.dual)
        assert a.n_iter == b.n_iter and a.n_iter > 3 and a.status == "converged"
        assert a.dual.shape == (n, k)
    # (the multipliers of a sample sum to 0; the own one is at most C_i, the others at most 0)
    cold = fits[0][0]
    np.testing.assert_allclose(cold.dual.sum(axis=1), 0.0, atol=1e-9)
    assert np.all(cold.dual[np.arange(n), y] <= C + 1e-12)
    if k > 10:
        return
    ours = crammer_singer.solve(ld, y, k, np.ones(n), tol=1e-6, max_iter=20000, seed=5)
    m = _liblinear(X, y, 4, C=1.0, eps=1e-6)
    coef = np.zeros((k, d + 1))
    W = np.ctypeslib.as_array(m.w, shape=((d + 1) * k,)).reshape(d + 1, k).T
    labels = list(m.get_labels())
    coef[:] = W[[labels.index(c) for c in range(k)]]
    theirs = primal_svc("l2", "squared_hinge", "crammer_singer", X, y, coef[:, :-1], coef[:, -1], 1.0)[0]
    assert _rel(ours.objective, theirs) < 1e-5, (ours.objective, theirs)


def test_crammer_singer_cold_share_counts_the_values_beyond_the_hot_columns(monkeypatch):
    """crammer_singer.cold_share (whether the rows of weights are asked for ahead, AHEAD_ALL_COLD): the share of the
    stored values outside the columns whose k weights fill the L2, here two columns of 3 classes' weights."""
    from maxmargin.solvers import crammer_singer
    from maxmargin.solvers._linear_common import linear_data

    counts = [2, 10, 0, 3, 5]  # values a column: the hot two hold 15 of 20
    rows = [[c] for c, m in enumerate(counts) for _ in range(m)]
    X = sp.csr_matrix((np.ones(20), np.concatenate(rows), np.arange(21)), shape=(20, 5))
    monkeypatch.setattr(crammer_singer, "l2_cache_bytes", lambda: 2 * 3 * 8)
    assert crammer_singer.cold_share(linear_data(X, 1.0), 3) == pytest.approx(0.25)
    monkeypatch.setattr(crammer_singer, "l2_cache_bytes", lambda: 5 * 3 * 8)  # every column fits
    assert crammer_singer.cold_share(linear_data(X, 1.0), 3) == 0.0


@pytest.mark.parametrize("plan", [None, (4, 2, 4), (2, 3, 2)], ids=["plain", "staged", "staged-weights"])
@pytest.mark.parametrize("unit", [False, True], ids=["values", "zero-one"])
@pytest.mark.parametrize("squared", [False, True], ids=["l1", "l2"])
def test_svr_records_take_the_arrays_iterates(squared, unit, plan, monkeypatch):
    """LinearSVR's dual CD on CSR rows through one record a row (dual_cd._svr_epochs_rec, with either prefetch
    scheme) takes the same iterates as the loop over the five per-row arrays, bit for bit, and an objective no
    higher than LIBLINEAR's."""
    from maxmargin.solvers import dual_cd
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(21)
    X = sp.random(1500, 300, density=0.03, format="csr", random_state=22)
    if unit:
        X.data[:] = 1.0
    y = np.asarray(X @ rng.normal(size=300)).ravel() + 0.1 * rng.normal(size=1500)
    ld = linear_data(X, 1.0, rows_first=True)
    assert ld.unit == unit and not ld.dense
    if plan is not None:
        monkeypatch.setattr(dual_cd, "prefetch_plan", lambda ld, **kw: plan)
    C = np.full(1500, 0.5)
    fits = []
    for records in (True, False):
        monkeypatch.setattr(dual_cd, "RECORDS", records)
        fits.append(dual_cd.solve_svr(ld, y, C, 0.05, squared=squared, tol=1e-5, max_iter=20000, seed=3))
    a, b = fits
    np.testing.assert_array_equal(a.w, b.w)
    np.testing.assert_array_equal(a.dual, b.dual)
    assert a.n_iter == b.n_iter and a.n_iter > 3
    m = _liblinear(X, y, 12 if squared else 13, C=0.5, eps=1e-5, extra="-p 0.05")
    W = np.ctypeslib.as_array(m.w, shape=(301,))
    loss = "squared_epsilon_insensitive" if squared else "epsilon_insensitive"
    theirs = primal_svr(loss, X, y, W[:-1], W[-1], 0.5, 0.05)
    # (liblinear-official's L1-loss dual stops at its epoch limit here, up to 0.2% above)
    assert a.objective <= theirs * (1 + 1e-6) and _rel(a.objective, theirs) < 5e-3, (a.objective, theirs)


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_zero_one_features_skip_values(loss):
    """0/1 features (a9a, mushrooms) take the dual CD loops that never read the stored values: the same
    iterates as the general loops, and LIBLINEAR's objective."""
    import dataclasses

    from maxmargin.solvers import dual_cd
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(11)
    X = sp.csr_matrix((rng.random((600, 40)) < 0.15).astype(float))
    y = np.where(X @ rng.normal(size=40) + 0.1 * rng.normal(size=600) > 0.3, 1, -1)
    ld = linear_data(X, 1.0)
    assert ld.unit and not linear_data(X * 2.0, 1.0).unit
    C = np.full(600, 0.1 if loss == "hinge" else 0.5)
    sq = loss == "squared_hinge"
    a = dual_cd.solve_svc(ld, y.astype(float), C, squared=sq, tol=1e-6, max_iter=100000, seed=4)
    b = dual_cd.solve_svc(
        dataclasses.replace(ld, unit=False), y.astype(float), C, squared=sq, tol=1e-6, max_iter=100000, seed=4
    )
    np.testing.assert_array_equal(a.w, b.w)
    assert a.n_iter == b.n_iter
    m = _liblinear(X, y, 1 if sq else 3, C=C[0], eps=1e-6)
    W = np.ctypeslib.as_array(m.w, shape=(X.shape[1] + 1,)) * (1.0 if m.get_labels()[0] == 1 else -1.0)
    theirs = primal_svc("l2", loss, "ovr", X, y, W[:-1], W[-1], C[0])[0]
    ours = primal_svc("l2", loss, "ovr", X, y, a.w[:-1], a.w[-1], C[0])[0]
    assert _rel(ours, theirs) < 1e-4, (ours, theirs)


@pytest.mark.parametrize("method", ["line_search", "trust_region"])
def test_zero_one_features_tron(method):
    """TRON's passes on 0/1 features skip the stored values too: the same iterates, LIBLINEAR's objective."""
    import dataclasses

    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(12)
    X = sp.csr_matrix((rng.random((600, 40)) < 0.15).astype(float))
    y = np.where(X @ rng.normal(size=40) + 0.1 * rng.normal(size=600) > 0.3, 1, -1)
    ld = linear_data(X, 1.0)
    C = np.full(600, 0.5)
    a = tron.solve(ld, y.astype(float), C, tol=1e-8, method=method)
    b = tron.solve(dataclasses.replace(ld, unit=False), y.astype(float), C, tol=1e-8, method=method)
    assert ld.unit
    np.testing.assert_array_equal(a.w, b.w)
    m = _liblinear(X, y, 2, C=0.5, eps=1e-8)
    W = np.ctypeslib.as_array(m.w, shape=(X.shape[1] + 1,)) * (1.0 if m.get_labels()[0] == 1 else -1.0)
    theirs = primal_svc("l2", "squared_hinge", "ovr", X, y, W[:-1], W[-1], 0.5)[0]
    assert _rel(a.objective, theirs) < 1e-8


def test_primal_newton_follows_liblinear_on_ill_conditioned_data():
    """The primal Newton method with line search takes LIBLINEAR's (>= 2.40) iterates: on dense data with many
    noisy features (the Hessian far from the identity) it stops where liblinear-official -s 2 stops, at the loose
    and at the default tolerance, where the trust-region variant stopped at an objective 9% higher; at a tight
    tolerance both methods reach the same minimum."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(5)
    n, d = 800, 300
    X = rng.normal(size=(n, d)) * 3.0
    y = np.where(X[:, :10].sum(axis=1) + 3.0 * rng.normal(size=n) > 0, 1, -1)
    ld = linear_data(X, 1.0)
    C = np.full(n, 1.0)

    def objective(w):
        xi = np.maximum(0.0, 1.0 - y * (X @ w[:-1] + w[-1]))
        return 0.5 * w @ w + C @ xi**2

    for tol in (0.01, 0.001):
        m = _liblinear(X, y, 2, C=1.0, eps=tol)
        W = np.ctypeslib.as_array(m.w, shape=(d + 1,)) * (1.0 if m.get_labels()[0] == 1 else -1.0)
        ours = tron.solve(ld, y.astype(float), C, tol=tol)
        assert _rel(objective(ours.w), objective(W)) < 1e-9
        assert _rel(ours.objective, objective(ours.w)) < 1e-9
    # (the trust region needs ~1,000-1,200 steps here, depending on the passes' summation order: room beyond that)
    tight = [
        tron.solve(ld, y.astype(float), C, tol=1e-10, method=k, max_iter=5000) for k in ("line_search", "trust_region")
    ]
    assert _rel(tight[0].objective, tight[1].objective) < 1e-9
    assert tight[0].objective < objective(W) - 1e-3  # the loose stops are not the minimum: the check can fail
    with pytest.raises(ValueError, match="method"):
        tron.solve(ld, y.astype(float), C, method="newton")


def test_label_check_fast_path_keeps_sklearn_errors():
    """Integer-valued labels skip scikit-learn's target check; anything else still gets its error."""
    X, y = _data(3)
    a = LinearSVC(random_state=0).fit(X, y)
    b = LinearSVC(random_state=0).fit(X, y.astype(float) * 2.0 - 1.0)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(b.classes_, [-1.0, 1.0, 3.0])
    with pytest.raises(ValueError, match="Unknown label type"):
        LinearSVC().fit(X, y + 0.5 * (y == 1))
    assert LinearSVC().fit(X, np.array(["a", "b", "c"])[y]).classes_.tolist() == ["a", "b", "c"]


def _sparse_wide(n=3000, d=3000, nnz=12, seed=0):
    """A bag-of-words-like binary problem: ``nnz`` random features a row (a few frequent ones), labels from a
    planted sparse rule with 5% flipped."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(d) + 5.0)
    cols = rng.choice(d, size=(n, nnz), p=p / p.sum())
    X = sp.csr_matrix((rng.uniform(0.2, 1.0, n * nnz), cols.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    X.sum_duplicates()
    y = np.where(X @ rng.normal(size=d) > 0, 1, -1)
    flip = rng.random(n) < 0.05
    y[flip] = -y[flip]
    return X, y


@pytest.fixture
def async_everywhere(monkeypatch):
    """The asynchronous dual CD on small data (its size thresholds off)."""
    from maxmargin.solvers import dual_cd

    monkeypatch.setattr(dual_cd, "ASYNC_STORED", 0)
    monkeypatch.setattr(dual_cd, "ASYNC_MIN_FEATURES", 0)
    monkeypatch.setattr(dual_cd, "ASYNC_MIN_ROWS", 100)
    if dual_cd.numba.get_num_threads() < 2:
        pytest.skip("one Numba thread: no asynchronous workers")
    return dual_cd


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_async_dual_cd_matches_liblinear(loss, async_everywhere):
    """The asynchronous epochs (two workers, one shared w) end at LIBLINEAR's objective, with w rebuilt from
    alpha: the same problem as the serial solver, to the same tol."""
    from maxmargin.solvers._linear_common import linear_data

    X, y = _sparse_wide()
    C = 0.1 if loss == "hinge" else 0.5
    ld = linear_data(X, 1.0)
    assert async_everywhere.async_workers(ld, 2) == 2
    yy = y.astype(float)
    Ci = np.full(len(y), C)
    fit = async_everywhere.solve_svc(ld, yy, Ci, squared=loss != "hinge", tol=1e-6, max_iter=100000, n_threads=2)
    assert fit.async_workers == 2 and fit.converged
    np.testing.assert_allclose(fit.w[:-1], X.T @ (fit.dual * yy), rtol=1e-10, atol=1e-12)  # w is sum a_i y_i x_i
    np.testing.assert_allclose(fit.w[-1], fit.dual @ yy, rtol=1e-10, atol=1e-12)
    assert fit.gap < 1e-4 * abs(fit.objective)
    m = _liblinear(X, y, 1 if loss != "hinge" else 3, C=C, eps=1e-6)
    W = np.ctypeslib.as_array(m.w, shape=(X.shape[1] + 1,)) * (1.0 if m.get_labels()[0] == 1 else -1.0)
    theirs = primal_svc("l2", loss, "ovr", X, y, W[:-1], W[-1], C)[0]
    ours = primal_svc("l2", loss, "ovr", X, y, fit.w[:-1], fit.w[-1], C)[0]
    assert _rel(ours, fit.objective) < 1e-9
    assert _rel(ours, theirs) < 1e-4, (ours, theirs)
    p_ll, _, _ = liblinearutil.predict(yy, X, m, "-q")
    assert _agree(np.where(X @ fit.w[:-1] + fit.w[-1] > 0, 1.0, -1.0), p_ll) >= 0.995


def test_async_stopped_early_keeps_w_consistent(async_everywhere):
    """A fit stopped inside the asynchronous phase (max_iter, callback) still returns w = sum a_i y_i x_i and the
    primal objective of that w."""
    from maxmargin.solvers._linear_common import linear_data

    X, y = _sparse_wide(seed=5)
    ld = linear_data(X, 1.0)
    yy = y.astype(float)
    Ci = np.full(len(y), 0.5)
    stops = [
        {"max_iter": 2},
        {"max_iter": 1000, "callback": lambda info: False},
    ]
    for kw in stops:
        fit = async_everywhere.solve_svc(ld, yy, Ci, tol=1e-8, n_threads=2, **kw)
        assert fit.async_workers == 2 and not fit.converged
        np.testing.assert_allclose(fit.w[:-1], X.T @ (fit.dual * yy), rtol=1e-10, atol=1e-12)
        ours = primal_svc("l2", "squared_hinge", "ovr", X, y, fit.w[:-1], fit.w[-1], 0.5)[0]
        assert _rel(ours, fit.objective) < 1e-9


def test_async_only_when_asked_and_not_seeded(async_everywhere, monkeypatch):
    """LinearSVC hands threads to one binary dual problem only for n_jobs > 1 with random_state=None; a set
    random_state keeps the fit serial and reproducible.  The estimator's async fit reaches the serial objective."""
    seen = []
    solve = async_everywhere.solve_svc

    def spy(*args, **kwargs):
        fit = solve(*args, **kwargs)
        seen.append(fit.async_workers)
        return fit

    monkeypatch.setattr(async_everywhere, "solve_svc", spy)
    X, y = _sparse_wide(seed=2)
    kw = {"dual": True, "C": 0.5, "tol": 1e-5, "max_iter": 100000}
    serial = LinearSVC(**kw, random_state=0, n_jobs=2).fit(X, y)
    again = LinearSVC(**kw, random_state=0, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(serial.coef_, again.coef_)
    LinearSVC(**kw).fit(X, y)  # n_jobs=None: serial
    fast = LinearSVC(**kw, n_jobs=2).fit(X, y)
    assert seen == [1, 1, 1, 2]
    assert _rel(fast.objective_[0], serial.objective_[0]) < 1e-4
    assert _agree(fast.predict(X), serial.predict(X)) >= 0.995
    LinearSVC(**kw, n_jobs=2).fit(X, np.array([0, 1, 2])[(np.arange(len(y)) % 3)])  # one-vs-rest: serial problems
    assert seen[4:] == [1, 1, 1]


def test_async_rule_wants_large_sparse_wide_data():
    from maxmargin.solvers import dual_cd
    from maxmargin.solvers._linear_common import linear_data

    X, _ = _sparse_wide(n=20000, d=5000, nnz=12)
    ld = linear_data(X, 1.0)
    assert dual_cd.async_workers(ld, 1) == 1
    want = min(2, dual_cd.numba.get_num_threads())
    assert dual_cd.async_workers(ld, 2) == want
    assert dual_cd.async_workers(linear_data(X[:1000], 1.0), 2) == 1  # small
    assert dual_cd.async_workers(linear_data(X[:, :1000], 1.0), 2) == 1  # few features
    dense_ish = sp.random(20000, 2500, density=0.02, format="csr", random_state=0)
    assert dual_cd.async_workers(linear_data(dense_ish, 1.0), 2) == 1  # not sparse enough


@pytest.mark.parametrize(
    "loss,dual,solver",
    [
        ("epsilon_insensitive", True, 13),
        ("squared_epsilon_insensitive", True, 12),
        ("squared_epsilon_insensitive", False, 11),
    ],
)
def test_svr_matches_liblinear(loss, dual, solver, tmp_path):
    X, y = make_regression(150, 6, noise=5.0, random_state=0)
    y = y / 50.0
    C = 0.05 if solver == 13 else 0.5  # within liblinear-official's 1000 epochs (see test_svc_matches_liblinear)
    est = LinearSVR(loss=loss, dual=dual, epsilon=0.1, C=C, tol=1e-8, max_iter=200000, random_state=0).fit(X, y)
    m = _liblinear(X, y, solver, C=C, eps=1e-6 if solver == 13 else 1e-8, extra="-p 0.1")
    liblinearutil.save_model(str(tmp_path / "r.model"), m)
    ll = maxmargin.load_liblinear_model(tmp_path / "r.model")
    a = primal_svr(loss, X, y, est.coef_, est.intercept_, C, 0.1)
    b = primal_svr(loss, X, y, ll.coef_, ll.intercept_, C, 0.1)
    assert est.objective_[0] == pytest.approx(a, rel=1e-9)
    assert a <= b * (1 + 1e-6) and _rel(a, b) < 1e-4
    np.testing.assert_allclose(est.coef_, ll.coef_, rtol=1e-2, atol=1e-3)


# --------------------------------------------------------------------------- against scikit-learn


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("combo", SVC_COMBOS, ids=lambda c: "-".join(map(str, c)))
def test_svc_matches_sklearn_weighted(combo, n_classes, sparse):
    from sklearn.svm import LinearSVC as SkLinearSVC

    penalty, loss, dual, mc = combo
    X, y = _data(n_classes, seed=1)
    sw = np.random.default_rng(0).uniform(0.2, 2.0, len(y))
    cw = {c: 1.0 + 0.5 * c for c in range(n_classes)}
    Xin = sp.csr_matrix(X) if sparse else X
    kw = {
        "penalty": penalty,
        "loss": loss,
        "dual": dual,
        "multi_class": mc,
        "C": 1.0,
        "tol": 1e-7,
        "max_iter": 200000,
        "class_weight": cw,
        "random_state": 0,
    }
    est = LinearSVC(**kw).fit(Xin, y, sample_weight=sw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sk = SkLinearSVC(**kw).fit(Xin, y, sample_weight=sw)
    assert est.coef_.shape == sk.coef_.shape
    assert np.shape(est.intercept_) == np.shape(sk.intercept_)
    assert _agree_decisive(est, X, sk.predict(X)) >= 0.995
    if mc == "crammer_singer" and n_classes == 2:
        return  # one collapsed decision function; the objective needs both classes' weights
    cwv = np.array([cw[c] for c in est.classes_])
    ours = primal_svc(penalty, loss, mc, X, y, est.coef_, est.intercept_, 1.0, sw=sw, cw=cwv)
    theirs = primal_svc(penalty, loss, mc, X, y, sk.coef_, sk.intercept_, 1.0, sw=sw, cw=cwv)
    for a, b in zip(ours, theirs):
        assert _rel(a, b) < 1e-4, (a, b)


@pytest.mark.parametrize(
    "loss,dual",
    [("epsilon_insensitive", True), ("squared_epsilon_insensitive", True), ("squared_epsilon_insensitive", False)],
)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_svr_matches_sklearn_weighted(loss, dual, sparse):
    from sklearn.svm import LinearSVR as SkLinearSVR

    X, y = make_regression(150, 6, noise=5.0, random_state=1)
    y = y / 50.0
    sw = np.random.default_rng(1).uniform(0.2, 2.0, len(y))
    Xin = sp.csr_matrix(X) if sparse else X
    kw = {"loss": loss, "dual": dual, "epsilon": 0.05, "C": 2.0, "tol": 1e-8, "max_iter": 200000, "random_state": 0}
    est = LinearSVR(**kw).fit(Xin, y, sample_weight=sw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sk = SkLinearSVR(**kw).fit(Xin, y, sample_weight=sw)
    a = primal_svr(loss, X, y, est.coef_, est.intercept_, 2.0, 0.05, sw=sw)
    b = primal_svr(loss, X, y, sk.coef_, sk.intercept_, 2.0, 0.05, sw=sw)
    assert _rel(a, b) < 1e-4
    assert est.coef_.shape == sk.coef_.shape and np.shape(est.intercept_) == np.shape(sk.intercept_)
    np.testing.assert_allclose(est.predict(X), sk.predict(X), rtol=1e-2, atol=1e-2)


def test_no_intercept_and_scaling_like_sklearn():
    from sklearn.svm import LinearSVC as SkLinearSVC

    X, y = _data(2, seed=3)
    for kw in ({"fit_intercept": False}, {"intercept_scaling": 10.0}):
        est = LinearSVC(tol=1e-8, max_iter=100000, **kw).fit(X, y)
        sk = SkLinearSVC(tol=1e-8, max_iter=100000, **kw).fit(X, y)
        np.testing.assert_allclose(est.coef_, sk.coef_, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(est.intercept_, sk.intercept_, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------- against an independent QP


def _qp(P, q, G, h):
    qpsolvers = pytest.importorskip("qpsolvers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = qpsolvers.solve_qp(
            sp.csc_matrix(P),
            q,
            G=sp.csc_matrix(G),
            h=h,
            solver="clarabel",
            tol_gap_abs=1e-10,
            tol_gap_rel=1e-10,
            tol_feas=1e-10,
        )
    assert z is not None
    return z


@pytest.mark.parametrize("penalty,loss", [("l2", "hinge"), ("l2", "squared_hinge"), ("l1", "squared_hinge")])
def test_svc_against_primal_qp(penalty, loss):
    """min reg(w) + sum C_i xi_i(^2) s.t. y_i w.x~_i >= 1 - xi_i, xi >= 0, solved by Clarabel."""
    X, y = _data(2, n=60, d=5, seed=4)
    yy = np.where(y == 1, 1.0, -1.0)
    C = np.random.default_rng(2).uniform(0.3, 1.5, len(y))
    Xb = np.hstack([X, np.ones((len(y), 1))])
    n, m = Xb.shape
    if penalty == "l2":  # z = (w, xi)
        P = sp.block_diag([sp.eye(m), sp.diags(2 * C if loss == "squared_hinge" else np.full(n, 1e-12))])
        q = np.concatenate([np.zeros(m), np.zeros(n) if loss == "squared_hinge" else C])
        G = sp.vstack([sp.hstack([-(yy[:, None] * Xb), -sp.eye(n)]), sp.hstack([sp.csr_matrix((n, m)), -sp.eye(n)])])
        h = np.concatenate([-np.ones(n), np.zeros(n)])
        z = _qp(P, q, G, h)
        w = z[:m]
    else:  # z = (u, v, xi), w = u - v, u, v >= 0
        P = sp.block_diag([sp.eye(2 * m) * 1e-12, sp.diags(2 * C)])
        q = np.concatenate([np.ones(2 * m), np.zeros(n)])
        A = yy[:, None] * Xb
        G = sp.vstack([sp.hstack([-A, A, -sp.eye(n)]), -sp.eye(2 * m + n)])
        h = np.concatenate([-np.ones(n), np.zeros(2 * m + n)])
        z = _qp(P, q, G, h)
        w = z[:m] - z[m : 2 * m]
    ref = primal_svc(penalty, loss, "ovr", X, y, w[None, :-1], w[-1:], 1.0, sw=C)[0]
    est = LinearSVC(penalty=penalty, loss=loss, dual=penalty == "l2", tol=1e-9, max_iter=500000).fit(X, y, C)
    assert _rel(est.objective_[0], ref) < 1e-5
    np.testing.assert_allclose(est.coef_[0], w[:-1], atol=2e-3)
    if penalty == "l2" and loss == "hinge":
        assert est.duality_gap_[0] >= -1e-8 and est.duality_gap_[0] < 1e-4 * ref


# --------------------------------------------------------------------------- scikit-learn's checks

_SW_XFAIL = (
    "the solvers stop at tol (a relative rule, LIBLINEAR's), so weighting a sample by 2 and repeating it "
    "reach the same objective but not the same coefficients to 1e-7; scikit-learn expects the same "
    "failure of its own LinearSVC / LinearSVR"
)


def _expected_failed(est):
    return {
        "check_sample_weight_equivalence_on_dense_data": _SW_XFAIL,
        "check_sample_weight_equivalence_on_sparse_data": _SW_XFAIL,
    }


@parametrize_with_checks([LinearSVC(), LinearSVR()], expected_failed_checks=_expected_failed)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kw,match",
    [
        (
            {"penalty": "l1", "loss": "hinge", "dual": False},
            "The combination of penalty='l1' and loss='hinge' is not supported, Parameters: penalty='l1', loss='hinge'",
        ),
        (
            {"penalty": "l1", "loss": "squared_hinge", "dual": True},
            "The combination of penalty='l1' and loss='squared_hinge' are not supported when dual=True",
        ),
        (
            {"penalty": "l2", "loss": "hinge", "dual": False},
            "The combination of penalty='l2' and loss='hinge' are not supported when dual=False",
        ),
    ],
)
def test_invalid_combinations_like_sklearn(kw, match):
    from sklearn.svm import LinearSVC as SkLinearSVC

    X, y = _data(2)
    with pytest.raises(ValueError) as ours:
        LinearSVC(**kw).fit(X, y)
    with pytest.raises(ValueError) as theirs:
        SkLinearSVC(**kw).fit(X, y)
    assert str(ours.value) == str(theirs.value)
    assert match in str(ours.value)


def test_bad_input_named():
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = _data(2)
    with pytest.raises(InvalidParameterError, match="'C' parameter"):
        LinearSVC(C=-1).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'intercept_scaling' parameter"):
        LinearSVR(intercept_scaling=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'time_limit' parameter"):
        LinearSVC(time_limit=-1).fit(X, y)
    sw = np.ones(len(y))
    sw[7] = -1
    with pytest.raises(ValueError, match="row 7 is negative"):
        LinearSVC().fit(X, y, sample_weight=sw)
    with pytest.raises(ValueError, match="the data contains only one class"):
        LinearSVC().fit(X, np.ones(len(y), dtype=int))
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        LinearSVC().fit(Xn, y)
    with pytest.raises(ValueError, match="X has 3 features, but LinearSVC is expecting 8 features"):
        LinearSVC().fit(X, y).predict(X[:, :3])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearSVC(dual=True),
        lambda: LinearSVC(dual=False),
        lambda: LinearSVC(loss="hinge"),
        lambda: LinearSVC(multi_class="crammer_singer"),
        lambda: LinearSVC(penalty="l1", dual=False),
        lambda: LinearSVR(),
        lambda: LinearSVR(loss="squared_epsilon_insensitive", dual=False),
        lambda: LinearSVR(loss="squared_epsilon_insensitive", dual=True),
    ],
)
@pytest.mark.parametrize("unit", [False, True])
def test_non_finite_csr_values_named_and_nothing_changed(make, bad, unit):
    """A CSR matrix's stored values are checked after validation, by the pass each solver makes anyway (the rows'
    squared norms of the dual solvers, 0/1 data's check for ones): a NaN or infinity still gets scikit-learn's
    error -- on rows repeated three times too (the merged rows of the dual) -- and a refused fit leaves the fitted
    estimator as it was."""
    X, y = _data(2, n=300)
    X = sp.vstack([sp.csr_matrix(X)] * 3).tocsr()
    y = np.tile(y, 3)
    if unit:
        X.data[:] = 1.0
    Xb = X.copy()
    Xb.data[Xb.data.shape[0] // 2] = bad
    est = make()
    target = y if isinstance(est, LinearSVC) else y.astype(float)
    with pytest.raises(ValueError, match="Input X contains (NaN|infinity)"):
        est.fit(Xb, target)
    assert not hasattr(est, "n_features_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, target)
    coef = est.coef_.copy()
    with pytest.raises(ValueError, match="Input X contains (NaN|infinity)"):
        est.fit(Xb[:, :5], target)
    assert est.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(est.coef_, coef)


@pytest.mark.parametrize("seed", [3, 6, 8])
def test_crammer_singer_on_repeated_unit_rows(seed):
    """Crammer-Singer on 0/1 rows each repeated three times: the stall watch once met a look without any violation
    and divided by it (ZeroDivisionError for these seeds until session 70); the fit now ends at the objective of a
    tight fit (within 1e-3) and predicts as it does."""
    X, y = _data(2, n=300)
    X = sp.vstack([sp.csr_matrix(X)] * 3).tocsr()
    y = np.tile(y, 3)
    X.data[:] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = LinearSVC(multi_class="crammer_singer", random_state=seed).fit(X, y)
        tight = LinearSVC(multi_class="crammer_singer", tol=1e-6, max_iter=20000, random_state=seed).fit(X, y)
    assert np.isfinite(est.objective_).all()
    assert est.objective_[0] == pytest.approx(tight.objective_[0], rel=1e-3)
    assert np.mean(est.predict(X) == tight.predict(X)) >= 0.99


# --------------------------------------------------------------------------- callback, time limit, warm start


def test_callback_and_stop():
    X, y = _data(3, n=300)
    seen = []

    def cb(info):
        seen.append(info)
        return False

    with pytest.warns(ConvergenceWarning):
        est = LinearSVC(dual=True, tol=1e-12, max_iter=10**6, callback=cb).fit(X, y)
    assert est.fit_status_ == 1
    assert set(seen[0]) >= {"iteration", "objective", "violation", "tol", "elapsed", "subproblem", "n_subproblems"}
    assert seen[0]["subproblem"] == 0 and seen[0]["n_subproblems"] == 3 and len(seen) == 1
    assert np.isnan(est.objective_[1]) and est.predict(X).shape == (300,)
    calls = []
    LinearSVR(tol=1e-12, max_iter=50, callback=lambda info: calls.append(info["iteration"])).fit(X, y * 1.0)
    assert calls and calls == sorted(calls)


def test_time_limit(monkeypatch):
    from maxmargin.solvers import dual_ipm

    # no stall watch: it would end this fit ('stalled': tol 1e-14 is out of reach) before the time limit does
    monkeypatch.setattr(dual_ipm, "_watch", lambda *args: None)
    X, y = _data(2, n=400)
    with pytest.warns(ConvergenceWarning, match="time_limit"):
        est = LinearSVC(loss="hinge", dual=True, tol=1e-14, max_iter=10**8, time_limit=0.3).fit(X, y)
    assert est.fit_status_ == 1 and est.fit_time_ < 5


@pytest.mark.parametrize(
    "kw",
    [
        {"dual": True},
        {"loss": "hinge", "dual": True},
        {"dual": False},
        {"penalty": "l1", "dual": False},
        {"multi_class": "crammer_singer"},
    ],
)
def test_warm_start_along_C_path(kw, monkeypatch):
    from maxmargin.solvers import dual_primal

    # the iterations compared are the dual epochs: no early switch to the Newton method, whose few iterations a
    # cold fit would otherwise count instead of its epochs (dual_primal.StallWatch)
    monkeypatch.setattr(dual_primal, "STALL_FIRST", 10**9)
    X, y = _data(3, n=300, seed=5)
    tol = 1e-3 if "multi_class" in kw else 1e-6
    warm = LinearSVC(tol=tol, max_iter=10**6, warm_start=True, random_state=0, **kw)
    its_warm, its_cold = 0, 0
    for C in (0.5, 1.0, 2.0):
        warm.set_params(C=C).fit(X, y)
        cold = LinearSVC(C=C, tol=tol, max_iter=10**6, random_state=0, **kw).fit(X, y)
        np.testing.assert_allclose(warm.objective_, cold.objective_, rtol=1e-4 if tol < 1e-4 else 1e-3)
        if C != 0.5:
            its_warm += warm.n_iter_
            its_cold += cold.n_iter_
    assert its_warm < its_cold


def test_warm_start_svr(monkeypatch):
    from maxmargin.solvers import dual_primal

    monkeypatch.setattr(dual_primal, "STALL_FIRST", 10**9)  # the dual epochs compared (see the test above)
    X, y = make_regression(200, 5, noise=1.0, random_state=0)
    kw = {"loss": "squared_epsilon_insensitive", "dual": True, "tol": 1e-6, "max_iter": 10**6, "random_state": 0}
    warm = LinearSVR(C=1.0, warm_start=True, **kw).fit(X, y)
    warm.set_params(C=1.5).fit(X, y)
    cold = LinearSVR(C=1.5, **kw).fit(X, y)
    assert _rel(warm.objective_[0], cold.objective_[0]) < 1e-4 and warm.n_iter_ < cold.n_iter_


def test_float32_stays_and_threads_agree(monkeypatch):
    from maxmargin import linear

    monkeypatch.setattr(linear, "THREADS_MIN_WORK", 0)  # threads even for problems this small
    assert LinearSVC(n_jobs=2)._threads(4, 300) == 2
    X, y = _data(4, n=300, seed=6)
    X32 = X.astype(np.float32)
    a = LinearSVC(tol=1e-6, max_iter=10**5, dual=True, n_jobs=1, random_state=0).fit(X32, y)
    b = LinearSVC(tol=1e-6, max_iter=10**5, dual=True, n_jobs=2, random_state=0).fit(X32, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = LinearSVC(tol=1e-6, max_iter=10**5, dual=True).fit(X, y)
    np.testing.assert_allclose(a.objective_, c.objective_, rtol=1e-4)
    assert a.margin_.shape == (4,) and np.all(a.margin_ > 0)
    monkeypatch.undo()
    assert LinearSVC(n_jobs=2)._threads(4, 300) == 1  # small problems one after the other (THREADS_MIN_WORK)


def test_crammer_singer_margins_from_its_objective_pass():
    """Crammer-Singer's margin_ comes from the class norms its objective's pass sums over the weights the data can
    make nonzero (no pass over coef_ of its own): 1 / ||coef_ row||, the bias left out, with columns stored nowhere
    and the objective as NumPy computes it from coef_ and intercept_."""
    rng = np.random.default_rng(12)
    X = sp.random(500, 4000, density=0.01, format="csr", random_state=4)
    X = sp.hstack([X[:, :2500], sp.csr_matrix((500, 1500))]).tocsr()
    y = np.argmax(X[:, :2500] @ rng.normal(size=(2500, 4)) + 0.1 * rng.normal(size=(500, 4)), axis=1)
    m = LinearSVC(multi_class="crammer_singer", tol=1e-6, max_iter=10**5, random_state=0).fit(X, y)
    assert not np.any(m.coef_[:, 2500:]) and np.all(m.intercept_ != 0.0)
    np.testing.assert_allclose(m.margin_, 1.0 / np.linalg.norm(m.coef_, axis=1), rtol=1e-10)
    F = X @ m.coef_.T + m.intercept_
    margins = 1.0 + F - F[np.arange(500), y][:, None]
    margins[np.arange(500), y] = 0.0
    expected = 0.5 * (np.sum(m.coef_**2) + np.sum(m.intercept_**2)) + np.maximum(margins.max(axis=1), 0.0).sum()
    assert _rel(m.objective_[0], expected) < 1e-10


def test_one_vs_rest_weights_written_side_by_side(monkeypatch):
    import pickle

    from maxmargin import _pages

    monkeypatch.setattr(_pages, "MIN_BYTES", 0)  # the mapped memory even for this small problem
    rng = np.random.default_rng(11)
    X = sp.random(400, 5000, density=0.01, format="csr", random_state=3)
    X = sp.hstack([X[:, :3000], sp.csr_matrix((400, 2000))]).tocsr()  # the last 2,000 features stored nowhere
    y = np.argmax(X[:, :3000] @ rng.normal(size=(3000, 5)) + 0.1 * rng.normal(size=(400, 5)), axis=1)
    kw = {"tol": 1e-8, "max_iter": 10**6, "random_state": 0}
    m = LinearSVC(**kw).fit(X, y)
    assert m.coef_.shape == (5, 5000) and m.coef_.flags.f_contiguous and m.intercept_.shape == (5,)
    assert not np.any(m.coef_[:, 3000:]) and np.count_nonzero(m.coef_) > 0
    np.testing.assert_allclose(m.margin_, 1.0 / np.linalg.norm(m.coef_, axis=1), rtol=1e-12)
    for c in range(5):  # each row is its own one-vs-rest problem's solution
        b = LinearSVC(**kw).fit(X, np.where(y == c, 1, 0))
        assert _rel(m.objective_[c], b.objective_[0]) < 1e-6
        np.testing.assert_allclose(m.coef_[c], b.coef_[0], atol=1e-4)
        assert m.intercept_[c] == pytest.approx(b.intercept_[0], abs=1e-4)
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    np.testing.assert_array_equal(m.predict(X), m.classes_[np.argmax(m.decision_function(X), axis=1)])


def test_pages_zeros_are_plain_zeroed_arrays(monkeypatch):
    import pickle

    from maxmargin import _pages

    small = _pages.zeros((3, 4))
    assert type(small) is np.ndarray and small.shape == (3, 4) and not small.any()
    monkeypatch.setattr(_pages, "MIN_BYTES", 0)
    a = _pages.zeros((1000, 7))
    assert a.shape == (1000, 7) and a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable
    assert not a.any()
    a[3, 2] = 5.0
    b = pickle.loads(pickle.dumps(a))
    assert b[3, 2] == 5.0 and b.sum() == 5.0


# --------------------------------------------------------------------------- model files


@pytest.mark.parametrize(
    "est", [LinearSVC(), LinearSVC(multi_class="crammer_singer"), LinearSVR(epsilon=0.1)], ids=["svc", "cs", "svr"]
)
def test_model_file_round_trip(est, tmp_path):
    X, y = _data(3)
    if isinstance(est, LinearSVR):
        y = X @ np.arange(X.shape[1]) + 0.1
    est.fit(X, y)
    maxmargin.save_model(est, tmp_path / "m.mm")
    back = maxmargin.load_model(tmp_path / "m.mm")
    assert type(back) is type(est)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    np.testing.assert_array_equal(back.objective_, est.objective_)


def test_coef_is_in_fortran_order_as_scikit_learns(tmp_path):
    """scikit-learn's decision function takes X @ coef_.T; for CSR rows a C-ordered coef_ would be copied
    on every call (24 MB for 100 classes of 30,000 features)."""
    X, y = _data(3)
    est = LinearSVC().fit(X, y)
    assert est.coef_.flags.f_contiguous
    maxmargin.save_liblinear_model(est, tmp_path / "m.model")
    back = maxmargin.load_liblinear_model(tmp_path / "m.model")
    assert back.coef_.flags.f_contiguous
    got = back.decision_function(sp.csr_matrix(X))
    np.testing.assert_allclose(got, est.decision_function(X), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(
    "solver,n_classes", [(1, 2), (2, 3), (3, 2), (4, 3), (4, 2), (5, 3), (11, 0), (12, 0), (13, 0)]
)
def test_liblinear_files_both_ways(solver, n_classes, tmp_path):
    X, y = _data(max(n_classes, 2), seed=7)
    if n_classes == 0:
        y = (X @ np.linspace(-1, 1, X.shape[1])).astype(float)
    else:
        y = np.array([5, -3, 7])[y]  # integer labels, not in LIBLINEAR's order
    m = _liblinear(X, y, solver, eps=1e-3, extra="-p 0.1" if n_classes == 0 else "")
    liblinearutil.save_model(str(tmp_path / "theirs.model"), m)
    theirs_pred, _, _ = liblinearutil.predict(np.zeros(len(y)), sp.csr_matrix(X), m, "-q")
    ours = maxmargin.load_liblinear_model(tmp_path / "theirs.model")
    if n_classes:
        # exact ties between classes (Crammer-Singer puts training points on them, depending on LIBLINEAR's
        # unseeded shuffles) are broken in LIBLINEAR's label order there and in sorted order here
        assert _agree_decisive(ours, X, np.asarray(theirs_pred)) == 1.0
    else:
        np.testing.assert_allclose(ours.predict(X), theirs_pred, rtol=1e-9, atol=1e-9)

    # ours, written and read back by liblinear-official
    kw = {
        1: {"dual": True},
        2: {"dual": False},
        3: {"loss": "hinge", "dual": True},
        4: {"multi_class": "crammer_singer"},
        5: {"penalty": "l1", "dual": False},
    }
    est = (
        LinearSVR(
            epsilon=0.1,
            dual=solver != 11,
            loss="epsilon_insensitive" if solver == 13 else "squared_epsilon_insensitive",
        )
        if n_classes == 0
        else LinearSVC(**kw[solver])
    )
    est.fit(X, y)
    assert est.solver_type_ == solver
    maxmargin.save_liblinear_model(est, tmp_path / "ours.model")
    back = liblinearutil.load_model(str(tmp_path / "ours.model"))
    p, _, _ = liblinearutil.predict(np.zeros(len(y)), sp.csr_matrix(X), back, "-q")
    if n_classes:
        assert _agree(est.predict(X), np.asarray(p)) == 1.0
    else:
        np.testing.assert_allclose(est.predict(X), p, rtol=1e-9, atol=1e-9)
    again = maxmargin.load_liblinear_model(tmp_path / "ours.model")
    np.testing.assert_allclose(again.coef_, est.coef_, rtol=1e-15)


def test_liblinear_file_errors(tmp_path):
    (tmp_path / "lr.model").write_text("solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 1\nbias -1\nw\n0.5 \n")
    with pytest.raises(maxmargin.ModelFormatError, match="not a support vector machine"):
        maxmargin.load_liblinear_model(tmp_path / "lr.model")
    (tmp_path / "cut.model").write_text(
        "solver_type L2R_L2LOSS_SVC\nnr_class 2\nlabel 1 -1\nnr_feature 3\nbias -1\nw\n0.5 \n"
    )
    with pytest.raises(maxmargin.ModelFormatError, match="expected 3 weights"):
        maxmargin.load_liblinear_model(tmp_path / "cut.model")
    X, y = _data(2)
    est = LinearSVC().fit(X, np.array(["a", "b"])[y])
    with pytest.raises(ValueError, match="integer labels"):
        maxmargin.save_liblinear_model(est, tmp_path / "x.model")


def test_cli_train_linear(tmp_path):
    from click.testing import CliRunner

    from maxmargin.cli import cli

    X, y = _data(2)
    data = tmp_path / "d.svm"
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(X, np.where(y == 1, 1, -1), str(data), zero_based=False)
    out = tmp_path / "d.model"
    r = CliRunner().invoke(
        cli, ["train", str(data), "--linear", "-c", "2", "--model-format", "liblinear", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert "Trained LinearSVC" in r.output
    m = liblinearutil.load_model(str(out))
    assert m.get_nr_feature() == X.shape[1]
    r = CliRunner().invoke(cli, ["predict", str(out), str(data)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["train", str(data), "--model-format", "liblinear", "-o", str(out)])
    assert r.exit_code != 0 and "needs --linear" in r.output


def _line(output, start):
    return next(x for x in output.splitlines() if x.strip().startswith(start))


def test_cli_linear_margin_line_says_one_over_norm_w(tmp_path):
    """The training report's margin of a linear model is 1/||w|| (intercept excluded), and says so; a kernel
    model's line keeps min y f(x)/||w||."""
    from click.testing import CliRunner
    from sklearn.datasets import dump_svmlight_file

    from maxmargin.cli import cli
    from maxmargin.io import load_liblinear_model

    X, y = _data(2)
    data = tmp_path / "d.svm"
    dump_svmlight_file(X, np.where(y == 1, 1, -1), str(data), zero_based=False)
    r = CliRunner().invoke(
        cli, ["train", str(data), "--linear", "--model-format", "liblinear", "-o", str(tmp_path / "m")]
    )
    assert r.exit_code == 0, r.output
    line = _line(r.output, "margin")
    assert "1 / ||w||" in line and "min y f(x)" not in line
    coef = load_liblinear_model(tmp_path / "m").coef_
    assert float(line.split()[1]) == pytest.approx(1.0 / np.linalg.norm(coef), rel=1e-3)
    r = CliRunner().invoke(cli, ["train", str(data), "-k", "linear", "-o", str(tmp_path / "k.mm")])
    assert r.exit_code == 0, r.output
    assert "min y f(x) / ||w||" in _line(r.output, "margin")


@pytest.mark.parametrize("n_classes", [2, 3])
def test_cli_info_reads_liblinear_files(n_classes, tmp_path):
    """``maxmargin info`` describes a LIBLINEAR model file written by liblinear-official itself: solver type,
    classes, features, and 1/||w|| per problem from the file's weights."""
    from click.testing import CliRunner

    from maxmargin.cli import cli

    X, y = _data(n_classes, seed=4)
    y = np.array([4, -2, 9])[y]
    m = _liblinear(X, y, 2, eps=1e-3)
    path = tmp_path / "theirs.model"
    liblinearutil.save_model(str(path), m)
    nr_w = 1 if n_classes == 2 else n_classes
    W = np.ctypeslib.as_array(m.w, shape=((X.shape[1] + 1) * nr_w,)).reshape(X.shape[1] + 1, nr_w)
    norms = np.linalg.norm(W[:-1], axis=0)  # the bias feature's weight is the intercept: excluded
    r = CliRunner().invoke(cli, ["info", str(path)])
    assert r.exit_code == 0, r.output
    assert "LIBLINEAR model file" in _line(r.output, "File")
    assert "L2R_L2LOSS_SVC" in _line(r.output, "Parameters")
    assert _line(r.output, "Features").split()[1] == str(X.shape[1])
    assert all(str(c) in _line(r.output, "Type") for c in (4, -2, 9)[:n_classes])
    margin = _line(r.output, "Margin")
    assert "1 / ||w||" in margin
    shown = [float(v) for v in margin.split()[1:4:2]] if n_classes > 2 else [float(margin.split()[1])]
    np.testing.assert_allclose(shown, [(1 / norms).min(), (1 / norms).max()][: len(shown)], rtol=1e-3)
    r = CliRunner().invoke(cli, ["info", "--json", str(path)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["file_format"] == "liblinear" and d["n_features"] == X.shape[1]
    np.testing.assert_allclose(np.sort(np.atleast_1d(d["margin"])), np.sort(1 / norms), rtol=1e-9)


# --------------------------------------------------------------------------- the approximate-kernel route


def test_nystroem_pipeline_beats_linear():
    from sklearn.datasets import make_circles
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    X, y = make_circles(2000, noise=0.1, factor=0.5, random_state=0)
    Xt, yt = make_circles(1000, noise=0.1, factor=0.5, random_state=1)
    pipe = make_pipeline(Nystroem(gamma=2.0, n_components=100, random_state=0), LinearSVC(C=1.0)).fit(X, y)
    plain = LinearSVC(C=1.0).fit(X, y)
    assert pipe.score(Xt, yt) > 0.95
    assert pipe.score(Xt, yt) > plain.score(Xt, yt) + 0.3


def test_tron_threads_match_serial(monkeypatch):
    """The chunked passes of TRON on Numba threads (large data only) give the serial result."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    X, y = _data(2, n=3000, d=20, seed=8)
    yy = np.where(y == 1, 1.0, -1.0)
    C = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    serial = tron.solve(linear_data(sp.csr_matrix(X), 1.0), yy, C, tol=1e-8)
    monkeypatch.setattr(tron, "PARALLEL_STORED", 10)
    for Xin in (X, sp.csr_matrix(X)):
        par = tron.solve(linear_data(Xin, 1.0), yy, C, tol=1e-8)
        assert _rel(par.objective, serial.objective) < 1e-8  # sums in another order: another stopping point
        np.testing.assert_allclose(par.w, serial.w, rtol=1e-4, atol=1e-6)
    yr = X @ np.linspace(-1, 1, X.shape[1])
    a = tron.solve(linear_data(X, 1.0), yr, C, kind="squared_epsilon_insensitive", epsilon=0.1, tol=1e-8)
    monkeypatch.setattr(tron, "PARALLEL_STORED", 10**12)
    b = tron.solve(linear_data(X, 1.0), yr, C, kind="squared_epsilon_insensitive", epsilon=0.1, tol=1e-8)
    assert _rel(a.objective, b.objective) < 1e-8


def _active_rows_problem(seed, unit=False):
    """Sparse rows, well separated: after one Newton step fewer than half the rows (and values) stay active."""
    rng = np.random.default_rng(seed)
    X = sp.random(1500, 60, density=0.15, format="csr", random_state=rng)
    if unit:
        X.data[:] = 1.0
    y = np.where(np.asarray(X @ rng.normal(size=60)).ravel() > 0, 1.0, -1.0)
    return X, y, rng.uniform(0.5, 2.0, 1500)


@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("chunks", [1, 2])
def test_tron_compact_copies_the_active_rows_in_order(unit, chunks):
    """``tron._compact`` writes each chunk's active rows one after the other (their column numbers, values and z)
    where they fit, and copies nothing where they hold more values than its arrays."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    X, y, C = _active_rows_problem(21, unit)
    ld = linear_data(X, 1.0)
    assert bool(ld.unit) == unit
    args = ld.args() + (bool(ld.unit), False)
    n, m = X.shape[0], ld.n_weights
    w = np.random.default_rng(2).normal(size=m)
    o, z, act, n_act = np.empty(n), np.empty(n), np.empty(n, np.int64), np.zeros(chunks, np.int64)
    acc = tron._accumulators(chunks, 2 * m)
    tron._fun_ser(w, *args, y, C, 0, 0.0, o, chunks)
    grad_diag, compact = (
        (tron._grad_diag_ser, tron._compact_ser) if chunks == 1 else (tron._grad_diag_par, tron._compact_par)
    )
    grad_diag(o, *args, y, C, 0, 0.0, z, act, n_act, acc, chunks)
    rows = np.concatenate([act[t * n // chunks : t * n // chunks + n_act[t]] for t in range(chunks)])
    assert 0 < rows.size < n
    want = X[rows]
    cap = want.nnz
    cdata = np.full(0 if unit else cap, np.nan)
    cind, cptr, cz = np.full(cap, -1, np.int32), np.full(n + 1, -1, np.int64), np.full(n, np.nan)
    counts = np.empty(chunks + 1, np.int64)
    assert compact(ld.data, ld.indices, ld.indptr, bool(ld.unit), z, act, n_act, chunks, cdata, cind, cptr, cz, counts)
    k = 0
    for t in range(chunks):
        lo = t * n // chunks
        for q in range(lo, lo + n_act[t]):
            i = rows[k]
            a, b = cptr[q], cptr[q + 1]
            np.testing.assert_array_equal(cind[a:b], X.indices[X.indptr[i] : X.indptr[i + 1]])
            if not unit:
                np.testing.assert_array_equal(cdata[a:b], X.data[X.indptr[i] : X.indptr[i + 1]])
            assert cz[q] == z[i]
            k += 1
    assert cptr[n_act[0]] == (want.indptr[n_act[0]])
    small = np.full(cap - 1, -1, np.int32)
    assert not compact(
        ld.data, ld.indices, ld.indptr, bool(ld.unit), z, act, n_act, chunks, cdata, small, cptr, cz, counts
    )
    assert (small == -1).all()


@pytest.mark.parametrize("unit", [False, True])
def test_tron_cg_steps_on_the_active_rows_copy_keep_the_iterates(monkeypatch, unit):
    """The line-search Newton method's CG steps on the copy of the active rows (``COMPACT_SHARE``, here with
    ``COMPACT_MIN_BYTES`` 0) make the same iterates, bit for bit, as in place: serial and on two chunks."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    X, y, C = _active_rows_problem(22, unit)
    three = tron.solve(linear_data(X, 1.0), y, C, tol=1e-6, max_iter=3)  # the copy is made from the 4th step on
    margins = y * (X @ three.w[:-1] + three.w[-1])
    assert np.diff(X.indptr)[margins < 1].sum() < tron.COMPACT_SHARE * X.nnz
    for stored in (10**12, 10):
        monkeypatch.setattr(tron, "PARALLEL_STORED", stored)
        monkeypatch.setattr(tron, "COMPACT_MIN_BYTES", 1 << 40)
        plain = tron.solve(linear_data(X, 1.0), y, C, tol=1e-6)
        monkeypatch.setattr(tron, "COMPACT_MIN_BYTES", 0)
        monkeypatch.setattr(tron, "COMPACT_MIN_ROW_VALUES", 0)
        copied = tron.solve(linear_data(X, 1.0), y, C, tol=1e-6)
        assert plain.converged and plain.n_iter >= 6
        np.testing.assert_array_equal(copied.w, plain.w)
        assert copied.n_iter == plain.n_iter and copied.objective == plain.objective


def test_tron_chunk_accumulators_sit_apart_and_their_pads_stay_unread():
    """Each chunk's accumulator row of TRON's passes starts on a 128-byte boundary, ACC_PAD_DOUBLES clear of the
    next (unpadded, two threads wrote one cache line for every row: the gradient's pass ran slower on two threads
    than on one), and the passes never read the pads: NaN there leaves the sums those of NumPy."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    acc = tron._accumulators(2, 46)
    assert acc.shape[0] == 2 and acc.shape[1] >= 46 + tron.ACC_PAD_DOUBLES
    assert acc.ctypes.data % 128 == 0 and acc.strides[0] % 128 == 0
    rng = np.random.default_rng(11)
    X = sp.random(400, 22, density=0.6, format="csr", random_state=rng)
    y = np.where(rng.random(400) < 0.5, 1.0, -1.0)
    C = rng.uniform(0.5, 2.0, 400)
    ld = linear_data(X, 1.0)
    m = ld.n_weights
    w = rng.normal(size=m) * 0.3
    Xb = np.hstack([X.toarray(), np.ones((400, 1))])
    o, z = np.empty(400), np.empty(400)
    act, n_act = np.empty(400, dtype=np.int64), np.zeros(2, dtype=np.int64)
    acc = tron._accumulators(2, 2 * m)
    acc.fill(np.nan)
    args = ld.args() + (bool(ld.unit), False)
    tron._fun_par(w, *args, y, C, 0, 0.0, o, 2)
    np.testing.assert_allclose(o, Xb @ w, rtol=1e-12)
    tron._grad_diag_par(o, *args, y, C, 0, 0.0, z, act, n_act, acc, 2)
    r = np.minimum(y * o - 1.0, 0.0)
    coef = 2.0 * C * r * y
    both = acc[0, : 2 * m] + acc[1, : 2 * m]  # (interleaved: weight j's two sums at 2j and 2j + 1)
    np.testing.assert_allclose(both[0::2], Xb.T @ coef, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(both[1::2], (Xb**2).T @ (2.0 * C * (r < 0)), rtol=1e-10)
    acc[:, 2 * m :] = np.nan
    v = rng.normal(size=m)
    tron._hess_vec_par(v, *args, z, act, n_act, acc, 2)
    np.testing.assert_allclose(acc[0, :m] + acc[1, :m], Xb.T @ (z * (Xb @ v)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("per_row", [2, 40])
def test_tron_products_only_pass_and_far_weights(per_row):
    """The line search's pass ``X s`` (``kind=PRODUCTS_ONLY``) stores the products and no loss; over more weights
    than FAR_WEIGHTS, the passes with the weights' prefetch (rows of 2 values) and without (40) give the products and
    the Hessian-vector sums of NumPy, on one chunk and two."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(66)
    n, d = 3000, tron.FAR_WEIGHTS + 500
    cols = rng.integers(0, d, size=(n, per_row))
    cols[:, 0] = np.arange(n) * (d // n)  # rows spread over all the weights: none unused
    X = sp.csr_matrix((rng.normal(size=n * per_row), (np.repeat(np.arange(n), per_row), cols.ravel())), shape=(n, d))
    X.sum_duplicates()
    ld = linear_data(X, 1.0)
    assert ld.n_weights > tron.FAR_WEIGHTS
    assert (X.nnz <= tron.FAR_ROW_VALUES * n) == (per_row == 2)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    C = rng.uniform(0.5, 2.0, n)
    m = ld.n_weights
    args = ld.args() + (bool(ld.unit), per_row == 2)
    s = rng.normal(size=m)
    xs = np.asarray(X @ s[:d]).ravel() + s[d]
    for chunks, fun in ((1, tron._fun_ser), (2, tron._fun_par)):
        o = np.full(n, np.nan)
        assert fun(s, *args, y, C, tron.PRODUCTS_ONLY, 0.0, o, chunks) == 0.0
        np.testing.assert_allclose(o, xs, rtol=1e-12, atol=1e-12)
        loss = fun(s, *args, y, C, 0, 0.0, o, chunks)
        np.testing.assert_allclose(loss, np.sum(C * np.minimum(y * xs - 1.0, 0.0) ** 2), rtol=1e-12)
    z = 2.0 * C * (y * xs < 1.0)
    act = np.flatnonzero(z).astype(np.int64)
    n_act = np.array([act.shape[0]], dtype=np.int64)
    acc = tron._accumulators(1, 2 * m)
    v = rng.normal(size=m)
    tron._hess_vec_ser(v, *args, z, act, n_act, acc, 1)
    Xb = sp.hstack([X, np.ones((n, 1))]).tocsr()
    np.testing.assert_allclose(acc[0, :m], Xb.T @ (z * (Xb @ v)), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_dual_plan_alone_unless_problems_run_on_threads(monkeypatch, loss):
    """The dual CD's prefetch plan is asked with ``alone=True`` for a binary problem and for one-vs-rest's problems
    run one at a time (``n_jobs=1``), with ``alone=False`` where they run on two threads; the models are the same."""
    import maxmargin.linear as linear_mod
    from maxmargin.solvers import dual_cd

    asked = []
    real = dual_cd.prefetch_plan
    monkeypatch.setattr(dual_cd, "prefetch_plan", lambda ld, **kw: asked.append(kw.get("alone")) or real(ld, **kw))
    monkeypatch.setattr(linear_mod, "cores", lambda: 2)
    monkeypatch.setattr(linear_mod, "THREADS_MIN_WORK", 0)
    rng = np.random.default_rng(5)
    X = sp.random(300, 40, density=0.2, format="csr", random_state=rng)
    y3 = rng.integers(0, 3, 300)

    def fit(y, **kw):
        return LinearSVC(loss=loss, dual=True, tol=1e-3, random_state=0, **kw).fit(X, y)

    fit(y3 % 2)
    assert asked and all(a is True for a in asked)
    asked.clear()
    serial = fit(y3, n_jobs=1)
    assert len(asked) >= 3 and all(a is True for a in asked)
    asked.clear()
    threaded = fit(y3, n_jobs=2)
    assert len(asked) >= 3 and all(a is False for a in asked)
    np.testing.assert_array_equal(serial.coef_, threaded.coef_)


def test_far_weights_by_how_the_values_spread(monkeypatch):
    """TRON's passes prefetch the weights of the rows ahead only over more than FAR_WEIGHTS weights, on rows of at
    most FAR_ROW_VALUES values, and where the L2-sized set of the most frequent columns holds less than FAR_HOT_SHARE
    of the values (here a 16 KiB L2: 1,024 columns): values spread at random over the columns -- yes; the same number
    of values on 500 columns, or rows of 40 values, or fewer weights -- no.  A compacted copy of the rows keeps the
    columns' counts (compact_columns)."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import compact_columns, linear_data

    monkeypatch.setattr(tron, "l2_cache_bytes", lambda: 16 << 10)
    rng = np.random.default_rng(73)
    n, d = 4000, tron.FAR_WEIGHTS + 500

    def rows(per_row, span, cols=d):
        c = rng.integers(0, span, size=(n, per_row))
        X = sp.csr_matrix((np.ones(n * per_row), (np.repeat(np.arange(n), per_row), c.ravel())), shape=(n, cols))
        X.sum_duplicates()
        return linear_data(X, 1.0)

    spread = rows(3, d)
    assert tron.far_weights(spread)
    assert not tron.far_weights(rows(3, 500))  # every value on 500 hot columns
    assert not tron.far_weights(rows(40, d))  # long rows
    assert not tron.far_weights(rows(3, 5000, cols=5000))  # few weights
    assert not tron.far_weights(linear_data(rng.normal(size=(50, 20)), 1.0))  # dense rows
    small, kept = compact_columns(spread)
    np.testing.assert_array_equal(small._counts, np.bincount(small.indices, minlength=small.n_features))


@pytest.mark.parametrize("method", ["line_search", "trust_region"])
def test_tron_on_kept_scratch_blocks_reads_nothing_unwritten(method):
    """TRON's working arrays come uninitialised from kept blocks (maxmargin._scratch) where they are large: blocks
    filled with NaN between two fits (and first used by a fit on other data) leave the result bit for bit the
    same, on both threads' layout and serially."""
    from maxmargin import _scratch
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(5)
    X = sp.random(3000, 40_000, density=0.002, format="csr", random_state=rng)  # 10 x 40,001 weights: 3.2 MB
    y = np.where(X @ rng.normal(size=40_000) + 0.1 * rng.normal(size=3000) > 0, 1.0, -1.0)
    C = np.ones(3000)
    ld = linear_data(X, 1.0)
    for parallel in (True, False):
        first = tron.solve(ld, y, C, tol=1e-6, method=method, parallel=parallel, compact=False)
        other = linear_data(sp.random(2000, 40_000, density=0.003, format="csr", random_state=rng), 1.0)
        tron.solve(other, np.where(rng.random(2000) < 0.5, 1.0, -1.0), np.ones(2000), compact=False)
        assert _scratch.kept_bytes() >= 10 * 40_001 * 8
        for entry in _scratch._blocks:
            entry[0].fill(255)  # every double a NaN
        again = tron.solve(ld, y, C, tol=1e-6, method=method, parallel=parallel, compact=False)
        assert again.n_iter == first.n_iter and again.cg_iter == first.cg_iter
        np.testing.assert_array_equal(again.w, first.w)
        assert np.isfinite(again.objective) and again.objective == first.objective


def test_thin_dense_data_go_to_csr_for_coordinate_descent_only():
    """linear_data(..., rows_first=True) hands dense data of <= CD_CSR_MAX_FEATURES features to the CSR loops (the
    faster layout for one-row updates); TRON's layout stays dense; the fits agree either way."""
    from maxmargin.solvers._linear_common import CD_CSR_MAX_FEATURES, linear_data

    X, y = _data(2, d=8)
    assert not linear_data(X, 1.0, rows_first=True).dense and linear_data(X, 1.0).dense
    wide = np.random.default_rng(0).normal(size=(20, CD_CSR_MAX_FEATURES + 1))
    assert linear_data(wide, 1.0, rows_first=True).dense
    a = LinearSVC(dual=True, tol=1e-8, max_iter=10**5, random_state=0).fit(X, y)
    b = LinearSVC(dual=True, tol=1e-8, max_iter=10**5, random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-9)


def test_large_dense_data_of_long_rows_stay_dense_for_coordinate_descent(monkeypatch):
    """Dense data of >= CD_DENSE_MIN_FEATURES features and >= CD_DENSE_MIN_BYTES keep the dense layout for the
    coordinate-descent loops (threshold lowered here); squared hinge, hinge and LinearSVR then run the dense loops
    and reach the solutions of the CSR loops on the same data."""
    from maxmargin import LinearSVR
    from maxmargin.solvers import _linear_common as lc

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, lc.CD_DENSE_MIN_FEATURES))
    y = np.where(X @ rng.normal(size=X.shape[1]) + rng.normal(size=300) > 0, 1, -1)
    t = X @ rng.normal(size=X.shape[1])
    assert not lc.linear_data(X, 1.0, rows_first=True).dense
    assert not lc.linear_data(X[:, :-1], 1.0, rows_first=True).dense
    monkeypatch.setattr(lc, "CD_DENSE_MIN_BYTES", X.nbytes)
    assert lc.linear_data(X, 1.0, rows_first=True).dense
    assert not lc.linear_data(X[:, :-1].copy(), 1.0, rows_first=True).dense  # one feature short
    assert not lc.linear_data(X[:-1], 1.0, rows_first=True).dense  # a row short of the bytes
    # the middle tier (CD_DENSE_MID_FEATURES features from CD_DENSE_MID_BYTES) and rows of CD_DENSE_ANY_FEATURES
    mid = rng.normal(size=(40, lc.CD_DENSE_MID_FEATURES))
    assert not lc.linear_data(mid, 1.0, rows_first=True).dense
    monkeypatch.setattr(lc, "CD_DENSE_MID_BYTES", mid.nbytes)
    assert lc.linear_data(mid, 1.0, rows_first=True).dense
    assert not lc.linear_data(mid[:-1], 1.0, rows_first=True).dense  # a row short of the bytes
    assert not lc.linear_data(mid[:, :-1].copy(), 1.0, rows_first=True).dense  # one feature short: the 48 tier
    wide = rng.normal(size=(20, lc.CD_DENSE_ANY_FEATURES))
    assert lc.linear_data(wide, 1.0, rows_first=True).dense
    assert not lc.linear_data(wide[:, :-1].copy(), 1.0, rows_first=True).dense
    for kw in (dict(), dict(loss="hinge")):
        a = LinearSVC(dual=True, tol=1e-8, max_iter=10**5, random_state=0, **kw).fit(X, y)
        b = LinearSVC(dual=True, tol=1e-8, max_iter=10**5, random_state=0, **kw).fit(sp.csr_matrix(X), y)
        np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-9)
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-5, atol=1e-7)
    a = LinearSVR(dual=True, tol=1e-8, max_iter=10**5, random_state=0).fit(X, t)
    b = LinearSVR(dual=True, tol=1e-8, max_iter=10**5, random_state=0).fit(sp.csr_matrix(X), t)
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-9)


@pytest.mark.parametrize("squared", [True, False])
@pytest.mark.parametrize("bias", [1.0, -1.0])
def test_dense_epochs_with_the_update_one_row_late_match_the_plain_ones(monkeypatch, squared, bias):
    """Dense rows of <= LAG_MAX_FEATURES features run _svc_epochs_lag (each row's update of w applied after the
    next row's product, which adds the pending step times the two rows' product): the same iterates to rounding
    as the plain epochs, epoch by epoch, with shrinking (rows shrunk while an update is pending), and w equal to
    sum y alpha x at the end."""
    from maxmargin.solvers import dual_cd
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 20)) + 0.3
    y = np.where(X @ rng.normal(size=20) + 0.5 * rng.normal(size=400) > 0, 1.0, -1.0)
    ld = linear_data(X, bias)
    assert ld.dense
    C = np.full(400, 2.0)
    fits = {}
    for lag in (True, False):
        monkeypatch.setattr(dual_cd, "LAG_MAX_FEATURES", 20 if lag else 0)
        for k in (1, 3, 10**4):
            f = dual_cd.solve_svc(ld, y, C, squared=squared, tol=1e-6, max_iter=k, seed=5, fold=False)
            fits[lag, k] = f
    for k in (1, 3, 10**4):
        a, b = fits[True, k], fits[False, k]
        np.testing.assert_allclose(a.dual, b.dual, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(a.w, b.w, rtol=1e-9, atol=1e-11)
    f = fits[True, 10**4]
    assert f.status == "converged" and f.n_iter > 3
    Xb = np.hstack([X, np.full((400, 1), bias)]) if bias > 0 else X
    np.testing.assert_allclose(f.w, Xb.T @ (f.dual * y), rtol=1e-9, atol=1e-10)
    assert np.count_nonzero(f.dual) < 400  # rows at 0: shrinking ran


@pytest.mark.parametrize("n", [3, 40, 700])
def test_layout_of_wide_rows_from_a_column_sample(n):
    """linear_data samples long rows in runs of columns (_clearly_dense): wide dense rows stay dense, wide rows
    of mostly zeros (in any columns, and all zeros in the sampled runs' columns too) go to CSR, and the row norms
    (in vector lanes for dense rows) equal NumPy's."""
    from maxmargin.solvers import _linear_common as lc

    rng = np.random.default_rng(n)
    d = 3 * lc.DENSITY_SAMPLE_VALUES // min(n, lc.DENSITY_SAMPLE_ROWS) + 7
    dense = rng.normal(size=(n, d))
    ld = lc.linear_data(dense, 1.0)
    assert ld.dense
    np.testing.assert_allclose(lc.row_sqnorms(*ld.args()), np.einsum("ij,ij->i", dense, dense) + 1.0, rtol=1e-12)
    sparse_rows = dense * (rng.random((n, d)) < 0.2)
    assert not lc.linear_data(sparse_rows, 1.0).dense
    half = dense.copy()
    half[:, : d // 2] = 0.0  # 50% zeros, all in the first half: under SPARSE_BELOW + 0.15, so every row is counted
    assert not lc._clearly_dense(half)
    assert lc.linear_data(half, 1.0).dense == (np.count_nonzero(half) >= lc.SPARSE_BELOW * half.size)


@pytest.mark.parametrize("density", [0.0, 0.01, 0.1, 0.6, 1.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_to_csr_equals_scipy_by_either_loop(density, dtype):
    """The compiled dense -> CSR conversion (row counts, then the values by the branching or the branch-free loop)
    gives scipy's arrays: empty rows, rows ending in a zero or a value, the last row's zeros included."""
    from maxmargin.solvers._linear_common import _dense_row_counts, _dense_to_csr

    rng = np.random.default_rng(int(density * 100))
    X = ((rng.random((60, 17)) < density) * rng.normal(size=(60, 17))).astype(dtype)
    X[3] = 0.0
    X[4, -1] = 2.5
    X[-1, :] = 0.0
    X[-1, 5] = -1.0
    ref = sp.csr_matrix(X)
    indptr = _dense_row_counts(X)
    np.testing.assert_array_equal(indptr, ref.indptr)
    for branchless in (False, True):
        data, indices = _dense_to_csr(X, indptr, branchless)
        assert data.dtype == dtype and indices.dtype == np.int32
        np.testing.assert_array_equal(data, ref.data)
        np.testing.assert_array_equal(indices, ref.indices)


# --------------------------------------------------------------------------- prefetching (no effect on the iterates)


def _planned(monkeypatch, plan):
    """Every coordinate-descent loop prefetches by ``plan`` = (ahead, stages, entries), whatever the data size."""
    from maxmargin.solvers import crammer_singer, dual_cd

    for mod in (dual_cd, crammer_singer):
        monkeypatch.setattr(mod, "prefetch_plan", lambda ld, **kw: plan)


STAGED_PLANS = [(2, 1, 0), (0, 0, 0), (3, 2, 3), (1, 3, 5), (7, 3, 2), (40, 2, 40)]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("layout", ["dense", "csr", "csr01"])
@pytest.mark.parametrize(
    "kw",
    [
        {"loss": "squared_hinge", "dual": True},
        {"loss": "hinge", "dual": True},
        {"multi_class": "crammer_singer"},
    ],
    ids=["l2", "l1", "cs"],
)
def test_staged_prefetch_leaves_iterates_unchanged(kw, layout, monkeypatch):
    """The plain and staged prefetch schemes (prefetch_plan) only ask the memory system for lines: every
    distance and stage count gives bit-identical weights and dual variables, including a distance longer than the
    data (40 > active rows after shrinking) -- a prefetch beyond the visiting order must not read or write."""
    X, y = _data(3, n=120, d=40, seed=3)
    if layout == "csr01":
        X = sp.csr_matrix((X > 0.3).astype(float))
    elif layout == "csr":
        X = sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0))
    from maxmargin.solvers import dual_cd

    fits = []
    for whole in (True, False):  # the staged CSR record loop's two compiled copies (dual_cd.whole_rows)
        monkeypatch.setattr(dual_cd, "whole_rows", lambda ld, whole=whole: whole)
        for plan in STAGED_PLANS:
            _planned(monkeypatch, plan)
            est = LinearSVC(tol=1e-5, max_iter=2000, random_state=0, **kw).fit(X, y)
            fits.append((est.coef_.copy(), est.intercept_.copy(), est.n_iter_))
    for coef, b, it in fits[1:]:
        np.testing.assert_array_equal(coef, fits[0][0])
        np.testing.assert_array_equal(b, fits[0][1])
        np.testing.assert_array_equal(it, fits[0][2])


@pytest.mark.parametrize("loss", ["epsilon_insensitive", "squared_epsilon_insensitive"])
def test_staged_prefetch_leaves_svr_unchanged(loss, monkeypatch):
    X, y = make_regression(150, 40, noise=1.0, random_state=2)
    X[np.abs(X) < 0.5] = 0.0
    from maxmargin.solvers import dual_cd

    for Xf in (X, sp.csr_matrix(X)):
        fits = []
        for whole in (True, False):
            monkeypatch.setattr(dual_cd, "whole_rows", lambda ld, whole=whole: whole)
            for plan in STAGED_PLANS:
                _planned(monkeypatch, plan)
                est = LinearSVR(loss=loss, dual=True, tol=1e-5, max_iter=5000, epsilon=0.1, random_state=0)
                fits.append(est.fit(Xf, y).coef_.copy())
        for coef in fits[1:]:
            np.testing.assert_array_equal(coef, fits[0])


def test_staged_prefetch_async_matches_liblinear(monkeypatch, async_everywhere):
    """The asynchronous epochs with the staged scheme (all three stages) still end at LIBLINEAR's objective."""
    from maxmargin.solvers._linear_common import linear_data

    monkeypatch.setattr(async_everywhere, "prefetch_plan", lambda ld, **kw: (3, 3, 3))
    X, y = _sparse_wide(seed=7)
    yy = y.astype(float)
    fit = async_everywhere.solve_svc(
        linear_data(X, 1.0), yy, np.full(len(y), 0.5), tol=1e-6, max_iter=10**5, n_threads=2
    )
    assert fit.async_workers == 2 and fit.converged
    m = _liblinear(X, y, 1, C=0.5, eps=1e-6)
    W = np.ctypeslib.as_array(m.w, shape=(X.shape[1] + 1,)) * (1.0 if m.get_labels()[0] == 1 else -1.0)
    theirs = primal_svc("l2", "squared_hinge", "ovr", X, y, W[:-1], W[-1], 0.5)[0]
    assert _rel(fit.objective, theirs) < 1e-4


def test_epoch_stages_drops_prefetch_for_cached_dense_rows():
    """The plan's plain scheme is dropped for an epoch whose active dense rows hold at most PREFETCH_ACTIVE_BYTES
    (they stay in cache after shrinking); larger active sets, CSR rows and the staged scheme keep the plan."""
    from maxmargin.solvers._linear_common import PREFETCH_ACTIVE_BYTES, epoch_stages

    rule = epoch_stages.py_func
    Xd = np.zeros((4, 50))
    rows = PREFETCH_ACTIVE_BYTES // (50 * 8)
    assert rule(1, True, rows, Xd) == 0 and rule(1, True, 10, Xd) == 0
    assert rule(1, True, rows + 1, Xd) == 1
    assert rule(1, True, 2 * rows, Xd.astype(np.float32)) == 0  # 4-byte values: half the bytes a row
    assert rule(1, False, 10, Xd) == 1 and rule(2, True, 10, Xd) == 2 and rule(0, True, 10**9, Xd) == 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_dense_prefetch_above_the_active_limit_leaves_iterates_unchanged(monkeypatch):
    """Dense rows above PREFETCH_ACTIVE_BYTES run their first epochs with the plain scheme's prefetches and the
    later, shrunk ones without: the same weights bit for bit as without any prefetch (LinearSVC's dual,
    Crammer-Singer's and LinearSVR's dense epochs)."""
    from maxmargin.solvers._linear_common import PREFETCH_ACTIVE_BYTES

    d = 40
    n = PREFETCH_ACTIVE_BYTES // (d * 8) + 500
    X, y = _data(3, n=n, d=d, seed=11)
    yr = X[:, :5].sum(axis=1) + 0.3 * np.random.default_rng(1).normal(size=n)
    fits = []
    for plan in ((2, 1, 0), (0, 0, 0)):
        _planned(monkeypatch, plan)
        a = LinearSVC(loss="hinge", tol=0.1, max_iter=30, random_state=0).fit(X, y).coef_.copy()
        b = LinearSVC(multi_class="crammer_singer", tol=0.1, max_iter=4, random_state=0).fit(X, y).coef_.copy()
        c = LinearSVR(dual=True, tol=0.1, max_iter=30, random_state=0).fit(X, yr).coef_.copy()
        fits.append((a, b, c))
    for first, second in zip(*fits):
        np.testing.assert_array_equal(first, second)


def test_prefetch_plan_by_shape(monkeypatch):
    """Data within a core's caches: no prefetch.  Data that stay in the shared cache: the plain scheme.  Large
    data: staged, with a longer distance for short rows, the weight stage only when the weight vector is large
    (more than PREFETCH_WEIGHTS_L2 times the L2 cache, here set to 1 MB), dense rows with their per-row arrays."""
    from maxmargin.solvers import _linear_common
    from maxmargin.solvers._linear_common import (
        PREFETCH_STAGED_ALONE_BYTES,
        PREFETCH_STAGED_BYTES,
        PREFETCH_WEIGHTS_L2,
        linear_data,
        prefetch_plan,
    )

    monkeypatch.setattr(_linear_common, "l2_cache_bytes", lambda: 1 << 20)
    rng = np.random.default_rng(0)
    assert prefetch_plan(linear_data(sp.random(1000, 50, 0.2, format="csr", random_state=0), 1.0)) == (0, 0, 0)
    assert prefetch_plan(linear_data(rng.normal(size=(2000, 100)), 1.0)) == (2, 1, 0)  # 1.6 MB
    assert prefetch_plan(linear_data(sp.random(30000, 50, 0.2, format="csr", random_state=0), 1.0)) == (2, 1, 0)

    def hashed(n, d, k):
        cols = np.sort(rng.integers(0, d, size=(n, k)), axis=1)
        return sp.csr_matrix((rng.random(n * k) + 0.5, cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))

    limit = PREFETCH_WEIGHTS_L2 * (1 << 20) // 8  # weights
    short_wide = prefetch_plan(linear_data(hashed(300_000, 2 * limit, 4), 1.0))
    # weights below the limit (text whose hot words stay in cache; hashed300k after the fold): no weight stage
    short_below = prefetch_plan(linear_data(hashed(300_000, limit - 2, 4), 1.0))
    short_narrow = prefetch_plan(linear_data(hashed(300_000, 1000, 4), 1.0))
    long_rows = prefetch_plan(linear_data(hashed(30_000, 1000, 150), 1.0))
    assert short_wide[1] == 3 and short_below[1] == 2 and short_narrow[1] == 2 and long_rows[1] == 2
    assert short_below[0] == short_narrow[0] == 2 * short_wide[0]
    assert short_narrow[0] > long_rows[0] >= 1 and all(p[2] > 0 for p in (short_wide, short_narrow, long_rows))
    n = PREFETCH_STAGED_BYTES // (40 * 8) + 1
    ahead, stages, entries = prefetch_plan(linear_data(rng.normal(size=(n, 40)), 1.0, rows_first=True))
    assert stages == 2 and entries == ahead > 0
    # between the two limits (50,000 rows of 20 values: ~13.7 MiB with the per-row arrays): staged for a problem
    # that runs alone, plain for one of several (one-vs-rest); dense rows plain either way (as above)
    mid = linear_data(hashed(50_000, 1000, 20), 1.0)
    assert PREFETCH_STAGED_ALONE_BYTES < 50_000 * (20 * 12 + 48) + 8 * 1001 <= PREFETCH_STAGED_BYTES
    assert prefetch_plan(mid) == (2, 1, 0) and prefetch_plan(mid, alone=True)[1] == 2
    n = PREFETCH_STAGED_ALONE_BYTES // (200 * 8) + 1
    assert prefetch_plan(linear_data(rng.normal(size=(n, 200)), 1.0), alone=True) == (2, 1, 0)


def test_prefetch_lines_asks_for_every_line_of_a_span_once(monkeypatch):
    """prefetch_lines walks the 64-byte lines from the one holding arr[lo] to the one holding arr[hi - 1]: counted
    here through a pure-Python stand-in for the prefetch, on spans that start and end inside lines."""
    from maxmargin.solvers import _linear_common as lc

    asked = []
    monkeypatch.setattr(lc, "_address", lambda arr, i: arr.ctypes.data + int(i) * arr.itemsize)
    monkeypatch.setattr(lc, "_prefetch_address", lambda a: asked.append(int(a)))
    monkeypatch.setattr(lc, "uint64", int)
    arr = np.zeros(1000)
    for lo, hi in [(0, 1), (3, 4), (5, 13), (7, 9), (0, 8), (1, 200), (999, 1000)]:
        asked.clear()
        lc.prefetch_lines.py_func(arr, lo, hi)
        first, last = (arr.ctypes.data + lo * 8) // 64, (arr.ctypes.data + (hi - 1) * 8) // 64
        assert [a // 64 for a in asked] == list(range(first, last + 1)), (lo, hi)
        assert all(a % 64 == 0 for a in asked)


def test_cache_sizes_from_sysfs_text():
    from maxmargin.solvers._linear_common import l2_cache_bytes, parse_cache_size

    assert parse_cache_size("1024K\n") == 1 << 20
    assert parse_cache_size("2M") == 2 << 20 and parse_cache_size("512") == 512 and parse_cache_size("48KB") == 48 << 10
    with pytest.raises(ValueError):
        parse_cache_size("unknown")
    assert l2_cache_bytes() > 0


def test_tron_wide_weights_match_liblinear():
    """Beyond tron.FAR_WEIGHTS weights the sparse passes prefetch the weights of rows ahead (hashed features):
    the fit still reaches liblinear-official's TRON objective, and both solvers agree on the predictions."""
    from maxmargin.solvers import tron

    rng = np.random.default_rng(5)
    n, d, k = 500, 2 * tron.FAR_WEIGHTS, 6
    cols = np.sort(rng.choice(d // 50, size=(n, k)), axis=1) * 50 + rng.integers(0, 50, size=(n, 1))
    X = sp.csr_matrix((rng.random(n * k) + 0.5, cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))
    X.sum_duplicates()
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1, -1)
    est = LinearSVC(dual=False, tol=1e-8, max_iter=1000).fit(X, y)
    m = _liblinear(X, y, 2, eps=1e-8)
    W = np.zeros(d + 1)
    nr = m.nr_feature + 1
    W[: nr - 1] = np.ctypeslib.as_array(m.w, shape=(nr,))[:-1]
    W[-1] = m.w[nr - 1]
    W *= 1.0 if m.get_labels()[0] == 1 else -1.0
    theirs = primal_svc("l2", "squared_hinge", "ovr", X, y, W[None, :-1], W[-1:], 1.0)[0]
    ours = primal_svc("l2", "squared_hinge", "ovr", X, y, est.coef_, est.intercept_, 1.0)[0]
    assert est.coef_.shape[1] > tron.FAR_WEIGHTS
    assert _rel(ours, theirs) < 1e-6, (ours, theirs)


def _hashed(n=400, d=5000, per_row=4, seed=0, unit=False):
    """Rows of a few hashed features out of many: about a third of the stored values sit in a feature of
    their own row only (fold_singletons' shape)."""
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, d, size=(n, per_row))
    vals = np.ones((n, per_row)) if unit else rng.uniform(0.5, 2.0, size=(n, per_row))
    X = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
    X.sum_duplicates()
    w_true = rng.normal(size=d)
    y = np.where(X @ w_true + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, y


@pytest.mark.parametrize("unit", [False, True], ids=["values", "01"])
@pytest.mark.parametrize("squared", [True, False], ids=["l2", "l1"])
def test_one_row_features_folded_into_the_diagonal(squared, unit):
    """fold_singletons: the features stored in one training row become a diagonal term of that row; the dual
    CD runs on the rest.  Same iterates as without the fold (to rounding), the full weight vector rebuilt
    (a folded feature's weight is y_r alpha_r x_rj), a warm start too; and the objective of liblinear-official."""
    from maxmargin.solvers import dual_cd
    from maxmargin.solvers._linear_common import FOLD_SINGLETONS_MIN, fold_singletons, linear_data

    X, y01 = _hashed(unit=unit)
    y = np.where(y01 == 1, 1.0, -1.0)
    C = np.full(y.shape[0], 0.7)
    ld = linear_data(X, 1.0, rows_first=True)
    folded = fold_singletons(ld)
    counts = np.bincount(X.indices, minlength=X.shape[1])
    single = counts[X.indices] == 1
    assert folded is not None and single.mean() > FOLD_SINGLETONS_MIN
    assert folded.ld.n_features == int((counts >= 2).sum()) and folded.ld.data.size == int((~single).sum())
    fits = [dual_cd.solve_svc(ld, y, C, squared=squared, tol=1e-6, seed=0, fold=f) for f in (False, True)]
    np.testing.assert_allclose(fits[1].w, fits[0].w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fits[1].dual, fits[0].dual, rtol=1e-9, atol=1e-12)
    assert fits[1].n_iter == fits[0].n_iter
    # a folded feature's weight: y_r alpha_r x_rj
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[single]
    np.testing.assert_allclose(fits[1].w[X.indices[single]], (y * fits[1].dual)[rows] * X.data[single], rtol=1e-12)
    # w = sum_i y_i alpha_i x_i over all features (and the bias)
    np.testing.assert_allclose(fits[1].w[:-1], X.T @ (y * fits[1].dual), rtol=1e-9, atol=1e-12)
    # a warm start from the solution stays there
    warm = dual_cd.solve_svc(ld, y, C, squared=squared, tol=1e-6, seed=1, alpha0=fits[1].dual)
    np.testing.assert_allclose(warm.w, fits[1].w, rtol=1e-5, atol=1e-7)
    # the objective of the independent solver
    m = _liblinear(X, y01, 1 if squared else 3, C=0.7, eps=1e-6)
    ref = maxmargin.load_liblinear_model
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.txt")
        liblinearutil.save_model(path, m)
        other = ref(path)
    w_ref = np.r_[np.ravel(other.coef_), other.intercept_]
    xi = lambda w: np.maximum(0.0, 1.0 - y * (X @ w[:-1] + w[-1]))  # noqa: E731
    obj = lambda w: 0.5 * w @ w + 0.7 * np.sum(xi(w) ** 2 if squared else xi(w))  # noqa: E731
    assert obj(fits[1].w) == pytest.approx(obj(w_ref), rel=1e-4)
    # the reported objective is the primal's at the returned weights (folded: from the final check's pass, with
    # the folded features' share of each row's output added there)
    for fit in fits:
        assert fit.status == "converged"
        assert fit.objective == pytest.approx(obj(fit.w), rel=1e-12)


def test_short_fits_skip_the_fold_unless_problems_share_it():
    """A single problem whose rows' mean C_i |x_i|^2 is below FOLD_MIN_CX (a fit of a few epochs) runs without
    the fold; at a larger C, or for problems that share the data (``fold='shared'``, one-vs-rest) it folds.  The
    results agree either way."""
    from maxmargin.solvers import dual_cd
    from maxmargin.solvers._linear_common import linear_data, sqnorms

    X, y01 = _hashed()
    y = np.where(y01 == 1, 1.0, -1.0)
    norms = sqnorms(linear_data(X, 1.0, rows_first=True))
    small = 0.5 * dual_cd.FOLD_MIN_CX / norms.mean()  # mean C |x|^2 half the threshold
    fits = {}
    for C, fold in ((small, True), (small, "shared"), (4 * small, True), (small, False)):
        ld = linear_data(X, 1.0, rows_first=True)
        fits[C, fold] = dual_cd.solve_svc(ld, y, np.full(y.shape[0], C), tol=1e-8, seed=0, fold=fold)
        folded = getattr(ld, "_folded", None) is not None
        assert folded == (fold == "shared" or C > small), (C, fold)
    for key in ((small, True), (small, "shared")):
        np.testing.assert_allclose(fits[key].w, fits[small, False].w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("unit", [False, True], ids=["values", "01"])
def test_fold_writes_the_arrays_of_numpys_masks(unit):
    """_fold_entries (branchless: each value written to both sides) gives the arrays of NumPy's masks, rows of every
    kind: empty, all one-row features, none, and a last row ending in a one-row feature."""
    from maxmargin.solvers import _linear_common as lc

    X, _ = _hashed(n=401, unit=unit)
    X = sp.vstack([X, sp.csr_matrix((2, X.shape[1])), X[:3]]).tocsr()  # empty rows; rows of shared features
    last = sp.csr_matrix(([1.0, 2.0], ([0, 0], [X.indices[0], X.shape[1] - 1])), shape=(1, X.shape[1]))
    X = sp.vstack([X, last]).tocsr()  # ... and a row whose last value is in a one-row feature
    ld = lc.linear_data(X, 1.0, rows_first=True)
    counts = np.bincount(ld.indices, minlength=X.shape[1])
    assert counts[-1] == 1
    renumber = np.full(X.shape[1], -1, dtype=np.int32)
    kept = np.flatnonzero(counts >= 2)
    renumber[kept] = np.arange(kept.size, dtype=np.int32)
    n_single = int(np.sum(counts == 1))
    bits, prefix, kept_r = lc.column_ranks(counts, 2, kept.size)
    np.testing.assert_array_equal(kept_r, kept)
    one = lc._fold_entries(ld.data, ld.indices, ld.indptr, (bits, prefix), ld.unit, n_single)
    assert one[0].shape[0] == ld.indices.size - n_single and one[4].shape[0] == n_single
    data, indices, indptr, mass, rows, cols, vals = one
    single = counts[X.indices] == 1
    kept_X = sp.csr_matrix(X.multiply(sp.csr_matrix(counts >= 2)))
    kept_X.sort_indices()
    np.testing.assert_array_equal(indptr, kept_X.indptr)
    np.testing.assert_array_equal(indices, renumber[kept_X.indices])
    np.testing.assert_array_equal(cols, X.indices[single])
    np.testing.assert_array_equal(rows, np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[single])
    np.testing.assert_allclose(mass, np.bincount(rows, weights=X.data[single] ** 2, minlength=X.shape[0]))


@pytest.mark.parametrize("n_features", [1, 63, 64, 65, 1000, 4097])
def test_column_ranks_number_the_kept_columns_in_order(rng, n_features):
    """column_ranks / _renumbered: the kept columns' new numbers are their ranks among the kept (as a table of
    cumulative counts), at every position in a word of the bit table, the last word partly filled."""
    from maxmargin.solvers import _linear_common as lc

    counts = rng.integers(0, 4, n_features).astype(np.int32)
    for least in (1, 2):
        keep = counts >= least
        bits, prefix, kept = lc.column_ranks(counts, least, int(keep.sum()))
        np.testing.assert_array_equal(kept, np.flatnonzero(keep))
        cols = np.flatnonzero(keep).astype(np.int32)
        out = np.empty(cols.size, np.int32)
        lc._renumbered(cols, bits, prefix, out)
        np.testing.assert_array_equal(out, np.arange(cols.size))
        flags = [lc._rank(bits, prefix, np.uint64(j))[0] for j in range(n_features)]
        np.testing.assert_array_equal(flags, keep.astype(int))


def test_fold_leaves_data_without_one_row_features_alone():
    from maxmargin.solvers._linear_common import fold_singletons, linear_data

    X, _ = _data(2, n=200, d=30, seed=1)
    assert fold_singletons(linear_data(sp.csr_matrix(X), 1.0)) is None
    assert fold_singletons(linear_data(X, 1.0)) is None  # dense rows


def test_fold_declines_where_most_features_stay():
    """One-row features past FOLD_SINGLETONS_MIN of the values, but most features in two rows or more (each column
    in ~2.4 rows: 9% of the values one-row, ~69% of the features left): no fold (FOLD_KEPT_MAX); with few columns
    left (each in ~0.3 rows) it folds."""
    from maxmargin.solvers._linear_common import FOLD_KEPT_MAX, FOLD_SINGLETONS_MIN, fold_singletons, linear_data

    rng = np.random.default_rng(3)
    for d, folds in ((25_000, False), (200_000, True)):
        cols = np.sort(rng.choice(d, size=(200, 300)), axis=1)
        X = sp.csr_matrix((rng.normal(size=60_000), cols.ravel(), np.arange(0, 60_001, 300)), shape=(200, d))
        X.sum_duplicates()
        counts = np.bincount(X.indices, minlength=d)
        assert np.count_nonzero(counts == 1) > FOLD_SINGLETONS_MIN * X.nnz
        assert (np.count_nonzero(counts >= 2) > FOLD_KEPT_MAX * d) != folds
        assert (fold_singletons(linear_data(X, 1.0)) is not None) == folds


@pytest.mark.parametrize("kind", ["squared_hinge", "squared_epsilon_insensitive"])
def test_primal_on_the_used_features_only(kind):
    """compact_columns: TRON on the features stored in some row gives the weights it gives on all of them (the
    others 0), from a cold and from a warm start."""
    from maxmargin.solvers import tron
    from maxmargin.solvers._linear_common import compact_columns, linear_data

    X, y01 = _hashed(n=300, d=3000, per_row=3, seed=4)
    y = np.where(y01 == 1, 1.0, -1.0) if kind == "squared_hinge" else X @ np.linspace(-1, 1, 3000) + 0.1
    C = np.full(y.shape[0], 0.5)
    ld = linear_data(X, 1.0)
    small, kept = compact_columns(ld)
    assert kept.shape[0] == np.unique(X.indices).shape[0] < 0.8 * X.shape[1]
    fits = [tron.solve(ld, y, C, kind=kind, epsilon=0.05, tol=1e-8, compact=c) for c in (False, True)]
    # the same weights to rounding: the CG steps' sums keep eight partial sums by position, and dropping columns
    # moves a weight to another partial sum (session 33), so not bit for bit
    np.testing.assert_allclose(fits[1].w, fits[0].w, rtol=1e-9, atol=1e-9 * np.abs(fits[0].w).max())
    assert fits[1].objective == pytest.approx(fits[0].objective, rel=1e-12)
    unused = np.setdiff1d(np.arange(X.shape[1]), kept)
    assert np.all(fits[1].w[unused] == 0.0)
    w0 = fits[0].w + 0.01
    warm = tron.solve(ld, y, C * 2, kind=kind, epsilon=0.05, tol=1e-8, w0=w0)
    cold = tron.solve(ld, y, C * 2, kind=kind, epsilon=0.05, tol=1e-8, compact=False)
    np.testing.assert_allclose(warm.w, cold.w, rtol=1e-4, atol=1e-6)  # both stopped at tol


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_l1_columns_equal_scipys_transpose(parts, monkeypatch):
    """cd_l1.to_columns transposes CSR rows itself (one counting and one scattering pass, parts of the rows on
    threads): the same CSC arrays as scipy's transpose with the bias column appended and sorted row indices, for
    float32 values, int64 indices, unsorted and duplicate column indices within a row, explicit zeros, empty rows
    and columns, with and without the bias column."""
    from maxmargin.solvers import cd_l1

    monkeypatch.setattr(cd_l1, "_transpose_parts", lambda nnz, n_cols: parts)

    def scipys(X, bias):
        Xc = sp.csc_matrix(X, dtype=np.float64)
        if bias > 0:
            Xc = sp.hstack([Xc, sp.csc_matrix(np.full((X.shape[0], 1), float(bias)))], format="csc")
        return Xc.data, Xc.indices.astype(np.int32), Xc.indptr.astype(np.int64)

    D = sp.random(400, 90, density=0.06, random_state=3, dtype=np.float32).toarray()
    D[5] = 0.0  # an empty row
    D[:, 7] = 0.0  # an empty column
    X = sp.csr_matrix(D)
    X.data[::11] = 0.0  # explicit zeros stay
    odd = sp.csr_matrix(  # row 0 with columns out of order, row 2 with a column twice; int64 indices; 5 empty rows
        (np.array([3.0, 1.0, 2.0, 4.0, 5.0]), np.array([2, 0, 1, 1, 1], dtype=np.int64), np.array([0, 3, 3, 5])),
        shape=(3, 4),
    )
    odd = sp.vstack([odd, sp.csr_matrix((5, 4))], format="csr")  # (no column holds half of the rows)
    for M in (X, X.astype(np.float64), odd, sp.csr_matrix((5, 3))):
        for bias in (1.0, 0.5, 0.0):
            ours = cd_l1.to_columns(M, bias)
            theirs = scipys(M, bias)
            # scipy keeps a row's duplicates in the order stored, and so do we; row order within a column
            for a, b in zip(ours, theirs):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
            assert np.all(np.diff(ours[2]) >= 0)
            for j in range(ours[2].shape[0] - 1):
                assert np.all(np.diff(ours[1][ours[2][j] : ours[2][j + 1]]) >= 0)


def test_crammer_singer_primal_on_threads_equals_one_thread_and_numpy():
    """The Crammer-Singer objective's pass (blocks of rows on threads, their sums added in order) gives the same
    bits on threads as on one, and the objective a NumPy computation gives from the weights."""
    from maxmargin.solvers import crammer_singer
    from maxmargin.solvers._linear_common import linear_data

    rng = np.random.default_rng(4)
    X = sp.random(3000, 400, density=0.05, format="csr", random_state=5)
    y = rng.integers(0, 7, size=3000)
    C = rng.uniform(0.5, 2.0, size=3000)
    ld = linear_data(X, 1.0)
    Wt = rng.normal(size=(ld.n_weights, 7))
    every = np.arange(ld.n_weights)
    args = (*ld.args(), y.astype(np.int64), C, Wt, every, False)
    par, ser = crammer_singer._primal_par(*args), crammer_singer._primal_ser(*args)
    assert par[1] == ser[1]
    F = X @ Wt[:-1] + Wt[-1]
    margins = 1.0 + F - F[np.arange(3000), y][:, None]
    margins[np.arange(3000), y] = 0.0
    np.testing.assert_array_equal(par[0], ser[0])
    np.testing.assert_allclose(par[0], np.sum(Wt * Wt, axis=0), rtol=1e-12)
    assert crammer_singer._primal(*args[:-2]) == crammer_singer._half(par[0]) + par[1]
    np.testing.assert_allclose(par[1], C @ np.maximum(margins.max(axis=1), 0.0), rtol=1e-12)
    # the norm over the rows the data can make nonzero (used_weights) only: the same where the others are 0
    X = sp.random(3000, 20_000, density=0.00012, format="csr", random_state=6)  # ~6,000 of 20,000 columns used
    ld = linear_data(X, 1.0)
    used = crammer_singer.used_weights(ld)
    assert used[-1] == 20_000 and 0.15 * 20_000 < used.shape[0] < 0.5 * 20_000
    np.testing.assert_array_equal(used[:-1], np.flatnonzero(np.asarray((X != 0).sum(axis=0)).ravel()))
    Wt = np.zeros((ld.n_weights, 7))
    Wt[used] = rng.normal(size=(used.shape[0], 7))
    every = np.arange(ld.n_weights)
    for parallel in (True, False):
        full = crammer_singer._primal_parts(*ld.args(), y.astype(np.int64), C, Wt, parallel)
        some = crammer_singer._primal_parts(*ld.args(), y.astype(np.int64), C, Wt, parallel, used)
        np.testing.assert_allclose(some[0], full[0], rtol=1e-13)
        assert some[1] == full[1]
        again = crammer_singer._primal_parts(*ld.args(), y.astype(np.int64), C, Wt, parallel, every)
        np.testing.assert_array_equal(again[0], full[0])
    assert crammer_singer.used_weights(linear_data(rng.normal(size=(50, 8)), 1.0)) is None
    # dense rows with class-major weights (k, n_weights), as the dense epochs keep them: the same norms and losses
    Xd = rng.normal(size=(700, 21))
    ld = linear_data(Xd, 1.0)
    Wc = rng.normal(size=(7, ld.n_weights))
    yd, Cd = y[:700].astype(np.int64), C[:700]
    F = Xd @ Wc[:, :-1].T + Wc[:, -1]
    margins = 1.0 + F - F[np.arange(700), yd][:, None]
    margins[np.arange(700), yd] = 0.0
    for parallel in (True, False):
        cols, loss = crammer_singer._primal_parts(*ld.args(), yd, Cd, Wc, parallel, class_major=True)
        np.testing.assert_allclose(cols, np.sum(Wc * Wc, axis=1), rtol=1e-12)
        np.testing.assert_allclose(loss, Cd @ np.maximum(margins.max(axis=1), 0.0), rtol=1e-12)
        rows = crammer_singer._primal_parts(*ld.args(), yd, Cd, np.ascontiguousarray(Wc.T), parallel)
        np.testing.assert_allclose(cols, rows[0], rtol=1e-12)
        np.testing.assert_allclose(loss, rows[1], rtol=1e-12)


def test_l1_solver_keeps_dense_columns_without_indices():
    """Dense input of mostly nonzeros goes to the L1 solver as whole columns (cd_l1.to_columns: every entry, no row
    indices); the iterates are those of the same data as CSC to rounding (the column sums run in vector lanes,
    and CSC drops the explicit zeros, so the lanes add different terms); dense input of mostly zeros stays CSC."""
    from maxmargin.solvers import cd_l1

    X, y = _data(3, n=300, d=12, seed=7)
    X[X < -1.5] = 0.0  # a few explicit zeros: the dense layout keeps them, CSC drops them
    cdata, cind, cptr = cd_l1.to_columns(X, 1.0)
    assert cd_l1.is_dense_layout(cdata, cind) and cdata.size == 300 * 13 and np.all(np.diff(cptr) == 300)
    sparse_zeros = np.where(np.abs(X) > 1.0, X, 0.0)
    assert not cd_l1.is_dense_layout(*cd_l1.to_columns(sparse_zeros, 1.0)[:2])
    for C in (0.1, 1.0):
        a = LinearSVC(penalty="l1", dual=False, C=C, tol=1e-4, random_state=0).fit(X, y)
        b = LinearSVC(penalty="l1", dual=False, C=C, tol=1e-4, random_state=0).fit(sp.csr_matrix(X), y)
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-7, atol=1e-10)
        assert a.n_iter_ == b.n_iter_
    warm_a = LinearSVC(penalty="l1", dual=False, tol=1e-4, warm_start=True, random_state=0)
    warm_b = LinearSVC(penalty="l1", dual=False, tol=1e-4, warm_start=True, random_state=0)
    for C in (0.5, 2.0):
        warm_a.set_params(C=C).fit(X, y)
        warm_b.set_params(C=C).fit(sp.csr_matrix(X), y)
    # a warm start's slacks come from one product (BLAS for the columns, SciPy for CSC): equal to rounding
    np.testing.assert_allclose(warm_a.coef_, warm_b.coef_, rtol=0, atol=1e-12)


def test_l1_solver_reads_full_csc_columns_without_indices(monkeypatch):
    """Columns holding every row (covlike's numeric columns beside one-hot ones: the input stays CSC) are read by
    the epochs as the dense layout, the others through their row indices: the same problem, so LIBLINEAR's optimum
    at a tight tol (objective within 1e-5, predictions equal); dense input below half nonzeros is transposed to the
    same CSC arrays as scipy's; and columns of at least FULL_COLUMN_SHARE of the rows are written out whole (their
    zeros explicit: the same matrix), with the same fit to rounding."""
    from maxmargin.solvers import cd_l1

    monkeypatch.setattr(cd_l1, "FULL_COLUMN_SHARE", 2.0)  # (first: no column written out)

    rng = np.random.default_rng(11)
    n = 600
    num = rng.normal(size=(n, 4)) * [3.0, 1.0, 0.5, 2.0] + [5.0, -1.0, 0.0, 2.0]
    num[num == 0.0] = 1.0
    hot = np.zeros((n, 20))
    hot[np.arange(n), rng.integers(0, 20, n)] = 1.0
    X = np.hstack([hot[:, :10], num, hot[:, 10:]])
    y = np.where(num[:, 0] - 5.0 + 0.5 * hot[:, 3] + rng.normal(size=n) > 0, 1, -1)
    cdata, cind, cptr = cd_l1.to_columns(X, 1.0)
    assert not cd_l1.is_dense_layout(cdata, cind)
    assert int(np.sum(np.diff(cptr) == n)) == 5  # four numeric columns and the bias
    Xc = sp.hstack([sp.csc_matrix(X), sp.csc_matrix(np.ones((n, 1)))], format="csc")
    for a, b in zip((cdata, cind, cptr), (Xc.data, Xc.indices, Xc.indptr)):
        np.testing.assert_array_equal(a, b)
    for dtype in (np.float32, np.int64):
        got = cd_l1.to_columns((X * 4).astype(dtype), 0.0)
        ref = sp.csc_matrix((X * 4).astype(dtype).astype(np.float64))
        for a, b in zip(got, (ref.data, ref.indices, ref.indptr)):
            np.testing.assert_array_equal(a, b)
    Xh = X.copy()
    Xh[::3, 12] = 0.0  # a numeric column with a third of its rows zero
    m = _liblinear(X, y, 5, C=0.5, eps=1e-7)
    ll_w = np.array(m.get_decfun()[0])
    ll_b = m.get_decfun()[1]
    theirs = primal_svc("l1", "squared_hinge", "ovr", X, y, ll_w[None, :], np.array([ll_b]), 0.5)
    fits = {}
    for share in (2.0, 0.5):
        monkeypatch.setattr(cd_l1, "FULL_COLUMN_SHARE", share)
        full = int(np.sum(np.diff(cd_l1.to_columns(Xh, 1.0)[2]) == n))
        assert full == (4 if share > 1 else 5)
        for a, b in zip(cd_l1.to_columns(Xh, 1.0), cd_l1.to_columns(sp.csr_matrix(Xh), 1.0)):
            np.testing.assert_array_equal(a, b)  # dense rows and CSR rows: the same columns
        for Xin in (X, sp.csr_matrix(X), Xh):
            est = LinearSVC(penalty="l1", dual=False, C=0.5, tol=1e-7, max_iter=100000, random_state=0).fit(Xin, y)
            fits[share, Xin is Xh] = est.coef_
            if Xin is Xh:
                continue
            ours = primal_svc("l1", "squared_hinge", "ovr", X, y, est.coef_, est.intercept_, 0.5)
            assert _rel(ours[0], theirs[0]) < 1e-5, (ours, theirs)
            assert _agree(est.predict(X), np.where(X @ ll_w + ll_b > 0, 1, -1)) >= 0.995
    np.testing.assert_allclose(fits[0.5, True], fits[2.0, True], rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(cd_l1, "FULL_COLUMN_SHARE", 1e-9)  # every column whole: the same matrix, rows in order
    for Xin in (Xh, sp.csr_matrix(Xh)):
        cols = cd_l1.to_columns(Xin, 0.0)
        assert np.all(np.diff(cols[2]) == n) and np.array_equal(cols[1], np.tile(np.arange(n), 24))
        np.testing.assert_array_equal(sp.csc_matrix(cols, shape=(n, 24)).toarray(), Xh)
    # a whole column where a row repeats the column (a non-canonical CSR row): its values add up at the row's place
    rep = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([0, 0, 0]), np.array([0, 2, 3])), shape=(2, 1))
    cols = cd_l1.to_columns(rep, 0.0)
    np.testing.assert_array_equal(cols[0], [3.0, 3.0])
    np.testing.assert_array_equal(cols[1], [0, 1])


def test_l1_solver_drops_columns_stored_nowhere(monkeypatch):
    """Features stored in no row (hashed or vocabulary-sized data) are left out of the L1 solver's epochs: their
    weights stay 0 and the model is the one the solver reaches with them (same objective, same predictions),
    cold and warm-started."""
    from maxmargin.solvers import cd_l1

    X, y = _data(2, n=200, d=10, seed=11)
    wide = sp.hstack([sp.csr_matrix((200, 30)), sp.csr_matrix(X), sp.csr_matrix((200, 25))], format="csr")
    assert cd_l1._stored_columns(cd_l1.to_columns(wide, 1.0)[2]) is not None
    fits = {}
    for label, limit in (("dropped", cd_l1.STORED_COLUMNS_MAX), ("kept", 0.0)):
        monkeypatch.setattr(cd_l1, "STORED_COLUMNS_MAX", limit)
        est = LinearSVC(penalty="l1", dual=False, C=0.5, tol=1e-6, max_iter=10**4, random_state=0).fit(wide, y)
        warm = LinearSVC(penalty="l1", dual=False, C=0.5, tol=1e-6, max_iter=10**4, warm_start=True, random_state=0)
        warm.fit(wide, y).set_params(C=2.0).fit(wide, y)
        fits[label] = (est, warm)
    for i in range(2):
        a, b = fits["dropped"][i], fits["kept"][i]
        assert np.all(a.coef_[:, :30] == 0) and np.all(a.coef_[:, 40:] == 0)
        np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-6)
        np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-4)
        np.testing.assert_array_equal(a.predict(wide), b.predict(wide))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, bool])
@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearSVC(random_state=0, tol=1e-6),
        lambda: LinearSVC(dual=False, tol=1e-6),
        lambda: LinearSVC(penalty="l1", dual=False, tol=1e-6, random_state=0),
        lambda: LinearSVR(random_state=0, tol=1e-6),
    ],
)
def test_integer_and_boolean_csr_values_fit_as_their_floats(dtype, make):
    """CSR matrices of integer or boolean values (CountVectorizer's counts) go to the solvers as float32 without a
    float64 copy (linear._float_values); the fit is the float64 matrix's, bit for bit.  Counts beyond 2**24 are not
    exact in float32 and go as float64."""
    from maxmargin import linear

    rng = np.random.default_rng(7)
    X = sp.random(300, 60, density=0.1, format="csr", random_state=8)
    X.data = rng.integers(1, 2 if dtype is bool else 6, X.nnz).astype(float)
    y = np.where(X @ rng.normal(size=60) + 0.2 * rng.normal(size=300) > 0.3, 1, -1)
    Xt = sp.csr_matrix((X.data.astype(dtype), X.indices, X.indptr), shape=X.shape)
    assert linear._float_values(Xt).dtype == np.float32
    a, b = make().fit(X, y), make().fit(Xt, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    if np.dtype(dtype).itemsize == 8:
        big = X.copy()
        big.data = big.data * (2**24 + 1)
        Xbig = sp.csr_matrix((big.data.astype(dtype), X.indices, X.indptr), shape=X.shape)
        assert linear._float_values(Xbig).dtype == np.float64
        np.testing.assert_array_equal(make().fit(big, y).coef_, make().fit(Xbig, y).coef_)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_l1_penalty_fused_columns_same_iterates(dtype):
    """A single L1-penalty problem on dense rows scales its columns straight from X (cd_l1.fused_columns): the same
    values as the transpose and then the scaling, so the same iterates bit for bit; with a warm start too."""
    from maxmargin.solvers import cd_l1

    rng = np.random.default_rng(4)
    X = np.exp(rng.normal(size=(150, 70))).astype(dtype)
    y = np.where(X[:, 0] - X[:, 1] + 0.5 * rng.normal(size=150) > 0, 1.0, -1.0)
    C = rng.uniform(0.5, 2.0, size=150)
    fused = cd_l1.fused_columns(X, 1.0)
    assert fused is not None and cd_l1.is_fused(fused)
    a = cd_l1.solve(X, 1.0, y, C, tol=1e-6, seed=0, columns=fused)
    b = cd_l1.solve(None, 1.0, y, C, tol=1e-6, seed=0, columns=cd_l1.to_columns(X, 1.0))
    np.testing.assert_array_equal(a.w, b.w)
    assert a.n_iter == b.n_iter
    w0 = 0.5 * b.w
    a2 = cd_l1.solve(X, 1.0, y, C, tol=1e-6, seed=0, columns=fused, w0=w0)
    b2 = cd_l1.solve(None, 1.0, y, C, tol=1e-6, seed=0, columns=cd_l1.to_columns(X, 1.0), w0=w0)
    np.testing.assert_array_equal(a2.w, b2.w)
    est = LinearSVC(penalty="l1", dual=False, tol=1e-6, random_state=0).fit(X, y, sample_weight=C)
    np.testing.assert_allclose(np.r_[est.coef_.ravel(), est.intercept_], a.w, rtol=0, atol=0)
    assert cd_l1.fused_columns(np.where(X > 2.5, X, 0), 1.0) is None  # sparse-ish dense rows: CSC as before


def test_narrow_column_numbers_give_the_dual_the_same_iterates(monkeypatch):
    """The record epochs read uint16 column numbers below 65,536 features (``narrow_indices``): the same
    coefficients, bit for bit, as with the int32 numbers; wider data keep their int32 numbers."""
    from maxmargin.solvers import _linear_common as lc

    rng = np.random.default_rng(3)
    X = sp.random(3000, 700, density=0.03, format="csr", random_state=4)
    y = np.where(X @ rng.normal(size=700) + 0.1 * rng.normal(size=3000) > 0, 1, -1)
    ld = lc.linear_data(X, 1.0)
    assert lc.narrow_indices(ld).dtype == np.uint16
    np.testing.assert_array_equal(lc.narrow_indices(ld), ld.indices)
    wide = lc.linear_data(sp.csr_matrix((np.ones(2), ([0, 1], [5, 70_000])), shape=(2, 70_001)), 1.0)
    assert lc.narrow_indices(wide) is wide.indices
    narrow = LinearSVC(dual=True, tol=1e-4, random_state=0).fit(X, y)
    monkeypatch.setattr(lc, "NARROW_MAX_FEATURES", 0)
    plain = LinearSVC(dual=True, tol=1e-4, random_state=0).fit(X, y)
    assert narrow.n_iter_ == plain.n_iter_
    np.testing.assert_array_equal(narrow.coef_, plain.coef_)
    np.testing.assert_array_equal(narrow.intercept_, plain.intercept_)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearSVC(random_state=0),
        lambda: LinearSVC(loss="hinge", random_state=0),
        lambda: LinearSVC(dual=False, random_state=0),
        lambda: LinearSVC(penalty="l1", dual=False, random_state=0),
        lambda: LinearSVC(multi_class="crammer_singer", random_state=0),
        lambda: LinearSVR(random_state=0),
        lambda: LinearSVR(loss="squared_epsilon_insensitive", dual=False, random_state=0),
    ],
    ids=["dual", "hinge", "primal", "l1", "cs", "svr", "svr-primal"],
)
def test_int64_indices_fit_as_int32(make):
    """CSR matrices with 64-bit indices (scipy's choice past 2**31 stored values, or the user's) are taken, not
    refused as LIBLINEAR must (scikit-learn's LinearSVC sends its users to report it): the compiled loops take
    either width, and the fit is the one of the same matrix with 32-bit indices, bit for bit."""
    rng = np.random.default_rng(64)
    X = sp.random(600, 300, density=0.05, format="csr", random_state=64)
    regression = isinstance(make(), LinearSVR)
    y = np.asarray(X @ rng.normal(size=300)).ravel()
    if not regression:
        y = np.digitize(y, np.quantile(y, [0.3, 0.7]))  # three classes
    X64 = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)), shape=X.shape)
    X64.indices = X64.indices.astype(np.int64)  # (the constructor may narrow them)
    X64.indptr = X64.indptr.astype(np.int64)
    assert X64.indices.dtype == np.int64 and X64.indptr.dtype == np.int64
    a, b = make().fit(X, y), make().fit(X64, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    np.testing.assert_array_equal(a.predict(X64), b.predict(X))


def test_object_string_labels_fit_as_numpy_strings(monkeypatch):
    """Text labels in an object array (a pandas column) fit as the same labels in a NumPy string array: the same
    classes (object dtype, as scikit-learn keeps them), the same coefficients.  They are class labels as they are, so
    scikit-learn's check of the targets (which sorts them again: a 31 ms fit took 186 ms at 200,000 rows) is not
    run; object labels that are not all strings still get it."""
    import maxmargin.linear as linear_module

    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 5))
    yu = np.array(["spam", "ham", "eggs"])[np.argmax(X[:, :3] + 0.3 * rng.normal(size=(300, 3)), axis=1)]
    yo = yu.astype(object)
    ref = LinearSVC(random_state=0).fit(X, yu)
    checked = []
    real = linear_module.check_classification_targets
    monkeypatch.setattr(linear_module, "check_classification_targets", lambda y: checked.append(1) or real(y))
    est = LinearSVC(random_state=0).fit(X, yo)
    assert checked == []
    assert est.classes_.dtype == object and list(est.classes_) == list(ref.classes_)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    with pytest.raises(ValueError, match="Unknown label type"):  # integers as objects: scikit-learn's check refuses
        LinearSVC(random_state=0).fit(X, np.where(yu == "spam", 1, 0).astype(object))
    assert checked == [1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_value_checks_find_a_bad_value_wherever_it_sits(dtype):
    """``_all_ones`` and ``_all_float32`` test a block of values at a time (session 63): a failing value at a block's
    first or last place, in the tail after the last whole block, or in a short array is still found."""
    from maxmargin.solvers._linear_common import CHECK_BLOCK, _all_float32, _all_ones

    B = CHECK_BLOCK
    for n in (0, 1, 7, B - 1, B, B + 1, 3 * B + 5):
        ones = np.ones(n, dtype)
        assert _all_ones(ones) and _all_float32(ones.astype(np.float64))
        for at in sorted({0, B - 1, B, 2 * B, n - 1} & set(range(n))):
            for bad in (0.5, 0.0, np.nan, np.inf):
                a = ones.copy()
                a[at] = bad
                assert not _all_ones(a), (n, at, bad)
            # a float64 value that float32 cannot hold, and one it can
            a = ones.astype(np.float64)
            a[at] = 0.1
            assert not _all_float32(a), (n, at)
            a[at] = 0.25
            assert _all_float32(a), (n, at)
            a[at] = np.nan
            assert not _all_float32(a), (n, at)


def test_blas_hold_only_where_blas_could_thread(monkeypatch):
    """The BLAS hold is skipped for the dual CD / Newton solvers where OpenBLAS runs their dots and Cholesky factors
    serially anyway (the thresholds measured in session 70), and kept otherwise or where another BLAS is loaded."""
    import contextlib

    from maxmargin import _threads, linear

    monkeypatch.setattr(_threads, "_BLAS_KINDS", [True])  # every BLAS library OpenBLAS
    assert _threads.blas_serial_for(10_000, 127)
    assert not _threads.blas_serial_for(10_001)
    assert not _threads.blas_serial_for(100, 128)
    hold = linear._LinearSVMBase._blas_hold
    assert isinstance(hold(2, 6_000, 113), contextlib.nullcontext)
    assert isinstance(hold(1, 9_000, 300), contextlib.nullcontext)  # (no direct steps over 256 weights)
    assert not isinstance(hold(2, 6_000, 200), contextlib.nullcontext)  # the direct steps' Cholesky could thread
    assert not isinstance(hold(2, 20_000, 113), contextlib.nullcontext)
    assert not isinstance(hold(5, 100, 10), contextlib.nullcontext)  # the L1 penalty multiplies matrices
    assert not isinstance(hold(3, 100, 10), contextlib.nullcontext)  # the hinge's interior point too
    monkeypatch.setattr(_threads, "_BLAS_KINDS", [False])  # MKL or BLIS: thresholds unknown
    assert not isinstance(hold(2, 6_000, 113), contextlib.nullcontext)
