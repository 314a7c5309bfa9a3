"""Support vector classification with a scikit-learn API.

:class:`SVC` and :class:`NuSVC` have the parameters and fitted attributes of
``sklearn.svm.SVC`` / ``sklearn.svm.NuSVC`` with the same meaning, so they can
replace them in existing code, and add:

* ``formulation`` and ``solver`` (SVC): which SVM (hinge, hard margin, squared
  slack, ...) and which algorithm; see :mod:`maxmargin.formulations`;
* ``sigma``: the Gaussian width of the documents, ``gamma = 1 / (2 sigma^2)``;
* ``callback`` and ``time_limit``: watch or stop a long fit;
* ``warm_start`` (SVC): start from the previous fit's multipliers;
* ``predict_from_proba``: make ``predict`` agree with ``argmax(predict_proba)``;
* fitted ``objective_``, ``margin_``, ``loo_bound_`` (seed 002's leave-one-out
  bound #SV/n), ``duality_gap_`` and ``train_error_``.

Multi-class problems are split one-vs-one as in LIBSVM: the binary problem of
classes ``a < b`` labels ``a`` as +1, and its decision value is positive for
``a``.  The public ``dual_coef_`` / ``intercept_`` follow scikit-learn's layout
exactly (for two classes, positive decision values mean ``classes_[1]``).

:class:`BaseKernelSVM` holds what every maxmargin estimator shares (parameter
checks, the kernel of the fitted model, validation at predict time, solver
options); :mod:`maxmargin.regression` and :mod:`maxmargin.oneclass` build on it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import numbers
import os
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import dedup, formulations, labels, probability, scaleout, votes
from ._ready import all_finite, canonical_csr, ready_x, ready_xy
from ._threads import cores, one_blas_thread
from .callbacks import CallbackSupportMixin, report_of, reports_progress
from .early import _EARLY_ATTRIBUTES, early_decision, set_early_model
from .formulations.pairs import PairFits, mark_support, pair_wins, scatter_dual
from .kernels import densify_if_cheap
from .kernels.blocks import block_data, block_mode
from .kernels.engine import FUSED_DENSE_PREDICT, kernel_times
from .kernels.objects import block_rows_for, dense_product_pays, make_kernel
from .problem import DualProblem, nu_svc_problem
from .solvers import ipm, ovo, ovo_folds, smo
from .solvers import registry as solver_registry


def _check_positive(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _check_nu(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or not 0 < value <= 1:
        raise ValueError(f"nu must be a number in (0, 1], got {value!r}")


def _check_bool(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")


@functools.lru_cache(maxsize=8)
def pair_classes(n_classes):
    """``(pa, pb)``: the classes of the one-vs-one pairs (a, b), a < b, in LIBSVM's order, as read-only
    arrays (kept per class count: ``np.triu_indices`` took ~30 us a call, several calls a small fit or predict)."""
    pa, pb = np.triu_indices(n_classes, k=1)
    pa.flags.writeable = False
    pb.flags.writeable = False
    return pa, pb


def ovr_from_ovo(dec, n_classes):
    """One-vs-rest scores from one-vs-one decision values (scikit-learn's rule:
    votes plus confidences squashed into (-1/3, 1/3) to break ties); compiled, :func:`maxmargin.votes.ovr_scores`."""
    return votes.ovr_scores(dec, n_classes)


#: the folds of a large binary problem go to the batched solver from this many features (see SVC._folds_batched)
FOLDS_BATCHED_FEATURES = 64
#: predict / predict_proba / the 'ovr' decision form the one-vs-one values of at most this many bytes
#: at a time (rows in blocks; they take 8 k(k-1)/2 bytes a row for k classes)
OVO_BLOCK_BYTES = 32 * 1024 * 1024

_SCALE_ADVICE = "scale the features (StandardScaler, or --scale on the command line)"


#: the linear kernel predicts through ``w`` (``x'w + b``, :func:`linear_weights`) where ``w`` of all pairs holds at
#: most this many values (32 MB) and the products cost less than those with the support vectors (:func:`weights_pay`)
LINEAR_W_MAX_VALUES = 1 << 22
#: ... counting ~20 us of Python per class (a product and two indexed sums) as this many operations
LINEAR_W_CLASS_COST = 20_000


def linear_weights(dual_coef, SV, n_support):
    """``w = sum_i dual_coef_i x_i`` of every decision function of a linear-kernel model, dense, shape
    (n_pairs, n_features): one row for a binary, regression or one-class model (``dual_coef`` of one row);
    otherwise one row per one-vs-one pair (a, b) in LIBSVM's order, from the support vectors of class a (their
    ``dual_coef`` row b - 1) and of class b (row a).  One product per class, whatever the number of pairs."""
    dual = np.asarray(dual_coef.toarray() if sp.issparse(dual_coef) else dual_coef, dtype=np.float64)
    if dual.shape[0] == 1:
        return np.asarray(SV.T @ dual[0], dtype=np.float64).reshape(1, -1)
    n_classes = len(n_support)
    pa, pb = pair_classes(n_classes)
    W = np.zeros((pa.shape[0], SV.shape[1]))
    starts = np.concatenate([[0], np.cumsum(n_support)])
    for a in range(n_classes):
        sa = slice(starts[a], starts[a + 1])
        Ca = np.asarray(SV[sa].T @ dual[:, sa].T).T  # row c: class a's vectors with their coefficients in row c
        first, second = pa == a, pb == a
        W[first] += Ca[pb[first] - 1]
        W[second] += Ca[pa[second]]
    return W


def weights_pay(kernel, X, n_sv, n_classes):
    """Whether predicting ``X`` through :func:`linear_weights` costs fewer operations than through the kernel
    block with the ``n_sv`` support vectors: forming ``w`` takes (k-1) n_sv d, the product n nnz-per-row n_pairs,
    against n n_sv (nnz-per-row + k - 1); a class's Python steps count as :data:`LINEAR_W_CLASS_COST` operations
    (5 classes, 3 rows: 0.32 ms through ``w`` against 0.21 ms without that term).  Only for the linear kernel."""
    if kernel != "linear" or n_sv == 0:
        return False
    n, d = X.shape
    n_pairs = max(n_classes * (n_classes - 1) // 2, 1)
    if n_pairs * d > LINEAR_W_MAX_VALUES:
        return False
    per_row = X.nnz / max(n, 1) if sp.issparse(X) else d
    k1 = max(n_classes - 1, 1)
    cost_w = k1 * n_sv * d + n * per_row * n_pairs + LINEAR_W_CLASS_COST * n_classes
    return cost_w < n * n_sv * (per_row + k1)


def check_finite_kernel(kern, X):
    """ValueError when the kernel is not finite on the training data ``X``: the diagonal
    (every row) and a block over the rows of largest norm (where products overflow)."""
    n = X.shape[0]
    if kern.name == "precomputed" or n == 0:
        return  # validate_data has refused a Gram matrix with non-finite entries
    if _surely_finite(kern, X):
        return
    with np.errstate(all="ignore"):
        return _check_finite_kernel(kern, X, n)


#: :func:`_surely_finite`: kernel arguments below this bound cannot overflow
FINITE_ARGUMENT = 1e150


def _surely_finite(kern, X):
    """Whether the built-in kernel ``kern`` is finite on every pair of rows of the finite data ``X``, by a
    bound from its largest magnitude ``M`` and width ``d``: dot products and squared distances are at most
    ``4 d M^2``, so the kernel's argument at most ``t = max(gamma, 1) 4 d M^2 + |coef0|``; below
    :data:`FINITE_ARGUMENT` (and ``t^degree`` below 1e300 for a polynomial) nothing overflows.  Spares the
    check's kernel block (~0.1 ms of a 2 ms fit on small data) for all but extreme data."""
    if kern.name not in ("linear", "rbf", "poly", "sigmoid"):
        return False
    values = X.data if sp.issparse(X) else X
    if values.size == 0:
        return True
    top = max(abs(float(values.max())), abs(float(values.min())))
    gamma, coef0, degree = kern.params
    t = max(gamma, 1.0) * 4.0 * X.shape[1] * top * top + abs(coef0)
    if not t < FINITE_ARGUMENT:  # also inf and NaN
        return False
    return kern.name != "poly" or t <= 1.0 or degree * math.log10(t) < 300.0


#: a prediction over at most this many (row, support vector) pairs forms the kernel block at once (one row:
#: 25 us against 36 us through kernel_times' fused loop), without a BLAS limit
SMALL_BLOCK_VALUES = 1 << 16

#: the dtype the kernel estimators train on
_FLOAT64 = (np.float64,)


def _ready_rows(X, est):
    """Whether ``X`` passes predict-time validation as it is: a C-ordered float64 NumPy array of ``est``'s
    width, every value finite, ``est`` fitted on dense data without feature names (nothing for validate_data to
    check or convert; its generic checks took 120 of the 230 us a one-row ``predict`` cost, and its finite check
    4.4 ms of a 3,000 x 3,000 precomputed kernel's 15 ms, against 1.6 ms compiled).  Anything else goes through
    validate_data, whose messages name the problem."""
    return (
        type(X) is np.ndarray
        and X.dtype == np.float64
        and X.ndim == 2
        and X.flags.c_contiguous
        and X.size > 0
        and X.shape[1] == getattr(est, "n_features_in_", -1)
        and not hasattr(est, "feature_names_in_")
        and not getattr(est, "_sparse", False)
        and all_finite(X)
    )


def _check_finite_kernel(kern, X, n):
    from .kernels import row_norms_sq

    sq = np.asarray(row_norms_sq(X), dtype=np.float64)
    if kern.name != "callable":
        d = np.asarray(kern._diag_from_sq(sq), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(d))
        if bad.size:
            raise ValueError(
                f"non-finite kernel values: K(x, x) = {d[bad[0]]} for training row {int(bad[0])} "
                f"({kern.name} kernel); the data holds values too large for it: {_SCALE_ADVICE}"
            )
    top = np.argpartition(sq, n - 24)[-24:] if n > 24 else np.arange(n)  # the rows of largest norm
    idx = np.unique(np.concatenate([np.arange(min(n, 8)), top]))
    K = np.asarray(kern(X[idx], X[idx]), dtype=np.float64)
    bad = np.argwhere(~np.isfinite(K))
    if bad.size:
        i, j = (int(idx[k]) for k in bad[0])
        raise ValueError(
            f"non-finite kernel values: K(x_{i}, x_{j}) = {K[tuple(bad[0])]} (training rows {i} and {j}, "
            f"{kern.name} kernel); the kernel or the data gives NaN or inf: {_SCALE_ADVICE}"
            + (", or make the kernel function return finite values" if kern.name == "callable" else "")
        )


def check_finite_solution(coef, rho):
    """ValueError (as scikit-learn raises) when a solver returned non-finite dual coefficients or offset."""
    if (coef is not None and not np.all(np.isfinite(coef))) or not np.all(np.isfinite(rho)):
        raise ValueError(
            "the dual coefficients or the intercept are not finite (NaN or inf): the kernel values "
            f"overflow on this data, which may hold very large values: {_SCALE_ADVICE}"
        )


def _error_share(wrong, row_counts=None):
    """The share of training rows in ``wrong``; each row counting ``row_counts`` times where given."""
    if row_counts is None:
        return float(np.mean(wrong)) if wrong.size else 0.0
    return float(np.dot(row_counts, wrong) / max(np.sum(row_counts), 1))


def warn_not_converged(tol, fits, stacklevel=3):
    """One ConvergenceWarning for the first fit that stopped early (max_iter, time_limit, callback)."""
    for fit in fits:
        if not fit.converged:
            warnings.warn(
                f"the solver stopped before reaching tol={tol} ({fit.status}; "
                f"maximal KKT violation {fit.violation:.3g} after {fit.n_iter} iterations); "
                "the model is usable but not optimal",
                ConvergenceWarning,
                stacklevel=stacklevel + 1,
            )
            return


def _check_width(X):
    """ValueError for more features than maxmargin.io.data.MAX_FEATURES (dense vectors that long)."""
    from .io.data import MAX_FEATURES, too_many_features_message

    if X.shape[1] > MAX_FEATURES:
        raise ValueError(too_many_features_message(X.shape[1], "the number of features"))


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic garbage collector off for the duration (back on after, if it was on).

    A fit with many classes builds a few objects per pair (300 classes: 44,850 pairs); the
    collections those allocations set off walked every live object again and again, half of
    the time spent building the pairs' fits.  Reference counting still frees what is not in
    a cycle."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def sample_weights(sample_weight, X):
    """Per-row weights of the training data ``X`` (ones for None; ValueError naming a negative row)."""
    if sample_weight is None:  # (scikit-learn's check takes ~40 us to say so)
        return np.ones(X.shape[0])
    sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
    if np.any(sw < 0):
        raise ValueError(f"sample_weight must be non-negative; row {int(np.argmax(sw < 0))} is negative")
    return sw


def _check_class_labels(y):
    """scikit-learn's check of classification targets, with a message that says what to do."""
    if isinstance(y, np.ndarray) and y.ndim == 1 and y.dtype.kind in "biuUS":
        return  # integer, boolean or string labels are classes as they are (the check costs ~0.3 ms)
    if isinstance(y, np.ndarray) and y.ndim == 1 and y.dtype == object and y.shape[0]:
        # Python strings (a pandas text column): classes as they are; the check sorts the objects (45 ms at
        # 200,000 rows), labels.encode finds them by equality (~7 ms)
        try:
            classes = labels._encode_objects(y)[0] if type(y[0]) is str else None
        except TypeError:  # objects that do not order: scikit-learn's check says so below
            classes = None
        if classes is not None and all(type(c) is str for c in classes):
            return
    try:
        check_classification_targets(y)
    except ValueError:
        y = np.asarray(y)
        if y.dtype.kind == "f":
            bad = np.flatnonzero(y != np.round(y))
            if bad.size:
                raise ValueError(
                    "classification needs class labels, but the labels are continuous numbers "
                    f"(label {float(y[bad[0]]):g} "
                    f"of row {int(bad[0])} is not an integer): give integer or string labels, or fit a regression "
                    "(SVR or NuSVR; --type epsilon-svr or nu-svr on the command line)"
                ) from None
        raise


class BaseKernelSVM(CallbackSupportMixin, BaseEstimator):
    """What every maxmargin kernel estimator shares.

    Subclasses have the parameters ``kernel, degree, gamma, coef0, sigma, tol,
    cache_size, shrinking, max_iter, verbose, callback, time_limit``; fitting sets
    ``_gamma`` (the resolved kernel coefficient) and ``_sparse``.
    """

    def _named_row_kernel(self):
        """Whether the kernel is a named formula of the rows (not precomputed, not a callable): equal rows then
        have equal kernel values, which merging identical rows (:mod:`maxmargin.dedup`) needs."""
        return isinstance(self.kernel, str) and self.kernel != "precomputed"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags

    # ----------------------------------------------------------------- checks
    def _check_solver_params(self):
        _check_positive("tol", self.tol)
        _check_positive("cache_size", self.cache_size)
        if (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, numbers.Integral)
            or (self.max_iter < -1 or self.max_iter == 0)
        ):
            raise ValueError(f"max_iter must be -1 (no limit) or a positive integer, got {self.max_iter!r}")
        _check_positive("time_limit", self.time_limit, allow_none=True)
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"callback must be callable or None, got {self.callback!r}")

    def _validate_train(self, X, y="no_validation", y_numeric=False):
        """Validated training data (CSR with sorted indices, or dense C-ordered float64);
        ``y="no_validation"`` for unsupervised estimators."""
        # ready_x / ready_xy: validate_data's answer for input it would take as it is, ~0.15-0.5 ms sooner
        if isinstance(y, str) and y == "no_validation":
            ready = ready_x(self, X, _FLOAT64)
            X = ready if ready is not None else validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C")
            y = None
        else:
            ready = ready_xy(self, X, y, _FLOAT64)
            X, y = (
                ready
                if ready is not None
                else validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C", y_numeric=y_numeric)
            )
        X = canonical_csr(X)
        _check_width(X)
        if self.kernel == "precomputed" and X.shape[0] != X.shape[1]:
            raise ValueError(f"a precomputed kernel must be a square Gram matrix, got shape {X.shape}")
        return X, y

    _sample_weights = staticmethod(sample_weights)

    def _fit_kernel(self, X):
        """The Kernel object for training data ``X``; sets ``_gamma`` and ``_sparse``."""
        kern = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X=X, sigma=self.sigma)
        self._gamma = float(kern.params[0]) if kern.code in (1, 2, 3) else 0.0
        self._sparse = sp.issparse(X)
        check_finite_kernel(kern, X)
        return kern

    def _solver_options(self, subproblem=0, n_subproblems=1, with_callback=True):
        """Keyword arguments for :func:`maxmargin.solvers.smo.solve`."""
        options = dict(
            tol=self.tol,
            max_iter=self.max_iter,
            shrinking=bool(self.shrinking),
            cache_size=self.cache_size,
            verbose=bool(self.verbose),
        )
        if self.time_limit is not None:
            options["time_limit"] = self.time_limit
        callback = report_of(self).solver_callback(subproblem) if with_callback else None
        if callback is not None:  # callback=, scikit-learn's callbacks and watchers (maxmargin.callbacks)
            options["callback"] = callback
            options["callback_info"] = {"subproblem": subproblem, "n_subproblems": n_subproblems}
        return options

    def _row_pool(self):
        """With ``warm_start=True``: the pool of kernel-row caches kept on the estimator
        between fits (at most ``cache_size`` MB; see :class:`maxmargin.solvers.smo.KernelRowPool`),
        so that a grid over C does not recompute kernel rows.  None otherwise."""
        from .solvers.smo import KernelRowPool

        if not getattr(self, "warm_start", False):
            self.__dict__.pop("_kernel_pool", None)
            return None
        pool = getattr(self, "_kernel_pool", None)
        if pool is None or pool.budget != float(self.cache_size) * 1024 * 1024:
            pool = KernelRowPool(self.cache_size)
            self._kernel_pool = pool
        pool.new_generation()
        return pool

    def __getstate__(self):
        state = super().__getstate__()
        if isinstance(state, dict):
            state = dict(state)
            state.pop("_kernel_pool", None)  # a run-time cache (up to cache_size MB), not part of the model
        return state

    @staticmethod
    def _subset(X, rows, precomputed):
        """The rows ``rows`` of ``X`` (and those columns of a Gram matrix); ``X`` itself where they are all
        of its rows in order (read only: a binary problem's folds, no copy of the data)."""
        if rows.shape[0] == X.shape[0] and bool(np.all(rows == np.arange(rows.shape[0]))):
            return X
        return X[rows][:, rows] if precomputed else X[rows]

    # --------------------------------------------------------------- predict
    def _get_kernel(self):
        """The Kernel object of the fitted model (rebuilt from the parameters)."""
        kern = getattr(self, "_kernel_cache", None)
        if kern is None or getattr(self, "_kernel_cache_key", None) != (
            self.kernel,
            self._gamma,
            self.degree,
            self.coef0,
        ):
            kern = make_kernel(self.kernel, self._gamma, self.degree, self.coef0)
            self._kernel_cache = kern
            self._kernel_cache_key = (self.kernel, self._gamma, self.degree, self.coef0)
        return kern

    def _validate_for_predict(self, X):
        check_is_fitted(self)
        if _ready_rows(X, self):
            return X
        shape = getattr(X, "shape", None)
        if self.kernel == "precomputed" and shape is not None and len(shape) == 2 and shape[1] != self.shape_fit_[0]:
            raise ValueError(
                f"X has {shape[1]} columns; a precomputed kernel at predict time needs one column "
                f"per training sample ({self.shape_fit_[0]})"
            )
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C", reset=False)
        if sp.issparse(X) != self._sparse and self._sparse:
            X = sp.csr_matrix(X)
        return canonical_csr(X)

    def _sv_for_blocks(self, X):
        """The support vectors as the kernel blocks against rows of ``X`` take them: dense where BLAS pays (a dense
        copy made once per call, not per block), sparse where the rows of both are sparse enough for a sparse
        product (:func:`maxmargin.kernels.objects.dense_product_pays`)."""
        SV = self.support_vectors_
        if sp.issparse(SV) and sp.issparse(X) and not dense_product_pays(X, SV):
            return SV
        return densify_if_cheap(SV)

    def _kernel_to_sv(self, X, SV):
        """Kernel block between rows of X and the support vectors ``SV``."""
        if self.kernel == "precomputed":
            return np.asarray(X[:, self.support_].toarray() if sp.issparse(X) else X[:, self.support_])
        return self._get_kernel()(X, SV)


#: :meth:`BaseSVMClassifier._pair_workers`: one-vs-one problems holding fewer rows than this in all are solved one
#: after the other (NuSVC, 4 classes, 6 pairs: 450 rows in all 1.17x slower on two threads, 900 rows 0.93x,
#: 1,800 rows 0.83x; wine's 3 pairs, 236 rows: 6.6 ms on threads, ~4 ms one by one)
THREADS_MIN_ROWS = 800


class BaseSVMClassifier(ClassifierMixin, BaseKernelSVM):
    """Shared machinery of the kernel SVM classifiers (one-vs-one)."""

    #: fitted attributes a model file stores (see maxmargin.io.model)
    _state_attributes = (
        "classes_",
        "support_",
        "support_vectors_",
        "dual_coef_",
        "intercept_",
        "n_support_",
        "n_features_in_",
        "shape_fit_",
        "fit_status_",
        "n_iter_",
        "objective_",
        "margin_",
        "loo_bound_",
        "duality_gap_",
        "train_error_",
        "fit_time_",
        "w_norm_",
        "_gamma",
        "_sparse",
        "_linear_w",
        "probA_",
        "probB_",
    )

    # ----------------------------------------------------------------- checks
    def _check_params(self):
        self._check_box_params()
        self._check_solver_params()
        if self.decision_function_shape not in ("ovr", "ovo"):
            raise ValueError(f"decision_function_shape must be 'ovr' or 'ovo', got {self.decision_function_shape!r}")
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")
        _check_bool("probability", self.probability)
        _check_bool("predict_from_proba", self.predict_from_proba)
        if self.predict_from_proba and not self.probability:
            raise ValueError("predict_from_proba=True needs probability=True")

    def _check_box_params(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _upper_bounds(self, weights):  # pragma: no cover - abstract
        """Per-sample upper bounds of the dual from sample times class weights."""
        raise NotImplementedError

    def _check_feasible(self, members, bounds, classes):
        """Hook: raise ValueError when a binary problem (``members``, the pairs of ``classes`` in LIBSVM's order)
        has no feasible point."""

    def _fit_pair(self, X, y, bounds, kern, options, alpha0=None, rows=None):  # pragma: no cover - abstract
        """Fit one binary problem; returns a :class:`maxmargin.formulations.BinaryFit`."""
        raise NotImplementedError

    # ------------------------------------------------------------------- fit
    @reports_progress
    def fit(self, X, y, sample_weight=None):
        """Fit the SVM on ``X`` (dense or sparse; the Gram matrix for a
        precomputed kernel) and labels ``y``; dask arrays / DataFrames are gathered first
        (:mod:`maxmargin.scaleout`)."""
        with _gc_paused():
            return self._fit_classes(X, y, sample_weight)

    def _fit_classes(self, X, y, sample_weight):
        if scaleout.is_dask(X) or scaleout.is_dask(y) or scaleout.is_dask(sample_weight):
            X, y, sample_weight = scaleout.to_local(X, y, sample_weight)
        self._check_params()
        t_start = time.perf_counter()
        X, y = self._validate_train(X, y)
        _check_class_labels(y)
        n = X.shape[0]
        precomputed = self.kernel == "precomputed"
        classes, y_idx = labels.encode(y)
        if classes.shape[0] < 2:
            raise ValueError(
                f"the training labels contain only one class ({getattr(classes[0], 'item', lambda: classes[0])()!r}); "
                "a classifier needs at least two classes"
            )
        sw = self._sample_weights(sample_weight, X)
        cw = labels.class_weights(self.class_weight, classes, y, y_idx)
        C_all = self._upper_bounds(sw * cw[y_idx])
        # identical rows of one class as one row with their bounds summed (exact; dedup.py), expanded after the fit
        dup = dedup.find(X, y_idx, C_all) if self._merges_duplicates() else None
        X_all, y_all, C_rows = X, y_idx, C_all
        if dup is not None:
            X, y_idx, C_all = X[dup.keep], y_idx[dup.keep], dup.C
            n = X.shape[0]

        n_classes = classes.shape[0]
        pairs = [(a, b) for a in range(n_classes) for b in range(a + 1, n_classes)]
        # per pair its rows (weight > 0) in increasing order and +1 / -1 for its first / second class
        members, counts = ovo.pair_members(y_idx, C_all, n_classes)
        if np.any(counts == 0):
            empty = int(np.flatnonzero(counts == 0)[0])
            a, b = (0, empty) if empty > 0 else (0, 1)  # the first pair, in order, with an empty class
            ca, cb = (c.item() if hasattr(c, "item") else c for c in (classes[a], classes[b]))
            raise ValueError(
                f"after removing samples of zero weight, classes {ca!r} and {cb!r} do not both have samples left"
            )
        self._check_feasible(members, C_all, classes)
        warm = self._previous_alphas(n, classes, pairs, members)

        self.classes_ = classes
        kern = self._fit_kernel(X_all)  # gamma='scale' from every row
        report = report_of(self)
        report.begin(len(pairs), probability=bool(self.probability))
        fits = []
        compiled = self._compiled_pairs(X, kern, members, warm)
        workers = 1 if compiled.any() else self._pair_workers(members, warm, X)
        # the folds of every pair are drawn first, in pair order (one permutation each, as LIBSVM)
        plans = self._fold_plans(members) if self.probability else None
        on_dask = self._fit_pairs_on_dask(X, y_idx, pairs, members, C_all, kern, compiled, warm)
        if compiled.any():
            fits = self._fit_pairs_compiled(
                X, y_idx, pairs, members, C_all, kern, precomputed, compiled, plans, done=on_dask
            )
        elif on_dask is not None:
            fits = self._fit_pairs_rest(X, members, C_all, kern, precomputed, on_dask)
        elif workers > 1:
            fits = self._fit_pairs_in_threads(X, members, C_all, kern, precomputed, workers)
        else:
            # with probability=True, a whole kernel matrix SMO computes stays on the fit for the folds
            keep = smo.keeping_gram() if self.probability else contextlib.nullcontext()
            with smo.kernel_row_pool(self._row_pool()), keep:
                for p_no, (rows, ysub) in enumerate(members):
                    options = self._solver_options(p_no, len(pairs))
                    alpha0 = None if warm is None else warm[p_no]
                    report.problem_begin(p_no)
                    fit = self._fit_pair(X, ysub, C_all[rows], kern, options, alpha0, rows=rows)
                    report.problem_end(p_no)
                    fits.append(fit)
                    if fit.status == "callback":
                        break
            # stopped by a callback: the pairs not started keep the zero solution (usable, not converged)
            for rows, _ in members[len(fits) :]:
                fits.append(formulations.BinaryFit(np.zeros(rows.shape[0]), 0.0, 0.0, 0, np.inf, False, "callback"))
        self._set_model(X, y_idx, fits, members, pairs, n, C_all, kern, None if dup is None else dup.counts)
        self._check_fits(fits, pairs)
        if dup is not None:
            self._expand_duplicates(dup, X_all, y_all, C_rows, self._coef_scale(fits))
        if self.probability:
            self._fit_probability(X, fits, members, pairs, C_all, kern, precomputed, plans)
        else:
            self.probA_ = np.empty(0)
            self.probB_ = np.empty(0)
        self._C_fit = getattr(self, "C", None)
        self.fit_time_ = time.perf_counter() - t_start
        if not precomputed:
            self._get_kernel()  # prepared here, so that predicting leaves __dict__ unchanged
        return self

    def _merges_duplicates(self):
        """Whether identical training rows of one class are solved as one (:mod:`maxmargin.dedup`); per estimator."""
        return False

    def _check_fits(self, fits, pairs):
        """Warnings about the one-vs-one fits (``pairs``: their classes, as indices); per estimator."""

    def _coef_scale(self, fits):
        """Per binary problem, the factor between ``dual_coef_`` and the solution whose bounds are the rows' ``C``
        (None: 1 for every problem); per estimator."""
        return None

    def _expand_duplicates(self, dup, X, y_idx, C, pair_scale=None):
        """The model fitted on the merged rows as a model of all rows ``X``: each merged row's coefficients split
        over its group (:func:`maxmargin.dedup.expand`; ``pair_scale``: :meth:`_coef_scale`), the support vectors
        ordered by class then row as LIBSVM's (the decision function is unchanged; the training error was counted
        over every row by :meth:`_set_model`)."""
        scale = None
        if pair_scale is not None:
            # dual_coef_[j, s] belongs to the pair of the support vector's class c and the class j (j < c) or j + 1
            k = self.classes_.shape[0]
            c = y_idx[dup.keep[self.support_]][None, :]
            j = np.arange(k - 1)[:, None]
            other = np.where(j < c, j, j + 1)
            a, b = np.minimum(c, other), np.maximum(c, other)
            scale = np.asarray(pair_scale, dtype=np.float64)[a * k - a * (a + 1) // 2 + (b - a - 1)]
        rows, dual = dedup.expand(self.dual_coef_, self.support_, dup, C, scale)
        order = np.lexsort((rows, y_idx[rows]))
        support = rows[order]
        self.support_ = support.astype(np.int32)
        self.support_vectors_ = X[support]
        self.dual_coef_ = dual[:, order]
        self.n_support_ = np.bincount(y_idx[support], minlength=self.classes_.shape[0]).astype(np.int32)
        self.shape_fit_ = X.shape
        self.loo_bound_ = float(support.shape[0] / max(X.shape[0], 1))

    def _pair_workers(self, members, warm, X=None):
        """How many one-vs-one problems to solve at once (threads).

        More than one only where it is safe and pays: at least two pairs small enough
        for the two-variable SMO (whose compiled loop releases the GIL; larger pairs go
        to the batched solver, which already uses every core, one after the other), no
        callback, no verbose output, no warm start (its row pool is per thread) and the
        estimator's pairs solved by SMO.  Each thread gets ``cache_size / workers``, so
        the memory bound is unchanged.
        """
        cores = os.cpu_count() or 1
        if cores < 2 or len(members) < 2 or warm is not None or self.callback is not None or self.verbose:
            return 1
        if getattr(self, "warm_start", False) or not self._pairs_use_smo():
            return 1
        if sum(rows.shape[0] for rows, _ in members) < THREADS_MIN_ROWS:
            return 1  # a thread pool for pairs this small costs more than it saves
        small = sum(not self._pair_batched(rows, X) for rows, _ in members)
        return min(cores, small) if small >= 2 else 1

    def _pair_batched(self, rows, X=None):
        """Whether solver='auto' gives the one-vs-one problem on ``rows`` (of the training data ``X``) to the
        batched solver (which runs on every core: such problems are solved one after the other, never on the
        pairs' threads); :func:`maxmargin.formulations.rows_dear_for_smo` as the fit decides it."""
        if getattr(self, "solver", "auto") == "divide":
            return rows.shape[0] >= self._divide_smo_below()
        auto = getattr(self, "solver", "auto") == "auto" and self.kernel != "precomputed" and not callable(self.kernel)
        if auto and formulations.smo_on_gram(X, rows.shape[0], None, self.cache_size):
            return False  # SMO over the pair's whole kernel matrix
        if rows.shape[0] >= formulations.AUTO_BATCHED_MIN_N:
            return True
        if not auto:
            return False
        return formulations.rows_dear_for_smo(X, rows.shape[0])

    def _pairs_use_smo(self):  # pragma: no cover - per estimator
        return False

    def _divide_smo_below(self):
        """``solver='divide'``: the problems of fewer rows are solved whole by SMO, not divided (its
        ``direct_below``, within its part solver's SMO range; :mod:`maxmargin.solvers.divide`); such one-vs-one
        pairs may share the pairs' threads.  0 for the other solvers."""
        if getattr(self, "solver", "auto") != "divide":
            return 0
        from .solvers import divide

        opts = self.solver_options or {}
        below = opts.get("direct_below")
        below = divide.DIRECT_BELOW if below is None else divide._check_int("direct_below", below, 0)
        part = opts.get("part_solver", "auto")
        if part == "smo":
            return below
        return min(below, divide.BATCHED_MIN_N) if part == "auto" else 0

    def _pairs_compile(self):
        """Whether this estimator's one-vs-one problems may go to :mod:`maxmargin.solvers.ovo`
        (the C-SVC dual, solved by SMO); per estimator."""
        return False

    def _pairs_nu(self):
        """The ``nu`` of the pairs :mod:`maxmargin.solvers.ovo` solves (0: the C-SVC dual); per estimator."""
        return 0.0

    def _compiled_pairs(self, X, kern, members, warm):
        """Per one-vs-one problem, whether it is solved by the compiled all-pairs route
        (:mod:`maxmargin.solvers.ovo`): three or more classes, the C-SVC dual by SMO, a
        built-in or precomputed kernel, no callback, verbose output or warm start, and
        a pair small enough that every worker holds its Gram matrix within cache_size."""
        none = np.zeros(len(members), dtype=bool)
        if (
            len(members) < 3
            or not self._pairs_compile()
            or warm is not None
            or self.callback is not None
            or self.verbose
            or getattr(self, "warm_start", False)
            or kern.name == "callable"
        ):
            return none
        workers = cores()
        offsets = getattr(members, "offsets", None)
        sizes = (
            np.diff(offsets).astype(np.float64)
            if offsets is not None
            else np.fromiter((rows.shape[0] for rows, _ in members), dtype=np.float64, count=len(members))
        )
        eligible = ovo.pair_fits(sizes, self.cache_size, workers)  # elementwise over the pairs' sizes
        # the linear kernel on few features: pairs of MIN_PAIR_ROWS rows and more go through the registry, whose
        # 'auto' takes the interior point for them (solvers/ipm.py); on one worker as on several
        small = (
            sizes < ipm.MIN_PAIR_ROWS
            if self.solver == "auto" and ipm.pays(X, kern, ipm.MIN_PAIR_ROWS)
            else np.ones(sizes.shape[0], dtype=bool)
        )
        if getattr(self, "solver", "auto") == "divide":  # the pairs it would solve whole by SMO, not divide
            small &= sizes < self._divide_smo_below()
        eligible &= small
        # members are the pairs (a, b), a < b, in LIBSVM's order: k classes give k(k-1)/2 of them;
        # pair (0, b) holds class b's rows, pair (0, 1) class 0's
        k = int(round((1 + np.sqrt(1 + 8 * len(members))) / 2))
        pairs = np.column_stack(pair_classes(k))
        counts = getattr(members, "counts", None)
        if counts is None:
            counts = np.zeros(k)
            counts[0] = np.count_nonzero(members[0][1] > 0)
            for b in range(1, k):
                counts[b] = np.count_nonzero(members[b - 1][1] < 0)
        counts = np.asarray(counts, dtype=np.float64)
        chosen = ovo.plan(counts, pairs, eligible, self.cache_size, workers)
        self._ovo_workers = None
        if workers > 1 and not chosen.all() and block_mode(X, kern) in ovo.LAZY_MODES:
            # rows on demand (narrow dense or sparse rows): one worker with room for a whole Gram matrix may
            # take every pair where two would not, and solve_pairs gives the pairs after the probes to every core
            # where the probes' rows on demand leave room (ovo.lazy_workers).  Pair by pair on two threads lost
            # to one worker here: 4 classes of 2,000 rows, 8 x 4,000^2 bytes a pair: 0.050 s against 0.020 s.
            # Not for some of the pairs only: those ran on one core while the other waited (5 overlapping
            # classes of 2,400 rows: 1.13x the time pair by pair)
            alone = ovo.plan(counts, pairs, ovo.pair_fits(sizes, self.cache_size, 1) & small, self.cache_size, 1)
            if alone.all():
                self._ovo_workers = 1
                return alone
        return chosen

    def _fit_pairs_on_dask(self, X, y_idx, pairs, members, C_all, kern, compiled, warm):
        """``solver='divide'`` with ``backend='dask'`` and many classes: the one-vs-one problems it would divide,
        each solved whole on one worker as one task (:meth:`maxmargin.scaleout.DaskExecutor.map_pairs`), as
        many at once as the cluster has worker threads; on each, ``solver='divide'`` with its threads. Returns
        the fits per pair (None for the pairs left to the other routes), or None where the pairs are not sent
        (fewer such pairs than worker threads: each is then divided over the whole cluster, one after the other;
        a callback or a warm start: they stay here).

        Why: one pair divided over the cluster waits for its slowest part at every level and for the global
        step, which runs on one host while the others wait; whole pairs side by side keep every worker busy
        (mid64, 60,000 x 64, 10 classes, 2 workers of one thread: see ``benchmarks/RESULTS.md``, session 43)."""
        if getattr(self, "solver", "auto") != "divide":
            return None
        opts = getattr(self, "solver_options", None) or {}
        if opts.get("backend") != "dask" or len(pairs) < 2:
            return None
        if getattr(self, "formulation", None) is None or opts.get("early_stop") is not None or kern.code == 4:
            return None  # NuSVC, early_stop, a Gram matrix or callable kernel: the usual route names the problem
        if warm is not None or self.callback is not None or getattr(self, "warm_start", False):
            return None
        below = self._divide_smo_below()
        todo = [p for p, (rows, _) in enumerate(members) if not compiled[p] and rows.shape[0] >= below]
        executor = scaleout.DaskExecutor()
        if len(todo) < max(2, executor.threads()):
            return None
        n_classes = self.classes_.shape[0]
        class_rows = [np.flatnonzero((y_idx == c) & (C_all > 0)) for c in range(n_classes)]
        items = []
        for p in todo:
            a, b = pairs[p]
            rows, ysub = members[p]
            order = np.argsort(np.concatenate([class_rows[a], class_rows[b]]), kind="stable")
            options = dict(self._solver_options(p, len(pairs), with_callback=False), **opts)
            options["backend"] = "threads"  # with the worker's threads
            options.pop("n_jobs", None)
            args = (np.asarray(ysub, dtype=np.float64), C_all[rows], kern, self.formulation, "divide")
            items.append((a, b, order, args, options))
        report = report_of(self)
        for p in todo:
            report.problem_begin(p, steps=False)
        solved = executor.map_pairs(formulations.fit_binary, [X[r] for r in class_rows], items)
        fits = [None] * len(pairs)
        for p, fit in zip(todo, solved):
            fits[p] = fit
            report.problem_end(p)
        return fits

    def _fit_pairs_compiled(self, X, y_idx, pairs, members, C_all, kern, precomputed, compiled, plans=None, done=None):
        """The one-vs-one fits, those marked in ``compiled`` by :func:`maxmargin.solvers.ovo.solve_pairs`
        (all at once, compiled, on every core), the rest one by one as usual.  With ``plans`` (the
        probability folds, :meth:`_fold_plans`) and warm-started folds, the compiled pairs' folds
        are solved there too, right after each pair (:mod:`maxmargin.solvers.ovo_folds`); their
        held-out decision values go to the fits as ``cv_decision`` (rows in increasing order).  Without folds the
        kernel rows are computed as SMO visits them where that pays (:func:`maxmargin.solvers.ovo.lazy_plan`):
        easy classes leave most of them uncomputed.  ``done``: per pair its fit where already solved (on Dask,
        :meth:`_fit_pairs_on_dask`), else None."""
        chosen = np.flatnonzero(compiled).tolist()
        report = report_of(self)
        folds = None
        if plans is not None and self._folds_warm_start():
            sizes = np.array([members[p_no][1].shape[0] for p_no in chosen], dtype=np.int64)
            offsets = np.concatenate([[0], np.cumsum(sizes)])
            labels = np.concatenate([members[p_no][1] for p_no in chosen]).astype(np.float64)
            perms = np.concatenate([plans[p_no] for p_no in chosen]).astype(np.int64)
            layout, folds = ovo_folds.layout_folds(labels, perms, offsets, probability.N_FOLDS)
        res = ovo.solve_pairs(
            block_data(X, kern),
            y_idx,
            C_all,
            np.column_stack(pair_classes(self.classes_.shape[0]))[chosen],
            tol=self.tol,
            max_iter=self.max_iter,
            shrinking=bool(self.shrinking),
            time_limit=self.time_limit,
            on_batch=(lambda ps: report.batch_done([chosen[p] for p in ps])) if report.active else None,
            folds=folds,
            n_folds=probability.N_FOLDS if folds is not None else 0,
            fold_tol=probability.fold_tol(self.tol),
            workers=getattr(self, "_ovo_workers", None),
            cache_size=self.cache_size if getattr(self, "_ovo_workers", None) else None,
            nu=self._pairs_nu(),
        )
        if res["r"] is not None and not bool(np.all(res["r"][np.asarray(res["solved"], dtype=bool)] > 0)):
            # a nu-SVC pair without a margin (r <= 0): the usual route solves the pairs again and names the problem
            fits = [None] * len(pairs) if done is None else list(done)
            return self._fit_pairs_rest(X, members, C_all, kern, precomputed, fits)
        solved = formulations.fits_from_pairs(
            res, C_all, kern, X, "smo", tol=self.tol, max_iter=self.max_iter, consume=True
        )
        if len(chosen) == len(pairs) and folds is None:
            return solved  # every pair, in order: the model is set from its arrays (PairFits)
        if len(chosen) == len(pairs) and isinstance(solved, PairFits) and bool(np.all(res["solved"])):
            # and so are the sigmoids, fitted there on each pair's held-out values
            solved.sigmoids = (np.array(res["probA"]), np.array(res["probB"]))
            return solved
        fits = [None] * len(pairs) if done is None else list(done)
        if folds is not None:  # the held-out values back in increasing row order
            cv_rows = res["cv_flat"][np.repeat(offsets[:-1], sizes) + layout]
        for k, (p_no, fit) in enumerate(zip(chosen, solved)):
            fits[p_no] = fit
            if folds is not None and res["cv"][k] is not None:
                fit.cv_decision = cv_rows[offsets[k] : offsets[k + 1]]
        return self._fit_pairs_rest(X, members, C_all, kern, precomputed, fits)

    def _fit_pairs_rest(self, X, members, C_all, kern, precomputed, fits):
        """``fits`` (per pair, None where not solved yet) with the others solved as usual: on threads where
        :meth:`_pair_workers` allows, else one by one."""
        report = report_of(self)
        rest = [p_no for p_no, fit in enumerate(fits) if fit is None]
        workers = self._pair_workers(members, None, X) if rest else 1
        if rest and workers > 1:  # pairs too large for the memory left: on threads as usual
            threaded = self._fit_pairs_in_threads(X, members, C_all, kern, precomputed, workers, rest)
            return [fit if fit is not None else threaded[p_no] for p_no, fit in enumerate(fits)]
        for p_no in rest:
            rows, ysub = members[p_no]
            options = self._solver_options(p_no, len(fits))
            report.problem_begin(p_no)
            fits[p_no] = self._fit_pair(X, ysub, C_all[rows], kern, options, rows=rows)
            report.problem_end(p_no)
        return fits

    def _fit_pairs_in_threads(self, X, members, C_all, kern, precomputed, workers, only=None):
        """The one-vs-one fits: pairs of at least ``AUTO_BATCHED_MIN_N`` points one
        after the other (their solver runs on every core), then the small ones on
        ``workers`` threads with ``cache_size / workers`` each; returned in pair order
        (with ``only``, a list of pair numbers: those pairs, the others None)."""
        import threading
        from concurrent.futures import ThreadPoolExecutor, as_completed

        n_pairs = len(members)
        stop = threading.Event()  # set on Ctrl-C: the running pairs stop at their next chunk

        report = report_of(self)

        def one(p_no, cache):
            rows, ysub = members[p_no]
            watch = report.solver_callback(p_no)

            def halt(info):
                if stop.is_set() or (watch is not None and watch(info) is False):
                    return False
                return None

            options = dict(self._solver_options(p_no, n_pairs), cache_size=cache, callback=halt)
            report.problem_begin(p_no, steps=False)
            fit = self._fit_pair(X, ysub, C_all[rows], kern, options, None, rows=rows)
            report.problem_end(p_no)
            return fit

        todo = range(n_pairs) if only is None else only
        batched = {p: self._pair_batched(members[p][0], X) for p in todo}
        big = [p for p in todo if batched[p]]
        small = [p for p in todo if not batched[p]]
        fits = [None] * n_pairs
        for p_no in big:
            fits[p_no] = one(p_no, float(self.cache_size))
        with one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:  # our threads cover the cores
            futures = {pool.submit(one, p, float(self.cache_size) / workers): p for p in small}
            try:
                for f in as_completed(futures):
                    fits[futures[f]] = f.result()
            except BaseException:  # Ctrl-C (or a failing pair): no new pair starts, the running ones stop
                stop.set()
                for f in futures:
                    f.cancel()
                raise
        return fits

    def _previous_alphas(self, n, classes, pairs, members):
        """Per binary problem, the previous fit's multipliers on its rows (warm start), or None.

        They are rebuilt from ``support_`` / ``dual_coef_`` and multiplied by
        ``C_new / C_old``, which keeps :math:`y^T\\alpha = 0` and maps the box
        :math:`[0, C_{old}]` onto :math:`[0, C_{new}]`; the solver then clips them
        into the new box (per-sample weights may have changed) and restores the
        equality constraint.
        """
        if not getattr(self, "warm_start", False) or not hasattr(self, "dual_coef_"):
            return None
        prev_classes = getattr(self, "classes_", None)
        if (
            self.shape_fit_[0] != n
            or prev_classes is None
            or prev_classes.shape != classes.shape
            or not np.array_equal(prev_classes, classes)
            or self.support_.shape[0] == 0
        ):
            return None
        k = classes.shape[0]
        dual = np.asarray(self.dual_coef_.toarray() if sp.issparse(self.dual_coef_) else self.dual_coef_)
        if k == 2:
            dual = -dual
        sv_class = np.repeat(np.arange(k), self.n_support_)
        C_old = getattr(self, "_C_fit", None)
        ratio = self.C / C_old if (C_old and getattr(self, "C", None)) else 1.0
        out = []
        for (a, b), (rows, _) in zip(pairs, members):
            full = np.zeros(n)
            in_a, in_b = sv_class == a, sv_class == b
            full[self.support_[in_a]] = np.abs(dual[b - 1, in_a])
            full[self.support_[in_b]] = np.abs(dual[a, in_b])
            out.append(full[rows] * ratio)
        return out

    def _set_model(self, X, y_idx, fits, members, pairs, n, C_all, kern, row_counts=None):
        """The fitted attributes from the pairs' ``fits``; ``row_counts``: how many training rows each row of ``X``
        stands for (merged duplicates, :mod:`maxmargin.dedup`), for the training error."""
        # the compiled pairs' fits carry their values as flat arrays (formulations.pairs.PairFits):
        # no per-pair objects are built below (300 classes: 44,850 pairs)
        arrays = getattr(fits, "arrays", None)
        n_classes = self.classes_.shape[0]
        n_pairs = len(pairs)
        if arrays is not None:
            rows_all, coef_all, seg_offsets = arrays["rows"], arrays["coef"], arrays["offsets"]
            seg_pair = np.arange(n_pairs, dtype=np.int64)
            rho = np.asarray(arrays["rho"], dtype=np.float64)
        else:
            for fit in fits:
                if fit.alpha is None:
                    check_finite_solution(fit.w, fit.rho)
            # every dual solution as one flat array (pair by pair), so that no step below
            # loops over the pairs in Python with arrays of n entries (100 classes: 4950 pairs)
            dual_pairs = [p for p, fit in enumerate(fits) if fit.alpha is not None]
            seg_pair = np.array(dual_pairs, dtype=np.int64)
            seg_offsets = np.concatenate([[0], np.cumsum([members[p][0].shape[0] for p in dual_pairs])])
            if dual_pairs:
                rows_all = np.concatenate([members[p][0] for p in dual_pairs])
                coef_all = np.concatenate([fits[p].alpha * members[p][1] for p in dual_pairs])
            else:
                rows_all = np.zeros(0, dtype=np.int64)
                coef_all = np.zeros(0)
            rho = np.array([fit.rho for fit in fits], dtype=np.float64)
        check_finite_solution(coef_all, rho)
        is_sv = np.zeros(n, dtype=bool)
        rows_all = np.asarray(rows_all, dtype=np.int64)
        coef_all = np.asarray(coef_all, dtype=np.float64)
        mark_support(rows_all, coef_all, is_sv)  # (compiled: 300 classes' 897,000 entries, 17 ms as NumPy masks)
        # support vectors ordered by class, then by index (LIBSVM / scikit-learn)
        order = np.lexsort((np.arange(n), y_idx))
        support = order[is_sv[order]]
        self.support_ = support.astype(np.int32)
        self.n_support_ = np.bincount(y_idx[support], minlength=n_classes).astype(np.int32)
        self.support_vectors_ = X[support] if self.kernel != "precomputed" else np.empty((0, 0))
        dual = np.zeros((max(n_classes - 1, 1), support.shape[0]))
        spos = np.full(n, -1, dtype=np.int64)
        spos[support] = np.arange(support.shape[0])
        pa, pb = pair_classes(n_classes)  # pairs: all of them, in this order
        # a support vector of class a sits in dual_coef_ row b-1 for pair (a, b), of class b in row a
        scatter_dual(
            rows_all,
            np.asarray(seg_offsets, dtype=np.int64),
            seg_pair,
            coef_all,
            np.asarray(y_idx, dtype=np.int64),
            pa.astype(np.int64),
            pb.astype(np.int64),
            spos,
            dual,
        )
        intercept = -rho
        linear_w = None
        for p_no, fit in enumerate(fits if arrays is None else ()):
            if fit.alpha is None:
                if linear_w is None:
                    linear_w = np.zeros((n_pairs, X.shape[1]))
                linear_w[p_no] = fit.w
        if n_classes == 2:
            dual = -dual
            intercept = -intercept
            if linear_w is not None:
                linear_w = -linear_w
        self.dual_coef_ = dual
        self.intercept_ = intercept
        self._linear_w = linear_w
        self.shape_fit_ = X.shape
        self.loo_bound_ = float(support.shape[0] / max(n, 1))
        if arrays is not None:
            self.n_iter_ = np.asarray(arrays["n_iter"]).astype(np.int32)
            self.objective_ = np.asarray(arrays["objective"], dtype=np.float64).copy()
            self.duality_gap_ = np.asarray(arrays["gap"], dtype=np.float64).copy()
            self.fit_status_ = 0 if bool(np.all(arrays["converged"])) else 1
            self.w_norm_ = np.asarray(arrays["w_norm"], dtype=np.float64).copy()
            self.margin_ = np.asarray(arrays["margin"], dtype=np.float64).copy()
        else:
            self.n_iter_ = np.array([f.n_iter for f in fits], dtype=np.int32)
            self.objective_ = np.array([f.objective for f in fits])
            gaps = [f.gap for f in fits]
            gaps = [f.extra.get("duality_gap") if g is None else g for f, g in zip(fits, gaps)]
            self.duality_gap_ = np.array([np.nan if g is None else g for g in gaps])
            self.fit_status_ = 0 if all(f.converged for f in fits) else 1
            # geometric margin per binary problem: 1/||w||, ||w||^2 from the dual objective
            self.w_norm_ = np.array(
                [self._w_norm_of(fit, rows, ysub, C_all, X, kern) for fit, (rows, ysub) in zip(fits, members)]
            )
            margins = np.empty(len(fits))
            for p_no, fit in enumerate(fits):
                m = fit.extra.get("margin", getattr(fit, "margin", None))
                wn = self.w_norm_[p_no]
                margins[p_no] = float(m) if m is not None else (1.0 / wn if wn > 0 else np.inf)
            self.margin_ = margins
        dec = None
        if n_classes == 2 and len(fits) == 1 and fits[0].extra.get("train_decision") is not None:
            # two classes: the solver's training decision values (from its gradient) spare a kernel product with
            # the support vectors; only rows left out of the problem (weight 0) are predicted (20,000 x 10, every
            # 20th row weighted 0: 542 -> ~420 ms, the time without weights)
            rows = np.asarray(members[0][0])
            dec = np.empty((n, 1))
            dec[rows, 0] = -np.asarray(fits[0].extra["train_decision"], dtype=np.float64)
            if rows.shape[0] < n:
                out = np.ones(n, dtype=bool)
                out[rows] = False
                rest = np.flatnonzero(out)
                dec[rest] = self._by_row_chunks(X[rest], lambda d: d).reshape(-1, 1)
        if (
            dec is None
            and n_classes > 2
            and (arrays is not None or all(f.extra.get("train_decision") is not None for f in fits))
        ):
            # (break_ties too: its scores are the votes plus confidences within (-1/3, 1/3), so a class that wins
            # all its k-1 pairs is still the arg-max; before, break_ties predicted every training row: 10 classes
            # of 800 rows, 16 features, fit 40 -> 17 ms)
            self.train_error_ = self._train_error_by_votes(X, y_idx, fits, members, row_counts)
        else:
            pred = self._predict_from_ovo(dec) if dec is not None else self._by_row_chunks(X, self._predict_from_ovo)
            self.train_error_ = _error_share(pred != self.classes_[y_idx], row_counts)
        if arrays is None or not bool(np.all(arrays["converged"])):
            warn_not_converged(self.tol, fits, stacklevel=4)

    def _train_error_by_votes(self, X, y_idx, fits, members, row_counts=None):
        """The voting rule's training error, with kernel products only where needed.

        A training point of class c takes part in the k-1 pairs (c, e), whose solvers
        give its decision values for free (from their gradients).  If c wins all of
        them, c has k-1 votes and every other class at most k-2: the vote picks c,
        whatever the other pairs say.  Only the points that lose some pair of their
        own class (or were left out of a pair, zero weight) need the decision values
        of every pair, computed from the support vectors."""
        n, k = X.shape[0], self.classes_.shape[0]
        arrays = getattr(fits, "arrays", None)
        if arrays is not None:  # the compiled pairs' flat arrays (solver's order, first class first in each pair)
            wins = np.zeros(n, dtype=np.int64)
            pair_wins(arrays["rows"], arrays["decision"], arrays["offsets"], arrays["n_first"], wins)
        else:
            flat = getattr(members, "rows_flat", None) is not None
            rows = members.rows_flat if flat else np.concatenate([r for r, _ in members])
            decision = np.concatenate([f.extra["train_decision"] for f in fits])
            first = decision > 0  # the vote: first class
            own_first = (members.ysub_flat if flat else np.concatenate([ysub for _, ysub in members])) > 0
            wins = np.bincount(rows[first == own_first], minlength=n)
        rest = np.flatnonzero(wins < k - 1)
        if rest.size == 0:
            return 0.0
        wrong = np.zeros(n, dtype=bool)
        wrong[rest] = self._by_row_chunks(X[rest], self._predict_from_ovo) != self.classes_[y_idx[rest]]
        return _error_share(wrong, row_counts)

    def _w_norm_of(self, fit, rows, ysub, C_all, X, kern):
        """||w|| in feature space of one binary problem."""
        if "w_norm" in fit.extra:
            return float(fit.extra["w_norm"])
        if fit.alpha is None:
            return float(np.sqrt(fit.w @ fit.w))
        a = fit.alpha
        formulation = getattr(self, "formulation", None)
        if formulation in ("l1", "hard", "l2"):
            # objective = 1/2 ||w||^2 [+ 1/2 sum a^2/C for l2] - sum a
            wsq = 2.0 * (fit.objective + a.sum())
            if formulation == "l2":
                wsq -= np.sum(a * a / C_all[rows])
        else:
            sv = rows[a > 0]
            c = (a * ysub)[a > 0]
            if self.kernel == "precomputed":
                wsq = float(c @ (np.asarray(X[np.ix_(sv, sv)]) @ c))
            else:
                wsq = float(c @ kern.mmv(X[sv], X[sv], c))
        return float(np.sqrt(max(wsq, 0.0)))

    # ----------------------------------------------------------- probability
    def _fold_plans(self, members):
        """The probability folds of every pair from ``random_state``, one permutation each (as LIBSVM;
        :func:`maxmargin.probability.fold_permutations`), kept as permutations: :func:`maxmargin.probability.plan_of`
        cuts one into folds where a pair needs them as row sets (many classes have tens of thousands of
        pairs: the compiled route takes each row's fold, :func:`maxmargin.solvers.ovo_folds.layout_folds`)."""
        rng = check_random_state(self.random_state)
        return probability.fold_permutations([rows.shape[0] for rows, _ in members], rng)

    def _fit_probability(self, X, fits, members, pairs, C_all, kern, precomputed, plans):
        """Platt's sigmoid per binary problem from 5-fold cross-validated decision
        values (see :mod:`maxmargin.probability`) on the folds ``plans``; a fit that carries
        ``cv_decision`` (its folds were solved with it, :meth:`_fit_pairs_compiled`) gives them."""
        n_pairs = len(pairs)
        probA = np.zeros(n_pairs)
        probB = np.zeros(n_pairs)
        report = report_of(self)
        report.probability_begin(n_pairs)
        sigmoids = getattr(fits, "sigmoids", None)
        if sigmoids is not None:  # every pair, its folds and its sigmoid solved by the compiled route
            self.probA_, self.probB_ = sigmoids
            for p_no in range(n_pairs):
                report.probability_pair_done(p_no)
            report.probability_end()
            return
        stopped = any(f.status == "callback" for f in fits)
        if stopped:
            warnings.warn(
                "the fit was stopped by the callback: the probability sigmoids are fitted on the "
                "training decision values (no cross-validation)",
                ConvergenceWarning,
                stacklevel=3,
            )
        workers = probability.fold_workers()

        def one(p_no, inner):
            fit, (rows, ysub) = fits[p_no], members[p_no]
            Xs = self._subset(X, rows, precomputed)
            if stopped:
                dec = probability.held_out_decision(
                    Xs, kern, np.arange(rows.shape[0]), np.arange(rows.shape[0]), fit, ysub
                )
            else:
                extra = getattr(fit, "extra", None) or {}
                dec = self._cv_decision_values(
                    Xs,
                    ysub,
                    C_all[rows],
                    kern,
                    precomputed,
                    fit,
                    probability.plan_of(plans[p_no]),
                    inner,
                    extra.pop("gram", None),
                )
            probA[p_no], probB[p_no] = probability.sigmoid_train(dec, ysub)
            report.probability_pair_done(p_no)

        rest = list(range(n_pairs))
        if not stopped:
            ready = [p for p in rest if getattr(fits[p], "cv_decision", None) is not None]
            if ready:  # the compiled route's pairs: all sigmoids in one compiled call
                decs = [fits[p].cv_decision for p in ready]
                offsets = np.concatenate([[0], np.cumsum([d.shape[0] for d in decs])])
                probA[ready], probB[ready] = probability.sigmoid_train_many(
                    np.concatenate(decs), np.concatenate([members[p][1] for p in ready]), offsets
                )
                for p_no in ready:
                    report.probability_pair_done(p_no)
            rest = [p for p in rest if getattr(fits[p], "cv_decision", None) is None]
        with warnings.catch_warnings(), one_blas_thread():
            warnings.simplefilter("ignore", ConvergenceWarning)
            if workers > 1 and len(rest) > 1 and not stopped:  # pairs on threads, their folds one by one
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(max_workers=min(workers, len(rest))) as pool:
                    for f in [pool.submit(one, p_no, 1) for p_no in rest]:
                        f.result()
            else:  # one pair: its folds on threads
                for p_no in rest:
                    one(p_no, workers)
        report.probability_end()
        self.probA_ = probA
        self.probB_ = probB

    def _cv_decision_values(self, Xs, ysub, bounds, kern, precomputed, fit, plan, workers, gram=None):
        """The cross-validated decision values of one binary problem (Platt's data) on the
        folds ``plan`` (:func:`maxmargin.probability.fold_plan`), ``workers`` folds at a time.

        Where the folds are SMO problems over the pair's rows (:meth:`_fold_problem`), they
        start from the full fit's multipliers (SVC; :meth:`_folds_warm_start`) and share the
        kernel rows of its support vectors (:class:`maxmargin.probability.FoldRows`), or every
        kernel value where the full fit computed the whole matrix ``gram``
        (:class:`maxmargin.probability.WholeGram`); each
        fold's result depends on its rows only, so the model is the same bit for bit whatever
        the number of threads.  The caller holds BLAS to one thread and silences the folds'
        ConvergenceWarnings."""
        perm = None if (precomputed or plan is None or gram is not None) else probability.class_groups(ysub)
        if perm is not None:  # the folds on the rows grouped by class; the values come back in the pair's order
            Xs, ysub, bounds, fit, plan = probability.grouped(perm, Xs, ysub, bounds, fit, plan)
            dec = self._cv_decision_values(Xs, ysub, bounds, kern, precomputed, fit, plan, workers)
            out = np.empty_like(dec)
            out[perm] = dec
            return out
        options = self._solver_options(with_callback=False)
        options["verbose"] = False
        options["tol"] = probability.fold_tol(self.tol)
        whole = np.arange(ysub.shape[0])
        n_sv = int(np.count_nonzero(fit.alpha)) if fit.alpha is not None else 0
        posed = self._fold_problem(Xs, ysub, bounds, kern, whole, n_sv, gram is not None) is not None
        shared = starts = None
        warm = fit.alpha if (fit.alpha is not None and self._folds_warm_start()) else None
        if posed and gram is not None:
            shared = probability.WholeGram(gram)
        elif posed and fit.alpha is not None and kern.name != "callable":
            shared = probability.FoldRows(Xs, kern, fit.alpha, bounds, self.cache_size, workers)
        if shared is not None and warm is not None and plan is not None:
            found = shared.starts(plan, warm, ysub, bounds)
            if found is not None:  # each fold's start, by the id of its training rows in the plan
                starts = {id(train): st for (train, _), st in zip(plan, found)}
        # the batched folds (warm 1-norm C-SVC) start from the full fit's gradient, less the held-out rows
        full_grad = held = None
        if warm is not None and not posed and self._folds_batched(Xs, kern, n_sv) and "train_decision" in fit.extra:
            full_grad = ysub * (fit.extra["train_decision"] + fit.rho) - 1.0
            if probability.rows_are_dear(Xs, kern):  # the support vectors' rows, computed once for every fold
                n_fold = Xs.shape[0] - Xs.shape[0] // probability.N_FOLDS
                held = probability.HeldRows(Xs, kern, warm, bounds, self.cache_size, n_fold)
                if held.sv.size == 0:
                    held = None

        def fit_fold(train, alpha0):
            problem = self._fold_problem(Xs, ysub, bounds, kern, train, n_sv, gram is not None)
            if problem is None:
                opts = options
                if full_grad is not None and alpha0 is not None:
                    alpha0, g0 = probability.fold_start(Xs, kern, ysub, warm, full_grad, train, held=held)
                    opts = dict(options, grad0=g0)
                    if held is not None:
                        opts.update(shared_rows=(held.rows, held.slot[train], train), cache_size=held.fold_cache_size())
                return self._fit_pair(Xs, ysub[train], bounds[train], kern, opts, alpha0, rows=train)
            start = starts.get(id(train)) if starts is not None and alpha0 is not None else None
            with contextlib.ExitStack() as stack:
                pool = stack.enter_context(shared.pool()) if shared is not None else smo.KernelRowPool(self.cache_size)
                stack.enter_context(smo.kernel_row_pool(pool))
                return self._fit_fold_problem(problem, options, alpha0, start)

        if isinstance(shared, probability.WholeGram):
            held = shared
        elif held is None and shared is not None and shared.sv.size and probability.rows_are_dear(Xs, kern):
            # where kernel values are dear, the SMO folds' held-out values read the shared rows of the full fit's
            # support vectors (elsewhere reading those long rows at scattered columns costs more than computing)
            held = shared
        return probability.cv_decision_values(
            fit_fold,
            Xs,
            ysub,
            kern,
            None,
            alpha_full=warm,
            full_fit=fit,
            workers=workers if posed else 1,
            plan=plan,
            held=held,
        )

    def _folds_warm_start(self):
        """Whether a fold may start from the full fit's multipliers (restricted to its rows)."""
        return False

    def _fold_problem(self, X, y, bounds, kern, train, n_sv=0, whole_gram=False):
        """The dual of a cross-validation fold as a problem over all rows of ``X`` with
        ``index = train``, or None where the fold must go through ``_fit_pair`` (``n_sv``: the full
        fit's support vectors; ``whole_gram``: the folds read the whole kernel matrix)."""
        return None

    def _fit_fold_problem(self, problem, options, alpha0, start=None):  # pragma: no cover - with _fold_problem
        raise NotImplementedError

    def _check_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes), columns in the order of ``classes_``.

        Platt scaling of each one-vs-one decision value, coupled for several
        classes (Wu, Lin & Weng 2004); see :mod:`maxmargin.probability`, which also
        says exactly when ``argmax(predict_proba)`` and ``predict`` can disagree
        (use ``predict_from_proba=True`` to make them agree).  On a dask collection:
        a dask array, block by block.
        """
        if scaleout.is_dask(X):
            return scaleout.blockwise(self, "predict_proba", X)
        X = self._validate_for_predict(X)
        if not self._has_proba():
            raise NotFittedError("predict_proba is not available: the model was fitted with probability=False")
        return self._by_row_chunks(X, self._proba_from_ovo)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def _has_proba(self):
        probA = getattr(self, "probA_", None)
        return probA is not None and np.size(probA) > 0

    def _proba_from_ovo(self, dec):
        if self.classes_.shape[0] == 2:
            dec = -dec  # pair orientation: positive for classes_[0]
        return probability.probabilities_from_ovo(dec, self.probA_, self.probB_)

    # --------------------------------------------------------------- predict
    def _ovo_decision(self, X):
        """One-vs-one decision values (n, n_pairs); for two classes positive means classes_[1]."""
        n_classes = self.classes_.shape[0]
        n = X.shape[0]
        n_pairs = n_classes * (n_classes - 1) // 2
        if weights_pay(self.kernel, X, self.support_.shape[0], n_classes):
            W = linear_weights(self.dual_coef_, self.support_vectors_, self.n_support_)
            return (np.asarray(X @ W.T) + self.intercept_).reshape(n, max(n_pairs, 1))
        out = np.empty((n, n_pairs))
        starts = np.concatenate([[0], np.cumsum(self.n_support_)])
        small = n * self.support_.shape[0] <= SMALL_BLOCK_VALUES
        if n_classes == 2 and self.kernel == "precomputed" and not small:
            # one matrix-vector product over the whole kernel row (coefficient 0 off the support vectors), not
            # a copy of the support vectors' columns first: 3,000 x 3,000, 1,417 support vectors: 9.6 -> 3.4 ms
            coef = np.zeros(X.shape[1])
            coef[self.support_] = self.dual_coef_[0]
            out[:, 0] = np.asarray(X @ coef).reshape(n) + self.intercept_[0]
            return out
        if n_classes == 2 and self.support_.shape[0] and self.kernel != "precomputed" and not small:
            # no kernel block stored: the fused loop of the gradient rebuild where it applies
            # (the support vectors as stored: a dense copy of sparse ones went back to CSR in kernel_times)
            SV = self.support_vectors_
            decision = kernel_times(
                self._get_kernel(), X, SV, self.dual_coef_[0], fused_dense=FUSED_DENSE_PREDICT, pool_when_busy=True
            )
            out[:, 0] = decision + self.intercept_[0]
            return out
        SV = self._sv_for_blocks(X)  # once per call, not per block
        rows = block_rows_for(max(self.support_.shape[0], 1))
        # many classes: each row's pair values from its class sums (votes.pair_values_from_kernel), no M
        CT = np.ascontiguousarray(self.dual_coef_.T) if n_classes >= votes.FUSED_MIN_CLASSES else None
        for s in range(0, n, rows):
            e = min(s + rows, n)
            Xb = X[s:e]
            if self._linear_w is not None and self.support_.shape[0] == 0:
                out[s:e] = np.asarray(Xb @ self._linear_w.T) + self.intercept_
                continue
            with one_blas_thread() if CT is not None else contextlib.nullcontext():
                # (BLAS's idle threads would spin on the cores the compiled loop uses next)
                Kb = self._kernel_to_sv(Xb, SV) if self.support_.shape[0] else np.zeros((e - s, 0))
            if n_classes == 2:
                out[s:e, 0] = Kb @ self.dual_coef_[0] + self.intercept_[0]
                continue
            if CT is not None:
                votes.pair_values_from_kernel(Kb, CT, starts, self.intercept_, out[s:e])
                continue
            # per class a, the products of its support vectors' kernel columns with their
            # coefficients in every pair, one matrix product each: M[a][:, c] (c = b - 1 for
            # pairs (a, b), c = b for pairs (b, a)); pair (a, b) is M[a][:, b-1] + M[b][:, a]
            M = np.empty((n_classes, e - s, n_classes - 1))
            # small products: BLAS threads cost more than they give (and the limit 13 us a call)
            with contextlib.nullcontext() if small else one_blas_thread():
                for a in range(n_classes):
                    sa = slice(starts[a], starts[a + 1])
                    np.matmul(Kb[:, sa], self.dual_coef_[:, sa].T, out=M[a])
            votes.values_from_class_sums(M, self.intercept_, out[s:e])
        return out

    def _fused_ok(self):
        """Whether :meth:`_votes_from_kernel` may stand in for :meth:`_ovo_decision` (a model whose decision
        values are those of its support vectors)."""
        return True

    def _votes_from_kernel(self, X, scores):
        """With many classes (:data:`maxmargin.votes.FUSED_MIN_CLASSES`), the index of each row's class by
        one-vs-one votes (``scores=False``) or the one-vs-rest scores (``scores=True``), straight from blocks of
        kernel values (:func:`maxmargin.votes.labels_from_kernel`): the k(k-1)/2 pair values of a row are never
        stored.  None where the usual route applies (fewer classes, no support vectors, predicting through ``w``,
        or a model routed by parts)."""
        k = self.classes_.shape[0]
        n_sv = self.support_.shape[0]
        if k < votes.FUSED_MIN_CLASSES or n_sv == 0 or not self._fused_ok() or weights_pay(self.kernel, X, n_sv, k):
            return None
        n = X.shape[0]
        starts = np.concatenate([[0], np.cumsum(self.n_support_)])
        SV = self._sv_for_blocks(X)
        CT = np.ascontiguousarray(self.dual_coef_.T)
        out = np.empty((n, k)) if scores else np.empty(n, dtype=np.int64)
        rows = block_rows_for(n_sv)
        for s in range(0, n, rows):
            e = min(s + rows, n)
            with one_blas_thread():  # BLAS's idle threads spin on the cores the compiled loops use next
                Kb = self._kernel_to_sv(X[s:e], SV)
            if scores:
                out[s:e] = votes.ovr_from_kernel(Kb, CT, starts, self.intercept_)
            else:
                out[s:e] = votes.labels_from_kernel(Kb, CT, starts, self.intercept_)
        return out

    def decision_function(self, X):
        """Signed distances (in function units) to the separating surfaces.

        Two classes: shape (n,), positive for ``classes_[1]``.  More classes:
        (n, n_classes) for ``decision_function_shape='ovr'``, else the
        one-vs-one values (n, n_classes*(n_classes-1)/2), positive for the
        first class of each pair.  On a dask collection: a dask array, block by block.
        """
        if scaleout.is_dask(X):
            return scaleout.blockwise(self, "decision_function", X)
        X = self._validate_for_predict(X)
        if self.classes_.shape[0] > 2 and self.decision_function_shape == "ovr":
            scores = self._votes_from_kernel(X, scores=True)
            if scores is not None:
                return scores
            return self._by_row_chunks(X, lambda dec: ovr_from_ovo(dec, self.classes_.shape[0]))
        dec = self._ovo_decision(X)
        if self.classes_.shape[0] == 2:
            return dec[:, 0]
        return dec

    def _by_row_chunks(self, X, reduce):
        """``reduce(one-vs-one decision values)`` over blocks of rows of ``X``, stacked: with many
        classes the values take 8 k(k-1)/2 bytes a row (300 classes: 359 KB; 14 GB for 40k rows),
        so they are formed at most :data:`OVO_BLOCK_BYTES` at a time."""
        n_pairs = max(self.classes_.shape[0] * (self.classes_.shape[0] - 1) // 2, 1)
        rows = max(1, int(OVO_BLOCK_BYTES // (8 * n_pairs)))
        n = X.shape[0]
        if n <= rows:
            return reduce(self._ovo_decision(X))
        return np.concatenate([reduce(self._ovo_decision(X[s : s + rows])) for s in range(0, n, rows)])

    def _predict_from_ovo(self, dec):
        n_classes = self.classes_.shape[0]
        if n_classes == 2:
            # LIBSVM (and scikit-learn): its value -dec > 0 picks classes_[0], so dec = 0 picks classes_[1]
            return self.classes_[(dec[:, 0] >= 0).astype(int)]
        if self.break_ties and self.decision_function_shape == "ovr":
            return self.classes_[np.argmax(ovr_from_ovo(dec, n_classes), axis=1)]
        # one vote a pair: to its first class a where the value is > 0, else to b (LIBSVM), compiled
        return self.classes_[votes.labels_by_votes(dec, n_classes)]

    def predict(self, X):
        """Class labels: the sign for two classes, one-vs-one voting otherwise
        (ties go to the class listed first, as in LIBSVM), or the arg-max of the
        one-vs-rest scores when ``break_ties=True``.  With
        ``predict_from_proba=True``: ``argmax(predict_proba(X))``.  On a dask
        collection: a dask array, block by block."""
        if scaleout.is_dask(X):
            return scaleout.blockwise(self, "predict", X)
        X = self._validate_for_predict(X)
        if self.predict_from_proba and self.probability and self._has_proba():
            return self._by_row_chunks(X, lambda dec: self.classes_[np.argmax(self._proba_from_ovo(dec), axis=1)])
        by_scores = self.break_ties and self.decision_function_shape == "ovr"
        fused = self._votes_from_kernel(X, scores=by_scores)
        if fused is not None:
            return self.classes_[np.argmax(fused, axis=1) if by_scores else fused]
        return self._by_row_chunks(X, self._predict_from_ovo)

    # ---------------------------------------------------------- properties
    @property
    def coef_(self):
        """Weights ``w`` in input space, one row per binary problem (linear kernel only)."""
        check_is_fitted(self)
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        if self._linear_w is not None and self.support_.shape[0] == 0:
            return self._linear_w.copy()
        return linear_weights(self.dual_coef_, self.support_vectors_, self.n_support_)

    @property
    def n_iter(self):  # pragma: no cover - convenience alias
        return self.n_iter_


class SVC(BaseSVMClassifier):
    """C-support vector classification (and the documents' other formulations).

    Parameters
    ----------
    C : float, default=1.0
        Penalty of the slack (must be > 0). Ignored by ``formulation='hard'``.
    kernel : {'linear', 'poly', 'rbf', 'sigmoid', 'precomputed'} or callable, default='rbf'
    degree : int, default=3
        Degree of the polynomial kernel.
    gamma : {'scale', 'auto', 'median'} or float, default='scale'
        Kernel coefficient; ``'median'`` sets sigma to the median pairwise distance
        of the training data (seed 002's ``gaussianKernel[fTr]``).
    coef0 : float, default=0.0
    shrinking : bool, default=True
    probability : bool, default=False
        Fit Platt sigmoids on 5-fold cross-validated decision values (inside
        ``fit``: five extra fits per binary problem, warm-started from the full fit
        and stopped at ``10 * tol``) to enable
        ``predict_proba`` / ``predict_log_proba`` (attributes ``probA_``,
        ``probB_``); see :mod:`maxmargin.probability`.
    tol : float, default=1e-3
        Stopping tolerance on the maximal KKT violation.
    cache_size : float, default=200
        Kernel-row cache in MB.
    class_weight : dict or 'balanced', default=None
        Multiplies C per class.
    verbose : bool, default=False
    max_iter : int, default=-1
        Solver iterations per binary problem; -1 for no limit.
    decision_function_shape : {'ovr', 'ovo'}, default='ovr'
    break_ties : bool, default=False
    random_state : int, RandomState or None, default=None
        Seeds the folds of the probability cross-validation (``probability=True``):
        the same integer gives the same probabilities.
    formulation : str, default='l1'
        See :data:`maxmargin.formulations.FORMULATIONS`.
    solver : str, default='auto'
        See :data:`maxmargin.formulations.SOLVERS`. ``'auto'`` takes the batched
        working-set solver for binary problems of 4000 points or more and SMO
        below (the natural solver for 'l2-simplex' and 'zero-one').
    solver_options : dict or None, default=None
        Options of the chosen solver or bias rule, passed through to
        :func:`maxmargin.formulations.fit_binary` (for example
        ``{'step': '2/(t+2)'}`` for Frank-Wolfe, ``{'bias': 'notebook'}``).
    sigma : float or None, default=None
        Gaussian width; when given, ``gamma = 1 / (2 sigma**2)`` and ``gamma`` is ignored.
    callback : callable or None, default=None
        Called during the fit with a dict (iteration, objective, violation, tol,
        subproblem, n_subproblems, elapsed); returning False stops the fit.
    time_limit : float or None, default=None
        Seconds per binary problem after which the solver stops.
    warm_start : bool, default=False
        Start each binary problem from the previous fit's multipliers (same
        training rows and classes), scaled by ``C_new / C_old`` and made feasible:
        and, with the SMO solver, the kernel rows computed by the previous fit are
        kept (at most ``cache_size`` MB, on the estimator, never pickled) and
        reused while data and kernel stay the same: a grid over C costs far less
        than independent fits (gamma changes reuse the multipliers only; the
        batched solver, which ``'auto'`` picks from 4000 points on, gains less).
        Other training rows or classes fall back to a cold start.
    predict_from_proba : bool, default=False
        With ``probability=True``: ``predict`` returns ``argmax(predict_proba)``,
        so the two always agree (by default ``predict`` votes on the decision
        values, as LIBSVM does; :mod:`maxmargin.probability` says when they differ).

    Attributes
    ----------
    support_, support_vectors_, n_support_, dual_coef_, intercept_, classes_,
    coef_ (linear kernel), n_iter_, fit_status_, shape_fit_, probA_, probB_ :
        as in scikit-learn (``probA_``/``probB_``: one sigmoid per one-vs-one pair,
        ``P(first class) = 1/(1 + exp(A d + B))`` of the pair's decision value
        ``d``, positive for its first class; empty without ``probability``).
    objective_ : ndarray (n_pairs,)
        Dual objective value of each binary problem (a minimum).
    margin_ : ndarray (n_pairs,)
        Minimal geometric margin of each binary problem, by the formula of its
        formulation (seed 002): ``1/||w||`` for the hard margin,
        ``(1 - max_i xi_i)/||w|| = min_i y_i f(x_i)/||w||`` for soft margins
        (negative when the training data is not separated).
    w_norm_ : ndarray (n_pairs,)
        ``||w||`` in feature space; ``1/w_norm_`` is the half-width of the margin band.
    loo_bound_ : float
        #SV / n, the leave-one-out error bound (seed 002).
    duality_gap_ : ndarray (n_pairs,)
        Duality gap where the solver computes one, else NaN.
    train_error_ : float
        Fraction of training points misclassified (by the voting rule).
    fit_time_ : float
        Seconds spent in ``fit``.
    """

    def __init__(
        self,
        *,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        probability=False,
        tol=1e-3,
        cache_size=200,
        class_weight=None,
        verbose=False,
        max_iter=-1,
        decision_function_shape="ovr",
        break_ties=False,
        random_state=None,
        formulation="l1",
        solver="auto",
        sigma=None,
        callback=None,
        time_limit=None,
        warm_start=False,
        predict_from_proba=False,
        solver_options=None,
    ):
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state
        self.formulation = formulation
        self.solver = solver
        self.sigma = sigma
        self.callback = callback
        self.time_limit = time_limit
        self.warm_start = warm_start
        self.predict_from_proba = predict_from_proba
        self.solver_options = solver_options

    #: besides the base's: the routed level-k model of ``solver='divide'`` with ``early_stop``
    #: (None otherwise; see :mod:`maxmargin.solvers.divide`)
    _state_attributes = BaseSVMClassifier._state_attributes + _EARLY_ATTRIBUTES

    def _check_box_params(self):
        _check_positive("C", self.C)
        _check_bool("warm_start", self.warm_start)
        formulations.check_pair(self.formulation, self.solver)
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValueError(f"solver_options must be a dict or None, got {self.solver_options!r}")

    def _set_model(self, X, y_idx, fits, members, pairs, n, C_all, kern, row_counts=None):
        set_early_model(self, None, None)  # nothing left from an earlier fit
        super()._set_model(X, y_idx, fits, members, pairs, n, C_all, kern, row_counts)
        early = fits[0].extra.get("early") if len(fits) == 1 else None
        set_early_model(self, early, members[0][0] if early is not None else None)

    @property
    def coef_(self):
        """Weights ``w`` in input space, one row per binary problem (linear kernel only)."""
        if getattr(self, "_early_rho", None) is not None:
            raise AttributeError("coef_ is not available for the routed early model (one w per part)")
        return BaseSVMClassifier.coef_.fget(self)

    def _ovo_decision(self, X):
        if getattr(self, "_early_rho", None) is None:
            return super()._ovo_decision(X)
        return early_decision(self, X)

    def _fused_ok(self):
        return getattr(self, "_early_rho", None) is None

    def _upper_bounds(self, weights):
        return self.C * weights

    def _merges_duplicates(self):
        early = self.solver == "divide" and (self.solver_options or {}).get("early_stop") is not None
        return (
            self.formulation == "l1"
            and self.solver in ("auto", "smo", "ipm", "batched", "divide")
            and not early  # the routed model's parts hold the variables as solved
            and not self.probability
            and not self.warm_start
            and self._named_row_kernel()
        )

    def _pairs_use_smo(self):
        if self.solver_options and "callback" in self.solver_options:
            return False
        if self.solver == "divide":  # its small pairs, solved whole by SMO
            return self._divide_smo_below() > 0
        return formulations.resolve_solver(self.formulation, self.solver, 1) == "smo"

    def _pairs_compile(self):
        if self.solver == "divide":  # its pairs solved whole by SMO (_divide_smo_below) are SMO's pairs
            from .solvers import divide

            own = set(divide.OWN_OPTIONS) - {"early_stop"}  # early_stop: two classes only (_fit_pair says so)
            opts = self.solver_options or {}
            return self.formulation == "l1" and set(opts) <= own and self._divide_smo_below() > 0
        return self.formulation == "l1" and self.solver in ("auto", "smo") and not self.solver_options

    def _fit_pair(self, X, y, bounds, kern, options, alpha0=None, rows=None):
        """One binary problem on rows ``rows`` of ``X`` (None: every row), through the registry."""
        if alpha0 is not None:
            options = dict(options, alpha0=alpha0)
        if self.solver_options:
            options = dict(options, **self.solver_options)
            if options.get("early_stop") is not None and (len(self.classes_) > 2 or self.probability):
                raise ValueError(
                    "solver_options['early_stop'] (solver='divide') routes each point to one part's "
                    "binary model: it supports two classes only and probability=False; leave it None "
                    "for multi-class data or probabilities"
                )
        return formulations.fit_binary(X, y, bounds, kern, self.formulation, self.solver, rows=rows, **options)

    def _folds_warm_start(self):
        return self.formulation == "l1" and self.solver in ("auto", "smo", "batched") and not self.solver_options

    def _folds_batched(self, X, kern, n_sv=0):
        """Whether the cross-validation folds of a binary problem on the rows ``X`` go to the batched solver
        (``solver='auto'`` only): where the folds are large enough for 'auto' to pick it and SMO's one kernel row
        at a time is dear -- sparse rows (a row is a merge per pair of rows) or many features -- or where the
        full fit's ``n_sv`` support vectors' rows do not all fit in the folds' shared share of ``cache_size``
        (:func:`maxmargin.probability.shared_slots`), so that SMO's folds would recompute rows again and again.
        Measured (session 5; sparse40k, 8000 x 300 one-hot, 5 warm folds, each solver timed alone): SMO 6.7 s,
        batched 2.1 s.  Session 12, dense ijcnn1 (22 features), whole probability fits with SMO / batched
        folds: 12,000 rows 0.98 / 1.13 s (the support vectors' rows fit), 20,000 rows 2.31 / 2.21 s (1,349
        support vectors, 982 shared slots), all 49,990 rows 12.5 / 6.9 s."""
        if self.solver != "auto" or kern.name in ("precomputed", "callable"):
            return False
        n_fold = X.shape[0] - X.shape[0] // probability.N_FOLDS
        if formulations.resolve_solver(self.formulation, "auto", n_fold) != "batched":
            # below the size rule, as the fit: the batched folds where kernel rows are dear
            large = formulations.resolve_solver(self.formulation, "auto", formulations.AUTO_BATCHED_MIN_N)
            return large == "batched" and formulations.rows_dear_for_smo(X, n_fold, kern)
        if sp.issparse(X) or X.shape[1] >= FOLDS_BATCHED_FEATURES:
            return True
        return n_sv > probability.shared_slots(X.shape[0], self.cache_size, probability.fold_workers())

    def _fold_problem(self, X, y, bounds, kern, train, n_sv=0, whole_gram=False):
        # SMO serves the folds also where the full fit took the batched solver: they start from
        # its multipliers and hold its support vectors' kernel rows (BaseSVMClassifier._cv_decision_values),
        # except where SMO's kernel rows are dear (_folds_batched) and not all in the whole matrix
        if self.formulation != "l1" or self.solver not in ("auto", "smo") or self.solver_options:
            return None  # other formulations, solvers and options: through formulations.fit_binary
        if not whole_gram and self._folds_batched(X, kern, n_sv):
            return None  # through fit_binary, 'auto': the batched solver, warm-started
        m = train.shape[0]
        return DualProblem(
            X=X,
            kernel=kern,
            y=y[train],
            p=-np.ones(m),
            upper=bounds[train].copy(),
            index=train.astype(np.int64),
            shift=np.zeros(m),
        )

    def _fit_fold_problem(self, problem, options, alpha0, start=None):
        if start is not None:  # probability.FoldRows.starts: the start below and its gradients
            problem.alpha0 = start[0]
            options = dict(options, start=start[1:])
        elif alpha0 is not None:  # y'alpha = 0 restored on few multipliers (probability.restore_equality)
            problem.alpha0 = probability.restore_equality(alpha0, problem.y)
        sol = smo.solve(problem, **options)  # 'l1' + 'smo': the same solution and rho as fit_binary
        return formulations.BinaryFit(
            alpha=sol.alpha,
            rho=float(sol.rho),
            objective=float(sol.objective),
            n_iter=int(sol.n_iter),
            violation=float(sol.violation),
            converged=bool(sol.converged),
            status=sol.status,
        )


class NuSVC(BaseSVMClassifier):
    r"""nu-support vector classification (Schoelkopf et al. 2000), LIBSVM's way.

    Each one-vs-one problem solves (:mod:`maxmargin.problem.nu_svc_problem`)

    .. math::

        \min_\alpha \tfrac12\alpha^TQ\alpha \quad\text{s.t.}\quad
        \sum_{y_i=+1}\alpha_i = \sum_{y_i=-1}\alpha_i = \tfrac{\nu}{2}\sum_i w_i,\;
        0 \le \alpha_i \le w_i

    (:math:`w_i` = sample weight times class weight, 1 by default) with the
    nu-variant of SMO (two equality constraints, see
    :mod:`maxmargin.solvers.smo`); dividing :math:`\alpha` and :math:`\rho` by the
    solver's :math:`r` gives the C-SVC solution with :math:`C = 1/r`, which is what
    ``dual_coef_`` / ``intercept_`` hold (as in LIBSVM and scikit-learn).  ``nu``
    is an upper bound on the fraction of margin errors and a lower bound on the
    fraction of support vectors.  It is feasible for classes :math:`a, b` only if
    :math:`\nu \le 2\min(n_a, n_b)/(n_a + n_b)` (weighted counts); otherwise
    ``fit`` raises ValueError.

    Parameters
    ----------
    nu : float in (0, 1], default=0.5
    kernel, degree, gamma, coef0, shrinking, probability, tol, cache_size, verbose,
    max_iter, decision_function_shape, break_ties, random_state, sigma, callback,
    time_limit, predict_from_proba :
        as in :class:`SVC`.
    solver : {'auto', 'smo', 'batched'}, default='auto'
        The nu-variant of SMO or of the batched working-set solver; 'auto' takes
        the batched one for binary problems of at least
        ``maxmargin.formulations.AUTO_BATCHED_MIN_N`` points, as :class:`SVC` does.
    class_weight : dict or 'balanced', default=None
        Multiplies the bounds (the weights :math:`w_i`) per class.  Unlike
        scikit-learn's NuSVC, which accepts and ignores it, the weights are used.

    Attributes
    ----------
    As :class:`SVC`; ``objective_`` is the C-SVC dual objective of the rescaled
    solution (LIBSVM's ``obj / r^2``).
    """

    def __init__(
        self,
        *,
        nu=0.5,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        probability=False,
        tol=1e-3,
        cache_size=200,
        class_weight=None,
        verbose=False,
        max_iter=-1,
        decision_function_shape="ovr",
        break_ties=False,
        random_state=None,
        sigma=None,
        callback=None,
        time_limit=None,
        predict_from_proba=False,
        solver="auto",
    ):
        self.nu = nu
        self.solver = solver
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state
        self.sigma = sigma
        self.callback = callback
        self.time_limit = time_limit
        self.predict_from_proba = predict_from_proba

    def _check_box_params(self):
        _check_nu(self.nu)
        formulations.check_solver("nu-svc", self.solver)

    def _upper_bounds(self, weights):
        return np.asarray(weights, dtype=np.float64)

    def _check_feasible(self, members, bounds, classes):
        def label(c):
            return repr(c.item() if hasattr(c, "item") else c)

        # a pair's classes are the whole classes (rows of weight 0 weigh nothing): the classes' weights once, then
        # every pair's limit at once (a loop over the pairs took 0.3 s of a 300-class fit's 0.65 s)
        pa, pb = pair_classes(classes.shape[0])
        class_w = np.empty(classes.shape[0])
        for b in range(1, classes.shape[0]):  # pair (0, b) holds class 0 first and class b second
            rows, ysub = members[b - 1]
            if b == 1:
                class_w[0] = float(bounds[rows][ysub > 0].sum())
            class_w[b] = float(bounds[rows][ysub < 0].sum())
        limit = 2.0 * np.minimum(class_w[pa], class_w[pb]) / (class_w[pa] + class_w[pb])
        bad = np.flatnonzero(self.nu > limit * (1 + 1e-12))
        if bad.size:
            p = int(bad[0])
            ca, cb, wa, wb = classes[pa[p]], classes[pb[p]], class_w[pa[p]], class_w[pb[p]]
            raise ValueError(
                f"nu={self.nu!r} is infeasible for classes {label(ca)} and {label(cb)}: nu-SVC needs "
                f"nu <= 2 min(n_a, n_b) / (n_a + n_b) = {limit[p]:.6g} (weighted class sizes {wa:g} and {wb:g})"
            )

    def _pairs_use_smo(self):
        return self.solver in ("auto", "smo")

    def _merges_duplicates(self):
        # the class sums nu sum(w) / 2 are unchanged by merging and a group's sum has the box [0, its summed
        # weights] (dedup.py); the solution's 1/r scaling is undone for the split (_coef_scale)
        return not self.probability and self._named_row_kernel()

    def _coef_scale(self, fits):
        arrays = getattr(fits, "arrays", None)
        if arrays is not None:  # the compiled route's pairs (formulations.pairs.PairFits)
            r = np.asarray(arrays["r"], dtype=np.float64)
            return np.where(r > 0, 1.0 / np.where(r > 0, r, 1.0), 1.0)
        return np.array([1.0 / f.extra["r"] if f.extra.get("r", 0) > 0 else 1.0 for f in fits])

    def _check_fits(self, fits, pairs):
        """Warn where a pair's margin r is within the KKT violation its solver stopped at (r <= 0 raised already):
        r is the free multipliers' offset, known to about that violation, so its sign is the solver's rounding.
        The classes' reduced convex hulls (nearly) overlap and the C-SVC model with C = 1/r changes with ``tol``
        (4,000 noisy rows, 20 features, nu <= 0.5: r from 1e-5 at tol 1e-3 to 1e-8 at tol 1e-6, C from 1e5 to
        1e8; LIBSVM returns such models without a word).  Relative to the violation, not to ``tol``: kernel
        values of 1e-200 give a well-determined r of that size."""
        arrays = getattr(fits, "arrays", None)
        if arrays is not None and arrays.get("r") is not None:
            r = np.asarray(arrays["r"], dtype=np.float64)
            violation = np.asarray(arrays["violation"], dtype=np.float64)
        else:
            r = np.array([f.extra.get("r", np.inf) for f in fits], dtype=np.float64)
            # (SMO's nu-variant measures the violation of the nu-dual's KKT conditions; the QP's and the other
            # solvers' reports are not comparable with r: no warning for them)
            violation = np.array([f.violation if f.solver in ("smo", "batched") else 0.0 for f in fits])
        small = np.flatnonzero(np.isfinite(r) & (r <= violation))  # (a fit without r: none)
        if small.size:
            p = int(small[np.argmin(r[small])])
            ca, cb = (
                c.item() if hasattr(c, "item") else c for c in (self.classes_[pairs[p][0]], self.classes_[pairs[p][1]])
            )
            warnings.warn(
                f"nu-SVC's margin r = {r[p]:.3g} between classes {ca!r} and {cb!r} is within the solver's KKT "
                f"violation {violation[p]:.3g}"
                + (f" ({small.size} pairs of classes)" if small.size > 1 else "")
                + ": their reduced convex hulls (nearly) overlap, so the model (the C-SVC with C = 1/r) is "
                "ill-determined and changes with tol. A larger nu, or C-SVC (SVC), gives a well-determined model",
                UserWarning,
                stacklevel=3,
            )

    def _pairs_compile(self):
        # the pairs and their nu-variant in compiled code (ovo.solve_pairs with nu); probability=True's folds go
        # through the registry (the compiled folds are the C-SVC's).  300 classes of 10 rows: 12.8 s pair by pair
        # in Python (LIBSVM 0.6 s)
        return self.solver in ("auto", "smo") and not self.probability

    def _pairs_nu(self):
        return float(self.nu)

    def _fit_pair(self, X, y, bounds, kern, options, alpha0=None, rows=None):
        if alpha0 is not None:  # pragma: no cover - NuSVC has no warm start
            raise ValueError("NuSVC does not take a starting point")
        return formulations.fit("nu-svc", X, y, bounds, kern, self.solver, rows=rows, nu=self.nu, **options)

    def _fold_problem(self, X, y, bounds, kern, train, n_sv=0, whole_gram=False):
        problem = nu_svc_problem(X, kern, y[train], self.nu, bounds[train])
        problem.index = train.astype(np.int64)
        return problem

    def _fit_fold_problem(self, problem, options, alpha0, start=None):
        """Solve a nu-SVC fold problem from LIBSVM's start and rescale the solution by 1/r."""
        solver = formulations.resolve_solver("nu-svc", self.solver, problem.n_var)
        spec = solver_registry.spec(solver)
        passed, _ = solver_registry.split_options(solver, options)
        sol = spec.solve(problem, **passed)
        return formulations.get("nu-svc").rescale(problem, sol, self.nu, spec, details=False)
