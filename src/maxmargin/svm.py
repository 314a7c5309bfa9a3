"""Support vector classification with a scikit-learn API.

:class:`SVC` has the parameters and fitted attributes of ``sklearn.svm.SVC``
with the same meaning, so it can replace it in existing code, and adds:

* ``formulation`` and ``solver``: which SVM (hinge, hard margin, squared slack,
  ...) and which algorithm; see :mod:`maxmargin.formulations`;
* ``sigma``: the Gaussian width of the documents, ``gamma = 1 / (2 sigma^2)``;
* ``callback`` and ``time_limit``: watch or stop a long fit;
* fitted ``objective_``, ``margin_``, ``loo_bound_`` (seed 002's leave-one-out
  bound #SV/n), ``duality_gap_`` and ``train_error_``.

Multi-class problems are split one-vs-one as in LIBSVM: the binary problem of
classes ``a < b`` labels ``a`` as +1, and its decision value is positive for
``a``.  The public ``dual_coef_`` / ``intercept_`` follow scikit-learn's layout
exactly (for two classes, positive decision values mean ``classes_[1]``).
"""
from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import formulations
from .kernels import BLOCK_ROWS, make_kernel


def _check_positive(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def ovr_from_ovo(dec, n_classes):
    """One-vs-rest scores from one-vs-one decision values (scikit-learn's rule:
    votes plus confidences squashed into (-1/3, 1/3) to break ties)."""
    n = dec.shape[0]
    votes = np.zeros((n, n_classes))
    conf = np.zeros((n, n_classes))
    k = 0
    for a in range(n_classes):
        for b in range(a + 1, n_classes):
            d = dec[:, k]
            votes[:, a] += d > 0
            votes[:, b] += d <= 0
            conf[:, a] += d
            conf[:, b] -= d
            k += 1
    return votes + conf / (3 * (np.abs(conf) + 1))


class BaseSVMClassifier(ClassifierMixin, BaseEstimator):
    """Shared machinery of the kernel SVM classifiers (one-vs-one)."""

    #: fitted attributes a model file stores (see maxmargin.io.model)
    _state_attributes = (
        "classes_", "support_", "support_vectors_", "dual_coef_", "intercept_", "n_support_",
        "n_features_in_", "shape_fit_", "fit_status_", "n_iter_", "objective_", "margin_",
        "loo_bound_", "duality_gap_", "train_error_", "fit_time_", "_gamma", "_sparse", "_linear_w",
    )

    # ----------------------------------------------------------------- checks
    def _check_params(self):
        _check_positive("C", self.C)
        _check_positive("tol", self.tol)
        _check_positive("cache_size", self.cache_size)
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) or (
            self.max_iter < -1 or self.max_iter == 0
        ):
            raise ValueError(f"max_iter must be -1 (no limit) or a positive integer, got {self.max_iter!r}")
        _check_positive("time_limit", self.time_limit, allow_none=True)
        if self.decision_function_shape not in ("ovr", "ovo"):
            raise ValueError(
                f"decision_function_shape must be 'ovr' or 'ovo', got {self.decision_function_shape!r}"
            )
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"callback must be callable or None, got {self.callback!r}")
        if self.probability:
            raise NotImplementedError("probability=True is not available yet (issue 4)")
        formulations.check_pair(self.formulation, self.solver)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags

    # ------------------------------------------------------------------- fit
    def fit(self, X, y, sample_weight=None):
        """Fit the SVM on ``X`` (dense or sparse; the Gram matrix for a
        precomputed kernel) and labels ``y``."""
        self._check_params()
        t_start = time.perf_counter()
        X, y = validate_data(
            self, X, y, accept_sparse="csr", dtype=np.float64, order="C", accept_large_sparse=False
        )
        check_classification_targets(y)
        sparse = sp.issparse(X)
        if sparse:
            X.sort_indices()
        n = X.shape[0]
        if self.kernel == "precomputed" and X.shape[0] != X.shape[1]:
            raise ValueError(
                f"a precomputed kernel must be a square Gram matrix, got shape {X.shape}"
            )
        classes, y_idx = np.unique(y, return_inverse=True)
        if classes.shape[0] < 2:
            raise ValueError(
                f"the training labels contain only one class ({classes[0]!r}); "
                "a classifier needs at least two classes"
            )
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if np.any(sw < 0):
            raise ValueError(f"sample_weight must be non-negative; row {int(np.argmax(sw < 0))} is negative")
        cw = compute_class_weight(self.class_weight, classes=classes, y=y) if self.class_weight is not None \
            else np.ones(classes.shape[0])
        C_all = self.C * sw * cw[y_idx]

        self.classes_ = classes
        self._sparse = sparse
        kern = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X=X, sigma=self.sigma)
        self._gamma = float(kern.params[0]) if kern.code in (1, 2, 3) else 0.0

        n_classes = classes.shape[0]
        pairs = [(a, b) for a in range(n_classes) for b in range(a + 1, n_classes)]
        fits, members = [], []
        for p_no, (a, b) in enumerate(pairs):
            rows = np.flatnonzero(((y_idx == a) | (y_idx == b)) & (C_all > 0))
            if n_classes == 2:
                rows = np.flatnonzero(C_all > 0)
            ysub = np.where(y_idx[rows] == a, 1.0, -1.0)
            if np.unique(ysub).shape[0] < 2:
                raise ValueError(
                    f"after removing samples of zero weight, classes {classes[a]!r} and {classes[b]!r} "
                    "do not both have samples left"
                )
            Xs = X[rows][:, rows] if self.kernel == "precomputed" else X[rows]
            options = dict(
                tol=self.tol, max_iter=self.max_iter, shrinking=self.shrinking,
                cache_size=self.cache_size, verbose=bool(self.verbose), callback=self.callback,
                time_limit=self.time_limit,
            )
            if self.callback is not None:
                options["callback_info"] = {"subproblem": p_no, "n_subproblems": len(pairs)}
            options = {k: v for k, v in options.items() if v is not None or k in ("tol",)}
            fit = formulations.fit_binary(Xs, ysub, C_all[rows], kern, self.formulation, self.solver, **options)
            fits.append(fit)
            members.append((rows, ysub))
            if fit.status == "callback":
                break
        self._set_model(X, y_idx, fits, members, pairs, n, C_all, kern)
        self.fit_time_ = time.perf_counter() - t_start
        return self

    def _set_model(self, X, y_idx, fits, members, pairs, n, C_all, kern):
        n_classes = self.classes_.shape[0]
        n_pairs = len(pairs)
        coef_by_pair = []
        is_sv = np.zeros(n, dtype=bool)
        for fit, (rows, ysub) in zip(fits, members):
            if fit.alpha is None:
                coef_by_pair.append(None)
                continue
            c = np.zeros(n)
            c[rows] = fit.alpha * ysub
            coef_by_pair.append(c)
            is_sv[rows[fit.alpha > 0]] = True
        # support vectors ordered by class, then by index (LIBSVM / scikit-learn)
        order = np.lexsort((np.arange(n), y_idx))
        support = order[is_sv[order]]
        self.support_ = support.astype(np.int32)
        self.n_support_ = np.array([(y_idx[support] == k).sum() for k in range(n_classes)], dtype=np.int32)
        self.support_vectors_ = X[support] if self.kernel != "precomputed" else np.empty((0, 0))
        dual = np.zeros((max(n_classes - 1, 1), support.shape[0]))
        intercept = np.zeros(n_pairs)
        sv_class = y_idx[support]
        linear_w = None
        for p_no, ((a, b), fit) in enumerate(zip(pairs, fits)):
            c = coef_by_pair[p_no]
            intercept[p_no] = -fit.rho
            if c is None:
                if linear_w is None:
                    linear_w = np.zeros((n_pairs, X.shape[1]))
                linear_w[p_no] = fit.w
                continue
            csv = c[support]
            dual[b - 1, sv_class == a] = csv[sv_class == a]
            dual[a, sv_class == b] = csv[sv_class == b]
        if n_classes == 2:
            dual = -dual
            intercept = -intercept
            if linear_w is not None:
                linear_w = -linear_w
        self.dual_coef_ = dual
        self.intercept_ = intercept
        self._linear_w = linear_w
        self.n_iter_ = np.array([f.n_iter for f in fits], dtype=np.int32)
        self.objective_ = np.array([f.objective for f in fits])
        gaps = [f.gap for f in fits]
        self.duality_gap_ = np.array([np.nan if g is None else g for g in gaps])
        self.shape_fit_ = X.shape
        self.fit_status_ = 0 if all(f.converged for f in fits) else 1
        self.loo_bound_ = float(support.shape[0] / max(n, 1))
        # geometric margin per binary problem: 1/||w||, ||w||^2 from the dual objective
        margins = np.empty(len(fits))
        for p_no, (fit, (rows, ysub)) in enumerate(zip(fits, members)):
            margins[p_no] = self._margin_of(fit, rows, ysub, C_all, X, kern)
        self.margin_ = margins
        pred = self.predict(X)
        self.train_error_ = float(np.mean(pred != self.classes_[y_idx]))
        for fit in fits:
            if not fit.converged:
                warnings.warn(
                    f"the solver stopped before reaching tol={self.tol} ({fit.status}; "
                    f"maximal KKT violation {fit.violation:.3g} after {fit.n_iter} iterations); "
                    "the model is usable but not optimal",
                    ConvergenceWarning,
                    stacklevel=3,
                )
                break

    def _margin_of(self, fit, rows, ysub, C_all, X, kern):
        """Geometric margin 1/||w|| of one binary problem."""
        if "margin" in fit.extra:
            return float(fit.extra["margin"])
        if fit.alpha is None:
            nw = float(np.sqrt(fit.w @ fit.w))
            return 1.0 / nw if nw > 0 else np.inf
        a = fit.alpha
        if self.formulation in ("l1", "hard", "l2") and fit.objective is not None:
            # objective = 1/2 ||w||^2 [+ 1/2 sum a^2/C for l2] - sum a
            wsq = 2.0 * (fit.objective + a.sum())
            if self.formulation == "l2":
                wsq -= np.sum(a * a / C_all[rows])
        else:
            sv = rows[a > 0]
            c = (a * ysub)[a > 0]
            if self.kernel == "precomputed":
                wsq = float(c @ (np.asarray(X[np.ix_(sv, sv)]) @ c))
            else:
                wsq = float(c @ kern.mmv(X[sv], X[sv], c))
        return 1.0 / np.sqrt(wsq) if wsq > 0 else np.inf

    def _get_kernel(self):
        """The Kernel object of the fitted model (rebuilt from the parameters)."""
        kern = getattr(self, "_kernel_cache", None)
        if kern is None or getattr(self, "_kernel_cache_key", None) != (self.kernel, self._gamma,
                                                                       self.degree, self.coef0):
            kern = make_kernel(self.kernel, self._gamma, self.degree, self.coef0)
            self._kernel_cache = kern
            self._kernel_cache_key = (self.kernel, self._gamma, self.degree, self.coef0)
        return kern

    # --------------------------------------------------------------- predict
    def _validate_for_predict(self, X):
        check_is_fitted(self)
        shape = getattr(X, "shape", None)
        if self.kernel == "precomputed" and shape is not None and len(shape) == 2 and shape[1] != self.shape_fit_[0]:
            raise ValueError(
                f"X has {shape[1]} columns; a precomputed kernel at predict time needs one column "
                f"per training sample ({self.shape_fit_[0]})"
            )
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C", reset=False,
                          accept_large_sparse=False)
        if sp.issparse(X) != self._sparse and self._sparse:
            X = sp.csr_matrix(X)
        return X

    def _kernel_to_sv(self, X):
        """Kernel block between rows of X and the support vectors."""
        if self.kernel == "precomputed":
            return np.asarray(X[:, self.support_].toarray() if sp.issparse(X) else X[:, self.support_])
        return self._get_kernel()(X, self.support_vectors_)

    def _ovo_decision(self, X):
        """One-vs-one decision values (n, n_pairs); for two classes positive means classes_[1]."""
        n_classes = self.classes_.shape[0]
        n = X.shape[0]
        n_pairs = n_classes * (n_classes - 1) // 2
        out = np.empty((n, n_pairs))
        starts = np.concatenate([[0], np.cumsum(self.n_support_)])
        for s in range(0, n, BLOCK_ROWS):
            e = min(s + BLOCK_ROWS, n)
            Xb = X[s:e]
            if self._linear_w is not None and self.support_.shape[0] == 0:
                out[s:e] = np.asarray(Xb @ self._linear_w.T) + self.intercept_
                continue
            Kb = self._kernel_to_sv(Xb) if self.support_.shape[0] else np.zeros((e - s, 0))
            if n_classes == 2:
                out[s:e, 0] = Kb @ self.dual_coef_[0] + self.intercept_[0]
                continue
            k = 0
            for a in range(n_classes):
                sa = slice(starts[a], starts[a + 1])
                for b in range(a + 1, n_classes):
                    sb = slice(starts[b], starts[b + 1])
                    out[s:e, k] = (Kb[:, sa] @ self.dual_coef_[b - 1, sa] + Kb[:, sb] @ self.dual_coef_[a, sb]
                                   + self.intercept_[k])
                    k += 1
        return out

    def decision_function(self, X):
        """Signed distances (in function units) to the separating surfaces.

        Two classes: shape (n,), positive for ``classes_[1]``.  More classes:
        (n, n_classes) for ``decision_function_shape='ovr'``, else the
        one-vs-one values (n, n_classes*(n_classes-1)/2), positive for the
        first class of each pair.
        """
        X = self._validate_for_predict(X)
        dec = self._ovo_decision(X)
        if self.classes_.shape[0] == 2:
            return dec[:, 0]
        if self.decision_function_shape == "ovr":
            return ovr_from_ovo(dec, self.classes_.shape[0])
        return dec

    def predict(self, X):
        """Class labels: the sign for two classes, one-vs-one voting otherwise
        (ties go to the class listed first, as in LIBSVM), or the arg-max of the
        one-vs-rest scores when ``break_ties=True``."""
        X = self._validate_for_predict(X)
        dec = self._ovo_decision(X)
        n_classes = self.classes_.shape[0]
        if n_classes == 2:
            return self.classes_[(dec[:, 0] > 0).astype(int)]
        if self.break_ties and self.decision_function_shape == "ovr":
            return self.classes_[np.argmax(ovr_from_ovo(dec, n_classes), axis=1)]
        votes = np.zeros((X.shape[0], n_classes), dtype=np.int64)
        k = 0
        for a in range(n_classes):
            for b in range(a + 1, n_classes):
                pos = dec[:, k] > 0
                votes[pos, a] += 1
                votes[~pos, b] += 1
                k += 1
        return self.classes_[np.argmax(votes, axis=1)]

    # ---------------------------------------------------------- properties
    @property
    def coef_(self):
        """Weights ``w`` in input space, one row per binary problem (linear kernel only)."""
        check_is_fitted(self)
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        if self._linear_w is not None and self.support_.shape[0] == 0:
            return self._linear_w.copy()
        n_classes = self.classes_.shape[0]
        SV = self.support_vectors_
        if n_classes == 2:
            w = np.asarray(self.dual_coef_ @ SV) if not sp.issparse(SV) else np.asarray(
                sp.csr_matrix(self.dual_coef_) @ SV).reshape(1, -1)
            return np.asarray(w).reshape(1, -1)
        starts = np.concatenate([[0], np.cumsum(self.n_support_)])
        rows = []
        for a in range(n_classes):
            sa = slice(starts[a], starts[a + 1])
            for b in range(a + 1, n_classes):
                sb = slice(starts[b], starts[b + 1])
                w = SV[sa].T @ self.dual_coef_[b - 1, sa] + SV[sb].T @ self.dual_coef_[a, sb]
                rows.append(np.asarray(w).ravel())
        return np.vstack(rows)

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
        Not available yet.
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
    formulation : str, default='l1'
        See :data:`maxmargin.formulations.FORMULATIONS`.
    solver : str, default='smo'
        See :data:`maxmargin.formulations.SOLVERS`.
    sigma : float or None, default=None
        Gaussian width; when given, ``gamma = 1 / (2 sigma**2)`` and ``gamma`` is ignored.
    callback : callable or None, default=None
        Called during the fit with a dict (iteration, objective, violation, tol,
        subproblem, n_subproblems, elapsed); returning False stops the fit.
    time_limit : float or None, default=None
        Seconds per binary problem after which the solver stops.

    Attributes
    ----------
    support_, support_vectors_, n_support_, dual_coef_, intercept_, classes_,
    coef_ (linear kernel), n_iter_, fit_status_, shape_fit_ :
        as in scikit-learn.
    objective_ : ndarray (n_pairs,)
        Dual objective value of each binary problem (a minimum).
    margin_ : ndarray (n_pairs,)
        Geometric margin ``1/||w||`` in feature space of each binary problem.
    loo_bound_ : float
        #SV / n, the leave-one-out error bound (seed 002).
    duality_gap_ : ndarray (n_pairs,)
        Duality gap where the solver computes one, else NaN.
    train_error_ : float
        Fraction of training points misclassified.
    fit_time_ : float
        Seconds spent in ``fit``.
    """

    def __init__(self, *, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0, shrinking=True,
                 probability=False, tol=1e-3, cache_size=200, class_weight=None, verbose=False,
                 max_iter=-1, decision_function_shape="ovr", break_ties=False, random_state=None,
                 formulation="l1", solver="smo", sigma=None, callback=None, time_limit=None):
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
