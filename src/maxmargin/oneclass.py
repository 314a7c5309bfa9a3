r"""One-class SVM (Schoelkopf et al. 2001) with a scikit-learn API.

The dual (:func:`maxmargin.problem.one_class_problem`) is the standard form with
every :math:`y_i = +1`, no linear term and the equality constraint
:math:`\sum_i\alpha_i = \nu\sum_iw_i`:

.. math::

    \min_\alpha \tfrac12\alpha^TK\alpha
    \quad\text{s.t.}\quad e^T\alpha = \nu\textstyle\sum_i w_i,\; 0 \le \alpha_i \le w_i

(:math:`w_i` the sample weights, 1 by default), started from LIBSVM's feasible
point (the first :math:`\lfloor\nu n\rfloor` multipliers at 1, one fractional)
and solved by the same SMO as every other type.  With :math:`\rho` from the
solver, ``score_samples(x)`` :math:`= \sum_i\alpha_iK(x_i, x)`,
``decision_function(x) = score_samples(x) - offset_`` with ``offset_`` :math:`=\rho`
(``intercept_ = [-rho]``), and ``predict`` is +1 (inlier) where the decision value
is positive, -1 otherwise.  ``nu`` is an upper bound on the fraction of training
points outside the estimated support and a lower bound on the fraction of
support vectors.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import OutlierMixin

from .callbacks import reports_progress
from .regression import BaseSingleSVM
from .svm import _check_nu


class OneClassSVM(OutlierMixin, BaseSingleSVM):
    """Unsupervised outlier detection: the support of a distribution.

    Parameters
    ----------
    kernel, degree, gamma, coef0, tol, shrinking, cache_size, verbose, max_iter, sigma,
    callback, time_limit : as in :class:`maxmargin.SVR`.
    nu : float in (0, 1], default=0.5
        Upper bound on the fraction of training errors, lower bound on the fraction
        of support vectors.
    solver : {'smo', 'batched', 'auto'}, default='auto'
        As in :class:`maxmargin.SVR` (``n`` dual variables here).

    Attributes
    ----------
    support_, support_vectors_, dual_coef_ (1, n_SV), intercept_ (1,), offset_,
    n_support_ (1,), coef_ (linear kernel), fit_status_, n_iter_ (int), shape_fit_ :
        as in scikit-learn (``offset_ = -intercept_[0]`` = rho).
    objective_ : float
        Dual objective (a minimum).
    fit_time_ : float
    """

    _state_attributes = BaseSingleSVM._state_attributes + ("offset_",)

    _formulation = "one-class"

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        nu=0.5,
        shrinking=True,
        cache_size=200,
        verbose=False,
        max_iter=-1,
        sigma=None,
        callback=None,
        time_limit=None,
        solver="auto",
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.nu = nu
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter
        self.sigma = sigma
        self.callback = callback
        self.time_limit = time_limit
        self.solver = solver

    def _merges_duplicates(self):
        # e'a = nu sum(w) and 0 <= a_i <= w_i: a group's sum has the box [0, its summed weights] (dedup.py)
        return self._named_row_kernel()

    @reports_progress
    def fit(self, X, y=None, sample_weight=None):
        """Fit on ``X`` (``y`` is ignored)."""
        _check_nu(self.nu)
        self._check_solver()
        self._check_solver_params()
        t0 = time.perf_counter()
        X, _ = self._validate_train(X)
        sw = self._sample_weights(sample_weight, X)
        rows = self._positive_rows(sw)
        fit = self._fit_single(X, np.ones(rows.shape[0]), sw[rows], rows, nu=self.nu)
        self.offset_ = float(fit.rho)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def decision_function(self, X):
        """Signed distance to the boundary: positive inside (inliers), shape (n,)."""
        X = self._validate_for_predict(X)
        return self._decision(X)

    def score_samples(self, X):
        """Unshifted scores ``sum_i alpha_i K(x_i, x)`` (= decision_function + offset_)."""
        X = self._validate_for_predict(X)
        return self._decision(X) - float(np.ravel(self.intercept_)[0])

    def predict(self, X):
        """+1 for inliers (decision value > 0), -1 for outliers."""
        return np.where(self.decision_function(X) > 0, 1, -1)
