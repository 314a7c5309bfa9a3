r"""An interior-point method for the duals of the linear kernel on few features (and of the polynomial kernel on
few explicit features), finished by SMO.

With the linear kernel the dual's matrix has rank at most :math:`d`: :math:`Q = VV^T` with
:math:`V = \mathrm{diag}(y) X` (:math:`n \times d`).  SMO (seed 001's pair steps) needs many steps where many
multipliers sit at the bound :math:`C` and few are free -- large ``C`` on overlapping classes, where at most
:math:`d + 1` multipliers can be free: on 4,000 x 20 standardised rows with 10% of the labels flipped, LIBSVM
takes 0.8 M steps at C = 10 and 15 M at C = 100.  A primal-dual interior-point method (Mehrotra's
predictor-corrector) takes 15-20 Newton steps whatever ``C``, and with the low rank each costs
:math:`O(nd^2)` (Ferris and Munson 2003): the Newton system

.. math:: (Q + \mathrm{diag}(s) + D)\,\Delta\alpha + y\,\Delta\lambda = r, \qquad y^T\Delta\alpha = -r_p,

with the barrier's diagonal :math:`D = Z A^{-1} + W S^{-1}` (multipliers :math:`z` of :math:`\alpha \ge 0`,
:math:`w` of :math:`\alpha \le U`, slacks :math:`s = U - \alpha`) is solved by the Sherman-Morrison-Woodbury
identity :math:`(E + VV^T)^{-1} = E^{-1} - E^{-1}V(I + V^TE^{-1}V)^{-1}V^TE^{-1}`, one Cholesky factor of a
:math:`d \times d` matrix per step; :math:`E` has a small proximal term added (:data:`REG`), without which the
factor failed near the end on most problems with large ``C``.

The interior point only *starts* SMO: its multipliers are rounded to the bounds they are within ``1e-6``
(relative) of, made feasible (:func:`maxmargin.solvers.smo.initial_alpha`) and handed to SMO with their
gradients (:math:`O(nd)` each), so the solution stops by SMO's own rule (the maximal KKT violation below
``tol``) and has LIBSVM's offset.  Where the interior point fails (a factor that is not positive definite) SMO
starts from zero instead.  On the 4,000 x 20 rows above: 17 Newton steps, 0.03-0.06 s, and SMO then takes no
step, where SMO alone took 5 s at C = 10 and 37 s at C = 100.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import math

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.linalg.blas import dsyrk as syrk

from .._threads import one_blas_thread
from . import smo
from .base import Solution

PROBLEMS = ("dual",)
OPTIONS = smo.OPTIONS
OWN_OPTIONS = ("smo_first", "first_solver")
TRAITS = ("iterative", "libsvm-rho", "gathered-rows", "linear-kernel", "poly-kernel")

#: solver='auto' takes the interior point for the linear kernel on at most this many features (a Newton step
#: costs ~2 n d^2 flops; see :func:`pays`) ...
MAX_FEATURES = 64
#: ... and from this many variables on (below, SMO's steps are few and cheap)
MIN_VARIABLES = 1000
#: with ``smo_first`` (solver='auto'), SMO runs first for up to ``max(SMO_FIRST_MIN, SMO_FIRST_PER_D * d)``
#: steps: the interior point's ~17 Newton steps of ~2 n d^2 flops cost about as much as 8 d kernel rows of
#: ~2 n d flops, and SMO's early steps compute two rows each; so problems SMO solves in a few steps (far apart
#: classes) keep SMO's time and the others pay about the interior point's
SMO_FIRST_MIN = 200
SMO_FIRST_PER_D = 10
#: a multi-class fit's one-vs-one pairs leave the compiled all-pairs route for the interior point under 'auto' from
#: this many rows (below, an easy pair's few hundred SMO steps on in-memory class blocks cost less than the budget
#: and the interior point's Python: 4 well-separated classes of 750 rows, 8 features, 1.16-1.22x the compiled route)
MIN_PAIR_ROWS = 2000
#: Newton steps at most; the interior point stops earlier at a relative duality gap of GAP_TOL
MAX_NEWTON = 60
#: the duality gap's fall over STALL_STEPS steps that keeps a run going past ``soft_limit`` (:func:`interior_point`;
#: Skin_NonSkin's unscaled rows: the gap falls ~14% a step from the start while the residual stays -- the merit, and
#: so the best iterate, stay at the start's -- then both collapse by step 65)
GAP_FALL = 0.8
GAP_TOL = 1e-10
#: ... and at residuals (dual, primal) within this fraction of the gradient's largest entry
RES_TOL = 1e-9
#: the iterate with the smallest relative gap plus residual is returned when this many steps have not improved on it
#: (with the polynomial kernel's 231 features, 8,000 rows, C = 10: within 1e-8 at the 20th step, then rounding
#: drove the residual up to 3e-1 and the interior point ran to MAX_NEWTON)
STALL_STEPS = 3
#: ... once that iterate is within this (before, the gap may grow while the residuals fall)
STALL_FROM = 1e-6
#: the barrier's diagonal E gets this times the largest diagonal entry of VV^T added (a proximal term): near the
#: end E goes to 0 on the free multipliers and :math:`I + V^TE^{-1}V` lost its positive definiteness in rounding
#: (22 of 40 generated problems of 3-40 features, C from 0.1 to 1e5, weighted or not, then went to SMO from zero:
#: 16-35 M steps a pair at C = 1000); with 1e-14 to 1e-11 none did, the features scaled by 1e-3 or 1e3 as well
REG = 1e-12
#: a factor that fails leaves SMO the iterate where its relative duality gap and residuals are within this
LAST_TOL = 1e-6
#: multipliers within this fraction of a bound are put on it before SMO
ROUND = 1e-6
#: the fraction of the way to the boundary a step goes
STEP_FRACTION = 0.995
DEBUG = False
TINY = 1e-200  # a floor for multipliers and slacks (z / a stays finite)


#: the polynomial kernel (coef0 >= 0) through its explicit features phi(x) (phi(x).phi(z) = (gamma x.z + coef0)^p):
#: solver='auto' takes the interior point for at most this many of them (degree 2 on 20 features: 210; 4,000 x 20
#: standardised rows, 10% of the labels flipped, C = 100: 21 Newton steps, 0.69 s, against SMO 1.34 s and 677k
#: steps, the batched solver 3.45 s, LIBSVM 1.15 s; degree 3, 1,771 features: 24 s) ...
POLY_MAX_FEATURES = 256
#: ... where ``n`` times that many values are at most this many (the features are held dense)
POLY_MAX_VALUES = 1 << 24
#: ... and after the solver 'auto' would take ran this many steps per squared feature without converging (a Newton
#: step costs ~2 n D^2 flops, ~20 of them against a few n flops a step: SMO solves easy problems -- small C --
#: well before the budget, 4,000 rows at C = 1: 6,900 steps, 0.06 s batched against 0.43 s by Newton steps); times
#: the data rows per variable (SVR: 1/2), since a Newton step's cost goes with the rows (:class:`Features`)
POLY_FIRST_PER_D2 = 2


def feature_dimension(kernel, d):
    """How many explicit features the interior point works with for ``kernel`` on ``d`` input features: ``d`` for
    the linear kernel; for the polynomial kernel with gamma > 0 and coef0 >= 0 the monomials of the degrees its
    binomial expansion keeps (all up to the degree with coef0 > 0, the top one only with coef0 = 0); None for other
    kernels."""
    name = getattr(kernel, "name", None)
    if name == "linear":
        return d
    if name != "poly" or not (kernel.gamma > 0 and kernel.coef0 >= 0 and kernel.degree >= 1):
        return None
    degrees = range(kernel.degree + 1) if kernel.coef0 > 0 else (kernel.degree,)
    return sum(math.comb(d + k - 1, k) for k in degrees)


def feature_map(X, kernel):
    r"""The explicit features (dense, float64) with :math:`\phi(x)^T\phi(z) = k(x, z)`: ``X`` itself for the
    linear kernel; for the polynomial kernel, from :math:`(\gamma x^Tz + c_0)^p = \sum_k \binom{p}{k}
    c_0^{p-k}\gamma^k (x^Tz)^k` and :math:`(x^Tz)^k = \sum_{|m| = k} \binom{k}{m} x^m z^m` (multinomial
    coefficients over the multisets m of k features), one column :math:`\sqrt{\binom{p}{k} c_0^{p-k}\gamma^k
    \binom{k}{m}}\, x^m` per monomial."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if getattr(kernel, "name", None) == "linear":
        return X
    n, d = X.shape
    p, g, c0 = kernel.degree, kernel.gamma, kernel.coef0
    out = np.empty((n, feature_dimension(kernel, d)))
    col = 0
    for k in range(p + 1) if c0 > 0 else (p,):
        weight = math.comb(p, k) * c0 ** (p - k) * g**k
        for m in itertools.combinations_with_replacement(range(d), k):
            counts = np.bincount(np.asarray(m, dtype=np.int64), minlength=d)
            multinomial = math.factorial(k) / math.prod(math.factorial(int(c)) for c in counts)
            v = np.full(n, math.sqrt(weight * multinomial))
            for j in m:
                v *= X[:, j]
            out[:, col] = v
            col += 1
    return out


def pays_poly(X, kernel, n_var):
    """Whether solver='auto' should try the interior point on the polynomial kernel's explicit features (after a
    budget of the solver it would take, :data:`POLY_FIRST_PER_D2`): at most :data:`POLY_MAX_FEATURES` of them,
    ``n`` times as many at most :data:`POLY_MAX_VALUES`, at least :data:`MIN_VARIABLES` variables."""
    if getattr(kernel, "name", None) != "poly" or X is None or len(getattr(X, "shape", ())) != 2:
        return False
    D = feature_dimension(kernel, X.shape[1])
    return D is not None and D <= POLY_MAX_FEATURES and X.shape[0] * D <= POLY_MAX_VALUES and n_var >= MIN_VARIABLES


def pays(X, kernel, n_var):
    """Whether solver='auto' should take the interior point: the linear kernel on at most :data:`MAX_FEATURES`
    features (dense or sparse rows) and at least :data:`MIN_VARIABLES` variables."""
    return (
        getattr(kernel, "name", None) == "linear"
        and X is not None
        and len(getattr(X, "shape", ())) == 2
        and X.shape[1] <= MAX_FEATURES
        and n_var >= MIN_VARIABLES
    )


class Features:
    r"""The interior point's :math:`V` (:math:`VV^T` is the dual's matrix without its shift), held as
    :math:`V = \mathrm{diag}(\text{sign})\,\Phi_{[\text{rows}]}`: one feature row per data row, shared by the
    variables of that row (SVR's two, :math:`\alpha_i` and :math:`\alpha_i^*`).  ``rows`` None: ``Phi`` is
    :math:`V` itself.  With shared rows the products and the rank-n update run over the data rows:
    :math:`V^TEV = \Phi^T \mathrm{diag}(\textstyle\sum_{t \to i} E_t)\,\Phi` (the signs square away), half the
    work of a Newton step for SVR (8,000 x 20 rows, degree 2, C = 10: the interior point 0.56 -> 0.24 s, session 48)."""

    def __init__(self, Phi, rows=None, sign=None):
        self.Phi = Phi
        self.rows = None if rows is None else np.asarray(rows, dtype=np.intp)
        self.sign = None if sign is None else np.asarray(sign, dtype=np.float64)
        self.shape = (Phi.shape[0] if rows is None else self.rows.shape[0], Phi.shape[1])

    def dot(self, u):
        """:math:`Vu`."""
        out = self.Phi @ u
        return out if self.rows is None else self.sign * out[self.rows]

    def tdot(self, r):
        """:math:`V^Tr`."""
        if self.rows is None:
            return self.Phi.T @ r
        return self.Phi.T @ np.bincount(self.rows, weights=self.sign * r, minlength=self.Phi.shape[0])

    def gram(self, e):
        r"""The upper triangle of :math:`V^T\mathrm{diag}(e)V` (``e >= 0``), by BLAS's rank-n update."""
        if self.rows is not None:
            e = np.bincount(self.rows, weights=e, minlength=self.Phi.shape[0])
        return syrk(1.0, (self.Phi * np.sqrt(e)[:, None]).T, trans=0)

    def largest_square_norm(self):
        r""":math:`\max_t \|V_t\|^2` (0 for no rows)."""
        Phi = self.Phi if self.rows is None else self.Phi[np.unique(self.rows)]
        return float(np.einsum("ij,ij->i", Phi, Phi).max()) if Phi.shape[0] else 0.0


def _features(problem):
    """:class:`Features` of the problem's variables (dense, float64; :func:`feature_map`): one row per data row
    its variables use, where some share one (SVR)."""
    index = np.asarray(problem.index)
    rows, inverse = np.unique(index, return_inverse=True)
    if rows.size == index.size:
        return Features(problem.y[:, None] * feature_map(problem.X[index], problem.kernel))
    return Features(feature_map(problem.X[rows], problem.kernel), inverse.ravel(), problem.y)


def interior_point(
    V,
    y,
    p,
    U,
    shift,
    delta,
    max_newton=MAX_NEWTON,
    gap_tol=GAP_TOL,
    stall_from=STALL_FROM,
    accept=None,
    soft_limit=None,
):
    r"""Minimise :math:`\tfrac12\alpha^T(VV^T + \mathrm{diag}(shift))\alpha + p^T\alpha` subject to
    :math:`y^T\alpha = \delta`, :math:`0 \le \alpha \le U` (``U`` may hold ``inf``) by Mehrotra's
    predictor-corrector from an infeasible start; ``y`` None: no equality (the box alone, ``delta`` unused).
    ``stall_from``: the best iterate is returned once :data:`STALL_STEPS` steps did not improve on it and its
    relative gap plus residual is within this.  ``accept``: where given, a run that ends at ``max_newton`` returns
    its best iterate if that one's relative gap plus residual is within it, else None.  ``soft_limit``: past this
    many steps the run goes on (to ``max_newton``) only while its best iterate is at most :data:`STALL_STEPS` steps
    old or its duality gap falls to :data:`GAP_FALL` of its value STALL_STEPS steps before, and then ends as at
    ``max_newton``.  Returns ``(alpha, steps)``, or ``(None, steps)`` when a factor
    fails."""
    V = V if isinstance(V, Features) else Features(np.asarray(V, dtype=np.float64))
    with one_blas_thread():  # BLAS's idle threads spun on the cores between its calls: 8,000 x 231, 1.4 s -> 0.5 s
        return _interior_point(V, y, p, U, shift, delta, max_newton, gap_tol, stall_from, accept, soft_limit)


def _interior_point(V, y, p, U, shift, delta, max_newton, gap_tol, stall_from, accept, soft_limit=None):
    n, d = V.shape
    fin = np.isfinite(U)
    Uf = np.where(fin, U, 1.0)
    a = np.where(fin, 0.5 * Uf, 1.0)
    z = np.ones(n)
    w = np.where(fin, 1.0, 0.0)
    lam = 0.0
    diag = np.diag_indices(d)
    scale = max(1.0, float(np.abs(p).max()) if n else 1.0)
    reg = REG * V.largest_square_norm()
    n_bounds = n + int(np.count_nonzero(fin))
    steps = 0
    best = (np.inf, None, 0)
    gaps = [np.inf]
    for steps in range(1, max_newton + 1):
        a = np.maximum(a, TINY)  # (a step that reaches a bound in rounding stays inside it)
        s = np.where(fin, np.maximum(Uf - a, TINY), 1.0)  # (1 where there is no upper bound: w = 0 there)
        s_inf = np.where(fin, s, np.inf)  # (no upper bound: no barrier term, no step limit)
        g = V.dot(V.tdot(a)) + shift * a + p
        rd = g - z + w if y is None else g + lam * y - z + w
        rp = 0.0 if y is None else float(y @ a) - delta
        gap = float(z @ a + w @ s)
        obj = 0.5 * float(a @ (g + p))
        rscale = max(scale, float(np.abs(g).max()))
        res = max(float(np.abs(rd).max()), abs(rp)) / rscale
        if gap <= gap_tol * max(1.0, abs(obj)) and res <= RES_TOL:
            break
        merit = gap / max(1.0, abs(obj)) + res
        if merit < best[0]:
            best = (merit, a.copy(), steps)
        elif best[0] <= stall_from and steps - best[2] >= STALL_STEPS:
            return best[1], steps  # rounding stopped the progress near the end: the best iterate so far
        gaps.append(gap)
        falls = gap <= GAP_FALL * gaps[-1 - STALL_STEPS] if len(gaps) > STALL_STEPS else True
        if soft_limit is not None and steps > soft_limit and steps - best[2] >= STALL_STEPS and not falls:
            return (best[1] if accept is None or best[0] <= accept else None), steps
        mu = gap / n_bounds
        with np.errstate(over="ignore"):  # a multiplier at its floor TINY: z / a is inf, its Ei 0
            Ei = 1.0 / (z / a + w / s + shift + reg)
        # I + V'E^-1 V, its upper triangle by a rank-n update (half the products of V.T @ (E^-1 V))
        M = V.gram(Ei)
        M[diag] += 1.0
        try:
            factor = cho_factor(M, lower=False, check_finite=False)
        except LinAlgError:
            return _last(a, gap, obj, rd, rp, rscale), steps
        if not np.all(np.isfinite(factor[0])):
            return _last(a, gap, obj, rd, rp, rscale), steps

        def solve_m(r, Ei=Ei, factor=factor):
            Er = Ei * r
            return Er - Ei * V.dot(cho_solve(factor, V.tdot(Er), check_finite=False))

        b = None if y is None else solve_m(y)
        yb = None if y is None else float(y @ b)

        def direction(target_z, target_w, b=b, yb=yb, s_inf=s_inf, rd=rd, rp=rp):
            # complementarity targets: z a = target_z, w s = target_w (corrected by the predictor's products)
            r = -rd + target_z / a - target_w / s_inf
            aa = solve_m(r)
            if y is None:
                da, dl = aa, 0.0
            else:
                dl = (float(y @ aa) + rp) / yb
                da = aa - b * dl
            dz = (target_z - z * da) / a
            dw = (target_w + w * da) / s_inf
            return da, dz, dw, dl

        da, dz, dw, _ = direction(-z * a, -w * s)
        ap = min(_to_bound(a, da), _to_bound(s_inf, -da))
        ad = min(_to_bound(z, dz), _to_bound(w, dw))
        affine = float((a + ap * da) @ (z + ad * dz) + (s - ap * da) @ (w + ad * dw))
        sigma = (affine / gap) ** 3 if gap > 0 else 0.0
        da, dz, dw, dl = direction(sigma * mu - z * a - da * dz, sigma * mu - w * s + da * dw)
        ap = STEP_FRACTION * min(_to_bound(a, da), _to_bound(s_inf, -da))
        ad = STEP_FRACTION * min(_to_bound(z, dz), _to_bound(w, dw))

        a = a + ap * da
        z = z + ad * dz
        w = w + ad * dw
        lam += ad * dl
        if not (np.all(np.isfinite(a)) and np.isfinite(lam)):
            return None, steps
    else:  # (no break: max_newton steps without meeting gap_tol)
        if accept is not None:
            return (best[1] if best[0] <= accept else None), steps
    return a, steps


def _last(a, gap, obj, rd, rp, scale):
    """The iterate a failed factor leaves: SMO's start where it is already close (relative duality gap and
    residuals, the dual one against ``scale`` = the gradient's largest entry, within :data:`LAST_TOL`), else None
    (SMO from zero)."""
    close = (
        gap <= LAST_TOL * max(1.0, abs(obj)) and np.abs(rd).max() <= LAST_TOL * scale and abs(rp) <= LAST_TOL * scale
    )
    return a if close else None


def _to_bound(x, dx):
    """The longest step ``t <= 1`` with ``x + t dx >= 0`` (``x > 0``; ``inf`` entries never bind)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.where(dx < 0, x / -dx, np.inf)
    return min(1.0, float(r.min())) if r.size else 1.0


def _rounded(a, U):
    """Multipliers within :data:`ROUND` (relative) of a bound put on it."""
    fin = np.isfinite(U)
    top = float(np.max(np.where(fin, U, a))) if a.size else 1.0
    out = a.copy()
    out[out <= ROUND * np.where(fin, U, top)] = 0.0
    at_top = fin & (out >= (1.0 - ROUND) * np.where(fin, U, np.inf))
    out[at_top] = U[at_top]
    return out


def _restore_equality(a, y, U, delta):
    r"""``a`` with :math:`y^Ta = \delta` restored on its free multipliers, the one with the most room first, so
    that no multiplier leaves the bound it was rounded to (:func:`maxmargin.solvers.smo.initial_alpha` would
    move every nonzero one of a side a little, and those at ``U`` would become free: a thousand SMO steps)."""
    r = delta - float(y @ a)
    free = np.flatnonzero((a > 0) & (a < U))
    for t in free[np.argsort(-np.minimum(a[free], U[free] - a[free]))]:
        if r == 0.0:
            break
        step = min(max(y[t] * r, -a[t]), U[t] - a[t])  # y_t * step of y_t a_t
        a[t] += step
        r -= y[t] * step
    return a


def solve(problem, smo_first=False, first_solver="smo", **options):
    """Solve a :class:`~maxmargin.problem.DualProblem` of the linear kernel, or of the polynomial kernel through
    its explicit features (:func:`feature_map`): the interior point, then SMO from its rounded multipliers (see the
    module docstring).  A problem with a warm start goes to SMO from it.  ``options``: SMO's (:data:`OPTIONS`),
    passed on to it.  ``smo_first``: try ``first_solver`` ('smo' or 'batched') alone first, within a budget of
    steps (:data:`SMO_FIRST_PER_D` a feature; polynomial: :data:`POLY_FIRST_PER_D2` a squared feature, times the
    data rows per variable)."""
    if first_solver not in ("smo", "batched"):
        raise ValueError(f"first_solver must be 'smo' or 'batched', got {first_solver!r}")
    D = feature_dimension(problem.kernel, problem.X.shape[1]) if problem.X is not None else None
    if D is None or (problem.kernel.name == "poly" and D > POLY_MAX_FEATURES):
        raise ValueError(
            "solver='ipm' needs kernel='linear', or kernel='poly' with gamma > 0, coef0 >= 0 and at most "
            f"{POLY_MAX_FEATURES} explicit features; got {problem.kernel!r}"
            + (f" with {D} features" if D is not None else "")
        )
    max_iter = options.get("max_iter", -1)
    verbose = options.get("verbose", False)
    if problem.alpha0 is not None or problem.nu_constraints:
        return smo.solve(problem, **options)
    if smo_first:
        if problem.kernel.name == "poly":
            # a Newton step's cost goes with the data rows (:class:`Features`), a step of SMO's with the variables
            rows = np.unique(np.asarray(problem.index)).size / max(len(problem.index), 1)
            budget = max(SMO_FIRST_MIN, int(POLY_FIRST_PER_D2 * D * D * rows))
        else:
            budget = max(SMO_FIRST_MIN, SMO_FIRST_PER_D * problem.X.shape[1])
        first = smo if first_solver == "smo" else importlib.import_module(f"maxmargin.solvers.{first_solver}")
        if max_iter < 0 or max_iter > budget:
            sol = first.solve(problem, **{**options, "max_iter": budget})
            if sol.converged or sol.status != "max_iter":
                return sol
            tried = sol.n_iter
            if verbose:
                print(f"[ipm] SMO did not converge within {budget} steps: the interior point")
        else:
            return smo.solve(problem, **options)
    else:
        tried = 0
    V = _features(problem)
    U = np.asarray(problem.upper, dtype=np.float64)
    shift = np.asarray(problem.shift, dtype=np.float64)
    a, steps = interior_point(V, problem.y, problem.p, U, shift, float(problem.delta))
    if verbose:
        print(f"[ipm] {steps} Newton steps" + ("" if a is not None else ": a factor failed, SMO from zero"))
    if a is None:
        sol = smo.solve(problem, **options)
    else:
        start = copy.copy(problem)
        start.alpha0 = _restore_equality(_rounded(a, U), problem.y, U, float(problem.delta))
        start.alpha0 = smo.initial_alpha(start)  # (what the free multipliers could not take, if anything)
        alpha = start.alpha0
        G = V.dot(V.tdot(alpha)) + shift * alpha + problem.p
        at_top = np.isfinite(U) & (alpha >= U)
        Gbar = V.dot(V.tdot(np.where(at_top, U, 0.0))) + np.where(at_top, shift * U, 0.0)
        sol = smo.solve(start, **options, start=(G, Gbar))
    # n_iter: SMO's steps (those of the budget too) and the Newton steps
    sol.n_iter = int(sol.n_iter) + tried + steps
    sol.extra = {**(getattr(sol, "extra", None) or {}), "newton_steps": steps, "smo_budget_steps": tried}
    return sol


__all__ = ["Features", "interior_point", "pays", "solve", "Solution"]
