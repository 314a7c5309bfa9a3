"""Training data that scikit-learn's ``validate_data`` would return unchanged, recognised cheaply.

``validate_data(est, X, y, accept_sparse="csr", dtype=..., order="C")`` costs 0.15-0.5 ms a call on data that
needs nothing (its generic checks: dataframe detection, tags, the parameter plumbing), which is a tenth to a
quarter of a LinearSVC fit of 2-5 ms (mushrooms, text2).  :func:`ready_xy` recognises the input it would hand
back as it is -- a C-ordered NumPy array or a CSR matrix of an accepted dtype, finite, with a 1-D numeric finite
target of the same length -- does the two things it does to the estimator (``n_features_in_``, and no
``feature_names_in_`` left from a fit on a dataframe) and returns the same objects.  Anything else (lists,
dataframes, other sparse formats, 64-bit indices where refused, NaN or inf, a column-vector target, string
labels, empty data) returns None, and the caller runs ``validate_data``, whose messages name the problem.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, uint64

from . import _scratch

#: the float dtypes the compiled finite check takes (float16 and long doubles go to scikit-learn)
_FLOATS = (np.float32, np.float64)

#: the target kinds taken as they are: booleans, integers, floats (strings and objects go to scikit-learn)
_NUMERIC_KINDS = "biuf"


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _all_finite(a):
    """Whether every value of the 1-D array ``a`` is finite: ``x * 0`` is 0 for a finite ``x`` and NaN for NaN or
    inf, and a sum of zeros stays 0.  Reassociation (only) lets the sum run in vector lanes: 40 MB in 0.8 ms
    against 1.9 ms for ``np.isfinite(a.sum())``, which is what scikit-learn checks first."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * 0.0
    return s == 0.0


def canonical_csr(X, sorted_rows=True):
    r"""``X`` itself unless it is a sparse matrix other than CSR in scipy's canonical format (column indices sorted
    and distinct within each row); then a CSR copy with each row sorted and its duplicates summed.
    ``sorted_rows=False`` (the linear solvers, which never merge rows): CSR rows in any order are taken as they
    are when no row stores a column twice (:func:`_rows_distinct`, one pass).

    scipy allows a column stored twice in one row (the matrix holds their sum) and any order.  The compiled loops
    read rows by their stored values: the dual solvers' :math:`\|x_i\|^2` summed the duplicates' squares (one
    value stored as six sixths: the step 6x too long, coefficients off by 1e21), the kernel rows merge sorted
    indices (an SVC on such rows ran without end).  The caller's matrix is never changed (the in-place
    ``sort_indices`` once reordered the user's arrays); scipy caches the format check on the matrix, so canonical
    input pays for it once.  Sorting costs ~20 ns a stored value (scipy's, and compiled per-row or two-transpose
    versions tried in session 37 were no faster): on text2 (352k values) 7 ms, as long as a LinearSVC fit."""
    if not sp.issparse(X):
        return X
    if X.format == "csr":
        if X.has_canonical_format:
            return X
        # scipy caches the format check: a matrix found unsorted and then sorted in place (its ``sort_indices``, as
        # liblinear-official's ``problem`` does to its input) keeps answering False, and would be copied at every
        # fit (session 52: 40 ms of a 30 ms LinearSVR fit on 60,000 rows).  Sorted rows without a column stored
        # twice are canonical; the linear solvers need only the latter.
        if (not sorted_rows or X.has_sorted_indices) and _rows_distinct(X.indices, X.indptr, X.shape[1]):
            return X
    X = X.copy() if X.format == "csr" else X.tocsr(copy=True)  # (a sparse array stays an array)
    X.sum_duplicates()
    return X


def _rows_distinct(indices, indptr, n_features):
    """Whether no CSR row stores a column twice (and every column index is in range): each column remembers the
    last row that stored it (int32 stamps below 2**31 rows: 9 against 17 ms with int64 on news20b's 2.9M values
    over 1M columns)."""
    n = indptr.shape[0] - 1
    last = _scratch.full(n_features, -1, np.int32 if n < 2**31 - 1 else np.int64)  # (kept for the next fit)
    return bool(_no_repeats(indices, indptr, last))


@njit(cache=True, nogil=True)
def _no_repeats(indices, indptr, last):
    # a repeat is counted, not branched on, and the row judged at its end (a negative index, read unsigned, is out
    # of range too): bigrams' 5M values over 2M columns 14 against 16-20 ms with a test on every value
    nf = uint64(last.shape[0])
    for i in range(indptr.shape[0] - 1):
        repeats = 0
        for p in range(uint64(indptr[i]), uint64(indptr[i + 1])):
            c = uint64(indices[p])
            if c >= nf:
                return False
            repeats += last[c] == i
            last[c] = i
        if repeats:
            return False
    return True


def all_finite(a):
    """Whether every value of the C-contiguous float array ``a`` is finite."""
    return bool(_all_finite(a.reshape(-1)))


def ready_x(est, X, dtypes, large_sparse=True, csr_values=True):
    """``X`` when ``validate_data(est, X, accept_sparse="csr", dtype=dtypes, order="C",
    accept_large_sparse=large_sparse)`` would return it unchanged (``est`` then holds ``n_features_in_`` as that
    call leaves it); None where that call must decide.  ``csr_values=False``: a CSR matrix's stored values are not
    looked at (the caller checks that they are finite itself, in a pass it makes anyway -- see
    ``maxmargin.linear``)."""
    if type(X) is np.ndarray:
        if X.ndim != 2 or X.dtype not in dtypes or not X.flags.c_contiguous or not all_finite(X):
            return None
    elif sp.issparse(X) and X.format == "csr":
        if len(X.shape) != 2 or X.dtype not in dtypes or (csr_values and not all_finite(X.data)):
            return None
        if not large_sparse and (X.indices.dtype != np.int32 or X.indptr.dtype != np.int32):
            return None
    else:
        return None
    if X.shape[0] < 1 or X.shape[1] < 1:
        return None
    est.n_features_in_ = X.shape[1]
    if hasattr(est, "feature_names_in_"):  # a NumPy or SciPy input has no names: scikit-learn drops old ones
        del est.feature_names_in_
    return X


def ready_xy(est, X, y, dtypes, large_sparse=True, csr_values=True):
    """``(X, y)`` when ``validate_data(est, X, y, ...)`` (as :func:`ready_x`) would return them unchanged (a 1-D
    NumPy target of booleans, integers or finite floats, one per row); None otherwise."""
    if (
        type(y) is not np.ndarray
        or y.ndim != 1
        or y.dtype.kind not in _NUMERIC_KINDS
        or y.shape[0] != getattr(X, "shape", (-1,))[0]
        or (y.dtype.kind == "f" and (y.dtype not in _FLOATS or not all_finite(y)))
    ):
        return None
    # validate_data sets the attributes before it looks at y; here y is checked first, so that a refused
    # input leaves the estimator as validate_data will find it
    if ready_x(est, X, dtypes, large_sparse, csr_values) is None:
        return None
    return X, y
