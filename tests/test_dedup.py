"""Identical rows of one class solved as one row (maxmargin.dedup): the model of every row is LIBSVM's optimum."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import kkt_violation
from sklearn.svm import SVC as SkSVC

from maxmargin import SVC, NuSVC, NuSVR, dedup
from maxmargin.kernels.objects import make_kernel


def _repeated(rng, n_distinct=600, n=3000, d=3, k=2, flip=0.1):
    """Rows drawn from ``n_distinct`` quantised points (values on a grid, so rows repeat), labels from a rule with
    some flipped: identical rows with different labels too."""
    base = np.round(rng.normal(size=(n_distinct, d)) * 4) / 4
    X = base[rng.integers(0, n_distinct, n)]
    score = X[:, 0] + 0.5 * X[:, 1] ** 2
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))
    flipped = rng.random(n) < flip
    y[flipped] = rng.integers(0, k, flipped.sum())
    return X, y


def _dual_objective_and_kkt(model, X, y_pm, C_rows, kernel, rows=None):
    """The binary dual objective of a model's coefficients over all training rows (0 off the support vectors)
    and the KKT violation there."""
    alpha = np.zeros(X.shape[0])
    alpha[model.support_] = np.abs(model.dual_coef_[0])
    K = kernel(X, X)
    Q = (y_pm[:, None] * y_pm[None, :]) * K
    obj = 0.5 * alpha @ Q @ alpha - alpha.sum()
    return obj, kkt_violation(Q, -np.ones(X.shape[0]), y_pm, C_rows, alpha), alpha


@pytest.mark.parametrize("sparse", [False, True])
def test_binary_fit_on_merged_rows_is_libsvms_optimum(rng, sparse):
    X, y = _repeated(rng)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    C = 2.0
    found = dedup.find(X, y, C * w)
    assert found is not None and found.keep.shape[0] < 0.5 * X.shape[0]  # the merged route is the one tested
    Xf = sp.csr_matrix(X) if sparse else X
    ours = SVC(C=C, gamma=0.8, tol=1e-6).fit(Xf, y, sample_weight=w)
    ref = SkSVC(C=C, gamma=0.8, tol=1e-6).fit(X, y, sample_weight=w)
    kern = make_kernel("rbf", gamma=0.8)
    y_pm = np.where(y == ours.classes_[1], 1.0, -1.0)
    obj, viol, alpha = _dual_objective_and_kkt(ours, X, y_pm, C * w, kern)
    ref_obj = _dual_objective_and_kkt(ref, X, y_pm, C * w, kern)[0]
    assert obj == pytest.approx(ref_obj, rel=1e-6)
    assert viol < 1e-5
    # a solution of the original problem: every row within its own box, y'a = 0
    assert np.all(alpha <= C * w * (1 + 1e-12)) and abs(alpha @ y_pm) < 1e-8
    assert ours.support_.shape[0] == np.count_nonzero(alpha)
    assert np.all(np.diff(ours.support_[: ours.n_support_[0]]) > 0)  # by class, then row, as LIBSVM
    sv = ours.support_vectors_
    np.testing.assert_allclose(sv.toarray() if sparse else sv, X[ours.support_])
    np.testing.assert_allclose(ours.decision_function(Xf), ref.decision_function(X), atol=1e-4)
    assert ours.shape_fit_ == X.shape
    assert ours.train_error_ == pytest.approx(np.mean(ours.predict(Xf) != y))
    assert ours.loo_bound_ == pytest.approx(ours.support_.shape[0] / X.shape[0])


def test_multiclass_with_class_weights_matches_libsvm(rng):
    X, y = _repeated(rng, n_distinct=500, n=2500, k=4)
    assert dedup.find(X, y, np.ones(X.shape[0])) is not None
    params = dict(C=3.0, gamma=0.5, tol=1e-6, class_weight={0: 2.0, 3: 0.5})
    ours = SVC(**params).fit(X, y)
    ref = SkSVC(**params).fit(X, y)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-4)
    np.testing.assert_allclose(
        ours.decision_function(X), ref.decision_function(X), atol=1e-4
    )  # 'ovr' scores, from every pair
    assert np.mean(ours.predict(X) == ref.predict(X)) > 0.999
    # every coefficient within its row's bound, and the pair sums y'a = 0 hold on the split coefficients
    bound = 3.0 * np.array([2.0, 1.0, 1.0, 0.5])[y[ours.support_]]
    assert np.all(np.abs(ours.dual_coef_) <= bound * (1 + 1e-12))
    assert np.all(ours.n_support_ == np.bincount(y[ours.support_], minlength=4))
    assert ours.train_error_ == pytest.approx(np.mean(ours.predict(X) != y))


def test_merging_is_invisible_but_faster_in_the_solver(rng, monkeypatch):
    """The same data with merging off: the same decision function and gamma='scale' (from every row, not the
    distinct ones), and the merged problem's solver saw fewer rows."""
    X, y = _repeated(rng)
    merged = SVC(tol=1e-6).fit(X, y)
    monkeypatch.setattr(dedup, "MIN_ROWS", 10**9)
    plain = SVC(tol=1e-6).fit(X, y)
    assert merged._gamma == plain._gamma
    np.testing.assert_allclose(merged.decision_function(X), plain.decision_function(X), atol=1e-4)
    assert merged.objective_[0] == pytest.approx(plain.objective_[0], rel=1e-6)


def test_groups_keep_rows_apart_on_a_hash_collision():
    """Rows with equal keys but different values or labels, or a zero bound, are not merged."""
    X = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 3.0], [1.0, 2.0], [-0.0, 0.0], [0.0, 0.0], [1.0, 2.0]])
    labels = np.array([0, 0, 0, 1, 0, 0, 0])
    mergeable = np.array([True, True, True, True, True, True, False])
    keys = np.zeros(7, dtype=np.uint64)  # every row collides
    order = np.arange(7)
    group = np.empty(7, dtype=np.int64)
    z = np.zeros(1)
    dedup._groups(order, keys, labels, mergeable, True, X, z, np.zeros(1, dtype=np.int64), np.zeros(2, np.int64), group)
    # rows 0 and 1 merge; 2 differs, 3 has another label, 4 and 5 (zeros) differ from row 0, 6 may not merge
    np.testing.assert_array_equal(group, [0, 0, 2, 3, 4, 5, 6])
    # the same whatever the order within the run (find's sort is not stable): the head is the least mergeable index
    dedup._groups(
        order[::-1].copy(), keys, labels, mergeable, True, X, z, np.zeros(1, np.int64), np.zeros(2, np.int64), group
    )
    np.testing.assert_array_equal(group, [0, 0, 2, 3, 4, 5, 6])
    # -0.0 and 0.0 hash alike
    h = np.empty(2, dtype=np.uint64)
    dedup._dense_hashes(X[4:6], np.zeros(2, dtype=np.int64), h)
    assert h[0] == h[1]


@pytest.mark.parametrize("sparse", [False, True])
def test_find_groups_equal_rows_of_one_label(rng, sparse):
    """Against a grouping by np.unique over (label, row): every group is one (row, label) value, each value one
    group (no collisions at this size), headed by its first row, with the bounds summed."""
    X, y = _repeated(rng, n=5000, n_distinct=300, d=3, k=3)
    C = rng.choice([0.5, 1.0, 2.0], size=y.shape[0])
    dup = dedup.find(sp.csr_matrix(X) if sparse else X, y, C)
    _, first, inverse = np.unique(np.column_stack([y, X]), axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    np.testing.assert_array_equal(dup.keep, np.sort(first))
    np.testing.assert_array_equal(dup.keep[dup.group], first[inverse])
    np.testing.assert_allclose(dup.C, np.bincount(dup.group, weights=C))


def test_expand_splits_each_group_in_row_order():
    """A group's coefficient fills its rows' bounds in row order; a group at its summed bound puts every row at
    its own bound."""
    dup = dedup.Duplicates(
        keep=np.array([0, 1]), group=np.array([0, 1, 0, 0, 1]), C=np.array([3.0, 2.0]), counts=np.array([3, 2])
    )
    C_rows = np.ones(5)
    rows, dual = dedup.expand(np.array([[1.5, -2.0]]), np.array([0, 1]), dup, C_rows)
    np.testing.assert_array_equal(rows, [0, 1, 2, 4])
    np.testing.assert_allclose(dual, [[1.0, -1.0, 0.5, -1.0]])


def test_not_merged_where_it_does_not_apply(rng):
    X, y = _repeated(rng)
    assert dedup.find(X[:500], y[:500], np.ones(500)) is None  # too few rows
    distinct = rng.normal(size=(3000, 3))
    assert dedup.find(distinct, y, np.ones(3000)) is None  # nothing repeats
    for est in (
        SVC(probability=True),
        SVC(kernel="precomputed"),
        SVC(formulation="l2"),
        SVC(solver="frank_wolfe"),
        SVC(solver="divide", solver_options=dict(early_stop=1)),  # the routed parts hold the rows as solved
        SVC(kernel=lambda A, B: A @ B.T),
        NuSVC(probability=True),
        NuSVC(kernel="precomputed"),
        NuSVR(kernel="precomputed"),
    ):
        assert not est._merges_duplicates()
    assert SVC()._merges_duplicates() and NuSVC()._merges_duplicates() and NuSVR()._merges_duplicates()
    assert SVC(solver="batched")._merges_duplicates() and SVC(solver="divide")._merges_duplicates()


@pytest.mark.parametrize("solver", ["batched", "divide"])
def test_batched_and_divide_merge_rows_too(rng, solver, monkeypatch):
    """The batched and divide solvers solve the merged problem too (session 42: one-hot rows of 8 fields, 200,000
    rows, 27% distinct: divide 254 -> 13 s), to the unmerged fit's objective and decision function; divide's
    report counts the merged variables."""
    from maxmargin.solvers import batched, divide

    monkeypatch.setattr(divide, "DIRECT_BELOW", 0)  # divided, small as it is, whatever its parts leave across
    monkeypatch.setattr(divide, "ACROSS_MAX", np.inf)
    module = batched if solver == "batched" else divide
    seen, solve = [], module.solve
    monkeypatch.setattr(module, "solve", lambda problem, **kw: seen.append(problem.n_var) or solve(problem, **kw))
    X, y = _repeated(rng)
    kw = dict(tol=1e-6, solver=solver, solver_options=dict(n_parts=3) if solver == "divide" else None)
    merged = SVC(**kw).fit(X, y)
    n_merged = dedup.find(X, y, np.ones(X.shape[0])).keep.shape[0]
    monkeypatch.setattr(dedup, "MIN_ROWS", 10**9)
    plain = SVC(**kw).fit(X, y)
    assert seen == [n_merged, X.shape[0]] and n_merged < X.shape[0] / 2
    assert merged.objective_[0] == pytest.approx(plain.objective_[0], rel=1e-6)
    np.testing.assert_allclose(merged.decision_function(X), plain.decision_function(X), atol=1e-4)
    assert merged.support_.shape[0] <= plain.support_.shape[0] + 5


def test_svr_merges_rows_with_the_same_target(rng):
    """SVR: identical rows with the same target merge (rows with another target stay apart); the split model is
    LIBSVM's optimum of the full problem (its dual objective, within each row's bound)."""
    from sklearn.svm import SVR as SkSVR

    from maxmargin import SVR

    X, _ = _repeated(rng, n_distinct=400, n=2500)
    z = np.round(np.sin(3 * X[:, 0]) + X[:, 1] ** 2, 1)
    z[rng.random(X.shape[0]) < 0.05] += 0.5  # some repeats with another target
    w = rng.uniform(0.5, 2.0, X.shape[0])
    codes = np.unique(z, return_inverse=True)[1]
    assert dedup.find(X, codes, w) is not None
    params = dict(C=5.0, epsilon=0.05, gamma=0.7, tol=1e-6)
    ours = SVR(**params).fit(X, z, sample_weight=w)
    ref = SkSVR(**params).fit(X, z, sample_weight=w)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-4)
    kern = make_kernel("rbf", gamma=0.7)

    def objective(m):
        beta = np.zeros(X.shape[0])
        beta[m.support_] = m.dual_coef_[0]
        return 0.5 * beta @ kern(X, X) @ beta - z @ beta + 0.05 * np.abs(beta).sum(), beta

    obj, beta = objective(ours)
    assert obj == pytest.approx(objective(ref)[0], rel=1e-6)
    assert np.all(np.abs(beta) <= 5.0 * w * (1 + 1e-12)) and abs(beta.sum()) < 1e-8
    np.testing.assert_allclose(ours.support_vectors_, X[ours.support_])
    assert np.all(np.diff(ours.support_) > 0)


def test_one_class_merges_identical_rows(rng):
    """OneClassSVM (e'a = nu sum w, 0 <= a_i <= w_i): the merged fit is LIBSVM's optimum of the full problem."""
    from sklearn.svm import OneClassSVM as SkOneClassSVM

    from maxmargin import OneClassSVM

    X, _ = _repeated(rng, n_distinct=300, n=2500)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    assert dedup.find(X, np.zeros(X.shape[0], dtype=np.int64), w) is not None
    ours = OneClassSVM(nu=0.2, gamma=0.5, tol=1e-6).fit(X, sample_weight=w)
    ref = SkOneClassSVM(nu=0.2, gamma=0.5, tol=1e-6).fit(X, sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-4)
    K = make_kernel("rbf", gamma=0.5)(X, X)

    def objective(m):
        a = np.zeros(X.shape[0])
        a[m.support_] = m.dual_coef_[0]
        return 0.5 * a @ K @ a, a

    obj, a = objective(ours)
    assert obj == pytest.approx(objective(ref)[0], rel=1e-6)
    assert np.all(a <= w * (1 + 1e-12)) and a.sum() == pytest.approx(0.2 * w.sum())
    assert ours.offset_ == pytest.approx(ref.offset_[0] if np.ndim(ref.offset_) else ref.offset_, abs=1e-4)


def test_expand_with_a_scale_per_problem():
    """Coefficients that are the solution times a factor (NuSVC's 1/r): each entry's bounds are C times it."""
    dup = dedup.Duplicates(
        keep=np.array([0, 1]), group=np.array([0, 1, 0, 0, 1]), C=np.array([3.0, 2.0]), counts=np.array([3, 2])
    )
    rows, dual = dedup.expand(np.array([[1.5, -1.0]]), np.array([0, 1]), dup, np.ones(5), np.array([[2.0, 0.5]]))
    # group 0: bounds 2 a row, the first row takes all of 1.5; group 1: at its scaled sum 1.0, each row at 0.5
    np.testing.assert_array_equal(rows, [0, 1, 4])
    np.testing.assert_allclose(dual, [[1.5, -0.5, -0.5]])


@pytest.mark.parametrize("k", [2, 3])
def test_nusvc_merges_identical_rows(rng, k, monkeypatch):
    """NuSVC (class sums nu sum(w) / 2, 0 <= a_i <= w_i, the solution scaled by 1/r): the merged fit is LIBSVM's,
    and the split coefficients stay within each row's scaled bound w_i / r."""
    from sklearn.svm import NuSVC as SkNuSVC

    from maxmargin import NuSVC

    X, y = _repeated(rng, n_distinct=500, n=2500, k=k)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    assert dedup.find(X, y, w) is not None
    params = dict(nu=0.3, gamma=0.8, tol=1e-6)
    ours = NuSVC(**params).fit(X, y, sample_weight=w)
    ref = SkNuSVC(**params).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-4)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-4)
    assert np.all(ours.n_support_ == np.bincount(y[ours.support_], minlength=k))
    np.testing.assert_allclose(ours.support_vectors_, X[ours.support_])
    monkeypatch.setattr(dedup, "MIN_ROWS", 10**9)
    plain = NuSVC(**params).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(X), plain.decision_function(X), atol=1e-5)

    def per_pair(model):
        # each entry's pair (class of its support vector, the class of its row) and |coefficient| / w_i
        c = y[model.support_][None, :]
        j = np.arange(k - 1)[:, None]
        other = np.where(j < c, j, j + 1)
        pair = np.minimum(c, other) * k + np.maximum(c, other)
        return pair, np.abs(model.dual_coef_) / w[model.support_][None, :]

    # one r a pair: every |coefficient| / w_i at most that pair's 1 / r, which its rows at their bound reach
    pair_p, ratio_p = per_pair(plain)
    pair_o, ratio_o = per_pair(ours)
    for p in np.unique(pair_p):
        inv_r = ratio_p[pair_p == p].max()
        assert ratio_o[pair_o == p].max() <= inv_r * (1 + 1e-5)
        assert np.count_nonzero(ratio_o[pair_o == p] > inv_r * (1 - 1e-5)) > 0
    if k == 2:  # y'a = 0 on the split coefficients
        assert abs(ours.dual_coef_[0].sum()) < 1e-8 * np.abs(ours.dual_coef_).sum()


def test_nusvr_merges_rows_with_the_same_target(rng, monkeypatch):
    """NuSVR (sum a = sum a* = nu sum(C) / 2): the merged fit predicts as LIBSVM's, the split coefficients within
    each row's bound C w_i and summing to zero."""
    from sklearn.svm import NuSVR as SkNuSVR

    from maxmargin import NuSVR

    X, _ = _repeated(rng, n_distinct=400, n=2500)
    z = np.round(np.sin(3 * X[:, 0]) + X[:, 1] ** 2, 1)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    assert dedup.find(X, np.unique(z, return_inverse=True)[1], w) is not None
    params = dict(nu=0.4, C=2.0, gamma=0.7, tol=1e-6)
    ours = NuSVR(**params).fit(X, z, sample_weight=w)
    ref = SkNuSVR(**params).fit(X, z, sample_weight=w)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-4)
    beta = ours.dual_coef_[0]
    assert np.all(np.abs(beta) <= 2.0 * w[ours.support_] * (1 + 1e-12))
    assert abs(beta.sum()) < 1e-8 * np.abs(beta).sum()
    assert np.abs(beta).sum() <= 0.4 * 2.0 * w.sum() * (1 + 1e-9)
    monkeypatch.setattr(dedup, "MIN_ROWS", 10**9)
    plain = NuSVR(**params).fit(X, z, sample_weight=w)
    np.testing.assert_allclose(ours.predict(X), plain.predict(X), atol=1e-5)
    assert ours.epsilon_ == pytest.approx(plain.epsilon_, abs=1e-5)


def test_nusvc_class_weights_merge_as_sample_weights(rng, monkeypatch):
    """NuSVC's class weights scale the bounds as sample weights do (scikit-learn's NuSVC ignores class_weight; its
    fit with the same weights as sample_weight is the reference), merged or not."""
    from sklearn.svm import NuSVC as SkNuSVC

    from maxmargin import NuSVC

    X, y = _repeated(rng, n_distinct=500, n=2500, k=3)
    cw = {0: 2.0, 2: 0.5}
    w = np.array([cw.get(c, 1.0) for c in y])
    ours = NuSVC(nu=0.2, gamma=0.8, tol=1e-6, class_weight=cw).fit(X, y)
    ref = SkNuSVC(nu=0.2, gamma=0.8, tol=1e-6).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-4)
    monkeypatch.setattr(dedup, "MIN_ROWS", 10**9)
    plain = NuSVC(nu=0.2, gamma=0.8, tol=1e-6, class_weight=cw).fit(X, y)
    np.testing.assert_allclose(ours.decision_function(X), plain.decision_function(X), atol=1e-5)
