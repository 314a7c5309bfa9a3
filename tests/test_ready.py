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
