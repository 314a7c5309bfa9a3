"""Fits of the one-vs-one C-SVC problems that :mod:`maxmargin.solvers.ovo` solved all at once."""

from __future__ import annotations

import numpy as np
from numba import njit

from .base import BinaryFit, _is_linear


def fits_from_pairs(res, C, kernel, X, solver, tol=None):
    """:class:`BinaryFit` objects (formulation 'l1') for the one-vs-one problems that
    :func:`maxmargin.solvers.ovo.solve_pairs` solved, with what :func:`fit_binary` adds
    (training decision values, ||w||, margin, primal objective, duality gap) computed
    for all pairs at once; each fit's arrays follow its rows in increasing order."""
    if "rows_flat" in res:
        rows = res["rows_flat"]
        starts = np.asarray(res["offsets"][:-1], dtype=np.int64)
        sizes = np.diff(res["offsets"]).astype(np.int64)
    else:
        sizes = np.array([r.shape[0] for r in res["rows"]], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        rows = np.concatenate(res["rows"]) if sizes.size else np.zeros(0, dtype=np.int64)
    # y: +1 on the first class's rows (the first n_a of each pair as solve_pairs lays them out)
    n_a = np.asarray(res["n_first"], dtype=np.int64)
    pos = np.arange(rows.shape[0]) - np.repeat(starts, sizes)
    y = np.where(pos < np.repeat(n_a, sizes), 1.0, -1.0)
    unsolved = [p for p, a in enumerate(res["alpha"]) if a is None]
    alpha = np.concatenate([np.zeros(sizes[p]) if a is None else a for p, a in enumerate(res["alpha"])])
    grad = np.concatenate([-np.ones(sizes[p]) if g is None else g for p, g in enumerate(res["grad"])])
    rho = np.asarray(res["rho"], dtype=np.float64).copy()
    objective = np.asarray(res["objective"], dtype=np.float64).copy()
    violation = np.asarray(res["violation"], dtype=np.float64).copy()
    n_iter = np.nan_to_num(np.asarray(res["n_iter"], dtype=np.float64)).astype(np.int64)
    U = C[rows]
    from ..solvers.smo import compute_rho

    for p in unsolved:  # stopped before this pair started: the zero start, not converged
        sl = slice(starts[p], starts[p] + sizes[p])
        rho[p] = compute_rho(y[sl], grad[sl], alpha[sl], U[sl])
        objective[p] = 0.0
        violation[p] = 2.0
    rho_v = np.repeat(rho, sizes)
    s = y * (grad + 1.0)  # sum_j alpha_j y_j K_tj from the gradient G = Q alpha - e
    decision = s - rho_v
    w_sq = np.maximum(np.add.reduceat(alpha * y * s, starts) if sizes.size else np.zeros(0), 0.0)
    w_norm = np.sqrt(w_sq)
    funct = y * decision
    min_funct = np.minimum.reduceat(funct, starts) if sizes.size else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(w_norm > 0, min_funct / w_norm, np.inf)
    primal = 0.5 * w_sq + (np.add.reduceat(U * np.maximum(0.0, 1.0 - funct), starts) if sizes.size else 0.0)
    linear = _is_linear(kernel)
    status = res["status"]
    # each pair's rows in increasing order: its two classes' rows (each increasing) merged
    perm = np.empty(rows.shape[0], dtype=np.int64)
    _merge_order(rows, starts, sizes, n_a, perm)
    alpha_s, decision_s, coef_s, rows_s = alpha[perm], decision[perm], (alpha * y)[perm], rows[perm]
    # Python floats once for all pairs (float() on NumPy scalars a pair at a time was most of the loop)
    rho_l, obj_l, viol_l, margin_l = rho.tolist(), objective.tolist(), violation.tolist(), margin.tolist()
    w_norm_l, primal_l, gap_l, iter_l = w_norm.tolist(), primal.tolist(), (primal + objective).tolist(), n_iter.tolist()
    bounds = np.append(starts, starts[-1] + sizes[-1] if sizes.size else 0).tolist()
    fits = []
    for p in range(sizes.shape[0]):
        lo, hi = bounds[p], bounds[p + 1]
        # a run stopped early (time limit, callback) still has pairs that finished: those whose
        # violation is within tol (given) converged
        finished = status == "converged" or (tol is not None and viol_l[p] <= tol)
        converged = finished and res["alpha"][p] is not None
        extra = dict(
            margin=margin_l[p],
            w_norm=w_norm_l[p],
            bias_rule="libsvm",
            train_decision=decision_s[lo:hi],
            primal_objective=primal_l[p],
            duality_gap=gap_l[p],
        )
        coef = coef_s[lo:hi]
        w = np.asarray(X[rows_s[lo:hi]].T @ coef).ravel() if linear else None
        fits.append(
            BinaryFit(
                alpha=alpha_s[lo:hi],
                rho=rho_l[p],
                objective=obj_l[p],
                n_iter=iter_l[p],
                violation=viol_l[p],
                converged=bool(converged),
                status="converged" if converged else status,
                w=w,
                extra=extra,
                margin=margin_l[p],
                formulation="l1",
                solver=solver,
                coef=coef,
            )
        )
    return fits


@njit(cache=True)
def _merge_order(rows, starts, sizes, n_first, perm):
    """``perm`` such that ``rows[perm]`` is increasing within every pair's segment, whose first
    ``n_first[p]`` rows and the rest are each increasing (disjoint: two classes)."""
    for p in range(starts.shape[0]):
        i = starts[p]
        i1 = i + n_first[p]
        j = i1
        j1 = starts[p] + sizes[p]
        o = starts[p]
        while i < i1 or j < j1:
            if j >= j1 or (i < i1 and rows[i] < rows[j]):
                perm[o] = i
                i += 1
            else:
                perm[o] = j
                j += 1
            o += 1
