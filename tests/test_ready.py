"""maxmargin._ready: the inputs it takes come back exactly as scikit-learn's validate_data returns them, and it
refuses (returns None for) every input validate_data would convert, warn about or refuse."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data

import maxmargin
from maxmargin._ready import ready_x, ready_xy

DT2 = (np.float64, np.float32)


class Est(BaseEstimator):
    pass


def _reference(X, y, dtypes, large_sparse):
    est = Est()
    kw = dict(accept_sparse="csr", dtype=list(dtypes), order="C", accept_large_sparse=large_sparse)
    out = validate_data(est, X, **kw) if y is None else validate_data(est, X, y, **kw)
    return est, out


def _same(a, b):
    if sp.issparse(a):
        assert sp.issparse(b) and a.format == b.format and a.dtype == b.dtype
        assert a.indices.dtype == b.indices.dtype and a.indptr.dtype == b.indptr.dtype
        assert (a != b).nnz == 0
    else:
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


rng = np.random.default_rng(0)
Xd = rng.normal(size=(20, 4))
yc = rng.integers(0, 3, size=20)

TAKEN = {
    "dense float64": (Xd, yc, DT2, False),
    "dense float32": (Xd.astype(np.float32), yc, DT2, False),
    "CSR float64": (sp.csr_matrix(Xd), yc, DT2, False),
    "CSR array": (sp.csr_array(Xd), yc, DT2, False),
    "CSR float32": (sp.csr_matrix(Xd, dtype=np.float32), yc, DT2, False),
    "bool target": (Xd, yc > 0, DT2, False),
    "float target": (Xd, rng.normal(size=20), DT2, False),
    "uint8 target": (Xd, yc.astype(np.uint8), DT2, False),
    "one row": (Xd[:1], yc[:1], DT2, False),
}


def _csr64(X):
    X = sp.csr_matrix(X)
    X.indices = X.indices.astype(np.int64)
    X.indptr = X.indptr.astype(np.int64)
    return X


Xnan = Xd.copy()
Xnan[3, 2] = np.nan
Xinf = Xd.copy()
Xinf[0, 0] = -np.inf
ynan = rng.normal(size=20)
ynan[5] = np.nan

REFUSED = {
    "Fortran order": (np.asfortranarray(Xd), yc, DT2, False),
    "integer X": (np.arange(80).reshape(20, 4), yc, DT2, False),
    "float32 where float64 only": (Xd.astype(np.float32), yc, (np.float64,), True),
    "list": (Xd.tolist(), yc, DT2, False),
    "NaN in X": (Xnan, yc, DT2, False),
    "inf in X": (Xinf, yc, DT2, False),
    "NaN in sparse X": (sp.csr_matrix(Xnan), yc, DT2, False),
    "CSC": (sp.csc_matrix(Xd), yc, DT2, False),
    "COO": (sp.coo_matrix(Xd), yc, DT2, False),
    "64-bit indices refused": (_csr64(Xd), yc, DT2, False),
    "column target": (Xd, yc[:, None], DT2, False),
    "string target": (Xd, np.array(list("abcdefghijklmnopqrst")), DT2, False),
    "object target": (Xd, yc.astype(object), DT2, False),
    "NaN target": (Xd, ynan, DT2, False),
    "list target": (Xd, yc.tolist(), DT2, False),
    "short target": (Xd, yc[:19], DT2, False),
    "no rows": (Xd[:0], yc[:0], DT2, False),
    "no columns": (Xd[:, :0].copy(), yc, DT2, False),
    "1-D X": (Xd[:, 0].copy(), yc, DT2, False),
    "matrix": (np.asmatrix(Xd), yc, DT2, False),
    "complex target": (Xd, yc + 0j, DT2, False),
    "float16 target": (Xd, yc.astype(np.float16), DT2, False),
    "inf target": (Xd, np.where(yc > 1, np.inf, 0.0), DT2, False),
    "NaN in float32 X": (Xnan.astype(np.float32), yc, DT2, False),
}


@pytest.mark.parametrize("case", sorted(TAKEN))
def test_taken_inputs_match_validate_data(case):
    X, y, dtypes, large = TAKEN[case]
    ref_est, (rX, ry) = _reference(X, y, dtypes, large)
    est = Est()
    est.feature_names_in_ = np.array(["a", "b", "c", "d"], dtype=object)  # left from a fit on a dataframe
    out = ready_xy(est, X, y, dtypes, large)
    assert out is not None
    assert out[0] is X and out[1] is y  # no copy
    _same(out[0], rX)
    np.testing.assert_array_equal(out[1], ry)
    assert est.n_features_in_ == ref_est.n_features_in_ == X.shape[1]
    assert not hasattr(est, "feature_names_in_")


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_inputs_go_to_validate_data(case):
    X, y, dtypes, large = REFUSED[case]
    est = Est()
    assert ready_xy(est, X, y, dtypes, large) is None
    assert not hasattr(est, "n_features_in_")  # nothing set on a refusal


def test_64_bit_indices_where_accepted():
    X = _csr64(Xd)
    assert ready_xy(Est(), X, yc, (np.float64,), large_sparse=True) is not None


def test_x_only():
    est = Est()
    assert ready_x(est, Xd, (np.float64,)) is Xd and est.n_features_in_ == 4
    assert ready_x(Est(), Xnan, (np.float64,)) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: maxmargin.LinearSVC(),
        lambda: maxmargin.SVC(),
    ],
)
def test_estimators_refit_on_numpy_after_dataframe(make):
    """A fit on a dataframe records feature names; a later fit on a NumPy array (the fast path) drops them, as
    scikit-learn's validation does, so predict on NumPy data does not warn."""
    pd = pytest.importorskip("pandas")
    est = make()
    est.fit(pd.DataFrame(Xd, columns=list("abcd")), yc)
    assert list(est.feature_names_in_) == list("abcd")
    est.fit(Xd, yc)
    assert not hasattr(est, "feature_names_in_")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.predict(Xd)


@pytest.mark.parametrize("make", [lambda: maxmargin.LinearSVC(), lambda: maxmargin.SVC()])
def test_bad_input_still_named(make):
    """Refused inputs reach scikit-learn's validation, whose messages name the problem."""
    with pytest.raises(ValueError, match="NaN"):
        make().fit(Xnan, yc)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        make().fit(Xd, yc[:19])


def _non_canonical(n=240, d=40, copies=5, seed=0):
    """A canonical CSR matrix, the same matrix with every value stored as ``copies`` equal parts (duplicate
    columns within a row) in shuffled order, and a target."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr")
    y = np.where(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n) > 0, 1, -1)
    rows = np.repeat(np.arange(n), np.diff(X.indptr))
    r, c, v = np.repeat(rows, copies), np.repeat(X.indices, copies), np.repeat(X.data / copies, copies)
    order = np.lexsort((rng.random(r.size), r))  # rows in order, each row's entries shuffled
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=n))])
    Xdup = sp.csr_matrix((v[order], c[order].astype(np.int32), indptr.astype(np.int32)), shape=X.shape)
    assert not Xdup.has_canonical_format and not Xdup.has_sorted_indices
    return X, Xdup, y


def test_canonical_csr_sums_duplicates_into_a_copy():
    from maxmargin._ready import canonical_csr

    X, Xdup, _ = _non_canonical()
    before = (Xdup.data.copy(), Xdup.indices.copy(), Xdup.indptr.copy())
    Z = canonical_csr(Xdup)
    assert Z.has_canonical_format and Z.nnz == X.nnz
    np.testing.assert_allclose(Z.toarray(), X.toarray(), rtol=1e-14, atol=0)
    for a, b in zip(before, (Xdup.data, Xdup.indices, Xdup.indptr)):  # the caller's arrays untouched
        np.testing.assert_array_equal(a, b)
    assert canonical_csr(X) is X  # canonical CSR: no copy
    D = X.toarray()
    assert canonical_csr(D) is D
    assert canonical_csr(X.tocoo()).format == "csr"
    A = sp.csr_array(Xdup)
    assert isinstance(canonical_csr(A), sp.csr_array) and canonical_csr(A).has_canonical_format
    Z = canonical_csr(sp.coo_array(Xdup))
    assert isinstance(Z, sp.csr_array) and Z.has_canonical_format
    _, Xu, _ = _non_canonical(copies=1)  # shuffled rows, no column twice: kept as they are where order is free
    assert canonical_csr(Xu, sorted_rows=False) is Xu
    assert canonical_csr(Xu).has_canonical_format
    assert canonical_csr(Xdup, sorted_rows=False).has_canonical_format
    from maxmargin._ready import _no_repeats, _rows_distinct

    assert _rows_distinct(Xu.indices, Xu.indptr, Xu.shape[1])
    assert not _rows_distinct(Xdup.indices, Xdup.indptr, Xdup.shape[1])
    assert not _rows_distinct(Xu.indices, Xu.indptr, Xu.shape[1] - 1)  # a column out of range
    negative = Xu.indices.copy()
    negative[-1] = -1  # (read unsigned: out of range too)
    assert not _rows_distinct(negative, Xu.indptr, Xu.shape[1])
    last_row_twice = Xu.indices.copy()
    last_row_twice[-1] = last_row_twice[-2]  # a repeat in the last row, found at the row's end
    assert not _rows_distinct(last_row_twice, Xu.indptr, Xu.shape[1])
    for stamps in (np.int32, np.int64):  # (int64 stamps from 2**31 rows)
        assert _no_repeats(Xu.indices, Xu.indptr, np.full(Xu.shape[1], -1, dtype=stamps))
        assert not _no_repeats(Xdup.indices, Xdup.indptr, np.full(Xu.shape[1], -1, dtype=stamps))


def test_canonical_csr_sees_through_a_stale_format_flag():
    """scipy caches its format check: a matrix found unsorted, then sorted in place (``sort_indices``, as
    liblinear-official's ``problem`` does to its input), still says it is not canonical.  Such a matrix is taken as
    it is (before: copied and summed at every fit); one that still stores a column twice is not."""
    from maxmargin._ready import canonical_csr

    _, Xu, _ = _non_canonical(copies=1)
    assert not Xu.has_canonical_format  # the check ran on the shuffled rows and is cached
    Xu.sort_indices()
    assert Xu.has_sorted_indices and not Xu.has_canonical_format  # stale: the rows are canonical now
    assert canonical_csr(Xu) is Xu and canonical_csr(Xu, sorted_rows=False) is Xu
    _, Xdup, _ = _non_canonical(copies=3)
    assert not Xdup.has_canonical_format
    Xdup.sort_indices()
    for rows in (True, False):
        Z = canonical_csr(Xdup, sorted_rows=rows)
        assert Z is not Xdup and Z.has_canonical_format and Z.nnz == Xdup.nnz // 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: maxmargin.LinearSVC(tol=1e-8, max_iter=100_000),
        lambda: maxmargin.LinearSVC(dual=False, tol=1e-8),
        lambda: maxmargin.LinearSVC(penalty="l1", dual=False, tol=1e-8, max_iter=100_000),
        lambda: maxmargin.LinearSVC(loss="hinge", tol=1e-8, max_iter=100_000),
        lambda: maxmargin.LinearSVC(multi_class="crammer_singer", tol=1e-8, max_iter=100_000),
        lambda: maxmargin.LinearSVR(tol=1e-8, max_iter=100_000),
        lambda: maxmargin.LinearSVR(loss="squared_epsilon_insensitive", tol=1e-8, max_iter=100_000),
        lambda: maxmargin.SVC(kernel="rbf", gamma=1.0, tol=1e-6),
        lambda: maxmargin.SVC(kernel="linear", tol=1e-6),
        lambda: maxmargin.SVC(kernel="poly", degree=2, tol=1e-6),
        lambda: maxmargin.NuSVC(nu=0.3, gamma=1.0, tol=1e-6),
        lambda: maxmargin.SVR(gamma=1.0, tol=1e-6),
        lambda: maxmargin.OneClassSVM(gamma=1.0, tol=1e-6),
    ],
)
@pytest.mark.parametrize("copies", [1, 5])
def test_duplicate_and_unsorted_columns_fit_the_matrix_they_sum_to(make, copies):
    """scipy lets a row store one column several times (the matrix holds the sum) in any order.  Every
    estimator fits and predicts such rows as the matrix they sum to.  Before: the dual solvers' ||x_i||^2 summed
    the parts' squares (a step 5x too long: coefficients off by up to 1e155 after max_iter epochs), SVC's
    kernel rows ran without end, and fit sorted the caller's arrays in place."""
    X, Xdup, y = _non_canonical(copies=copies)
    before = (Xdup.data.copy(), Xdup.indices.copy(), Xdup.indptr.copy())
    a, b = make().fit(X, y), make().fit(Xdup, y)
    for a_, b_ in zip(before, (Xdup.data, Xdup.indices, Xdup.indptr)):
        np.testing.assert_array_equal(a_, b_)
    score = a.decision_function if hasattr(a, "decision_function") else a.predict
    ref = score(X)
    np.testing.assert_allclose(
        b.decision_function(X) if hasattr(b, "decision_function") else b.predict(X),
        ref,
        atol=1e-5 * (1 + np.abs(ref).max()),
    )
    np.testing.assert_allclose(score(Xdup), ref, rtol=1e-10, atol=1e-10)
