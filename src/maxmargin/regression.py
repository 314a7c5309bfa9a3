r"""Support vector regression with a scikit-learn API: :class:`SVR` and :class:`NuSVR`.

Both are the standard dual of :mod:`maxmargin.problem` with two variables per
training point, :math:`\alpha_i` (``y = +1``) and :math:`\alpha_i^*` (``y = -1``),
sharing the kernel row of point :math:`i` (``index = [0..n-1, 0..n-1]``), solved
by the same SMO as classification (LIBSVM's way):

epsilon-SVR (Vapnik; :func:`maxmargin.problem.svr_problem`)
    .. math::

        \min \tfrac12(\alpha-\alpha^*)^TK(\alpha-\alpha^*)
        + \varepsilon\sum_i(\alpha_i+\alpha_i^*) - \sum_iz_i(\alpha_i-\alpha_i^*)
        \quad\text{s.t.}\quad \sum_i(\alpha_i - \alpha_i^*) = 0,\; 0 \le \alpha_i, \alpha_i^* \le C w_i

    i.e. ``p = [eps - z, eps + z]`` for targets :math:`z`.

nu-SVR (Schoelkopf et al. 2000; :func:`maxmargin.problem.nu_svr_problem`)
    ``p = [-z, z]`` and the two constraints
    :math:`\sum_i\alpha_i = \sum_i\alpha_i^* = \nu C\sum_iw_i/2`, by the
    nu-variant of SMO; the tube width is found by the solver
    (:math:`\varepsilon = -r`, kept as ``epsilon_``).

The prediction is :math:`f(x) = \sum_i(\alpha_i - \alpha_i^*)K(x_i, x) - \rho`:
``dual_coef_`` holds :math:`\alpha_i - \alpha_i^*` of the support vectors and
``intercept_ = [-rho]``, as in scikit-learn.

:class:`BaseSingleSVM` is shared with :class:`maxmargin.oneclass.OneClassSVM`:
the estimators with one decision function.
"""

from __future__ import annotations

import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from . import dedup, formulations
from .callbacks import report_of, reports_progress
from .kernels.engine import FUSED_DENSE_PREDICT, kernel_times
from .kernels.objects import block_rows_for
from .solvers import smo
from .svm import (
    SMALL_BLOCK_VALUES,
    BaseKernelSVM,
    _check_bool,
    _check_nu,
    _check_positive,
    check_finite_solution,
    linear_weights,
    warn_not_converged,
    weights_pay,
)


def _check_epsilon(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
        raise ValueError(f"epsilon must be a non-negative finite number, got {value!r}")


class BaseSingleSVM(BaseKernelSVM):
    """Estimators with one decision function ``f(x) = sum_j c_j K(x_j, x) + b``
    (``c = dual_coef_[0]`` over ``support_vectors_``, ``b = intercept_[0]``)."""

    #: fitted attributes a model file stores (see maxmargin.io.model)
    _state_attributes = (
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
        "fit_time_",
        "_gamma",
        "_sparse",
    )

    def _positive_rows(self, sw):
        rows = np.flatnonzero(sw > 0)
        if rows.size == 0:
            raise ValueError("every sample has zero weight: nothing to fit")
        return rows

    #: the registered formulation (:mod:`maxmargin.formulations`) this estimator fits
    _formulation = ""

    def _check_solver(self):
        formulations.check_solver(self._formulation, getattr(self, "solver", "auto"))

    def _fit_single(self, X, z, C, rows, alpha0=None, **params):
        """The fit of this estimator's formulation on rows ``rows`` of ``X`` (no copy), with
        targets ``z`` and bounds ``C`` over those rows, through :func:`maxmargin.formulations.fit`."""
        report_of(self).begin(1, steps=True)
        kern = self._fit_kernel(X)
        options = self._solver_options()
        if alpha0 is not None:
            options["alpha0"] = alpha0
        # identical rows with the same target as one row, their bounds summed (exact; maxmargin.dedup)
        dup = None
        if alpha0 is None and self._merges_duplicates() and rows.shape[0] >= dedup.MIN_ROWS:
            every = rows.shape[0] == X.shape[0]  # rows ascending: all of them, no copy
            dup = dedup.find(X if every else X[rows], np.unique(z, return_inverse=True)[1], C)
        solve_X, solve_z, solve_C, solve_rows = X, z, C, rows
        if dup is not None:
            solve_X, solve_z, solve_C, solve_rows = X[rows[dup.keep]], z[dup.keep], dup.C, np.arange(dup.keep.shape[0])
        with smo.kernel_row_pool(self._row_pool()):
            fit = formulations.fit(
                self._formulation,
                solve_X,
                solve_z,
                solve_C,
                kern,
                getattr(self, "solver", "auto"),
                rows=solve_rows,
                **options,
                **params,
            )
        coef = fit.coef
        if dup is not None:  # each merged row's coefficient split over its rows (their order, their bounds)
            nz = np.flatnonzero(coef)
            split_rows, split = dedup.expand(np.asarray(coef)[None, nz], nz, dup, C)
            coef = np.zeros(rows.shape[0])
            coef[split_rows] = split[0]
        self._set_single(X, rows, coef, fit.rho, fit)
        return fit

    def _merges_duplicates(self):
        """Whether identical rows with the same target are solved as one (:mod:`maxmargin.dedup`); per estimator."""
        return False

    def _set_single(self, X, rows, coef, rho, sol):
        """Fitted attributes from the coefficients ``coef`` of the rows ``rows`` (ascending)."""
        check_finite_solution(coef, rho)
        nz = coef != 0
        support = rows[nz]
        self.support_ = support.astype(np.int32)
        self.support_vectors_ = X[support] if self.kernel != "precomputed" else np.empty((0, 0))
        self.dual_coef_ = np.asarray(coef[nz], dtype=np.float64)[None, :]
        self.intercept_ = np.array([-float(rho)])
        self.n_support_ = np.array([support.shape[0]], dtype=np.int32)
        self.shape_fit_ = X.shape
        self.fit_status_ = 0 if sol.converged else 1
        self.n_iter_ = int(sol.n_iter)
        self.objective_ = float(sol.objective)
        if self.kernel != "precomputed":
            self._get_kernel()  # prepared here, so that predicting leaves __dict__ unchanged
        warn_not_converged(self.tol, [sol], stacklevel=4)

    def _decision(self, X):
        """``f(x) = sum_j dual_coef_j K(sv_j, x) + intercept_`` in row blocks (validated X)."""
        if weights_pay(self.kernel, X, self.support_.shape[0], 2):
            w = linear_weights(self.dual_coef_, self.support_vectors_, self.n_support_)[0]
            return np.asarray(X @ w).ravel() + float(np.ravel(self.intercept_)[0])
        n = X.shape[0]
        out = np.empty(n)
        c = np.asarray(self.dual_coef_.toarray() if sp.issparse(self.dual_coef_) else self.dual_coef_)[0]
        if self.support_.shape[0] and self.kernel != "precomputed" and n * self.support_.shape[0] > SMALL_BLOCK_VALUES:
            # no kernel block stored where the fused loop of the gradient rebuild pays, as SVC's binary predict
            # (session 29, predict on the training rows, fused / blocks: SVR on TF-IDF text 6,000 x 40,000 0.17,
            # 6,000 x 300 at 5% 0.29; one-class 0.31 and 0.49); dense rows as engine.FUSED_DENSE_PREDICT says
            intercept = float(np.ravel(self.intercept_)[0])
            # (the support vectors as stored: a dense copy of sparse ones went back to CSR in kernel_times)
            return (
                kernel_times(
                    self._get_kernel(),
                    X,
                    self.support_vectors_,
                    c,
                    fused_dense=FUSED_DENSE_PREDICT,
                    pool_when_busy=True,
                )
                + intercept
            )
        SV = self._sv_for_blocks(X)
        rows = block_rows_for(max(self.support_.shape[0], 1))
        for s in range(0, n, rows):
            e = min(s + rows, n)
            if self.support_.shape[0] == 0:
                out[s:e] = 0.0
            else:
                out[s:e] = self._kernel_to_sv(X[s:e], SV) @ c
        return out + float(np.ravel(self.intercept_)[0])

    @property
    def coef_(self):
        """Weights in input space, shape (1, n_features) (linear kernel only)."""
        check_is_fitted(self)
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        return linear_weights(self.dual_coef_, self.support_vectors_, self.n_support_)


class _BaseRegressor(RegressorMixin, BaseSingleSVM):
    def _fit_regression(self, X, y, sample_weight, warm=None, **params):
        X, y = self._validate_train(X, y, y_numeric=True)
        y = np.asarray(y, dtype=np.float64)
        sw = self._sample_weights(sample_weight, X)
        rows = self._positive_rows(sw)
        alpha0 = warm(X.shape[0], rows) if warm is not None else None
        return self._fit_single(X, y[rows], self.C * sw[rows], rows, alpha0, **params)

    def predict(self, X):
        """Predicted values ``f(x)``, shape (n,)."""
        X = self._validate_for_predict(X)
        return self._decision(X)


class SVR(_BaseRegressor):
    """epsilon-support vector regression.

    Parameters
    ----------
    kernel, degree, gamma, coef0, tol, shrinking, cache_size, verbose, max_iter, sigma :
        as in :class:`maxmargin.SVC`.
    C : float, default=1.0
        Penalty of the errors outside the tube (> 0); multiplied by ``sample_weight``.
    epsilon : float, default=0.1
        Half-width of the tube in which errors cost nothing (>= 0).
    callback : callable or None, default=None
        Called during the fit with a dict (iteration, objective, violation, tol,
        subproblem, n_subproblems, elapsed); returning False stops the fit (with a
        usable model and a ConvergenceWarning).
    time_limit : float or None, default=None
        Seconds after which the solver stops.
    solver : {'smo', 'batched', 'auto'}, default='auto'
        :mod:`maxmargin.solvers.smo` (two variables per step) or the batched
        working-set solver :mod:`maxmargin.solvers.batched` (BLAS kernel blocks);
        ``'auto'`` (as in :class:`maxmargin.SVC`) takes the batched one from 4000
        dual variables (``2 n`` for SVR) on.  ``warm_start`` keeps kernel rows
        for SMO only; both start from the previous multipliers.
    warm_start : bool, default=False
        Start from the previous fit's multipliers (same training rows),
        :math:`\\alpha = \\max(\\beta, 0)`, :math:`\\alpha^* = \\max(-\\beta, 0)` of its
        ``dual_coef_`` :math:`\\beta`, scaled by ``C_new / C_old`` and made feasible;
        the kernel rows computed by the previous fit are kept (at most
        ``cache_size`` MB, on the estimator, never pickled) and reused when the
        data and kernel are the same.

    Attributes
    ----------
    support_, support_vectors_, dual_coef_ (1, n_SV), intercept_ (1,), n_support_ (1,),
    coef_ (linear kernel), fit_status_, n_iter_ (int), shape_fit_ : as in scikit-learn.
    objective_ : float
        Dual objective (a minimum).
    fit_time_ : float
        Seconds spent in ``fit``.
    """

    _formulation = "eps-svr"

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        C=1.0,
        epsilon=0.1,
        shrinking=True,
        cache_size=200,
        verbose=False,
        max_iter=-1,
        sigma=None,
        callback=None,
        time_limit=None,
        solver="auto",
        warm_start=False,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.C = C
        self.epsilon = epsilon
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter
        self.sigma = sigma
        self.callback = callback
        self.time_limit = time_limit
        self.solver = solver
        self.warm_start = warm_start

    def _previous_alpha(self, n, rows):
        if not self.warm_start or not hasattr(self, "dual_coef_") or self.shape_fit_[0] != n:
            return None
        beta = np.zeros(n)
        beta[self.support_] = np.asarray(self.dual_coef_)[0]
        C_old = getattr(self, "_C_fit", None)
        b = beta[rows] * (self.C / C_old if C_old else 1.0)
        return np.r_[np.maximum(b, 0.0), np.maximum(-b, 0.0)]

    def _merges_duplicates(self):
        return not self.warm_start and self._named_row_kernel()

    @reports_progress
    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (dense, sparse, or the Gram matrix for a precomputed kernel)
        and real targets ``y``."""
        _check_positive("C", self.C)
        _check_epsilon(self.epsilon)
        _check_bool("warm_start", self.warm_start)
        self._check_solver()
        self._check_solver_params()
        t0 = time.perf_counter()

        self._fit_regression(X, y, sample_weight, warm=self._previous_alpha, epsilon=self.epsilon)
        self._C_fit = self.C
        self.fit_time_ = time.perf_counter() - t0
        return self


class NuSVR(_BaseRegressor):
    """nu-support vector regression: ``nu`` bounds the fraction of points outside
    the tube from above and the fraction of support vectors from below; the tube
    width is found by the solver.

    Parameters
    ----------
    nu : float in (0, 1], default=0.5
    C : float, default=1.0
    kernel, degree, gamma, coef0, shrinking, tol, cache_size, verbose, max_iter, sigma,
    callback, time_limit, solver : as in :class:`SVR` (both solvers have the nu-variant).

    Attributes
    ----------
    As :class:`SVR`, and ``epsilon_`` (float): the tube half-width of the solution
    (:math:`-r` of the nu-solver).
    """

    _state_attributes = BaseSingleSVM._state_attributes + ("epsilon_",)

    _formulation = "nu-svr"

    def __init__(
        self,
        *,
        nu=0.5,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        tol=1e-3,
        cache_size=200,
        verbose=False,
        max_iter=-1,
        sigma=None,
        callback=None,
        time_limit=None,
        solver="auto",
    ):
        self.nu = nu
        self.C = C
        self.solver = solver
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.tol = tol
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter
        self.sigma = sigma
        self.callback = callback
        self.time_limit = time_limit

    @reports_progress
    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` and real targets ``y``."""
        _check_nu(self.nu)
        _check_positive("C", self.C)
        self._check_solver_params()
        self._check_solver()
        t0 = time.perf_counter()

        fit = self._fit_regression(X, y, sample_weight, nu=self.nu)
        self.epsilon_ = float(fit.extra["epsilon"])
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _merges_duplicates(self):
        # sum a = sum a* = nu sum(C) / 2 is unchanged by merging, and a group's a and a* each have the box [0, its
        # summed C]: a split of both within the rows' boxes is a solution of the whole problem (dedup.py)
        return self._named_row_kernel()
