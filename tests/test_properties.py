"""Property-based tests (hypothesis): every estimator on random valid data.

Each example draws a small data set (down to one row per class; duplicated rows, constant
columns, sample weights, dense or sparse, scales from 1e-100 to 1e100) and fits a maxmargin
estimator.  The fit must either raise a ValueError that says something (no internal crash: no
TypeError, IndexError, ZeroDivisionError, ...) or give a model whose decision values are finite
and agree with scikit-learn's SVC / NuSVC / SVR / NuSVR / OneClassSVM fitted with the same
hyper-parameters, wherever scikit-learn fits too.  Points whose decision value lies within a
small tolerance of 0 (of a class boundary) may be predicted differently.

The stopping tolerance is absolute (LIBSVM's): on data whose kernel values are tiny (linear kernel,
scale 1e-100 or 1e-3) it does not resolve the problem, so two solvers stop at different, equally
valid points; agreement is checked where the kernel's diagonal is of order 1e-2 .. 1e12.
Conflicting duplicates with a large C times kernel scale make SMO (ours and LIBSVM's alike) take
millions of steps; to keep the module fast, our fits run under ``time_limit`` and scikit-learn's
under ``max_iter``, and a fit that stopped there is compared with nothing (its decision values
must still be finite).
"""

import warnings

import numpy as np
import scipy.sparse as sp
import sklearn.svm as sk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

import maxmargin

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SCALES = (1e-100, 1e-3, 1.0, 1e3, 1e100)
TOL = 1e-6
TIME_LIMIT = 1.0  # seconds per fit (ours)
SK_MAX_ITER = 200_000  # steps per fit (scikit-learn)


@st.composite
def datasets(draw, classification=True):
    """(X, y, sample_weight or None): rows drawn from a few levels, so duplicates and constant
    columns are common; X dense or CSR; one of SCALES."""
    d = draw(st.integers(1, 3))
    if classification:
        k = draw(st.integers(2, 3))
        counts = [draw(st.integers(1, 5)) for _ in range(k)]
        y = np.repeat(np.arange(k), counts)
    else:
        n = draw(st.integers(2, 12))
        y = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=float)
    n = y.shape[0]
    levels = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    X = np.array(draw(st.lists(st.lists(levels, min_size=d, max_size=d), min_size=n, max_size=n)))
    X = X * draw(st.sampled_from(SCALES))
    w = None
    if draw(st.booleans()):
        w = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=n, max_size=n)))
    if draw(st.booleans()):
        X = sp.csr_matrix(X)
    return X, y, w


def _fit(est, X, y, w):
    """The fitted estimator, or the ValueError it raised (anything else fails the test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return est.fit(X, y, sample_weight=w) if y is not None else est.fit(X, sample_weight=w)
        except ValueError as exc:
            assert str(exc).strip(), f"{type(exc).__name__} without a message"
            return exc


def _ours(cls, X, y, w, **params):
    return _fit(cls(time_limit=TIME_LIMIT, **params), X, y, w)


def _comparable(X, kernel):
    """Whether tol resolves the problem (kernel diagonal of order 1e-2 .. 1e12)."""
    if kernel == "rbf":
        return True
    Xd = X.toarray() if sp.issparse(X) else X
    top = float(np.max(np.sum(Xd * Xd, axis=1), initial=0.0))
    return 1e-2 <= top <= 1e12


def _converged(model):
    return not isinstance(model, Exception) and np.all(np.asarray(model.fit_status_) == 0)


def _reference(cls, ours, X, y, w, **params):
    """scikit-learn's fit with the same parameters, or None where there is nothing to compare."""
    if not _converged(ours) or not _comparable(X, params["kernel"]):
        return None
    try:
        ref = _fit(cls(max_iter=SK_MAX_ITER, **params), X, y, w)
    except Exception:  # noqa: BLE001 - scikit-learn failing is not what is tested here
        return None
    return ref if _converged(ref) else None


def _decisions(model, X):
    with np.errstate(all="ignore"):
        return np.asarray(model.decision_function(X), dtype=float)


def _check_classifier(ours, ref, X):
    dec = _decisions(ours, X)
    assert np.all(np.isfinite(dec)), "non-finite decision values"
    if ref is None:
        return
    ref_dec = _decisions(ref, X)
    if not np.all(np.isfinite(ref_dec)):
        return
    scale = max(1.0, float(np.max(np.abs(ref_dec), initial=0.0)))
    near = np.abs(dec) <= 1e-4 * scale
    near |= np.abs(ref_dec) <= 1e-4 * scale
    clear = ~near.reshape(near.shape[0], -1).any(axis=1)
    np.testing.assert_array_equal(ours.predict(X)[clear], ref.predict(X)[clear])


@SETTINGS
@given(data=datasets(), C=st.sampled_from([0.1, 1.0, 100.0]), kernel=st.sampled_from(["linear", "rbf"]))
def test_svc_fits_or_says_why_and_agrees_with_sklearn(data, C, kernel):
    X, y, w = data
    params = {"C": C, "kernel": kernel, "tol": TOL, "decision_function_shape": "ovo"}
    ours = _ours(maxmargin.SVC, X, y, w, **params)
    if isinstance(ours, Exception):
        return
    _check_classifier(ours, _reference(sk.SVC, ours, X, y, w, **params), X)


@SETTINGS
@given(data=datasets(), nu=st.sampled_from([0.1, 0.5, 1.0]), kernel=st.sampled_from(["linear", "rbf"]))
def test_nusvc_fits_or_says_why_and_agrees_with_sklearn(data, nu, kernel):
    X, y, w = data
    params = {"nu": nu, "kernel": kernel, "tol": TOL, "decision_function_shape": "ovo"}
    ours = _ours(maxmargin.NuSVC, X, y, w, **params)
    if isinstance(ours, Exception):
        return
    _check_classifier(ours, _reference(sk.NuSVC, ours, X, y, w, **params), X)


def _check_values(ours_values, ref_values):
    assert np.all(np.isfinite(ours_values)), "non-finite predictions"
    if ref_values is None or not np.all(np.isfinite(ref_values)):
        return
    scale = max(1.0, float(np.max(np.abs(ref_values), initial=0.0)))
    np.testing.assert_allclose(ours_values, ref_values, rtol=1e-3, atol=1e-3 * scale)


@SETTINGS
@given(
    data=datasets(classification=False),
    C=st.sampled_from([0.1, 1.0, 100.0]),
    epsilon=st.sampled_from([0.0, 0.1, 1.0]),
    kernel=st.sampled_from(["linear", "rbf"]),
)
def test_svr_fits_or_says_why_and_agrees_with_sklearn(data, C, epsilon, kernel):
    X, y, w = data
    params = {"C": C, "epsilon": epsilon, "kernel": kernel, "tol": TOL}
    ours = _ours(maxmargin.SVR, X, y, w, **params)
    if isinstance(ours, Exception):
        return
    ref = _reference(sk.SVR, ours, X, y, w, **params)
    with np.errstate(all="ignore"):
        _check_values(ours.predict(X), None if ref is None else ref.predict(X))


@SETTINGS
@given(
    data=datasets(classification=False),
    nu=st.sampled_from([0.1, 0.5, 1.0]),
    C=st.sampled_from([0.1, 10.0]),
    kernel=st.sampled_from(["linear", "rbf"]),
)
def test_nusvr_fits_or_says_why_and_agrees_with_sklearn(data, nu, C, kernel):
    X, y, w = data
    params = {"nu": nu, "C": C, "kernel": kernel, "tol": TOL}
    ours = _ours(maxmargin.NuSVR, X, y, w, **params)
    if isinstance(ours, Exception):
        return
    ref = _reference(sk.NuSVR, ours, X, y, w, **params)
    with np.errstate(all="ignore"):
        _check_values(ours.predict(X), None if ref is None else ref.predict(X))


@SETTINGS
@given(data=datasets(), nu=st.sampled_from([0.1, 0.5, 1.0]), kernel=st.sampled_from(["linear", "rbf"]))
def test_one_class_fits_or_says_why_and_agrees_with_sklearn(data, nu, kernel):
    X, _, w = data
    params = {"nu": nu, "kernel": kernel, "tol": TOL}
    ours = _ours(maxmargin.OneClassSVM, X, None, w, **params)
    if isinstance(ours, Exception):
        return
    ref = _reference(sk.OneClassSVM, ours, X, None, w, **params)
    dec = _decisions(ours, X)
    assert np.all(np.isfinite(dec)), "non-finite decision values"
    if ref is None:
        return
    ref_dec = _decisions(ref, X)
    if not np.all(np.isfinite(ref_dec)):
        return
    scale = max(1.0, float(np.max(np.abs(ref_dec), initial=0.0)))
    clear = (np.abs(dec) > 1e-4 * scale) & (np.abs(ref_dec) > 1e-4 * scale)
    np.testing.assert_array_equal(ours.predict(X)[clear], ref.predict(X)[clear])
