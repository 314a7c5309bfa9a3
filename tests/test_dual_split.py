"""The split dual coordinate descent (``solvers.dual_split``): two threads, each owning half of the features, with
the same iterates as one thread running both halves; and LinearSVC through it against the plain solver."""

import numpy as np
import pytest
import scipy.sparse as sp

from maxmargin import LinearSVC, _threads
from maxmargin.solvers import _linear_common as lc
from maxmargin.solvers import dual_cd, dual_split

OTHER_CORES_BUSY = dual_split.other_cores_busy


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """The threads start whatever else runs on the machine (CI's other jobs, a parallel test run), and do not give up
    on a slow partner (a stall would hand over to the serial mode, which gives the same bits but no thread epochs):
    the tests below check what the threads compute; the load check and the stalls have tests of their own."""
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: False)
    monkeypatch.setattr(dual_split, "SPIN_LIMIT", 1 << 24)


def long_rows(n=240, d=3000, per_row=140, seed=0, unit=False, dtype=np.float64):
    """Sparse rows of ~``per_row`` values over ``d`` columns (Zipf-like column use, some columns in one row only),
    labels from planted weights plus noise."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, d + 1) ** 0.9
    p /= p.sum()
    rows = np.repeat(np.arange(n), per_row)
    cols = rng.choice(d, size=rows.size, p=p)
    vals = np.ones(rows.size) if unit else rng.random(rows.size) + 0.1
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    if unit:
        X.data[:] = 1.0
    X = sp.csr_matrix(X, dtype=dtype)
    X.sort_indices()
    s = X @ rng.normal(size=d)
    y = np.where(s + 0.3 * s.std() * rng.normal(size=n) > np.median(s), 1.0, -1.0)
    return X, y


def _epochs(ld, y, threads, C=1.0, squared=True, chunk=100, tol=1e-3, m=None):
    n = y.shape[0]
    Cs = np.full(n, C)
    diag = 0.5 / Cs if squared else np.zeros(n)
    upper = np.full(n, np.inf) if squared else Cs
    QD = lc.row_sqnorms(*ld.args()) + diag
    m = dual_split.split_column(ld) if m is None else m
    se = dual_split.SplitEpochs(
        ld, y, np.zeros(n), QD, diag, upper, np.zeros(ld.n_weights), np.arange(n), lc.rng_state(3), m, threads=threads
    )
    code, k = 1, 0
    while code == 1 and k < 1000:
        code = se.run(chunk, tol, True)
        k += 1
    return se


def test_split_points_are_each_rows_searchsorted():
    X, _ = long_rows(n=50, d=500, per_row=40)
    for m in (0, 1, 37, 256, 499, 500):
        mid = dual_split.split_points(X.indices, X.indptr.astype(np.int64), m)
        want = [X.indptr[i] + np.searchsorted(X.indices[X.indptr[i] : X.indptr[i + 1]], m) for i in range(50)]
        np.testing.assert_array_equal(mid, want)


def test_split_column_is_a_multiple_of_8_inside_the_features():
    X, _ = long_rows()
    ld = lc.linear_data(X, 1.0)
    m = dual_split.split_column(ld)
    assert m % 8 == 0 and 0 < m < X.shape[1]
    share = np.mean(ld.indices < m)
    assert 0.4 < share < 0.75  # near the quantile of the stored values' columns


@pytest.mark.parametrize(
    "unit, dtype, bias, squared",
    [
        (False, np.float64, 1.0, True),
        (False, np.float64, 1.0, False),
        (True, np.float64, 1.0, True),
        (False, np.float32, 2.5, True),
        (False, np.float64, -1.0, False),
    ],
)
def test_threads_give_the_serial_modes_bits(unit, dtype, bias, squared):
    X, y = long_rows(unit=unit, dtype=dtype)
    ld = lc.linear_data(X, bias)
    ref = _epochs(ld, y, threads=False, squared=squared)
    assert ref.thread_epochs == 0 and ref.epochs > 2
    for chunk in (1, 100):
        got = _epochs(ld, y, threads=True, squared=squared, chunk=chunk)
        np.testing.assert_array_equal(got.alpha(), ref.alpha())
        np.testing.assert_array_equal(got.w, ref.w)
        assert got.epochs == ref.epochs


def wide_dense(n=200, d=600, seed=1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    s = X[:, :20] @ rng.normal(size=20)
    return X, np.where(s + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("squared", [True, False])
def test_dense_rows_split_by_columns_give_the_serial_modes_bits(dtype, squared):
    X, y = wide_dense(dtype=dtype)
    ld = lc.linear_data(X, 1.0, rows_first=True)
    assert ld.dense and dual_split.split_column(ld) == 296
    ref = _epochs(ld, y, threads=False, squared=squared)
    got = _epochs(ld, y, threads=True, squared=squared, chunk=3)
    assert got.thread_epochs > 0
    np.testing.assert_array_equal(got.alpha(), ref.alpha())
    np.testing.assert_array_equal(got.w, ref.w)
    w = np.r_[X.T.astype(np.float64) @ (y * ref.alpha()), y @ ref.alpha()]  # w = sum_i y_i alpha_i x_i (bias last)
    np.testing.assert_allclose(ref.w, w, rtol=1e-9, atol=1e-12)


def _svr_epochs(ld, y, threads, squared, eps=0.1, chunk=100, tol=1e-3):
    n = y.shape[0]
    C = np.full(n, 1.0)
    lam = 0.5 / C if squared else np.zeros(n)
    upper = np.full(n, np.inf) if squared else C
    QD = lc.row_sqnorms(*ld.args())
    se = dual_split.SplitEpochs(
        ld,
        y,
        np.zeros(n),
        QD,
        lam,
        upper,
        np.zeros(ld.n_weights),
        np.arange(n),
        lc.rng_state(5),
        dual_split.split_column(ld),
        threads=threads,
        epsilon=eps,
        fstate=np.array([np.inf, -1.0, np.inf]),
    )
    code, k = 1, 0
    while code == 1 and k < 1000:
        code = se.run(chunk, tol, True)
        k += 1
    return se


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("squared", [True, False])
def test_regression_threads_give_the_serial_modes_bits(monkeypatch, dense, squared):
    X, _ = wide_dense() if dense else long_rows()
    rng = np.random.default_rng(3)
    y = np.asarray(X @ rng.normal(size=X.shape[1])).ravel() * 0.1 + rng.normal(size=X.shape[0])
    ld = lc.linear_data(X, 1.0, rows_first=True)
    ref = _svr_epochs(ld, y, False, squared)
    assert ref.epochs > 2
    for chunk in (1, 100):
        got = _svr_epochs(ld, y, True, squared, chunk=chunk)
        assert got.thread_epochs > 0
        np.testing.assert_array_equal(got.alpha(), ref.alpha())
        np.testing.assert_array_equal(got.w, ref.w)
    monkeypatch.setattr(dual_split, "SPIN_LIMIT", -1)  # stalls: the serial mode takes over at the same row
    got = _svr_epochs(ld, y, True, squared, chunk=1)
    assert got.stalls == dual_split.MAX_STALLS
    np.testing.assert_array_equal(got.w, ref.w)


@pytest.mark.parametrize("loss", ["epsilon_insensitive", "squared_epsilon_insensitive"])
def test_linear_svr_through_the_split_meets_the_plain_solver(split_everything, monkeypatch, loss):
    from maxmargin import LinearSVR

    X, _ = long_rows(n=300)
    rng = np.random.default_rng(4)
    y = np.asarray(X @ rng.normal(size=X.shape[1])).ravel() + 0.3 * rng.normal(size=300)
    kw = dict(loss=loss, epsilon=0.1, tol=1e-7, max_iter=20000, dual=True, random_state=0)
    split = LinearSVR(**kw).fit(X, y)
    monkeypatch.setattr(dual_cd, "worth_splitting", lambda ld, n: False)
    plain = LinearSVR(**kw).fit(X, y)
    assert abs(split.objective_ - plain.objective_) <= 1e-6 * plain.objective_
    np.testing.assert_allclose(split.predict(X), plain.predict(X), rtol=1e-4, atol=1e-4 * np.abs(y).max())


def test_stalled_threads_hand_over_to_the_serial_mode_at_the_same_row(monkeypatch):
    X, y = long_rows()
    ld = lc.linear_data(X, 1.0)
    ref = _epochs(ld, y, threads=False)
    monkeypatch.setattr(dual_split, "SPIN_LIMIT", -1)  # every wait is a stall: the threads stop after a row or two
    got = _epochs(ld, y, threads=True, chunk=1)
    assert got.stalls == dual_split.MAX_STALLS
    np.testing.assert_array_equal(got.alpha(), ref.alpha())
    np.testing.assert_array_equal(got.w, ref.w)


def test_the_split_solves_the_same_problem_as_the_plain_solver():
    X, y = long_rows(n=300)
    ld = lc.linear_data(X, 1.0)
    se = _epochs(ld, y, threads=True, tol=1e-9)
    alpha = se.alpha()
    w = lc.np.zeros(ld.n_weights)
    lc.weighted_sum(alpha * y, w, *ld.args())
    np.testing.assert_allclose(se.w, w, rtol=1e-9, atol=1e-12)  # w stays sum_i y_i alpha_i x_i
    plain = dual_cd.solve_svc(ld, y, np.ones(y.shape[0]), tol=1e-9, fold=False)
    np.testing.assert_allclose(alpha, plain.dual, atol=1e-6 * max(1.0, plain.dual.max()))
    G = y * lc.all_dots(se.w, *ld.args()) - 1.0 + 0.5 * alpha  # KKT of the squared-hinge dual, alpha >= 0
    assert np.all(np.where(alpha > 0, np.abs(G), -np.minimum(G, 0.0)) < 1e-7)


@pytest.fixture
def split_everything(monkeypatch):
    """Let LinearSVC take the split epochs on small data (its thresholds are for speed, not correctness)."""
    monkeypatch.setattr(dual_split, "SPLIT_MIN_STORED", 0)
    monkeypatch.setattr(dual_split, "SPLIT_MIN_VALUES", 1)
    monkeypatch.setattr(dual_split, "SPLIT_MIN_DENSE_VALUES", 1)
    monkeypatch.setattr(dual_split, "cores", lambda: 2)
    monkeypatch.setattr(dual_split, "exchange_ns", lambda: dual_split.REF_EXCHANGE_NS)


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_linear_svc_through_the_split_meets_the_plain_solver(split_everything, monkeypatch, loss):
    X, y = long_rows(n=300)
    split = LinearSVC(loss=loss, tol=1e-8, max_iter=5000, random_state=0).fit(X, y)
    monkeypatch.setattr(dual_cd, "worth_splitting", lambda ld, n: False)
    plain = LinearSVC(loss=loss, tol=1e-8, max_iter=5000, random_state=0).fit(X, y)
    close = 1e-8 * plain.objective_[0]
    if loss == "hinge":  # (no switch to TRON: both report a duality gap)
        # both objectives lie above the optimum by at most their gaps (~1e-7 here: the plain solver's stopping test
        # holds at one point since session 51, without LIBLINEAR's last epoch over every row, 1.4e-8 from the split's)
        close = split.duality_gap_[0] + plain.duality_gap_[0]
        assert close <= 1e-6 * plain.objective_[0]
    assert abs(split.objective_[0] - plain.objective_[0]) <= close
    np.testing.assert_allclose(split.coef_, plain.coef_, atol=1e-5 * np.abs(plain.coef_).max())
    assert np.mean(split.predict(X) == plain.predict(X)) >= 0.995


def _shuffled_rows(X, seed=0):
    """``X`` with each row's stored values in a random order (the same matrix, not sorted)."""
    rng = np.random.default_rng(seed)
    Xu = X.copy()
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        p = a + rng.permutation(b - a)
        Xu.indices[a:b], Xu.data[a:b] = X.indices[p], X.data[p]
    Xu.has_sorted_indices = False
    return Xu


def test_partitioned_rows_split_as_the_sorted_ones():
    X, _ = long_rows(n=60, d=500, per_row=40)
    Xu = _shuffled_rows(X)
    assert not dual_split._rows_sorted(Xu.indices, Xu.indptr) and dual_split._rows_sorted(X.indices, X.indptr)
    for m in (0, 37, 256, 500):
        data, indices = np.empty_like(Xu.data), np.empty_like(Xu.indices)
        dual_split._partitioned(Xu.data, Xu.indices, Xu.indptr, m, data, indices)
        mid = dual_split.split_points(indices, Xu.indptr.astype(np.int64), m)
        np.testing.assert_array_equal(mid, dual_split.split_points(X.indices, X.indptr.astype(np.int64), m))
        for i in range(60):
            lo, md, hi = Xu.indptr[i], mid[i], Xu.indptr[i + 1]
            assert np.all(indices[lo:md] < m) and np.all(indices[md:hi] >= m)
            order = np.argsort(indices[lo:hi])  # the same values as the row
            np.testing.assert_array_equal(indices[lo:hi][order], X.indices[lo:hi])
            np.testing.assert_array_equal(data[lo:hi][order], X.data[lo:hi])


def test_linear_svc_on_unsorted_rows_through_the_split_meets_the_sorted_fit(split_everything, monkeypatch):
    """LinearSVC keeps CSR rows in any order (no sort, no copy); the split epochs partition a copy of them."""
    X, y = long_rows(n=300, seed=2)
    Xu = _shuffled_rows(X, seed=3)
    calls = []
    real = dual_split._partitioned
    monkeypatch.setattr(dual_split, "_partitioned", lambda *a: calls.append(1) or real(*a))
    split = LinearSVC(tol=1e-8, max_iter=5000, random_state=0).fit(Xu, y)
    assert calls and not Xu.has_sorted_indices
    monkeypatch.setattr(dual_cd, "worth_splitting", lambda ld, n: False)
    plain = LinearSVC(tol=1e-8, max_iter=5000, random_state=0).fit(X, y)
    assert abs(split.objective_[0] - plain.objective_[0]) <= 1e-8 * plain.objective_[0]
    np.testing.assert_allclose(split.coef_, plain.coef_, atol=1e-5 * np.abs(plain.coef_).max())


def _wide_tail_rows(n=300, seed=6):
    """Rows of 60 values: 40 from a 1,000-column vocabulary, 20 from 400,000 others (mostly in one row only:
    :func:`~maxmargin.solvers._linear_common.fold_singletons` folds them), labels from planted weights."""
    rng = np.random.default_rng(seed)
    d = 401_000
    rows = np.repeat(np.arange(n), 60)
    cols = np.where(np.arange(rows.size) % 3 == 2, rng.integers(1_000, d, rows.size), rng.integers(0, 1_000, rows.size))
    X = sp.csr_matrix((rng.random(rows.size) + 0.1, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    s = X[:, :1_000] @ rng.normal(size=1_000)
    return X, np.where(s > np.median(s), 1.0, -1.0)


def test_the_fold_writes_unsorted_rows_partitioned_at_the_split_column(split_everything):
    """fold_singletons records the split column (the quantile of the kept columns' counts) and writes each row's
    values below it first, each part in the row's order: the split epochs take them without a copy of their own."""
    X, _ = _wide_tail_rows()
    Xu = _shuffled_rows(X, seed=7)
    fu = lc.fold_singletons(lc.linear_data(Xu, 1.0))
    fs = lc.fold_singletons(lc.linear_data(X, 1.0))
    assert fu is not None and fu.ld.split_at == fs.ld.split_at
    m = fu.ld.split_at
    counts = np.bincount(fs.ld.indices, minlength=fs.ld.n_features)
    assert m % 8 == 0 and 0 < m < fs.ld.n_features
    assert np.sum(counts[:m]) < dual_split.SPLIT_QUANTILE * counts.sum() <= np.sum(counts[: m + 8])
    assert dual_split.split_column(fu.ld) == m
    np.testing.assert_array_equal(fu.ld.indptr, fs.ld.indptr)
    np.testing.assert_allclose(fu.mass, fs.mass, rtol=1e-14)
    crossed = 0
    for i in range(X.shape[0]):
        lo, hi = fu.ld.indptr[i], fu.ld.indptr[i + 1]
        got, want = fu.ld.indices[lo:hi], fs.ld.indices[lo:hi]
        mid = lo + np.sum(got < m)
        assert np.all(got[: mid - lo] < m) and np.all(got[mid - lo :] >= m)
        # each part keeps the order the row had (the shuffled row's order, renumbered)
        a, b = Xu.indptr[i], Xu.indptr[i + 1]
        renumber = np.full(X.shape[1], -1)
        renumber[fu.kept] = np.arange(fu.kept.size)
        own = renumber[Xu.indices[a:b]]
        own_vals = Xu.data[a:b][own >= 0]
        own = own[own >= 0]
        np.testing.assert_array_equal(got, np.concatenate([own[own < m], own[own >= m]]))
        np.testing.assert_array_equal(fu.ld.data[lo:hi], np.concatenate([own_vals[own < m], own_vals[own >= m]]))
        np.testing.assert_array_equal(np.sort(got), want)
        crossed += bool(np.any(np.diff((own >= m).astype(int)) < 0))  # a value above m before one below
    assert crossed > 0  # rows out of order were there to partition


def test_linear_svc_on_unsorted_folded_rows_splits_them_without_a_copy(split_everything, monkeypatch):
    X, y = _wide_tail_rows(seed=8)
    Xu = _shuffled_rows(X, seed=9)
    calls = []
    real = dual_split._partitioned
    monkeypatch.setattr(dual_split, "_partitioned", lambda *a: calls.append(1) or real(*a))
    made = []
    real_epochs = dual_cd.SplitEpochs
    monkeypatch.setattr(
        dual_cd, "SplitEpochs", lambda ld, *a, **k: made.append(ld.split_at) or real_epochs(ld, *a, **k)
    )
    split = LinearSVC(tol=1e-8, max_iter=5000, random_state=0).fit(Xu, y)
    assert split.n_iter_ > 1 and not calls
    assert made and made[0] > 0  # the split epochs ran, on the fold's rows (partitioned at their recorded column)
    monkeypatch.setattr(dual_cd, "worth_splitting", lambda ld, n: False)
    plain = LinearSVC(tol=1e-8, max_iter=5000, random_state=0).fit(X, y)
    assert abs(split.objective_[0] - plain.objective_[0]) <= 1e-8 * plain.objective_[0]
    np.testing.assert_allclose(split.coef_, plain.coef_, atol=1e-5 * np.abs(plain.coef_).max())


def test_linear_svc_on_wide_dense_rows_through_the_split_meets_the_plain_solver(split_everything, monkeypatch):
    X, y = wide_dense(n=150, d=800)
    split = LinearSVC(tol=1e-8, max_iter=5000, dual=True, random_state=0).fit(X, y)
    monkeypatch.setattr(dual_cd, "worth_splitting", lambda ld, n: False)
    plain = LinearSVC(tol=1e-8, max_iter=5000, dual=True, random_state=0).fit(X, y)
    assert abs(split.objective_[0] - plain.objective_[0]) <= 1e-8 * plain.objective_[0]
    np.testing.assert_allclose(split.coef_, plain.coef_, atol=1e-5 * np.abs(plain.coef_).max())


def test_split_fits_are_reproducible_and_use_the_threads(split_everything, monkeypatch):
    X, y = long_rows(n=300, seed=4)
    ld = lc.linear_data(X, 1.0)
    fits = [dual_cd.solve_svc(ld, y, np.ones(300), tol=1e-4, seed=5, split_threads=2) for _ in range(2)]
    assert fits[0].split_thread_epochs > 0
    np.testing.assert_array_equal(fits[0].w, fits[1].w)
    a = LinearSVC(random_state=1).fit(X, y)
    b = LinearSVC(random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_worth_splitting_wants_two_threads_long_rows_and_sparse_data(monkeypatch):
    monkeypatch.setattr(dual_split, "cores", lambda: 2)
    monkeypatch.setattr(dual_split, "exchange_ns", lambda: dual_split.REF_EXCHANGE_NS)
    X, y = long_rows(n=12_000, d=50_000, per_row=160)
    ld = lc.linear_data(X, 1.0)
    assert ld.data.size >= dual_split.SPLIT_MIN_STORED
    assert dual_split.worth_splitting(ld, 2)
    assert not dual_split.worth_splitting(ld, 1)
    monkeypatch.setattr(dual_split, "cores", lambda: 1)
    assert not dual_split.worth_splitting(ld, 2)
    monkeypatch.setattr(dual_split, "cores", lambda: 2)
    short, _ = long_rows(n=12000, d=50_000, per_row=40)
    assert not dual_split.worth_splitting(lc.linear_data(short, 1.0), 2)
    # long rows, but few of them: rows and weights stay in cache, where the exchange costs more than it saves
    few = lc.linear_data(X[:4000], 1.0)
    assert few.data.size / 4000 >= dual_split.SPLIT_MIN_VALUES and few.data.size < dual_split.SPLIT_MIN_STORED
    assert not dual_split.worth_splitting(few, 2)
    # rows of 1,000 values and more: split from SPLIT_MIN_STORED_LONG values (the weights they touch leave the cache)
    wide, _ = long_rows(n=800, d=200_000, per_row=1_500)
    wide_ld = lc.linear_data(wide, 1.0)
    assert dual_split.SPLIT_MIN_STORED_LONG <= wide_ld.data.size < dual_split.SPLIT_MIN_STORED
    assert dual_split.worth_splitting(wide_ld, 2)
    assert not dual_split.worth_splitting(lc.linear_data(wide[:600], 1.0), 2)  # too few values
    assert not dual_split.worth_splitting(lc.linear_data(np.ones((850, 1000)), 1.0), 2)  # (dense: its own rule)
    # a core busy: one thread (the split's serial mode is slower than the plain epochs)
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: True)
    assert not dual_split.worth_splitting(wide_ld, 2) and not dual_split.worth_splitting(ld, 2)
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: False)
    assert dual_split.worth_splitting(lc.linear_data(np.ones((320, 5000)), 1.0), 2)  # dense rows: 5,000 columns
    assert not dual_split.worth_splitting(lc.linear_data(np.ones((100, 5000)), 1.0), 2)  # too few values
    assert not dual_split.worth_splitting(lc.linear_data(np.ones((1000, 2000)), 1.0), 2)


def test_rows_sorted_finds_the_first_row_out_of_order():
    rng = np.random.default_rng(8)
    for t in range(60):
        X = sp.random(30, 80, density=rng.uniform(0.0, 0.3), format="csr", random_state=t)
        X.sort_indices()
        indptr = X.indptr.astype(np.int64)
        assert dual_split._rows_sorted(X.indices, indptr)
        rows = np.flatnonzero(np.diff(indptr) >= 2)
        if rows.size:
            i = rng.choice(rows)
            k = rng.integers(indptr[i], indptr[i + 1] - 1)
            swapped = X.indices.copy()
            swapped[k], swapped[k + 1] = swapped[k + 1], swapped[k]
            assert not dual_split._rows_sorted(swapped, indptr)
            repeated = X.indices.copy()
            repeated[k + 1] = repeated[k]  # a column twice is not increasing either
            assert not dual_split._rows_sorted(repeated, indptr)


@pytest.mark.parametrize("squared", [False, True])
def test_svr_primal_in_blocks_is_the_formula(monkeypatch, squared):
    monkeypatch.setattr(lc, "OBJECTIVE_BLOCK_VALUES", 1000)  # blocks on threads even for this small set
    rng = np.random.default_rng(5)
    X, _ = long_rows(n=500, d=4000, per_row=60, seed=5)
    t = rng.normal(size=500)
    C = rng.uniform(0.5, 2.0, 500)
    w = 0.1 * rng.normal(size=4001)
    r = np.maximum(np.abs(X @ w[:-1] + w[-1] - t) - 0.2, 0.0)
    expected = 0.5 * w @ w + C @ (r * r if squared else r)
    for dense in (False, True):
        ld = lc.linear_data(X.toarray() if dense else X, 1.0)
        for parallel in (False, True):
            got = dual_cd.svr_primal(w, ld, t, C, 0.2, squared, parallel)
            assert got == pytest.approx(expected, rel=1e-12)


def test_folded_primal_is_the_primal_of_the_unfolded_weights():
    rng = np.random.default_rng(2)
    X, y = long_rows(n=200, d=20000, per_row=30, seed=2)  # many columns used by one row only: the fold applies
    ld = lc.linear_data(X, 1.0)
    folded = lc.fold_singletons(ld)
    assert folded is not None
    alpha = rng.random(200)
    C = rng.random(200) + 0.5
    w_small = np.zeros(folded.ld.n_weights)
    lc.weighted_sum(alpha * y, w_small, *folded.ld.args())
    w = folded.weights(w_small, alpha * y, X.shape[1])
    for squared in (True, False):
        xi = np.maximum(0.0, 1.0 - y * (X @ w[:-1] + w[-1]))
        direct = 0.5 * w @ w + C @ (xi * xi if squared else xi)
        for par in (False, True):
            got = dual_cd.folded_primal(w_small, folded, alpha, y, C, squared, parallel=par)
            assert got == pytest.approx(direct, rel=1e-12)
            assert dual_cd.svc_primal(w, ld, y, C, squared, parallel=par) == pytest.approx(direct, rel=1e-12)


def _tasks(tmp_path, states):
    """A fake ``/proc/self/task``: one thread a state letter (a name with a space and a parenthesis, as comm allows)."""
    d = tmp_path / "task"
    d.mkdir(exist_ok=True)
    for old in d.iterdir():
        (old / "stat").unlink()
        old.rmdir()
    for k, state in enumerate(states):
        (d / str(100 + k)).mkdir()
        (d / str(100 + k) / "stat").write_text(f"{100 + k} (numba (worker) {k}) {state} 1 2 3 4\n")
    return str(d)


def test_other_cores_busy_reads_the_runnable_count(tmp_path, monkeypatch):
    monkeypatch.setattr(dual_split.os, "cpu_count", lambda: 2)
    f = tmp_path / "loadavg"
    one = _tasks(tmp_path, ["R", "S", "S"])  # this thread runs, the workers sleep
    for text, busy in [("0.50 0.40 0.30 1/180 4242\n", False), ("1.9 1.0 0.8 2/181 4243\n", True), ("x y", False)]:
        f.write_text(text)
        assert OTHER_CORES_BUSY(str(f), one) is busy
    assert OTHER_CORES_BUSY(str(tmp_path / "missing"), one) is False
    # two runnable threads, both this process's (a Numba worker still spinning after a parallel region): not busy
    f.write_text("1.9 1.0 0.8 2/181 4243\n")
    assert OTHER_CORES_BUSY(str(f), _tasks(tmp_path, ["R", "R", "S"])) is False
    assert OTHER_CORES_BUSY(str(f), str(tmp_path / "none")) is True  # (no task folder: the count alone)
    f.write_text("2.9 1.0 0.8 3/181 4243\n")  # a third runnable thread, another process's: busy
    assert OTHER_CORES_BUSY(str(f), _tasks(tmp_path, ["R", "R", "S"])) is True


def test_other_cores_busy_wants_two_reads(monkeypatch):
    """A runnable count that drops between the two reads (a thread of another process that ran for a moment) is
    not a busy core."""
    monkeypatch.setattr(_threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(_threads, "_own_runnable", lambda task_dir: 1)
    for counts, busy in [([2, 1], False), ([2, 2], True), ([1, 2], False), ([3, 3], True)]:
        it = iter(counts)
        monkeypatch.setattr(_threads, "_runnable", lambda path, it=it: next(it))
        assert _threads.other_cores_busy() is busy


def test_a_busy_machine_runs_the_serial_mode_from_the_start(monkeypatch):
    X, y = long_rows()
    ld = lc.linear_data(X, 1.0)
    ref = _epochs(ld, y, threads=False)
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: True)
    got = _epochs(ld, y, threads=True)
    assert got.thread_epochs == 0 and got.stalls == 0
    np.testing.assert_array_equal(got.w, ref.w)


def test_a_slower_exchange_asks_for_longer_rows(monkeypatch):
    """Where the two threads' exchange takes k > 1 times REF_EXCHANGE_NS, rows must hold 1 + EXCHANGE_MARGIN (k - 1)
    times SPLIT_MIN_VALUES values to be split (rows of 1,000 values and more keep their own rule; dense rows
    theirs).  Session 72: rows of 258 values lost 10-30% split at a 120 ns exchange, where the plain proportion
    (k times) split them."""
    ref, margin = dual_split.REF_EXCHANGE_NS, dual_split.EXCHANGE_MARGIN
    assert dual_split.exchange_scale(0.5 * ref) == 1.0 and dual_split.exchange_scale(ref) == 1.0
    assert dual_split.exchange_scale(2.0 * ref) == pytest.approx(1.0 + margin)
    assert dual_split.exchange_scale(3.0 * ref) == pytest.approx(1.0 + 2.0 * margin)
    monkeypatch.setattr(dual_split, "cores", lambda: 2)
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: False)
    X, _ = long_rows(n=12_000, d=50_000, per_row=160)
    ld = lc.linear_data(X, 1.0)
    monkeypatch.setattr(dual_split, "exchange_ns", lambda: 1.0)  # faster than the reference: the same rule
    assert dual_split.worth_splitting(ld, 2)
    monkeypatch.setattr(dual_split, "exchange_ns", lambda: 3.0 * ref)
    assert not dual_split.worth_splitting(ld, 2)  # 160 < 3.5 x 128
    for per_row, split in [(500, False), (650, True)]:  # 389 and 493 values a row after repeats (3.5 x 128 = 448)
        longer, _ = long_rows(n=5_000, d=50_000, per_row=per_row)
        assert dual_split.worth_splitting(lc.linear_data(longer, 1.0), 2) == split, per_row
    rows = 8_000  # the rows of 258 values at 120 ns, not split; at 100 ns split
    for per_row, ns, split in [(258, 120.0, False), (258, 100.0, True), (360, 145.0, True), (340, 145.0, False)]:
        monkeypatch.setattr(dual_split, "exchange_ns", lambda: ns)
        assert dual_split._csr_rows_rules(per_row * rows, rows)[0] == split, (per_row, ns)
    wide, _ = long_rows(n=800, d=200_000, per_row=1_500)
    assert dual_split.worth_splitting(lc.linear_data(wide, 1.0), 2)


def test_exchange_ns_times_the_threads_once_a_process(monkeypatch):
    """exchange_ns() runs both threads' round trips EXCHANGE_RUNS times and keeps the median: later calls do not time
    again; on the
    real threads it gives a positive, finite number of nanoseconds (the reference value where a run gave up, as a
    preempted thread may make it on a loaded machine)."""
    monkeypatch.setattr(dual_split, "_EXCHANGE_NS", [])
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: False)
    calls = []
    monkeypatch.setattr(dual_split, "_ping_pong", lambda t, box, n: calls.append(t) or n)  # every run completes
    first = dual_split.exchange_ns()
    runs = dual_split.EXCHANGE_RUNS
    assert 0.0 < first < 1e9 and sorted(calls) == [0] * runs + [1] * runs and dual_split._EXCHANGE_NS == [first]
    assert dual_split.exchange_ns() == first and len(calls) == 2 * runs
    monkeypatch.undo()
    monkeypatch.setattr(dual_split, "_EXCHANGE_NS", [])
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: False)
    real = dual_split.exchange_ns()
    assert 0.0 < real < 1e6 and (dual_split._EXCHANGE_NS in ([], [real]))


def test_exchange_ns_without_a_partner_gives_up_at_once_and_keeps_nothing(monkeypatch):
    """A thread whose partner never posts stops at its first stalled wait (no hang), and a run that gave up -- or
    a busy machine -- leaves the reference value, timed again later."""
    import time

    raw = np.zeros(4 * dual_split.BOX_LINE)
    t0 = time.perf_counter()
    assert dual_split._ping_pong(0, raw, 1000) == 0
    assert time.perf_counter() - t0 < 5.0
    monkeypatch.setattr(dual_split, "_EXCHANGE_NS", [])
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: True)
    assert dual_split.exchange_ns() == dual_split.REF_EXCHANGE_NS and dual_split._EXCHANGE_NS == []
    monkeypatch.setattr(dual_split, "other_cores_busy", lambda: False)
    monkeypatch.setattr(dual_split, "_ping_pong", lambda t, box, n: n - 1 if t == 1 else n)  # the helper gave up
    assert dual_split.exchange_ns() == dual_split.REF_EXCHANGE_NS and dual_split._EXCHANGE_NS == []


def test_the_fold_leaves_rows_unpartitioned_where_the_split_cannot_come(monkeypatch):
    """Rows too short for the split epochs at any thread count (``may_split``): the fold records no split column
    and writes each row in its own order (the partition's work saved)."""
    X, _ = _wide_tail_rows()
    Xu = _shuffled_rows(X, seed=7)
    monkeypatch.setattr(dual_split, "cores", lambda: 2)
    monkeypatch.setattr(dual_split, "exchange_ns", lambda: dual_split.REF_EXCHANGE_NS)
    ld = lc.linear_data(Xu, 1.0)
    assert not dual_split.may_split(ld.n_features, ld.data.size, ld.n_samples)
    fu = lc.fold_singletons(ld)
    assert fu is not None and fu.ld.split_at == 0
    counts = np.bincount(Xu.indices, minlength=Xu.shape[1])
    for i in range(0, Xu.shape[0], 37):  # each row's kept columns, renumbered, in the row's own order
        cols = Xu.indices[Xu.indptr[i] : Xu.indptr[i + 1]]
        kept = cols[counts[cols] >= 2]
        got = fu.ld.indices[fu.ld.indptr[i] : fu.ld.indptr[i + 1]]
        np.testing.assert_array_equal(fu.kept[got], kept)
    # the same data may split once the rows count as long enough: then the column is recorded
    monkeypatch.setattr(dual_split, "SPLIT_MIN_STORED", 0)
    monkeypatch.setattr(dual_split, "SPLIT_MIN_VALUES", 1)
    assert lc.fold_singletons(lc.linear_data(Xu, 1.0)).ld.split_at > 0
