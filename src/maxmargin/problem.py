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
        K = self.kernel(self.X, self.X)
        K = K[np.ix_(self.index, self.index)]
        Q = (self.y[:, None] * self.y[None, :]) * K
        Q[np.diag_indices_from(Q)] += self.shift
        return Q

    def objective(self, alpha: np.ndarray) -> float:
        Q = self.q_matrix()
        return float(0.5 * alpha @ Q @ alpha + self.p @ alpha)


def csvc_problem(X, kernel, y, C, shift=None, hard=False):
    """The 1-norm (or hard / 2-norm) C-SVC dual for labels ``y`` in {+1, -1}.

    ``C`` is a scalar or a per-sample array (C times sample and class weights).
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
        index=np.arange(n, dtype=np.int64),
        shift=np.zeros(n) if shift is None else np.broadcast_to(shift, (n,)).astype(np.float64),
    )
