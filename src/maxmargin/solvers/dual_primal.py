r"""Squared-loss linear SVMs: dual coordinate descent, then the primal Newton method where it stalls.

LIBLINEAR (from version 2.42) runs its dual solvers for the squared losses (``-s 1``, ``-s 12``) for at most
300 epochs; when they have not met ``tol`` by then, it continues with the primal trust-region Newton method
(``-s 2``, ``-s 11``) started from the dual's :math:`w`.  Dual coordinate descent converges slowly where
:math:`\bar Q` is badly conditioned -- unscaled dense features, large ``C`` -- and one epoch costs as much as
a Hessian-vector product, so a few Newton steps replace hundreds of epochs.  The functions here do the same:

* :func:`l2_svc` -- :func:`~maxmargin.solvers.dual_cd.solve_svc` (squared hinge) for at most
  ``dual_epochs`` epochs, then :func:`~maxmargin.solvers.tron.solve` from its ``w`` to
  LIBLINEAR's primal stopping rule with ``0.1 * tol`` (LIBLINEAR: "the tolerance obtained from the dual's may be
  too loose").
* :func:`l2_svr` -- :func:`~maxmargin.solvers.dual_cd.solve_svr` (squared epsilon-insensitive), then TRON with
  ``0.001 * tol``, as LIBLINEAR.

After a switch the dual variables are recovered from the primal optimality conditions,

.. math:: \alpha_i = 2 C_i \max(0, 1 - y_i w\cdot x_i) \quad\text{(classification)},\qquad
          \beta_i = 2 C_i \operatorname{sign}(r_i) \max(0, |r_i| - \epsilon),\ r_i = y_i - w\cdot x_i
          \quad\text{(regression)},

and kept as ``dual`` (the warm start of the next fit along a C path).  No dual objective is reported after a
switch (``dual_objective`` None, so the estimators' ``duality_gap_`` is NaN, as for TRON): on the badly
conditioned problems that need the switch, these variables of a primal point that meets the gradient test
give a dual objective far below the primal one, a gap that says nothing about the primal solution's quality.

The epoch cap applies only when ``max_iter`` is larger than ``dual_epochs``: a user who asks for fewer
iterations gets the dual solver alone, stopped there.  ``max_iter`` then also bounds the Newton iterations.
``n_iter`` of the result counts both (epochs plus Newton iterations) and ``switched`` says whether the
primal phase ran.
"""

from __future__ import annotations

import time

import numpy as np

from . import dual_cd, tron
from ._linear_common import all_dots

#: LIBLINEAR's ``dual_solver_max_iter``: epochs of the dual solver before the switch
DUAL_EPOCHS = 300


def _remaining(time_limit, t0):
    if time_limit is None:
        return None
    return max(float(time_limit) - (time.perf_counter() - t0), 0.0)


def _dual_then_primal(dual_solve, ld, y, C, kind, epsilon, tol, tol_factor, recover, options):
    r"""Run ``dual_solve(max_iter=cap, **watch)`` (the dual for at most ``dual_epochs`` epochs); if it stopped on
    that cap while ``max_iter`` allows more, TRON from its ``w`` at ``tol_factor * tol``, and the dual variables
    from ``recover(r)`` with the residuals :math:`r_i = y_i - w\cdot x_i`.  ``options``: ``max_iter``,
    ``dual_epochs``, ``parallel``, ``verbose``, ``primal_data`` (None, or a callable giving the
    :class:`~maxmargin.solvers._linear_common.LinearData` TRON runs on, where its layout differs) and the watch
    (``callback``, ``callback_info``, ``time_limit``).
    Returns a :class:`~maxmargin.solvers.dual_cd.LinearFit` with ``switched`` set."""
    t0 = time.perf_counter()
    max_iter, dual_epochs = int(options["max_iter"]), int(options["dual_epochs"])
    watch = {k: options[k] for k in ("callback", "callback_info", "time_limit")}
    fit = dual_solve(max_iter=min(max_iter, dual_epochs), **watch)
    fit.switched = False
    if not (fit.status == "max_iter" and max_iter > dual_epochs):
        return fit
    if options.get("primal_data") is not None:
        ld = options["primal_data"]()
    primal = tron.solve(
        ld,
        y,
        C,
        kind=kind,
        epsilon=float(epsilon),
        tol=tol_factor * float(tol),
        max_iter=max_iter,
        w0=fit.w,
        parallel=options["parallel"],
        callback=watch["callback"],
        callback_info=watch["callback_info"],
        time_limit=_remaining(watch["time_limit"], t0),
        verbose=options["verbose"],
    )
    r = np.asarray(y, dtype=np.float64) - all_dots(primal.w, *ld.args())
    out = dual_cd.LinearFit(
        primal.w, recover(r), primal.objective, None, fit.n_iter + primal.n_iter, primal.violation, primal.status
    )
    out.switched = True
    out.async_workers = getattr(fit, "async_workers", 1)
    return out


def l2_svc(
    ld,
    y,
    C,
    *,
    tol=0.1,
    max_iter=1000,
    dual_epochs=DUAL_EPOCHS,
    parallel=True,
    callback=None,
    callback_info=None,
    time_limit=None,
    primal_data=None,
    **dual_options,
):
    """Squared-hinge classification: dual CD, then TRON if the dual used up ``dual_epochs`` (module docstring).
    ``dual_options`` go to :func:`~maxmargin.solvers.dual_cd.solve_svc`; ``parallel`` to TRON.  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` with ``switched`` set."""
    options = dict(
        max_iter=max_iter,
        dual_epochs=dual_epochs,
        parallel=parallel,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        verbose=dual_options.get("verbose", False),
        primal_data=primal_data,
    )
    yy = np.asarray(y, dtype=np.float64)
    CC = np.asarray(C, dtype=np.float64)

    def dual(**kw):
        return dual_cd.solve_svc(ld, y, C, squared=True, tol=tol, **kw, **dual_options)

    # y_i - w.x_i = y_i (1 - y_i w.x_i) for y_i = +-1, so xi_i = max(0, y_i r_i) and alpha_i = 2 C_i xi_i
    return _dual_then_primal(
        dual, ld, y, C, "squared_hinge", 0.0, tol, 0.1, lambda r: 2.0 * CC * np.maximum(0.0, yy * r), options
    )


def l2_svr(
    ld,
    y,
    C,
    epsilon,
    *,
    tol=0.1,
    max_iter=1000,
    dual_epochs=DUAL_EPOCHS,
    parallel=True,
    callback=None,
    callback_info=None,
    time_limit=None,
    primal_data=None,
    **dual_options,
):
    """Squared epsilon-insensitive regression: dual CD, then TRON if the dual used up ``dual_epochs``."""
    options = dict(
        max_iter=max_iter,
        dual_epochs=dual_epochs,
        parallel=parallel,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        verbose=dual_options.get("verbose", False),
        primal_data=primal_data,
    )
    CC = np.asarray(C, dtype=np.float64)

    def dual(**kw):
        return dual_cd.solve_svr(ld, y, C, epsilon, squared=True, tol=tol, **kw, **dual_options)

    def beta(r):  # beta_i = 2 C_i sign(r_i) max(0, |r_i| - epsilon)
        return 2.0 * CC * np.sign(r) * np.maximum(0.0, np.abs(r) - epsilon)

    return _dual_then_primal(dual, ld, y, C, "squared_epsilon_insensitive", epsilon, tol, 0.001, beta, options)
