"""LinearSVC / LinearSVR on repeated rows: identical rows of one label solved as one (``linear._repeats``), the
same optimum as LIBLINEAR's on every row."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import seed_liblinear
from sklearn.svm import LinearSVC as SkLinearSVC
from test_linear import _rel, primal_svc, primal_svr

from maxmargin import LinearSVC, LinearSVR, dedup, linear

liblinearutil = pytest.importorskip("liblinear.liblinearutil")


def _repeated(rng, n=12000, n_distinct=400, d=6, k=2, flip=0.1):
    """Rows drawn from ``n_distinct`` points on a grid (so rows repeat), labels from a rule with some flipped
    (identical rows with different labels too)."""
    base = np.round(rng.normal(size=(n_distinct, d)) * 2) / 2
    X = base[rng.integers(0, n_distinct, n)]
    score = X[:, 0] - 0.7 * X[:, 1] + 0.3 * X[:, 2] * X[:, 3]
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))
    flipped = rng.random(n) < flip
    y[flipped] = rng.integers(0, k, flipped.sum())
    return X, y


@pytest.fixture
def merges(monkeypatch):
    """The groups each fit merged (None where it did not merge)."""
    seen = []
    real = linear._repeats

    def spy(*args):
        dup = real(*args)
        seen.append(dup)
        return dup

    monkeypatch.setattr(linear, "_repeats", spy)
    return seen


def _liblinear(X, y, s, C, eps, extra=""):
    seed_liblinear()
    return liblinearutil.train(np.asarray(y, dtype=float), sp.csr_matrix(X), f"-s {s} -c {C} -e {eps} -B 1 -q {extra}")


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("k", [2, 3])
def test_svc_merged_rows_reach_liblinears_optimum(rng, merges, sparse, k):
    X, y = _repeated(rng, k=k)
    sw = rng.choice([0.5, 1.0, 2.0], size=y.shape[0])
    cw = {c: 1.0 + 0.5 * c for c in range(k)}
    Xin = sp.csr_matrix(X) if sparse else X
    est = LinearSVC(C=0.5, dual=True, tol=1e-6, max_iter=100000, class_weight=cw, random_state=0)
    est.fit(Xin, y, sample_weight=sw)
    assert est.solver_type_ == 1 and merges[-1] is not None
    assert merges[-1].keep.shape[0] < 0.3 * y.shape[0]  # 400 distinct points, 2-3 labels each at most
    # scikit-learn's LinearSVC (its own LIBLINEAR, which takes sample weights; liblinear-official's Python package
    # does not) on every row
    ref = SkLinearSVC(C=0.5, dual=True, tol=1e-7, max_iter=1_000_000, class_weight=cw, random_state=0)
    ref.fit(X, y, sample_weight=sw)
    coef, icpt = ref.coef_, ref.intercept_
    cwv = np.array([cw[c] for c in range(k)])
    ours = primal_svc("l2", "squared_hinge", "ovr", X, y, est.coef_, est.intercept_, 0.5, sw=sw, cw=cwv)
    theirs = primal_svc("l2", "squared_hinge", "ovr", X, y, coef, icpt, 0.5, sw=sw, cw=cwv)
    np.testing.assert_allclose(est.objective_, ours, rtol=1e-9)  # the reported objective is the unmerged one
    for a, b in zip(ours, theirs):
        assert a <= b * (1 + 1e-6) and _rel(a, b) < 1e-5, (a, b)
    # the same model unmerged (the sample says no: nothing merged)
    linear_share = linear.MERGE_SAMPLE_SHARE
    try:
        linear.MERGE_SAMPLE_SHARE = -1.0
        plain = LinearSVC(C=0.5, dual=True, tol=1e-6, max_iter=100000, class_weight=cw, random_state=0)
        plain.fit(Xin, y, sample_weight=sw)
    finally:
        linear.MERGE_SAMPLE_SHARE = linear_share
    assert merges[-1] is None
    np.testing.assert_allclose(est.objective_, plain.objective_, rtol=1e-5)
    np.testing.assert_allclose(est.coef_, plain.coef_, atol=2e-3 * np.abs(plain.coef_).max())


def test_primal_merges_for_many_classes_only(rng, merges):
    """TRON (``dual=False``) merges where it solves at least TRON_MERGE_MIN_PROBLEMS one-vs-rest problems, and
    reaches scikit-learn's optimum on every row; with two classes it keeps every row."""
    k = linear.TRON_MERGE_MIN_PROBLEMS
    X, y = _repeated(rng, k=k)
    sw = rng.choice([0.5, 1.0, 2.0], size=y.shape[0])
    est = LinearSVC(C=0.5, dual=False, tol=1e-8, max_iter=1000, random_state=0).fit(X, y, sample_weight=sw)
    assert est.solver_type_ == 2 and merges[-1] is not None
    ref = SkLinearSVC(C=0.5, dual=False, tol=1e-8, max_iter=100_000, random_state=0).fit(X, y, sample_weight=sw)
    ours = primal_svc("l2", "squared_hinge", "ovr", X, y, est.coef_, est.intercept_, 0.5, sw=sw)
    theirs = primal_svc("l2", "squared_hinge", "ovr", X, y, ref.coef_, ref.intercept_, 0.5, sw=sw)
    np.testing.assert_allclose(est.objective_, ours, rtol=1e-9)
    for a, b in zip(ours, theirs):
        assert a <= b * (1 + 1e-7) and _rel(a, b) < 1e-6, (a, b)
    X2, y2 = _repeated(rng, k=2)
    LinearSVC(dual=False, tol=1e-4, random_state=0).fit(X2, y2)
    assert merges[-1] is None


def test_svr_merged_rows_reach_liblinears_optimum(rng, merges):
    X, _ = _repeated(rng)
    y = np.clip(np.round(3 + X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=X.shape[0])), 1, 5)  # ratings 1-5
    est = LinearSVR(
        loss="squared_epsilon_insensitive", dual=True, C=0.5, epsilon=0.2, tol=1e-6, max_iter=100000, random_state=0
    ).fit(X, y)
    assert est.solver_type_ == 12 and merges[-1] is not None
    m = _liblinear(X, y, 12, 0.5, 1e-7, "-p 0.2")
    w = np.array(m.get_decfun()[0])
    b = m.get_decfun()[1]
    ours = primal_svr("squared_epsilon_insensitive", X, y, est.coef_, est.intercept_, 0.5, 0.2)
    theirs = primal_svr("squared_epsilon_insensitive", X, y, w, b, 0.5, 0.2)
    assert ours <= theirs * (1 + 1e-6) and _rel(ours, theirs) < 1e-5, (ours, theirs)
    np.testing.assert_allclose(est.objective_[0], ours, rtol=1e-9)


def test_warm_start_on_merged_rows_keeps_every_rows_dual(rng, merges):
    """The dual variables kept for the next fit are per original row (a group's shared out by weight) and give
    the fit's w; a warm fit at a new C reaches the cold fit's objective."""
    X, y = _repeated(rng)
    sw = rng.choice([0.5, 1.0, 2.0], size=y.shape[0])
    est = LinearSVC(C=0.2, dual=True, tol=1e-6, max_iter=100000, warm_start=True, random_state=0)
    est.fit(X, y, sample_weight=sw)
    assert merges[-1] is not None
    alpha = est._warm_state["dual"][0]
    assert alpha.shape == (X.shape[0],) and np.all(alpha >= 0)
    ypm = np.where(y == 1, 1.0, -1.0)
    w = (alpha * ypm) @ np.hstack([X, np.ones((X.shape[0], 1))])
    np.testing.assert_allclose(w[:-1], est.coef_[0], atol=1e-5)  # (after a switch to TRON: alpha from w)
    np.testing.assert_allclose(w[-1], est.intercept_[0], atol=1e-5)
    # squared hinge: alpha_i = 2 C_i xi_i at the optimum, row by row (the split is exact, not just the sums)
    xi = np.maximum(0.0, 1.0 - ypm * (X @ est.coef_[0] + est.intercept_[0]))
    np.testing.assert_allclose(alpha, 2 * 0.2 * sw * xi, atol=1e-3)
    est.set_params(C=1.0).fit(X, y, sample_weight=sw)
    cold = LinearSVC(C=1.0, dual=True, tol=1e-6, max_iter=100000, random_state=0).fit(X, y, sample_weight=sw)
    assert _rel(est.objective_[0], cold.objective_[0]) < 1e-6


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_not_merged_where_it_does_not_pay(rng, merges):
    """The L1 losses and the primal solvers keep every row; empty rows are never merged; distinct rows are left
    alone after the sample alone (``dedup.find`` not called)."""
    X, y = _repeated(rng)
    for kw in ({"loss": "hinge", "dual": True}, {"dual": False}, {"multi_class": "crammer_singer"}):
        LinearSVC(tol=1e-2, random_state=0, **kw).fit(X, y)
        assert merges[-1] is None, kw
    # a third of the rows empty (their bias alone), the rest distinct: nothing to merge
    Xd = rng.normal(size=(12000, 5))
    Xd[::3] = 0.0
    yd = (Xd[:, 0] > 0).astype(int)
    for Xin in (Xd, sp.csr_matrix(Xd)):
        assert dedup.sampled_share(Xin, yd) < 0.9
        assert dedup.sampled_share(Xin, yd, empty_apart=True) == 1.0
        LinearSVC(dual=True, tol=1e-2, random_state=0).fit(Xin, yd)
        assert merges[-1] is None
    # fewer rows than MERGE_MIN_ROWS: not looked at
    few = linear.MERGE_MIN_ROWS - 1
    assert linear._repeats(X[:few], y[:few], np.ones(few), 1) is None
    assert linear._repeats(X, y, np.ones(y.shape[0]), 1) is not None
    # empty rows among repeated ones stay apart in the groups found
    Xe = X.copy()
    Xe[:600] = 0.0
    dup = linear._repeats(sp.csr_matrix(Xe), y, np.ones(y.shape[0]), 1)
    assert dup is not None
    heads = dup.keep[dup.group[:600]]
    np.testing.assert_array_equal(heads, np.arange(600))


def test_sampled_share_sees_repeats(rng):
    X, y = _repeated(rng, n=20000, n_distinct=2000)
    for Xin in (X, sp.csr_matrix(X), sp.csr_matrix(X.astype(np.float32))):
        share = dedup.sampled_share(Xin, y)
        assert 0.3 < share < 0.9, share
    distinct = rng.normal(size=(20000, 4))
    assert dedup.sampled_share(sp.csr_matrix(distinct), y) == 1.0
    assert dedup.sampled_share(distinct, y) == 1.0
    # equal CSR rows (as stored) print alike, different ones apart
    A = sp.csr_matrix(np.array([[0, 1.5, 0, 2.0], [0, 1.5, 0, 2.0], [0, 2.0, 0, 1.5], [1.5, 0, 2.0, 0]]))
    out = np.empty(4, dtype=np.uint64)
    dedup._sparse_row_prints(A.data, A.indices, A.indptr, np.arange(4, dtype=np.int64), np.zeros(4, np.int64), out)
    assert out[0] == out[1] and len(set(out.tolist())) == 3
