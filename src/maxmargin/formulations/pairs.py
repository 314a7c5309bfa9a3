"""Fits of the one-vs-one C-SVC problems that :mod:`maxmargin.solvers.ovo` solved all at once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from .base import BinaryFit, _is_linear

#: :func:`fits_from_pairs` converts a pair's numbers one by one for this many fits, then all pairs' at once
BUILD_SINGLE = 64


def fits_from_pairs(res, C, kernel, X, solver, tol=None, max_iter=None, consume=False):
    """:class:`BinaryFit` objects (formulation 'l1') for the one-vs-one problems that
    :func:`maxmargin.solvers.ovo.solve_pairs` solved, with what :func:`fit_binary` adds
    (training decision values, ||w||, margin, primal objective, duality gap) computed
    for all pairs at once (:class:`PairFits`; each fit's arrays follow its rows in increasing order).  A pair whose
    SMO ran into ``max_iter`` steps with its violation not below ``tol`` is not converged (status 'max_iter').

    ``consume=True`` lets the flat arrays of ``res`` (``alpha_flat``, ``grad_flat``) become the fits' coefficients and
    decision values in place, and takes them out of ``res``.  1,000 classes of 5 rows are 4,995,000 entries: the
    NumPy expressions this replaced made ~25 arrays of 40 MB, whose first writes (59,000 page faults) cost 0.25-1.4 s
    of a 1.8-2.9 s fit on a virtual machine; now one compiled pass writes two."""
    if "rows_flat" in res:
        rows = np.ascontiguousarray(res["rows_flat"], dtype=np.int64)
        offsets = np.asarray(res["offsets"], dtype=np.int64)
    else:
        sizes = np.array([r.shape[0] for r in res["rows"]], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.concatenate(res["rows"]).astype(np.int64) if sizes.size else np.zeros(0, dtype=np.int64)
    n_pairs = offsets.shape[0] - 1
    # y: +1 on the first class's rows (the first n_first of each pair as solve_pairs lays them out)
    n_a = np.ascontiguousarray(res["n_first"], dtype=np.int64)
    if "alpha_flat" in res and res["alpha_flat"] is not None:  # flat arrays, pair p at offsets[p]
        solved = np.asarray(res["solved"], dtype=bool)  # a pair's alpha is there where it was solved
        alpha, grad = res["alpha_flat"], res["grad_flat"]
        if consume:
            res["alpha_flat"] = res["grad_flat"] = None  # (now the coefficients and decision values)
            for key in ("alpha", "grad"):  # the per-pair views of solve_pairs' result, not made yet: never
                getattr(res, "_lazy", {}).pop(key, None)
        else:
            alpha, grad = np.array(alpha, dtype=np.float64), np.array(grad, dtype=np.float64)
    else:
        solved = np.array([a is not None for a in res["alpha"]], dtype=bool)
        sizes = np.diff(offsets)
        alpha = np.concatenate([np.zeros(sizes[p]) if a is None else a for p, a in enumerate(res["alpha"])])
        grad = np.concatenate([-np.ones(sizes[p]) if g is None else g for p, g in enumerate(res["grad"])])
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    grad = np.ascontiguousarray(grad, dtype=np.float64)
    unsolved = np.flatnonzero(~solved).tolist()
    rho = np.asarray(res["rho"], dtype=np.float64).copy()
    objective = np.asarray(res["objective"], dtype=np.float64).copy()
    violation = np.asarray(res["violation"], dtype=np.float64).copy()
    n_iter = np.array(res["n_iter"], dtype=np.float64)
    n_iter[np.isnan(n_iter)] = 0.0  # pairs not started (np.nan_to_num: ~30 us)
    n_iter = n_iter.astype(np.int64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    from ..solvers.smo import compute_rho

    for p in unsolved:  # stopped before this pair started: the zero start, not converged
        lo, hi = int(offsets[p]), int(offsets[p + 1])
        alpha[lo:hi] = 0.0
        grad[lo:hi] = -1.0
        y = np.where(np.arange(hi - lo) < n_a[p], 1.0, -1.0)
        rho[p] = compute_rho(y, grad[lo:hi], alpha[lo:hi], C[rows[lo:hi]])
        objective[p] = 0.0
        violation[p] = 2.0
    w_sq = np.empty(n_pairs)
    min_funct = np.empty(n_pairs)
    hinge = np.empty(n_pairs)
    # alpha becomes the coefficients alpha * y, grad the decision values (in place: fresh copies unless consumed)
    coef, decision = alpha, grad
    _pair_values(rows, offsets, n_a, rho, C, coef, decision, w_sq, min_funct, hinge)
    w_norm = np.sqrt(w_sq)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(w_norm > 0, min_funct / w_norm, np.inf)
    primal = 0.5 * w_sq + hinge
    r = res.get("r") if hasattr(res, "get") else None
    nu = r is not None
    if nu:  # nu-SVC pairs (scaled to their C-SVC solution, C = w / r): no primal or gap reported, as fit_binary's
        primal = np.full(n_pairs, np.nan)
    linear = _is_linear(kernel)
    status = res["status"]
    gap = primal + objective
    # a run stopped early (time limit, callback) still has pairs that finished: those whose
    # violation is within tol (given) converged
    finished = np.full(n_pairs, status == "converged") | (tol is not None and violation <= tol)
    # a pair whose SMO ran into max_iter stopped early although the run as a whole went on (status 'converged')
    capped = n_iter >= max_iter if max_iter is not None and max_iter > 0 else np.zeros(n_pairs, dtype=bool)
    finished &= ~capped | (tol is not None and violation < tol)
    converged = finished & solved
    per_pair = dict(
        rho=rho, objective=objective, violation=violation, margin=margin, w_norm=w_norm, primal=primal, gap=gap
    )
    per_pair.update(n_iter=n_iter, converged=converged, capped=capped)
    if nu:
        per_pair["r"] = np.asarray(r, dtype=np.float64)
    # Python values of the pairs' numbers: one at a time for the first few fits built, then all at once as lists
    # (float() on NumPy scalars a pair at a time was most of the loop that built every fit; the lists of 1,000
    # classes' 499,500 pairs, 16,000 page faults, were made for fits never built)
    lists = {}
    built = [0]

    def values(p):
        built[0] += 1
        if built[0] <= BUILD_SINGLE:
            return {k: v[p].item() for k, v in per_pair.items()}
        if not lists:
            lists.update((k, v.tolist()) for k, v in per_pair.items())
        return {k: v[p] for k, v in lists.items()}

    def build(p):
        lo, hi = int(offsets[p]), int(offsets[p + 1])
        v = values(p)
        order = lo + np.argsort(rows[lo:hi], kind="stable")  # the pair's rows in increasing order
        c = coef[order]
        extra = dict(
            margin=v["margin"],
            w_norm=v["w_norm"],
            bias_rule="libsvm",
            train_decision=decision[order],
        )
        if nu:
            extra["r"] = v["r"]
        else:
            extra.update(primal_objective=v["primal"], duality_gap=v["gap"])
        w = np.asarray(X[rows[order]].T @ c).ravel() if linear else None
        return BinaryFit(
            alpha=np.abs(c),
            rho=v["rho"],
            objective=v["objective"],
            n_iter=v["n_iter"],
            violation=v["violation"],
            converged=v["converged"],
            status="converged" if v["converged"] else ("max_iter" if v["capped"] else status),
            w=w,
            extra=extra,
            margin=v["margin"],
            formulation="nu" if nu else "l1",
            solver=solver,
            coef=c,
        )

    arrays = dict(
        rows=rows,
        coef=coef,
        decision=decision,
        offsets=offsets,
        n_first=n_a,
        rho=rho,
        objective=objective,
        n_iter=n_iter,
        violation=violation,
        gap=gap,
        w_norm=w_norm,
        margin=margin,
        converged=converged,
    )
    if nu:
        arrays["r"] = np.asarray(r, dtype=np.float64)
    return PairFits(arrays, build, n_pairs)


@njit(cache=True, nogil=True)
def _pair_values(rows, offsets, n_first, rho, C, coef, decision, w_sq, min_funct, hinge):
    r"""One pass over the pairs' flat arrays (pair p at ``offsets[p]:offsets[p + 1]``, its first ``n_first[p]`` entries
    of class +1), in place: ``coef`` (the multipliers) becomes :math:`\alpha_t y_t`, ``decision`` (SMO's gradient
    :math:`G = Q\alpha - e`) the training decision value :math:`y_t(G_t + 1) - \rho`; per pair
    :math:`\|w\|^2 = \sum_t \alpha_t y_t s_t` with :math:`s_t = y_t(G_t + 1)` (at least 0), the smallest
    :math:`y_t f_t` and the hinge sum :math:`\sum_t C_t \max(0, 1 - y_t f_t)`."""
    for p in range(offsets.shape[0] - 1):
        lo, hi = offsets[p], offsets[p + 1]
        first = lo + n_first[p]
        r = rho[p]
        ws = 0.0
        mf = np.inf
        hs = 0.0
        for t in range(lo, hi):
            yt = 1.0 if t < first else -1.0
            s = yt * (decision[t] + 1.0)
            d = s - r
            a = coef[t]
            ws += a * yt * s
            f = yt * d
            if f < mf:
                mf = f
            if f < 1.0:
                hs += C[rows[t]] * (1.0 - f)
            coef[t] = a * yt
            decision[t] = d
        w_sq[p] = max(ws, 0.0)
        min_funct[p] = mf
        hinge[p] = hs


class PairFits(Sequence):
    """The fits of the pairs one :func:`~maxmargin.solvers.ovo.solve_pairs` call solved, as flat
    arrays (``arrays``: per entry, pair p at ``offsets[p]:offsets[p + 1]`` in the solver's order -- its first
    ``n_first[p]`` entries of class +1, then the others -- ``rows``, ``coef`` (:math:`\\alpha_t y_t`) and
    ``decision`` (training decision values); per pair ``rho``, ``objective``, ``n_iter``, ``violation``,
    ``gap``, ``w_norm``, ``margin``, ``converged``), with a :class:`BinaryFit` built when a pair
    is indexed (and kept: attributes set on it stay), its arrays in increasing row order.  The model is set from
    the arrays (:meth:`maxmargin.svm.BaseSVMClassifier._set_model`): 300 classes are 44,850 pairs, whose
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
def mark_support(rows, coef, is_sv):
    """``is_sv[rows[t]] = True`` where ``coef[t]`` (:math:`\\alpha_t y_t`) is not 0 (the pairs' flat arrays, one
    pass)."""
    for t in range(rows.shape[0]):
        if coef[t] != 0.0:
            is_sv[rows[t]] = True


@njit(cache=True)
def scatter_dual(rows, offsets, pair, coef, y_idx, pa, pb, spos, dual):
    """LIBSVM's ``dual_coef_`` layout from the pairs' flat arrays (segment k, ``offsets[k]:offsets[k + 1]``, of the pair
    ``pair[k]``): a support vector of class a sits in row b-1 for pair (a, b), of class b in row a; column
    ``spos[row]``."""
    for k in range(pair.shape[0]):
        p = pair[k]
        for t in range(offsets[k], offsets[k + 1]):
            if coef[t] != 0.0:
                r = rows[t]
                dual[pb[p] - 1 if y_idx[r] == pa[p] else pa[p], spos[r]] = coef[t]


@njit(cache=True)
def pair_wins(rows, decision, offsets, n_first, wins):
    """``wins[row]`` += the pairs whose vote goes to the row's own class (the first ``n_first[p]`` entries of pair p,
    at ``offsets[p]:offsets[p + 1]``, are of its first class, which a positive decision value votes for)."""
    for p in range(offsets.shape[0] - 1):
        first = offsets[p] + n_first[p]
        for t in range(offsets[p], offsets[p + 1]):
            if (decision[t] > 0.0) == (t < first):
                wins[rows[t]] += 1
