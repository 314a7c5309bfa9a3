r"""The standard dual problem every SVM type is turned into.

.. math::

    \min_\alpha \tfrac12 \alpha^T Q \alpha + p^T \alpha
    \quad\text{s.t.}\quad y^T\alpha = \Delta,\; 0 \le \alpha_i \le U_i

with :math:`Q_{ij} = y_i y_j K(x_{k(i)}, x_{k(j)}) + s_i \delta_{ij}`.

* ``index`` (``k`` above) maps each dual variable to a row of the training
  data, so one kernel row serves several variables (SVR has two variables per
  point: ``index = [0..n-1, 0..n-1]``).
* ``shift`` (``s`` above) is the diagonal term of the 2-norm soft margin,
  ``1/C`` (seed 002, eq. 23: ``H + I/C``); zero otherwise.
* ``upper`` may be ``inf`` (hard margin, 2-norm soft margin).

1-norm soft margin C-SVC (seed 002 eq. 21, seed 001): ``p = -1``, ``U_i = C w_i``,
``Delta = 0``.  Hard margin (seed 002 eq. 17): ``U = inf``.  2-norm soft margin:
``U = inf`` and ``shift = 1/(C w_i)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels import Kernel


@dataclass
class DualProblem:
    """A standard dual problem over training data ``X`` and a kernel.

    Attributes
    ----------
    X : ndarray (n, d) or scipy.sparse CSR matrix, or the (n, n) Gram matrix for
        a precomputed kernel.
    kernel : Kernel
        The kernel object (``maxmargin.kernels``).
    y : ndarray of shape (n_var,), values +1.0 / -1.0
    p : ndarray of shape (n_var,)
    upper : ndarray of shape (n_var,), entries > 0, possibly ``inf``
    index : ndarray of int64, shape (n_var,)
        Row of ``X`` each variable belongs to.
    shift : ndarray of shape (n_var,)
        Added to the diagonal of Q.
    delta : float
        Right-hand side of the equality constraint.
    alpha0 : ndarray or None
        A feasible starting point (warm start); zeros when None (then ``delta`` must be 0
        unless the solver builds its own feasible start).
    nu_constraints : bool
        When True the problem has LIBSVM's two equality constraints (nu-SVC, nu-SVR):
        ``sum_{y_i=+1} alpha_i`` and ``sum_{y_i=-1} alpha_i`` are each held fixed.
    """

    X: object
    kernel: Kernel
    y: np.ndarray
    p: np.ndarray
    upper: np.ndarray
    index: np.ndarray
    shift: np.ndarray
    delta: float = 0.0
    alpha0: np.ndarray | None = None
    nu_constraints: bool = False

    @property
    def n_var(self) -> int:
        return self.y.shape[0]

    def kernel_rows(self, rows) -> np.ndarray:
        """Kernel values between the data rows ``rows`` and all training rows."""
        return self.kernel.rows(self.X, np.asarray(rows, dtype=np.int64))

    def q_matrix(self) -> np.ndarray:
        """The whole ``Q`` (n_var x n_var). Only for small problems and references."""
        if self.kernel.name == "precomputed":  # X is the Gram matrix: pick the entries
            K = self.kernel(self.X[self.index][:, self.index])
        else:  # the kernel between the rows in index only (a subset of X is not copied elsewhere)
            rows, inv = np.unique(self.index, return_inverse=True)
            Xr = self.X[rows]
            K = self.kernel(Xr, Xr)[np.ix_(inv, inv)]
        Q = (self.y[:, None] * self.y[None, :]) * K
        Q[np.diag_indices_from(Q)] += self.shift
        return Q

    def objective(self, alpha: np.ndarray) -> float:
        Q = self.q_matrix()
        return float(0.5 * alpha @ Q @ alpha + self.p @ alpha)


def _rows_of(index, n):
    """The data rows of ``n`` points: ``index`` (rows of X, so subsets are never copies) or 0..n-1."""
    if index is None:
        return np.arange(n, dtype=np.int64)
    index = np.ascontiguousarray(index, dtype=np.int64)
    if index.shape != (n,):
        raise ValueError(f"index has shape {index.shape}; expected ({n},), one row of X per point")
    return index


def csvc_problem(X, kernel, y, C, shift=None, hard=False, index=None):
    """The 1-norm (or hard / 2-norm) C-SVC dual for labels ``y`` in {+1, -1}.

    ``C`` is a scalar or a per-sample array (C times sample and class weights);
    ``index`` the rows of ``X`` the points are (None: every row, in order).
    """
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    Cs = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    upper = np.full(n, np.inf) if hard else Cs
    return DualProblem(
        X=X,
        kernel=kernel,
        y=y,
        p=-np.ones(n),
        upper=upper,
        index=_rows_of(index, n),
        shift=np.zeros(n) if shift is None else np.broadcast_to(shift, (n,)).astype(np.float64),
    )


# --------------------------------------------------------------------------------------------
# The other SVM types on the same standard form (LIBSVM's way; added for issue 4).
def greedy_fill(upper, total):
    """LIBSVM's feasible start: fill the variables in order up to their bounds until
    their sum reaches ``total`` (the first ones at ``upper``, one fractional, the rest 0)."""
    upper = np.asarray(upper, dtype=np.float64)
    before = np.zeros(upper.shape[0])
    if upper.shape[0] > 1:
        np.cumsum(upper[:-1], out=before[1:])
    return np.minimum(np.maximum(total - before, 0.0), upper)


def svr_problem(X, kernel, z, C, epsilon, index=None):
    r"""epsilon-SVR: :math:`2n` variables :math:`(\alpha, \alpha^*)` on the same data rows.

    .. math::

        \min \tfrac12(\alpha-\alpha^*)^TK(\alpha-\alpha^*) + \sum_i(\varepsilon - z_i)\alpha_i
        + \sum_i(\varepsilon + z_i)\alpha^*_i,\quad \sum_i(\alpha_i - \alpha^*_i) = 0,\;
        0 \le \alpha, \alpha^* \le C_i

    i.e. ``index = [0..n-1, 0..n-1]``, ``y = [+1.., -1..]``, ``p = [eps - z, eps + z]``;
    the regression function is :math:`f(x) = \sum_i(\alpha_i - \alpha_i^*)K(x_i, x) - \rho`.
    """
    z = np.asarray(z, dtype=np.float64)
    n = z.shape[0]
    Cs = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,))
    idx = _rows_of(index, n)
    return DualProblem(
        X=X,
        kernel=kernel,
        y=np.r_[np.ones(n), -np.ones(n)],
        p=np.r_[epsilon - z, epsilon + z],
        upper=np.r_[Cs, Cs],
        index=np.r_[idx, idx],
        shift=np.zeros(2 * n),
    )


def nu_svr_problem(X, kernel, z, C, nu, index=None):
    r"""nu-SVR (LIBSVM): ``p = [-z, +z]``, the two constraints
    :math:`\sum_i\alpha_i = \sum_i\alpha_i^* = \nu\sum_iC_i/2` (``nu_constraints``);
    the tube width is :math:`\varepsilon = -r` of the nu-solver."""
    z = np.asarray(z, dtype=np.float64)
    n = z.shape[0]
    Cs = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    start = greedy_fill(Cs, nu * Cs.sum() / 2)
    idx = _rows_of(index, n)
    return DualProblem(
        X=X,
        kernel=kernel,
        y=np.r_[np.ones(n), -np.ones(n)],
        p=np.r_[-z, z],
        upper=np.r_[Cs, Cs],
        index=np.r_[idx, idx],
        shift=np.zeros(2 * n),
        delta=0.0,
        alpha0=np.r_[start, start],
        nu_constraints=True,
    )


def one_class_problem(X, kernel, nu, weights=None, index=None):
    r"""One-class SVM (Schoelkopf et al.): :math:`\min\tfrac12\alpha^TK\alpha`,
    :math:`e^T\alpha = \nu\sum_iw_i`, :math:`0 \le \alpha_i \le w_i` (``y = +1``, ``p = 0``,
    ``delta = nu * sum(w)``), from LIBSVM's start: the first :math:`\lfloor\nu n\rfloor`
    at their bound, one fractional."""
    n = X.shape[0] if index is None else len(index)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    total = float(nu * w.sum())
    return DualProblem(
        X=X,
        kernel=kernel,
        y=np.ones(n),
        p=np.zeros(n),
        upper=w.copy(),
        index=_rows_of(index, n),
        shift=np.zeros(n),
        delta=total,
        alpha0=greedy_fill(w, total),
    )


def nu_svc_problem(X, kernel, y, nu, weights=None, index=None):
    r"""nu-SVC (LIBSVM's scaled form): :math:`\min\tfrac12\alpha^TQ\alpha` with
    :math:`\sum_{y_i=+1}\alpha_i = \sum_{y_i=-1}\alpha_i = \nu\sum_iw_i/2`,
    :math:`0 \le \alpha_i \le w_i` (``nu_constraints``).  The solution divided by the
    solver's ``r`` is the C-SVC solution with :math:`C = 1/r`.  An infeasible ``nu``
    (:math:`\nu\sum_iw_i/2` above a class's total weight) is cut down to the largest
    feasible sums; the estimators reject it beforehand."""
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    # nu is feasible iff nu sum(w) / 2 <= min(class sums); beyond that, the largest feasible sums
    half = float(min(nu * w.sum() / 2, w[y > 0].sum(), w[y < 0].sum()))
    start = np.zeros(n)
    for c in (1.0, -1.0):
        m = y == c
        start[m] = greedy_fill(w[m], half)
    return DualProblem(
        X=X,
        kernel=kernel,
        y=y,
        p=np.zeros(n),
        upper=w.copy(),
        index=_rows_of(index, n),
        shift=np.zeros(n),
        delta=0.0,
        alpha0=start,
        nu_constraints=True,
    )
