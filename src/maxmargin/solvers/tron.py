r"""Primal trust-region Newton method for squared-loss linear SVMs (LIBLINEAR's solvers 2 and 11).

Objectives (per-sample :math:`C_i`, bias feature included in :math:`w` as in LIBLINEAR):

* squared hinge: :math:`f(w) = \tfrac12 w\cdot w + \sum_i C_i \max(0, 1 - y_i w\cdot x_i)^2`;
* squared epsilon-insensitive: :math:`f(w) = \tfrac12 w\cdot w + \sum_i C_i \max(0, |w\cdot x_i - y_i| - \epsilon)^2`.

Both are once continuously differentiable and piecewise quadratic.  With :math:`r_i` the signed residual of the
active pieces (:math:`r_i = y_i w\cdot x_i - 1` when :math:`y_i w\cdot x_i < 1`, resp.
:math:`w\cdot x_i - y_i \mp \epsilon` outside the tube) the gradient and the generalised Hessian are

.. math:: \nabla f = w + 2 \sum_{i\in I} C_i r_i s_i x_i, \qquad
          \nabla^2 f = I + 2 \sum_{i\in I} C_i x_i x_i^T,

(:math:`s_i = y_i` for classification, 1 for regression), so a Hessian-vector product is two passes over the
active rows, :math:`v + 2 X_I^T (C_I \circ X_I v)`, and the Hessian is never formed.

Trust region (Lin and Moré 1999; Lin, Weng and Keerthi 2008): each iteration solves
:math:`\min_s g\cdot s + \tfrac12 s^T H s` subject to :math:`\|s\| \le \Delta` approximately by conjugate
gradients (Steihaug: stop at the boundary or when the residual is below 0.1 ||g||), accepts the step when the
actual reduction is more than :math:`\eta_0 = 10^{-4}` times the predicted one, and resizes :math:`\Delta` by
the ratio (thresholds 0.25 / 0.75, factors 0.25 / 0.5 / 4).  Stopping: :math:`\|\nabla f(w)\| \le`
``tol`` :math:`\cdot \|\nabla f(w_0)\|` (classification scales ``tol`` by ``max(min(#pos, #neg), 1)/n``, as
LIBLINEAR does).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._linear_common import drive, row_axpy, row_dot
from .dual_cd import LinearFit

ETA0, ETA1, ETA2 = 1e-4, 0.25, 0.75
SIGMA1, SIGMA2, SIGMA3 = 0.25, 0.5, 4.0


@njit(cache=True, nogil=True)
def _fun_grad(w, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps, z, coef, g):
    """f(w); sets ``coef`` (2 C_i r_i s_i on active rows, else 0), ``z`` (active weights 2 C_i or 0) and ``g``."""
    n = y.shape[0]
    f = 0.0
    for j in range(w.shape[0]):
        f += w[j] * w[j]
    f *= 0.5
    for i in range(n):
        o = row_dot(i, w, Xd, data, indices, indptr, dense, nf, bias)
        r = 0.0
        s = 1.0
        if kind == 0:
            m = y[i] * o
            if m < 1.0:
                r = m - 1.0
                s = y[i]
        else:
            d = o - y[i]
            if d > eps:
                r = d - eps
            elif d < -eps:
                r = d + eps
        if r != 0.0:
            f += C[i] * r * r
            coef[i] = 2.0 * C[i] * r * s
            z[i] = 2.0 * C[i]
        else:
            coef[i] = 0.0
            z[i] = 0.0
    g[:] = w
    for i in range(n):
        c = coef[i]
        if c != 0.0:
            row_axpy(i, c, g, Xd, data, indices, indptr, dense, nf, bias)
    return f


@njit(cache=True, nogil=True)
def _fun(w, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps):
    n = y.shape[0]
    f = 0.0
    for j in range(w.shape[0]):
        f += w[j] * w[j]
    f *= 0.5
    for i in range(n):
        o = row_dot(i, w, Xd, data, indices, indptr, dense, nf, bias)
        r = 0.0
        if kind == 0:
            m = y[i] * o
            if m < 1.0:
                r = m - 1.0
        else:
            d = o - y[i]
            if d > eps:
                r = d - eps
            elif d < -eps:
                r = d + eps
        f += C[i] * r * r
    return f


@njit(cache=True, nogil=True)
def _hess_vec(v, out, Xd, data, indices, indptr, dense, nf, bias, z):
    """out = v + sum_{z_i > 0} z_i x_i (x_i . v)."""
    out[:] = v
    for i in range(z.shape[0]):
        zi = z[i]
        if zi != 0.0:
            t = zi * row_dot(i, v, Xd, data, indices, indptr, dense, nf, bias)
            row_axpy(i, t, out, Xd, data, indices, indptr, dense, nf, bias)


@njit(cache=True, nogil=True)
def _norm(v):
    s = 0.0
    for j in range(v.shape[0]):
        s += v[j] * v[j]
    return np.sqrt(s)


@njit(cache=True, nogil=True)
def _trcg(delta, g, s, r, d, Hd, Xd, data, indices, indptr, dense, nf, bias, z):
    """Steihaug CG for min g.s + 1/2 s'Hs, ||s|| <= delta.  Leaves r = -g - H s.  Returns CG iterations."""
    m = g.shape[0]
    for j in range(m):
        s[j] = 0.0
        r[j] = -g[j]
        d[j] = r[j]
    cg_tol = 0.1 * _norm(g)
    rTr = 0.0
    for j in range(m):
        rTr += r[j] * r[j]
    it = 0
    while True:
        if np.sqrt(rTr) <= cg_tol:
            break
        it += 1
        _hess_vec(d, Hd, Xd, data, indices, indptr, dense, nf, bias, z)
        dHd = 0.0
        for j in range(m):
            dHd += d[j] * Hd[j]
        alpha = rTr / dHd
        over = 0.0
        for j in range(m):
            t = s[j] + alpha * d[j]
            over += t * t
        if np.sqrt(over) > delta:
            # back to s and go to the trust-region boundary along d
            std = 0.0
            sts = 0.0
            dtd = 0.0
            for j in range(m):
                std += s[j] * d[j]
                sts += s[j] * s[j]
                dtd += d[j] * d[j]
            dsq = delta * delta
            rad = np.sqrt(std * std + dtd * (dsq - sts))
            if std >= 0.0:
                alpha = (dsq - sts) / (std + rad)
            else:
                alpha = (rad - std) / dtd
            for j in range(m):
                s[j] += alpha * d[j]
                r[j] -= alpha * Hd[j]
            break
        for j in range(m):
            s[j] += alpha * d[j]
            r[j] -= alpha * Hd[j]
        rnew = 0.0
        for j in range(m):
            rnew += r[j] * r[j]
        beta = rnew / rTr
        for j in range(m):
            d[j] = r[j] + beta * d[j]
        rTr = rnew
    return it


@njit(cache=True, nogil=True)
def _tron_iters(
    Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps, w, g, z, coef, work, istate, fstate, tol, n_iters
):
    """Up to ``n_iters`` accepted trust-region iterations.  istate = [iteration, started, cg iterations];
    fstate = [f, delta, ||g0||, ||g||].  Returns 0 when converged (or stuck), 1 otherwise."""
    m = w.shape[0]
    s = work[0]
    r = work[1]
    d = work[2]
    Hd = work[3]
    w_new = work[4]
    if istate[1] == 0:
        f = _fun_grad(w, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps, z, coef, g)
        gn = _norm(g)
        fstate[0] = f
        fstate[1] = gn
        if fstate[2] <= 0.0:  # no reference preset (a warm start presets the gradient norm at w = 0)
            fstate[2] = gn
        fstate[3] = gn
        istate[1] = 1
        if gn <= tol * fstate[2] or gn == 0.0:
            return 0
    f = fstate[0]
    delta = fstate[1]
    gnorm0 = fstate[2]
    done = 0
    while done < n_iters:
        istate[2] += _trcg(delta, g, s, r, d, Hd, Xd, data, indices, indptr, dense, nf, bias, z)
        gs = 0.0
        sr = 0.0
        for j in range(m):
            w_new[j] = w[j] + s[j]
            gs += g[j] * s[j]
            sr += s[j] * r[j]
        prered = -0.5 * (gs - sr)
        fnew = _fun(w_new, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps)
        actred = f - fnew
        snorm = _norm(s)
        if istate[0] == 0 and done == 0:
            delta = min(delta, snorm)
        if fnew - f - gs <= 0.0:
            alpha = SIGMA3
        else:
            alpha = max(SIGMA1, -0.5 * (gs / (fnew - f - gs)))
        if actred < ETA0 * prered:
            delta = min(max(alpha, SIGMA1) * snorm, SIGMA2 * delta)
        elif actred < ETA1 * prered:
            delta = max(SIGMA1 * delta, min(alpha * snorm, SIGMA2 * delta))
        elif actred < ETA2 * prered:
            delta = max(SIGMA1 * delta, min(alpha * snorm, SIGMA3 * delta))
        else:
            delta = max(delta, min(alpha * snorm, SIGMA3 * delta))
        if actred > ETA0 * prered:
            istate[0] += 1
            done += 1
            w[:] = w_new
            f = _fun_grad(w, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps, z, coef, g)
            gn = _norm(g)
            fstate[0] = f
            fstate[1] = delta
            fstate[3] = gn
            if gn <= tol * gnorm0:
                return 0
        fstate[1] = delta
        if abs(actred) <= 0.0 and prered <= 0.0:
            return 0
        if abs(actred) <= 1e-12 * abs(f) and abs(prered) <= 1e-12 * abs(f):
            return 0
    return 1


def solve(
    ld,
    y,
    C,
    *,
    kind="squared_hinge",
    epsilon=0.0,
    tol=1e-4,
    max_iter=1000,
    w0=None,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
):
    """Minimise the squared-hinge (``kind='squared_hinge'``, ``y`` in {-1, +1}) or squared epsilon-insensitive
    (``kind='squared_epsilon_insensitive'``) primal by TRON; see the module docstring.  ``w0``: a warm start.
    Returns a :class:`~maxmargin.solvers.dual_cd.LinearFit` (no dual variables)."""
    n = y.shape[0]
    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    code = 0 if kind == "squared_hinge" else 1
    eff_tol = float(tol)
    if code == 0:
        pos = int(np.sum(y > 0))
        eff_tol = float(tol) * max(min(pos, n - pos), 1) / max(n, 1)
    m = ld.n_weights
    w = np.zeros(m) if w0 is None else np.array(w0, dtype=np.float64)
    g = np.zeros(m)
    z = np.zeros(n)
    coef = np.zeros(n)
    work = np.zeros((5, m))
    istate = np.zeros(3, dtype=np.int64)
    fstate = np.zeros(4)
    args = ld.args()
    if w0 is not None:
        # the stopping rule is relative to the first gradient: a warm start measures it at w = 0, as a cold
        # start would, so that a good start does not make the rule stricter
        zero = np.zeros(m)
        _fun_grad(zero, *args, y, C, code, float(epsilon), z, coef, g)
        fstate[2] = _norm(g)

    def step(k):
        rc = _tron_iters(*args, y, C, code, float(epsilon), w, g, z, coef, work, istate, fstate, eff_tol, int(k))
        return rc, istate[0]

    def report():
        return fstate[0], fstate[3]

    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="tron",
    )
    if istate[1] == 0:  # max_iter 0: nothing evaluated
        fstate[0] = _fun(w, *args, y, C, code, float(epsilon))
    fit = LinearFit(w, None, fstate[0], None, it, fstate[3], status)
    fit.cg_iter = int(istate[2])
    return fit
