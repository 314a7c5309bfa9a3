"""probability=True's cross-validation folds: right fold solutions, the same model whatever the threads."""

import numpy as np
import pytest
import sklearn.svm
from sklearn.datasets import make_blobs, make_classification
from sklearn.utils import check_random_state

import maxmargin
from maxmargin import probability


def _bits(est):
    return [np.asarray(a).tobytes() for a in (est.dual_coef_, est.intercept_, est.probA_, est.probB_)]


def _capture_cv(monkeypatch):
    """Record (ysub, plan, held-out decision values) of every cv_decision_values call."""
    captured = []
    original = probability.cv_decision_values

    def spy(fit_fold, Xs, ysub, kernel, rng, **kw):
        dec = original(fit_fold, Xs, ysub, kernel, rng, **kw)
        captured.append((ysub.copy(), kw["plan"], dec, Xs))
        return dec

    monkeypatch.setattr(probability, "cv_decision_values", spy)
    return captured


def _capture_pairs(monkeypatch):
    """Record (class index of each row, pairs, folds, result) of every ovo.solve_pairs call."""
    from maxmargin.solvers import ovo

    captured = []
    original = ovo.solve_pairs

    def spy(bd, y_idx, C, pairs, **kw):
        res = original(bd, y_idx, C, pairs, **kw)
        captured.append((np.asarray(y_idx).copy(), pairs, kw.get("folds"), res))
        return res

    monkeypatch.setattr(ovo, "solve_pairs", spy)
    return captured


@pytest.mark.parametrize("kind", ["binary", "multi", "sparse"])
def test_same_model_bit_for_bit_across_runs_and_threads(kind, monkeypatch):
    import numba

    if kind == "multi":
        X, y = make_blobs(450, 5, centers=3, cluster_std=3.0, random_state=0)
    else:
        X, y = make_classification(500, 8, flip_y=0.1, random_state=0)
    if kind == "sparse":
        import scipy.sparse as sp

        X = sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0))
    models = []
    for workers, threads in ((1, 1), (3, numba.config.NUMBA_NUM_THREADS), (1, 1)):
        monkeypatch.setattr(probability, "fold_workers", lambda w=workers: w)
        numba.set_num_threads(threads)
        try:
            est = maxmargin.SVC(C=3.0, probability=True, random_state=7).fit(X, y)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        models.append(_bits(est))
    assert models[0] == models[1] == models[2]


def test_fold_workers_follow_numba_threads():
    import numba

    numba.set_num_threads(1)
    try:
        assert probability.fold_workers() == 1
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert 1 <= probability.fold_workers() <= probability.N_FOLDS


def test_fold_solutions_match_libsvm_on_each_fold(monkeypatch):
    """The warm-started folds with shared kernel rows solve the same problems as cold fits by
    LIBSVM (scikit-learn's SVC) on each fold's rows: the held-out decision values agree."""
    X, y = make_classification(400, 6, flip_y=0.05, random_state=3)
    captured = _capture_cv(monkeypatch)
    maxmargin.SVC(C=2.0, gamma=0.3, tol=1e-7, probability=True, random_state=0).fit(X, y)
    ((ysub, plan, dec, Xs),) = captured
    # the folds run on the rows grouped by class (+1 first, each in its order): row perm[r] is their row r
    perm = probability.class_groups(np.where(y == 0, 1.0, -1.0))  # the first class is +1
    assert perm is not None and np.array_equal(Xs, X[perm])
    inv = np.argsort(perm)
    # LIBSVM's folds: one permutation from random_state
    expected = probability.fold_plan(X.shape[0], check_random_state(0))
    assert all(
        np.array_equal(a[0], np.sort(inv[b[0]])) and np.array_equal(a[1], inv[b[1]]) for a, b in zip(plan, expected)
    )
    reference = np.zeros_like(dec)
    for train, test in plan:
        ref = sklearn.svm.SVC(C=2.0, gamma=0.3, tol=1e-7).fit(Xs[train], ysub[train])
        reference[test] = ref.decision_function(Xs[test])  # positive for +1, as ours
    np.testing.assert_allclose(dec, reference, atol=1e-4)


def test_folds_read_the_whole_kernel_matrix_and_match_libsvm(monkeypatch):
    """Dense rows of >= GRAM_MIN_FEATURES features, whose whole kernel matrix SMO computed for the full fit: the
    folds read that matrix (rows in the pair's order, no kernel value computed again); their held-out values
    are LIBSVM's on each fold's rows, and the model is the same bit for bit with 1 and 3 fold workers."""
    from maxmargin.kernels import rowcache

    rng = np.random.default_rng(4)
    n, d = 300, rowcache.GRAM_MIN_FEATURES + 10
    X = rng.normal(size=(n, d))
    y = (X[:, :5].sum(axis=1) + rng.normal(size=n) > 0).astype(int)
    made = []

    class Spy(probability.WholeGram):
        def __init__(self, G):
            made.append(G.shape)
            super().__init__(G)

    monkeypatch.setattr(probability, "WholeGram", Spy)
    captured = _capture_cv(monkeypatch)
    gamma = 1.0 / d
    maxmargin.SVC(C=2.0, gamma=gamma, tol=1e-7, probability=True, random_state=0).fit(X, y)
    assert made == [(n, n)]
    ((ysub, plan, dec, Xs),) = captured
    assert np.array_equal(Xs, X)  # not grouped by class
    reference = np.zeros_like(dec)
    for train, test in plan:
        ref = sklearn.svm.SVC(C=2.0, gamma=gamma, tol=1e-7).fit(Xs[train], ysub[train])
        reference[test] = ref.decision_function(Xs[test])
    np.testing.assert_allclose(dec, reference, atol=1e-4)
    bits = []
    for workers in (1, 3):
        monkeypatch.setattr(probability, "fold_workers", lambda w=workers: w)
        bits.append(_bits(maxmargin.SVC(C=2.0, gamma=gamma, probability=True, random_state=7).fit(X, y)))
    assert bits[0] == bits[1] and len(made) == 3


def test_predict_from_proba_is_the_argmax():
    X, y = make_blobs(300, 4, centers=4, cluster_std=3.5, random_state=2)
    est = maxmargin.SVC(probability=True, predict_from_proba=True, random_state=0).fit(X, y)
    P = est.predict_proba(X)
    np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(P, axis=1)])
    binary = (y == 0).astype(int)
    est2 = maxmargin.SVC(probability=True, predict_from_proba=True, random_state=0).fit(X, binary)
    np.testing.assert_array_equal(est2.predict(X), est2.classes_[np.argmax(est2.predict_proba(X), axis=1)])


def test_large_sparse_folds_take_the_batched_solver_and_match_libsvm(monkeypatch):
    """Folds of >= 4000 rows of 64 features go to the batched solver (warm-started from the full fit's
    multipliers and gradient; SMO's kernel rows are dear, SVC._folds_batched): each fold's held-out decision
    values equal LIBSVM's cold fit on the fold's rows, and the model is the same bit for bit on one thread
    and on all."""
    import numba
    import scipy.sparse as sp

    from maxmargin import formulations

    X, y = make_classification(5000, 64, n_informative=8, class_sep=2.0, flip_y=0.01, random_state=5)
    X = sp.csr_matrix(X)  # 64 features, sparse input (densified inside: the same route)
    solvers = []
    real_fit_binary = formulations.fit_binary

    def spy_fit(X_, y_, bounds, kern, formulation, solver, rows=None, **options):
        if rows is not None and rows.shape[0] < X_.shape[0]:
            name = formulations.resolve_solver(formulation, solver, rows.shape[0])
            solvers.append((name, "alpha0" in options, "grad0" in options, "shared_rows" in options))
        return real_fit_binary(X_, y_, bounds, kern, formulation, solver, rows=rows, **options)

    monkeypatch.setattr(formulations, "fit_binary", spy_fit)
    monkeypatch.setattr(probability, "HELD_MIN_FEATURES", 64)  # the full fit's support vectors' rows: HeldRows
    captured = _capture_cv(monkeypatch)
    est = maxmargin.SVC(C=1.0, gamma=0.01, tol=1e-6, probability=True, random_state=0).fit(X, y)
    # five warm-started batched folds, each from the full fit's gradient (probability.fold_start), reading the
    # full fit's support vectors' rows (probability.HeldRows, here from 64 features)
    assert solvers == [("batched", True, True, True)] * probability.N_FOLDS
    ((ysub, plan, dec, Xs),) = captured
    reference = np.zeros_like(dec)
    for train, test in plan:
        ref = sklearn.svm.SVC(C=1.0, gamma=0.01, tol=1e-6).fit(Xs[train], ysub[train])
        reference[test] = ref.decision_function(Xs[test])
    np.testing.assert_allclose(dec, reference, atol=1e-4)
    numba.set_num_threads(1)
    try:
        one = maxmargin.SVC(C=1.0, gamma=0.01, tol=1e-6, probability=True, random_state=0).fit(X, y)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert _bits(one) == _bits(est)


def test_compiled_folds_of_many_classes_match_libsvm_and_the_pair_route(monkeypatch):
    """Where the one-vs-one pairs are solved in compiled code, so are their folds, right after each
    pair (maxmargin.solvers.ovo_folds): each pair's held-out values equal LIBSVM's cold fits on the
    fold's rows, and the sigmoids equal those of the pair-by-pair route (forced by a cache too
    small for the compiled one) at a tight tol."""

    X, y = make_blobs(600, 4, centers=4, cluster_std=2.5, random_state=3)
    captured = _capture_pairs(monkeypatch)
    kw = {"C": 2.0, "gamma": 0.3, "tol": 1e-8, "probability": True, "random_state": 0}
    est = maxmargin.SVC(**kw).fit(X, y)
    ((y_idx, pairs, folds, res),) = captured
    assert len(pairs) == 6 and folds is not None and all(d is not None for d in res["cv"])
    folds = np.split(np.asarray(folds), np.asarray(res["offsets"])[1:-1])  # pair by pair
    for (a, b), rows, fold, d in list(zip(pairs, res["rows"], folds, res["cv"]))[:3]:
        yy = np.where(y_idx[rows] == a, 1, -1)  # the layout: class a's rows first
        reference = np.zeros_like(d)
        for f in range(probability.N_FOLDS):
            train, test = fold != f, fold == f
            ref = sklearn.svm.SVC(C=2.0, gamma=0.3, tol=1e-8).fit(X[rows[train]], yy[train])
            reference[test] = ref.decision_function(X[rows[test]])
        np.testing.assert_allclose(d, reference, atol=1e-5)
    slow = maxmargin.SVC(cache_size=0.01, **kw).fit(X, y)  # no room for class blocks: pair by pair
    assert len(captured) == 1
    np.testing.assert_allclose(est.probA_, slow.probA_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(est.probB_, slow.probB_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("data", ["narrow", "sparse", "wide"])
@pytest.mark.parametrize("plan", [(True, True), (True, False), (False, False)])
def test_compiled_folds_on_each_row_plan_match_libsvm(data, plan, monkeypatch):
    """The folds run on the pair's kernel rows however the compiled route holds them (``plan``:
    :func:`maxmargin.solvers.ovo.lazy_plan`'s (rows on demand, each pair its own diagonal blocks) after the
    probes, which take rows on demand): each fold's held-out values equal LIBSVM's cold fit on the fold's rows,
    on dense rows of few features, sparse rows, and dense rows of 40 features (matrix-vector rows on demand)."""
    import scipy.sparse as sp

    from maxmargin.kernels import make_kernel
    from maxmargin.kernels.blocks import DENSE, NARROW, SPARSE, block_data
    from maxmargin.solvers import ovo

    k, d = (8, 40) if data == "wide" else (4, 6)  # dense rows on demand: only with 3 x 8 pairs or more
    X, y = make_blobs(100 * k, d, centers=k, cluster_std=2.5, random_state=3)
    if data == "sparse":
        X[np.abs(X) < 3] = 0.0
        X = sp.csr_matrix(X)
    gamma = 0.3 if data != "wide" else 0.05
    mode = block_data(X, make_kernel("rbf", gamma=gamma)).mode
    assert mode == {"narrow": NARROW, "sparse": SPARSE, "wide": DENSE}[data]
    captured, plans = _capture_pairs(monkeypatch), []
    monkeypatch.setattr(ovo, "lazy_plan", lambda *a: plans.append(a) or plan)
    maxmargin.SVC(C=2.0, gamma=gamma, tol=1e-8, probability=True, random_state=0).fit(X, y)
    ((y_idx, pairs, folds, res),) = captured
    assert len(plans) == 1 and all(c is not None for c in res["cv"])
    folds = np.split(np.asarray(folds), np.asarray(res["offsets"])[1:-1])
    probes = np.unique(np.linspace(0, len(pairs) - 1, max(1, min(ovo.LAZY_PROBES, len(pairs) // 3))).astype(int))
    check = [int(probes[0])] + [p for p in range(len(pairs)) if p not in probes][:2]
    for p in check:  # a probe and pairs after it
        a, rows, fold, dec = pairs[p][0], res["rows"][p], folds[p], res["cv"][p]
        yy = np.where(y_idx[rows] == a, 1, -1)
        reference = np.zeros_like(dec)
        for f in range(probability.N_FOLDS):
            train, test = fold != f, fold == f
            ref = sklearn.svm.SVC(C=2.0, gamma=gamma, tol=1e-8).fit(X[rows[train]], yy[train])
            reference[test] = ref.decision_function(X[rows[test]])
        np.testing.assert_allclose(dec, reference, atol=1e-5)


@pytest.mark.parametrize("kind", ["binary", "multi"])
def test_folds_stop_at_fold_tol_and_the_probabilities_barely_move(kind, monkeypatch):
    """The folds are solved to ``probability.fold_tol(tol)`` (30 times the fit's tol): fewer SMO steps
    than at the fit's own tol, with probabilities that move far less than another draw of the folds
    moves them (``random_state``)."""
    from maxmargin import svm
    from maxmargin.solvers import ovo

    if kind == "multi":  # the compiled one-vs-one route and its folds
        X, y = make_blobs(600, 4, centers=3, cluster_std=5.0, random_state=1)
    else:  # SMO fold problems
        X, y = make_classification(600, 6, flip_y=0.1, random_state=1)
    seen = []
    fit_fold_problem, solve_pairs = svm.SVC._fit_fold_problem, ovo.solve_pairs

    def spy_problem(self, problem, options, alpha0, start=None):
        fit = fit_fold_problem(self, problem, options, alpha0, start)
        seen.append((options["tol"], fit.n_iter))
        return fit

    def spy_pairs(*args, **kw):
        res = solve_pairs(*args, **kw)
        if kw.get("folds") is not None:
            seen.append((kw["fold_tol"], int(np.nansum(res["cv_iter"]))))
        return res

    monkeypatch.setattr(svm.SVC, "_fit_fold_problem", spy_problem)
    monkeypatch.setattr(ovo, "solve_pairs", spy_pairs)
    kw = {"C": 10.0, "gamma": 0.5, "tol": 1e-4, "probability": True}
    models, steps = {}, {}
    for factor in (1.0, probability.FOLD_TOL_FACTOR):
        monkeypatch.setattr(probability, "FOLD_TOL_FACTOR", factor)
        seen.clear()
        models[factor] = maxmargin.SVC(random_state=0, **kw).fit(X, y)
        assert seen and all(t == pytest.approx(factor * 1e-4) for t, _ in seen)
        steps[factor] = sum(s for _, s in seen)
    other_draw = maxmargin.SVC(random_state=1, **kw).fit(X, y)
    factor = probability.FOLD_TOL_FACTOR
    assert factor == 30.0 and steps[factor] < 0.9 * steps[1.0]
    P = {f: m.predict_proba(X) for f, m in models.items()}
    by_tol = np.abs(P[factor] - P[1.0]).mean()
    by_draw = np.abs(other_draw.predict_proba(X) - P[factor]).mean()
    assert by_tol < 0.25 * by_draw


def test_fold_layout_of_all_pairs_is_plan_of_each():
    """The compiled route's fold layout (every pair at once) holds the folds plan_of cuts from the same
    permutation, in solve_pairs' order (class a's rows first); fold_permutations gives permutations."""
    from maxmargin.solvers.ovo_folds import layout_folds

    rng = np.random.RandomState(4)
    sizes = [7, 1, 12, 40, 5]
    perms = probability.fold_permutations(sizes, rng)
    labels = [np.where(rng.rand(n) < 0.4, 1.0, -1.0) for n in sizes]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    layout, fold = layout_folds(np.concatenate(labels), np.concatenate(perms), offsets, probability.N_FOLDS)
    for p, (perm, lab) in enumerate(zip(perms, labels)):
        assert np.array_equal(np.sort(perm), np.arange(sizes[p]))
        lay = layout[offsets[p] : offsets[p + 1]]
        order = np.r_[np.flatnonzero(lab > 0), np.flatnonzero(lab < 0)]  # class a's rows first
        assert np.array_equal(lay[order], np.arange(sizes[p]))
        f_rows = fold[offsets[p] : offsets[p + 1]][lay]  # each row's fold, rows in increasing order
        for f, (train, test) in enumerate(probability.plan_of(perm)):
            assert np.array_equal(np.flatnonzero(f_rows == f), np.sort(test))
            assert np.array_equal(np.flatnonzero(f_rows != f), train)


def test_restore_equality_moves_few_multipliers(rng):
    """A fold's warm start: y'alpha = 0 again, within the box, by the largest multipliers of the side in
    excess; the compiled twin (the one-vs-one folds, rows of class a first) moves the same ones."""
    from maxmargin.solvers.ovo_folds import _restore_equality

    n, na = 300, 140
    y = np.r_[np.ones(na), -np.ones(n - na)]
    U = rng.uniform(0.5, 2.0, size=n)
    a = np.where(rng.random(n) < 0.5, U, rng.uniform(0, 1, size=n) * U)  # half at the bound
    a[rng.random(n) < 0.3] = 0.0
    r = y @ a
    fixed = probability.restore_equality(a, y)
    assert abs(y @ fixed) < 1e-9 and np.all(fixed >= 0) and np.all(fixed <= U)
    moved = np.flatnonzero(fixed != a)
    side = np.flatnonzero(y == np.sign(r))
    biggest = side[np.argsort(-a[side], kind="stable")][: moved.size]
    assert set(moved) == set(biggest)  # the largest of the side in excess, nothing else
    assert 0 < moved.size < side.size // 2
    twin = a.copy()
    _restore_equality(twin, na)
    np.testing.assert_allclose(twin, fixed, atol=1e-12)
    # one class left: its multipliers go (largest first) until y'alpha = 0, i.e. all
    assert np.array_equal(probability.restore_equality(np.r_[1.0, 0.5], np.r_[1.0, 1.0]), np.r_[0.0, 0.0])


def test_fold_start_gradient_is_the_folds(rng):
    """The batched folds' start: the fold's gradient from the full fit's, less the held-out support
    vectors, plus the few multipliers restore_equality moved."""
    from maxmargin.kernels import make_kernel
    from maxmargin.problem import csvc_problem
    from maxmargin.solvers import smo

    X, y01 = make_classification(n_samples=250, n_features=6, random_state=3)
    y = np.where(y01 == 1, 1.0, -1.0)
    C = rng.uniform(0.5, 2.0, size=250)
    k = make_kernel("rbf", gamma=0.2, X=X)
    full = smo.solve(csvc_problem(X, k, y, C), tol=1e-6)
    train = np.sort(rng.choice(250, size=200, replace=False))
    a0, g0 = probability.fold_start(X, k, y, full.alpha, full.grad, train)
    fold = csvc_problem(X, k, y[train], C[train], index=train)
    assert abs(y[train] @ a0) < 1e-9 and np.all(a0 >= 0) and np.all(a0 <= C[train])
    np.testing.assert_allclose(g0, fold.q_matrix() @ a0 + fold.p, atol=1e-9)


def test_held_rows_give_the_folds_start_and_held_out_values(rng):
    """HeldRows (the batched folds' rows of the full fit's support vectors, where a kernel row is dear: dense
    rows of many features, wide sparse rows whose features are frequent, not hashed ones): its
    sums -- the rows it holds read, the others computed -- equal the kernel's, for a fold's start
    (fold_start) and its held-out decision values, with part of the support vectors held (a small cache)."""
    from maxmargin.kernels import make_kernel
    from maxmargin.problem import csvc_problem
    from maxmargin.solvers import smo

    X, y01 = make_classification(n_samples=300, n_features=260, n_informative=6, random_state=4)
    y = np.where(y01 == 1, 1.0, -1.0)
    C = np.full(300, 2.0)
    k = make_kernel("rbf", gamma=0.004, X=X)
    assert probability.rows_are_dear(X, k) and not probability.rows_are_dear(X[:, :100], k)
    import scipy.sparse as sp

    rows = np.repeat(np.arange(300), 20)  # 20 words a row, from 30 frequent ones or 5,000 rare ones
    frequent = sp.csr_matrix((np.ones(6000), (rows, rng.integers(0, 30, 6000))), shape=(300, 5000))
    hashed = sp.csr_matrix((np.ones(6000), (rows, rng.integers(0, 5000, 6000))), shape=(300, 5000))
    assert probability.rows_are_dear(frequent, k) and not probability.rows_are_dear(hashed, k)
    full = smo.solve(csvc_problem(X, k, y, C), tol=1e-6)
    n_sv = int(np.count_nonzero(full.alpha))
    cache = (n_sv // 2 + 240 * 240 / 300) * 8 * 300 / 2**20  # room for about half the support vectors' rows
    held = probability.HeldRows(X, k, full.alpha, C, cache, 240)
    assert 0 < held.sv.size < n_sv
    assert held.fold_cache_size() == pytest.approx(cache - held.rows.nbytes / 2**20)
    train = np.sort(rng.choice(300, size=240, replace=False))
    test = np.setdiff1d(np.arange(300), train)
    a0, g0 = probability.fold_start(X, k, y, full.alpha, full.grad, train, held=held)
    b0, h0 = probability.fold_start(X, k, y, full.alpha, full.grad, train)
    np.testing.assert_array_equal(a0, b0)
    np.testing.assert_allclose(g0, h0, atol=1e-12)
    fold = csvc_problem(X, k, y[train], C[train], index=train)
    np.testing.assert_allclose(g0, fold.q_matrix() @ a0 + fold.p, atol=1e-9)
    fit = smo.solve(fold, tol=1e-6)
    fit.rho = float(fit.rho)
    with_held = probability.held_out_decision(X, k, train, test, fit, y[train], held=held)
    without = probability.held_out_decision(X, k, train, test, fit, y[train])
    np.testing.assert_allclose(with_held, without, atol=1e-12)


def test_fold_rows_starts_and_shared_cache(rng):
    """FoldRows: every fold's start and gradients (one product over the shared rows, plus kernel blocks for
    the support vectors whose rows are not shared) equal the fold problem's own (init_gradient from its Q);
    folds run on caches over the shared rows, two at once, leave those rows as they were and reach the
    solution of a fold solved alone."""
    from concurrent.futures import ThreadPoolExecutor

    from maxmargin.kernels import make_kernel
    from maxmargin.problem import csvc_problem
    from maxmargin.solvers import smo

    X, y01 = make_classification(n_samples=300, n_features=5, flip_y=0.1, random_state=2)
    y = np.where(y01 == 1, 1.0, -1.0)
    C = np.full(300, 2.0)
    k = make_kernel("rbf", gamma=0.3, X=X)
    full = smo.solve(csvc_problem(X, k, y, C), tol=1e-6)
    n_sv = np.count_nonzero(full.alpha)
    plan = probability.fold_plan(300, np.random.RandomState(0))
    # 0.3 MB holds 131 rows: three quarters (SHARED_MAX_FRACTION) for support vectors, fewer than there are
    small = probability.FoldRows(X, k, full.alpha, C, cache_size=0.3, workers=2)
    assert small.sv.size == int(probability.SHARED_MAX_FRACTION * 131) < n_sv
    # 1 MB: every support vector's row, and two regions of the rest
    large = probability.FoldRows(X, k, full.alpha, C, cache_size=1.0, workers=2)
    assert large.sv.size == n_sv and large.rows.shape[0] - large.sv.size >= 4
    for shared in (small, large):
        starts = shared.starts(plan, full.alpha, y, C)
        for (train, _), (a0, G, Gbar) in zip(plan, starts):
            fold = csvc_problem(X, k, y[train], C[train], index=train)
            np.testing.assert_array_equal(a0, probability.restore_equality(full.alpha[train], y[train]))
            Q = fold.q_matrix()
            np.testing.assert_allclose(G, Q @ a0 + fold.p, atol=1e-10)
            at_up = a0 >= C[train]
            np.testing.assert_allclose(Gbar, Q[:, at_up] @ C[train][at_up], atol=1e-10)
    shared = small
    starts = shared.starts(plan, full.alpha, y, C)
    before = shared.rows[: shared.sv.size].copy()

    def run(f):
        train, _ = plan[f]
        fold = csvc_problem(X, k, y[train], C[train], index=train)
        fold.alpha0 = starts[f][0]
        with shared.pool() as pool, smo.kernel_row_pool(pool):
            return smo.solve(fold, tol=1e-6, start=starts[f][1:])

    with ThreadPoolExecutor(2) as ex:
        sols = list(ex.map(run, range(len(plan))))
    np.testing.assert_array_equal(shared.rows[: shared.sv.size], before)
    for (train, _), sol in zip(plan, sols):
        alone = smo.solve(csvc_problem(X[train], k, y[train], C[train]), tol=1e-6)
        assert sol.objective == pytest.approx(alone.objective, rel=1e-6, abs=1e-8)
        assert sol.violation < 1e-6


def test_thin_dense_folds_go_to_the_batched_solver_where_the_support_vectors_rows_do_not_fit():
    """SMO serves the folds of thin dense data while the full fit's support vectors' rows fit in the folds'
    shared share of cache_size (probability.shared_slots); beyond, the batched solver (SVC._folds_batched)."""
    from maxmargin.kernels import make_kernel

    X = np.random.default_rng(0).normal(size=(5000, 4))
    kern = make_kernel("rbf", gamma=0.5, X=X)
    room = probability.shared_slots(5000, 8.0, probability.fold_workers())
    slots = 8 * 1024 * 1024 // (8 * 5000)
    assert room == min(slots - 2 * probability.fold_workers(), int(probability.SHARED_MAX_FRACTION * slots))
    est = maxmargin.SVC(probability=True, cache_size=8.0)
    assert not est._folds_batched(X, kern, room)
    assert est._folds_batched(X, kern, room + 1)
    assert not maxmargin.SVC(probability=True, cache_size=8.0, solver="smo")._folds_batched(X, kern, room + 1)
    assert not est._folds_batched(X[:4000], kern, room + 1)  # folds of 3,200 rows: SMO whatever the rows
