r"""Margins, offsets and separability: the formulas every formulation's ``finish`` uses.

Geometric margin (:func:`geometric_margin`): hard :math:`1/\|w\|`; l1
:math:`\min_iy_if(x_i)/\|w\|`; l2 :math:`(1 - \max_i\alpha_i/C_i)/\|w\|`;
l2-simplex :math:`(\rho_m - \max_i\mu_i/C_i)/\|w\|`; zero-one
:math:`\min_iy_if(x_i)/\|w\|` (seed 002's ``train*SVM`` functions).  Offsets
(:func:`bias_from_dual`) by the rules of :data:`BIAS_RULES`.  Separability of the
hard margin: see "Separability" in :mod:`maxmargin.formulations`.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

BIAS_RULES = ("notebook", "libsvm", "largest-alpha", "sv-average", "simplex")
#: default smallest geometric margin, relative to the data radius R, that 'hard' accepts as separable
MIN_MARGIN_FACTOR = 1e-5
#: the formulations geometric_margin knows
MARGIN_FORMULATIONS = ("l1", "hard", "l2", "l2-simplex", "zero-one")


class NotSeparableError(ValueError):
    """The training data is not separable in the kernel's feature space (formulation='hard')."""


def margin_from_definition(w_norm, y, decision):
    r"""The notebook's minimal geometric margin :math:`g_S = \min_i y_i f(x_i)/\|w\|`."""
    y = np.asarray(y, dtype=np.float64)
    smallest = np.min(y * np.asarray(decision, dtype=np.float64))
    if w_norm > 0:  # (np.errstate costs ~15 us: one-vs-one fits ask once a pair)
        return float(smallest) / float(w_norm)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(smallest / w_norm)


def geometric_margin(formulation, alpha, y, C, K_or_w_norm, decision=None, rho=None):
    r"""Geometric margin of a fitted binary problem, by the formula of its formulation.

    Parameters
    ----------
    formulation : one of :data:`FORMULATIONS`
    alpha : ndarray or None
        Dual variables (``mu`` for 'l2-simplex'); None for primal-only fits
        (then ``decision`` is needed for 'l1', 'l2' and 'zero-one').
    y : ndarray of +1 / -1
    C : float or ndarray of per-sample C
    K_or_w_norm : float or ndarray (n, n)
        :math:`\|w\|`, or the Gram matrix of the training rows, from which
        :math:`\|w\|^2 = (\alpha\circ y)^TK(\alpha\circ y)` (and, if ``decision``
        is None, :math:`f = K(\alpha\circ y) - \rho`) are computed.
    decision : ndarray or None
        :math:`f(x_i)` on the training rows (needed by 'l1' and 'zero-one').
    rho : float or None
        Offset, to compute ``decision`` from a Gram matrix ('l2-simplex':
        defaults to :math:`-y^T\mu`).

    Returns
    -------
    float
        hard: :math:`1/\|w\|` (eq. 7 / 17); l1: :math:`\min_iy_if(x_i)/\|w\|`;
        l2: :math:`(1 - \max_i\alpha_i/C_i)/\|w\|`; l2-simplex:
        :math:`(\mu^TH\mu - \max_i\mu_i/C_i)/\|w\|`; zero-one:
        :math:`\min_iy_if(x_i)/\|w\|`.  ``inf`` when :math:`w = 0`.
    """
    if formulation not in MARGIN_FORMULATIONS:
        raise ValueError(f"formulation must be one of {MARGIN_FORMULATIONS}, got {formulation!r}")
    y = np.asarray(y, dtype=np.float64)
    if formulation in ("l2", "l2-simplex"):
        C = np.broadcast_to(np.asarray(C, dtype=np.float64), y.shape)
    if np.ndim(K_or_w_norm) == 2:
        if alpha is None:
            raise ValueError("a Gram matrix needs alpha; pass ||w|| for primal-only fits")
        K = np.asarray(K_or_w_norm, dtype=np.float64)
        coef = np.asarray(alpha, dtype=np.float64) * y
        Kc = K @ coef
        w_norm = float(np.sqrt(max(coef @ Kc, 0.0)))
        if decision is None:
            if rho is None:
                if formulation != "l2-simplex":
                    raise ValueError("pass rho (or decision) with a Gram matrix")
                rho = -float(y @ alpha)
            decision = Kc - rho
    else:
        w_norm = float(K_or_w_norm)
    if not w_norm > 0:
        return float("inf")
    if formulation == "hard":
        return 1.0 / w_norm
    if formulation == "l2":
        if alpha is not None:
            xi_max = float(np.max(np.asarray(alpha) / C))
        else:
            if decision is None:
                raise ValueError("'l2' without alpha needs the training decision values")
            xi_max = float(np.max(np.maximum(0.0, 1.0 - y * decision)))
        return (1.0 - xi_max) / w_norm
    if formulation == "l2-simplex":
        mu = np.asarray(alpha, dtype=np.float64)
        rho_m = w_norm**2 + float(y @ mu) ** 2 + float(np.sum(mu * mu / C))
        return (rho_m - float(np.max(mu / C))) / w_norm
    if decision is None:
        raise ValueError(f"the {formulation!r} margin min_i y_i f(x_i) / ||w|| needs the training decision values")
    return margin_from_definition(w_norm, y, decision)


# -------------------------------------------------------------------------- bias
def bias_from_dual(rule, alpha, y, s, upper, shift):
    r"""The offset ``rho`` (``b = -rho``) of a dual solution by one of :data:`BIAS_RULES`.

    ``s_i = sum_j alpha_j y_j K_ij``, ``upper`` the bounds, ``shift`` the diagonal
    term (``1/C`` for 'l2').  A support vector *on* the margin satisfies
    :math:`y_i(s_i - \rho) = 1 - \text{shift}_i\alpha_i`, i.e. :math:`\rho = s_i -
    y_i(1 - \text{shift}_i\alpha_i)`; the rules average that over different sets.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    t = s - y * (1.0 - shift * alpha)  # rho implied by each variable sitting on the margin
    sv = alpha > 0
    if not sv.any():
        rule = "libsvm"
    if rule == "notebook":
        # b = -(alpha o y)' H alpha / 1'alpha  (seed 002, eqs. 17, 21, 23)
        return float(alpha @ (s + y * shift * alpha) / alpha.sum())
    if rule == "libsvm":
        G = y * s + shift * alpha - 1.0
        from ..solvers.smo import compute_rho  # LIBSVM's calculate_rho

        return compute_rho(y, G, alpha, upper)
    free = sv & (alpha < upper)
    if rule == "largest-alpha":  # seed 003: n = argmax alpha (among the free SVs when there are any)
        cand = free if free.any() else sv
        idx = np.flatnonzero(cand)
        return float(t[idx[np.argmax(alpha[idx])]])
    if rule == "sv-average":  # seed 004: mean over all support vectors
        return float(t[sv].mean())
    raise ValueError(f"bias must be one of {BIAS_RULES} or None, got {rule!r}")


# ------------------------------------------------------------ separability
def _hard_scale(X, kernel):
    """R^2 = max_i K(x_i, x_i)."""
    d = np.asarray(kernel.diag(X), dtype=np.float64)
    return float(d.max(initial=0.0))


def _min_margin(X, kernel, min_margin):
    if min_margin is not None:
        if not isinstance(min_margin, numbers.Real) or not min_margin > 0:
            raise ValueError(f"min_margin must be a positive number, got {min_margin!r}")
        return float(min_margin)
    r2 = _hard_scale(X, kernel)
    return MIN_MARGIN_FACTOR * np.sqrt(r2) if r2 > 0 else MIN_MARGIN_FACTOR


def _hull_bound_below(info, gamma_min, r2):
    r"""Whether an SMO iterate proves the hard margin below ``gamma_min``.

    A feasible :math:`\alpha` (:math:`\alpha \ge 0`, :math:`y^T\alpha = 0`) divided by
    :math:`s = \sum\alpha/2` gives a point of each class's convex hull in feature space, at
    distance :math:`\sqrt{\alpha^TQ\alpha}/s`; the margin is half the smallest such distance, so
    :math:`\gamma \le \sqrt{\alpha^TQ\alpha}/\sum\alpha`, with :math:`\alpha^TQ\alpha =
    2(\text{objective} + \sum\alpha)`.  On data that is not separable this bound falls like
    :math:`1/\sum\alpha`, long before the objective reaches :math:`-1/(2\gamma_{min}^2)`."""
    total = info.get("alpha_sum")
    if total is None or not total > 0:
        return False
    wsq = max(2.0 * (info["objective"] + total), 0.0) + 1e-12 * max(r2, 1e-300) * total * total  # rounding slack
    return wsq < (gamma_min * total) ** 2


def _not_separable(reason):
    return NotSeparableError(
        "formulation='hard' needs training data that is separable in the kernel's feature space; "
        f"this data is not separable ({reason}). Use formulation='l1' (soft margin) or 'l2', "
        "or a more flexible kernel (e.g. 'rbf')"
    )


def linearly_separable(X, y):
    """Whether some (w, b) has y_i (w . x_i + b) >= 1 for all i: an LP feasibility problem in
    d + 1 variables (SciPy's HiGHS), exact and fast for the linear kernel (dense or CSR X)."""
    from scipy.optimize import linprog

    n, d = X.shape
    Xs = sp.csr_matrix(X, dtype=np.float64)
    A = sp.hstack([-(sp.diags(y) @ Xs), sp.csr_matrix(-y.reshape(-1, 1))], format="csr")
    res = linprog(np.zeros(d + 1), A_ub=A, b_ub=-np.ones(n), bounds=[(None, None)] * (d + 1), method="highs")
    if res.status == 2:  # infeasible
        return False
    if res.status == 0:
        return True
    raise RuntimeError(f"the separability LP failed: {res.message}")
