"""Fits of the one-vs-one C-SVC problems that :mod:`maxmargin.solvers.ovo` solved all at once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from .base import BinaryFit, _is_linear


def fits_from_pairs(res, C, kernel, X, solver, tol=None, max_iter=None):
    """:class:`BinaryFit` objects (formulation 'l1') for the one-vs-one problems that
    :func:`maxmargin.solvers.ovo.solve_pairs` solved, with what :func:`fit_binary` adds
    (training decision values, ||w||, margin, primal objective, duality gap) computed
    for all pairs at once; each fit's arrays follow its rows in increasing order.  A pair whose SMO ran into
    ``max_iter`` steps with its violation not below ``tol`` is not converged (status 'max_iter')."""
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
    if "alpha_flat" in res:  # flat arrays, pair p at starts[p]: no per-pair concatenation
        solved = np.asarray(res["solved"], dtype=bool)  # a pair's alpha is there where it was solved
        unsolved = np.flatnonzero(~solved).tolist()
        alpha = np.array(res["alpha_flat"], dtype=np.float64)
        grad = np.array(res["grad_flat"], dtype=np.float64)
        for p in unsolved:
            alpha[starts[p] : starts[p] + sizes[p]] = 0.0
            grad[starts[p] : starts[p] + sizes[p]] = -1.0
    else:
        solved = np.array([a is not None for a in res["alpha"]], dtype=bool)
        unsolved = np.flatnonzero(~solved).tolist()
        alpha = np.concatenate([np.zeros(sizes[p]) if a is None else a for p, a in enumerate(res["alpha"])])
        grad = np.concatenate([-np.ones(sizes[p]) if g is None else g for p, g in enumerate(res["grad"])])
    rho = np.asarray(res["rho"], dtype=np.float64).copy()
    objective = np.asarray(res["objective"], dtype=np.float64).copy()
    violation = np.asarray(res["violation"], dtype=np.float64).copy()
    n_iter = np.array(res["n_iter"], dtype=np.float64)
    n_iter[np.isnan(n_iter)] = 0.0  # pairs not started (np.nan_to_num: ~30 us)
    n_iter = n_iter.astype(np.int64)
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
    r = res.get("r") if hasattr(res, "get") else None
    nu = r is not None
    if nu:  # nu-SVC pairs (scaled to their C-SVC solution, C = w / r): no primal or gap reported, as fit_binary's
        primal = np.full(sizes.shape[0], np.nan)
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
    # a run stopped early (time limit, callback) still has pairs that finished: those whose
    # violation is within tol (given) converged
    finished = np.full(sizes.shape[0], status == "converged") | (tol is not None and violation <= tol)
    # a pair whose SMO ran into max_iter stopped early although the run as a whole went on (status 'converged')
    capped = n_iter >= max_iter if max_iter is not None and max_iter > 0 else np.zeros(sizes.shape[0], dtype=bool)
    finished &= ~capped | (tol is not None and violation < tol)
    converged = finished & solved
    conv_l = converged.tolist()
    capped_l = capped.tolist()
    r_l = np.asarray(r, dtype=np.float64).tolist() if nu else None

    def build(p):
        lo, hi = bounds[p], bounds[p + 1]
        extra = dict(
            margin=margin_l[p],
            w_norm=w_norm_l[p],
            bias_rule="libsvm",
            train_decision=decision_s[lo:hi],
        )
        if nu:
            extra["r"] = r_l[p]
        else:
            extra.update(primal_objective=primal_l[p], duality_gap=gap_l[p])
        coef = coef_s[lo:hi]
        w = np.asarray(X[rows_s[lo:hi]].T @ coef).ravel() if linear else None
        return BinaryFit(
            alpha=alpha_s[lo:hi],
            rho=rho_l[p],
            objective=obj_l[p],
            n_iter=iter_l[p],
            violation=viol_l[p],
            converged=conv_l[p],
            status="converged" if conv_l[p] else ("max_iter" if capped_l[p] else status),
            w=w,
            extra=extra,
            margin=margin_l[p],
            formulation="nu" if nu else "l1",
            solver=solver,
            coef=coef,
        )

    arrays = dict(
        rows=rows_s,
        alpha=alpha_s,
        coef=coef_s,
        decision=decision_s,
        pair=np.repeat(np.arange(sizes.shape[0]), sizes),
        rho=rho,
        objective=objective,
        n_iter=n_iter,
        violation=violation,
        gap=primal + objective,
        w_norm=w_norm,
        margin=margin,
        converged=converged,
    )
    if nu:
        arrays["r"] = np.asarray(r, dtype=np.float64)
    return PairFits(arrays, build, sizes.shape[0])


class PairFits(Sequence):
    """The fits of the pairs one :func:`~maxmargin.solvers.ovo.solve_pairs` call solved, as flat
    arrays (``arrays``: per entry, pair by pair in increasing row order, ``rows``, ``alpha``,
    ``coef``, ``decision``, ``pair``; per pair ``rho``, ``objective``, ``n_iter``, ``violation``,
    ``gap``, ``w_norm``, ``margin``, ``converged``), with a :class:`BinaryFit` built when a pair
    is indexed (and kept: attributes set on it stay).  The model is set from the arrays
    (:meth:`maxmargin.svm.BaseSVMClassifier._set_model`): 300 classes are 44,850 pairs, whose
    objects cost more than their solve."""

    def __init__(self, arrays, build, n):
        self.arrays = arrays
        self._build = build
        self._built = [None] * n

    def __len__(self):
        return len(self._built)

    def __getitem__(self, p):
        if isinstance(p, slice):
            return [self[i] for i in range(*p.indices(len(self)))]
        fit = self._built[p]
        if fit is None:
            fit = self._built[p] = self._build(p if p >= 0 else p + len(self))
        return fit


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


@njit(cache=True)
def mark_support(rows, alpha, is_sv):
    """``is_sv[rows[t]] = True`` where ``alpha[t] > 0`` (the pairs' flat arrays, one pass)."""
    for t in range(rows.shape[0]):
        if alpha[t] > 0.0:
            is_sv[rows[t]] = True


@njit(cache=True)
def scatter_dual(rows, pair, coef, alpha, y_idx, pa, pb, spos, dual):
    """LIBSVM's ``dual_coef_`` layout from the pairs' flat arrays: a support vector of class a sits in row b-1 for
    pair (a, b), of class b in row a; column ``spos[row]``."""
    for t in range(rows.shape[0]):
        if alpha[t] > 0.0:
            r = rows[t]
            p = pair[t]
            dual[pb[p] - 1 if y_idx[r] == pa[p] else pa[p], spos[r]] = coef[t]
