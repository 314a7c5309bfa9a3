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
:math:`\min_s g\cdot s + \tfrac12 s^T H s` subject to :math:`\|s\|_M \le \Delta` approximately by
preconditioned conjugate gradients (Steihaug: stop at the boundary or, by Nash and Sofer's rule, when a step
improves the quadratic model by little relative to the total), accepts the step when the actual reduction
is more than :math:`\eta_0 = 10^{-4}`
times the predicted one, and resizes :math:`\Delta` by the ratio (thresholds 0.25 / 0.75, factors
0.25 / 0.5 / 4).  The preconditioner is diagonal, :math:`M = 0.99 I + 0.01\,\mathrm{diag}(H)` (Hsia, Chiang and
Lin 2018), refreshed at every accepted step; :math:`\|s\|_M^2 = s^T M s`.

The passes over the data (function value, gradient and diagonal in one pass; a Hessian-vector product in one
pass) split the rows into chunks run on Numba threads, each accumulating :math:`X^T(\cdot)` into its own
buffer; a serial copy serves fits that already run on threads (one-vs-rest).  The outer loop is Python: the work
per step is one or two passes over the data.  Stopping: :math:`\|\nabla f(w)\| \le`
``tol`` :math:`\cdot \|\nabla f(w_0)\|` (classification scales ``tol`` by ``max(min(#pos, #neg), 1)/n``, as
LIBLINEAR does).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .._jit import parallel_and_serial
from ._linear_common import drive
from .dual_cd import LinearFit

ETA0, ETA1, ETA2 = 1e-4, 0.25, 0.75
SIGMA1, SIGMA2, SIGMA3 = 0.25, 0.5, 4.0
EPS_CG = 0.5
#: stored values per thread below which the passes run serially (a pass over less data takes well under a
#: millisecond, and on a shared machine waiting for a second core costs more than it saves: a9a, 450k values,
#: took 0.063 s on two threads and 0.03 s on one under load)
PARALLEL_STORED = 1_000_000
ALPHA_PCG = 0.01


@njit(cache=True, nogil=True, inline="always")
def _residual(o, yi, kind, eps):
    """(r, s): the active piece's residual r (0 when inactive) and sign s of the loss at output ``o``."""
    if kind == 0:
        mg = yi * o
        if mg < 1.0:
            return mg - 1.0, yi
        return 0.0, 1.0
    d = o - yi
    if d > eps:
        return d - eps, 1.0
    if d < -eps:
        return d + eps, 1.0
    return 0.0, 1.0


def _fun(w, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps, o, n_chunks):
    """The loss part of f(w); stores the outputs ``o = X w`` for :func:`_grad_diag`."""
    n = y.shape[0]
    fs = np.zeros(n_chunks)
    has_bias = bias > 0
    for t in prange(n_chunks):
        lo = t * n // n_chunks
        hi = (t + 1) * n // n_chunks
        f = 0.0
        for i in range(lo, hi):
            if dense:
                acc = 0.0
                for j in range(nf):
                    acc += Xd[i, j] * w[j]
            else:
                acc = 0.0
                for k in range(indptr[i], indptr[i + 1]):
                    acc += data[k] * w[indices[k]]
            if has_bias:
                acc += bias * w[nf]
            o[i] = acc
            r, _ = _residual(acc, y[i], kind, eps)
            f += C[i] * r * r
        fs[t] = f
    return fs.sum()


def _grad_diag(o, Xd, data, indices, indptr, dense, nf, bias, y, C, kind, eps, z, act, n_act, acc, n_chunks):
    """From the outputs ``o``: sets ``z_i`` (2 C_i on the active rows, else 0), the active rows of chunk ``t`` in
    ``act[lo_t : lo_t + n_act[t]]`` and ``acc[t] = [X^T coef | X^T (z x^2)]`` (coef_i = 2 C_i r_i s_i); the
    caller adds the chunks, ``w`` and 1."""
    n = y.shape[0]
    m = acc.shape[1] // 2
    has_bias = bias > 0
    for t in prange(n_chunks):
        a = acc[t]
        a[:] = 0.0
        lo = t * n // n_chunks
        hi = (t + 1) * n // n_chunks
        cnt = 0
        for i in range(lo, hi):
            r, sgn = _residual(o[i], y[i], kind, eps)
            if r == 0.0:
                z[i] = 0.0
                continue
            act[lo + cnt] = i
            cnt += 1
            c = 2.0 * C[i] * r * sgn
            zi = 2.0 * C[i]
            z[i] = zi
            if dense:
                for j in range(nf):
                    v = Xd[i, j]
                    a[j] += c * v
                    a[m + j] += zi * v * v
            else:
                for k in range(indptr[i], indptr[i + 1]):
                    j = indices[k]
                    v = data[k]
                    a[j] += c * v
                    a[m + j] += zi * v * v
            if has_bias:
                a[nf] += c * bias
                a[m + nf] += zi * bias * bias
        n_act[t] = cnt


def _hess_vec(v, Xd, data, indices, indptr, dense, nf, bias, z, act, n_act, acc, n_chunks):
    """acc[t, :m] = sum over chunk t's active rows (listed by :func:`_grad_diag`) of z_i x_i (x_i . v); the
    caller adds v and the chunks."""
    n = z.shape[0]
    has_bias = bias > 0
    for t in prange(n_chunks):
        a = acc[t]
        a[:] = 0.0
        lo = t * n // n_chunks
        for q in range(lo, lo + n_act[t]):
            i = act[q]
            zi = z[i]
            if dense:
                o = 0.0
                for j in range(nf):
                    o += Xd[i, j] * v[j]
                if has_bias:
                    o += bias * v[nf]
                c = zi * o
                for j in range(nf):
                    a[j] += c * Xd[i, j]
            else:
                p0 = indptr[i]
                p1 = indptr[i + 1]
                o = 0.0
                for k in range(p0, p1):
                    o += data[k] * v[indices[k]]
                if has_bias:
                    o += bias * v[nf]
                c = zi * o
                for k in range(p0, p1):
                    a[indices[k]] += c * data[k]
            if has_bias:
                a[nf] += c * bias


# The row loops are written out here rather than through the shared row helpers: measured 2-2.5x faster
# Hessian-vector products on a9a and ijcnn1.
_fun_par, _fun_ser = parallel_and_serial(_fun, nogil=True)
_grad_diag_par, _grad_diag_ser = parallel_and_serial(_grad_diag, nogil=True)
_hess_vec_par, _hess_vec_ser = parallel_and_serial(_hess_vec, nogil=True)


class _Problem:
    """The objective's passes over the data, parallel or serial.  :meth:`fun` keeps ``X w`` of the point it
    evaluated, so the gradient at an accepted step costs one pass (over the active rows) instead of two."""

    def __init__(self, ld, y, C, kind, eps, parallel):
        self.args = ld.args()
        self.y, self.C, self.kind, self.eps = y, C, kind, float(eps)
        self.m = ld.n_weights
        n = y.shape[0]
        stored = ld.Xd.size if ld.dense else ld.data.size
        self.chunks = max(1, min(numba.get_num_threads(), stored // PARALLEL_STORED)) if parallel else 1
        par = parallel and self.chunks > 1
        self._f = _fun_par if par else _fun_ser
        self._gd = _grad_diag_par if par else _grad_diag_ser
        self._hv = _hess_vec_par if par else _hess_vec_ser
        self.z = np.zeros(n)
        self.act = np.zeros(n, dtype=np.int64)
        self.n_act = np.zeros(self.chunks, dtype=np.int64)
        self.o = np.zeros(n)
        self.o_trial = np.zeros(n)
        self.acc = np.zeros((self.chunks, 2 * self.m))
        self.hv_calls = 0

    def fun(self, w):
        """f(w); remembers X w as the trial outputs."""
        loss = self._f(w, *self.args, self.y, self.C, self.kind, self.eps, self.o_trial, self.chunks)
        return 0.5 * float(w @ w) + loss

    def accept(self, w):
        """(g, diag(H)) at the point :meth:`fun` evaluated last; sets the active rows for :meth:`hess_vec`."""
        self.o, self.o_trial = self.o_trial, self.o
        self._gd(
            self.o, *self.args, self.y, self.C, self.kind, self.eps, self.z, self.act, self.n_act, self.acc, self.chunks
        )
        tot = self.acc.sum(axis=0)
        return w + tot[: self.m], 1.0 + tot[self.m :]

    def fun_grad(self, w):
        """(f, g, diag(H)) at w."""
        f = self.fun(w)
        g, diag = self.accept(w)
        return f, g, diag

    def hess_vec(self, v):
        self.hv_calls += 1
        self._hv(v, *self.args, self.z, self.act, self.n_act, self.acc, self.chunks)
        return v + self.acc[:, : self.m].sum(axis=0)


def _trpcg(prob, delta, g, M):
    r"""Steihaug PCG for min Q(s) = g.s + 1/2 s'Hs, ||s||_M <= delta.  Returns (s, r) with r = -g - Hs.

    Stops at the boundary, or by the truncated-Newton rule of Nash and Sofer on the model's decrease: after
    step i, when :math:`i\,(Q_i - Q_{i-1}) \ge` ``EPS_CG`` :math:`\cdot Q_i` (the last step gained little
    relative to the total), or when the preconditioned residual vanishes.
    """
    s = np.zeros_like(g)
    r = -g
    zv = r / M
    d = zv.copy()
    zTr = float(zv @ r)
    Q_prev = 0.0
    it = 0
    while zTr > 1e-30:
        Hd = prob.hess_vec(d)
        dHd = float(d @ Hd)
        if dHd <= 0.0:
            break
        alpha = zTr / dHd
        s_new = s + alpha * d
        if np.sqrt(float(s_new @ (M * s_new))) > delta:
            sMd = float(s @ (M * d))
            sMs = float(s @ (M * s))
            dMd = float(d @ (M * d))
            dsq = delta * delta
            rad = np.sqrt(max(sMd * sMd + dMd * (dsq - sMs), 0.0))
            alpha = (dsq - sMs) / (sMd + rad) if sMd >= 0.0 else (rad - sMd) / dMd
            s += alpha * d
            r -= alpha * Hd
            break
        s = s_new
        r -= alpha * Hd
        it += 1
        Q = 0.5 * (float(g @ s) - float(s @ r))
        if Q < 0.0 and it * (Q - Q_prev) >= EPS_CG * Q:
            break
        Q_prev = Q
        zv = r / M
        zTr_new = float(zv @ r)
        d = zv + (zTr_new / zTr) * d
        zTr = zTr_new
    return s, r


class _Tron:
    """TRON's state between chunks of outer iterations."""

    def __init__(self, prob, w, tol, gnorm0=None):
        self.prob = prob
        self.w = w
        self.f, self.g, diag = prob.fun_grad(w)
        self.M = (1.0 - ALPHA_PCG) + ALPHA_PCG * diag
        self.gnorm = float(np.linalg.norm(self.g))
        self.gnorm0 = self.gnorm if gnorm0 is None else gnorm0
        self.delta = float(np.sqrt(self.g @ (self.M * self.g)))
        self.tol = tol
        self.it = 0
        self.done = self.gnorm <= tol * self.gnorm0 or self.gnorm == 0.0

    def run(self, n_iters):
        """Up to ``n_iters`` accepted steps; returns 0 when converged (or stuck), 1 otherwise."""
        if self.done:
            return 0
        accepted = 0
        while accepted < n_iters:
            s, r = _trpcg(self.prob, self.delta, self.g, self.M)
            w_new = self.w + s
            gs = float(self.g @ s)
            prered = -0.5 * (gs - float(s @ r))
            f_new = self.prob.fun(w_new)
            actred = self.f - f_new
            snorm = float(np.sqrt(s @ (self.M * s)))
            if self.it == 0:
                self.delta = min(self.delta, snorm)
            denom = f_new - self.f - gs
            alpha = SIGMA3 if denom <= 0.0 else max(SIGMA1, -0.5 * (gs / denom))
            if actred < ETA0 * prered:
                self.delta = min(max(alpha, SIGMA1) * snorm, SIGMA2 * self.delta)
            elif actred < ETA1 * prered:
                self.delta = max(SIGMA1 * self.delta, min(alpha * snorm, SIGMA2 * self.delta))
            elif actred < ETA2 * prered:
                self.delta = max(SIGMA1 * self.delta, min(alpha * snorm, SIGMA3 * self.delta))
            else:
                self.delta = max(self.delta, min(alpha * snorm, SIGMA3 * self.delta))
            if actred > ETA0 * prered:
                self.it += 1
                accepted += 1
                self.w = w_new
                self.f = f_new
                self.g, diag = self.prob.accept(w_new)
                self.M = (1.0 - ALPHA_PCG) + ALPHA_PCG * diag
                self.gnorm = float(np.linalg.norm(self.g))
                if self.gnorm <= self.tol * self.gnorm0:
                    self.done = True
                    return 0
            if (actred <= 0.0 and prered <= 0.0) or (
                abs(actred) <= 1e-12 * abs(self.f) and abs(prered) <= 1e-12 * abs(self.f)
            ):
                self.done = True
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
    parallel=True,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
):
    """Minimise the squared-hinge (``kind='squared_hinge'``, ``y`` in {-1, +1}) or squared epsilon-insensitive
    (``kind='squared_epsilon_insensitive'``) primal by TRON; see the module docstring.  ``w0``: a warm start;
    ``parallel``: the passes over the data on Numba threads.  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` (no dual variables)."""
    n = y.shape[0]
    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    code = 0 if kind == "squared_hinge" else 1
    eff_tol = float(tol)
    if code == 0:
        pos = int(np.sum(y > 0))
        eff_tol = float(tol) * max(min(pos, n - pos), 1) / max(n, 1)
    prob = _Problem(ld, y, C, code, epsilon, parallel)
    m = ld.n_weights
    gnorm0 = None
    if w0 is not None and np.any(w0):
        # the stopping rule is relative to the first gradient: a warm start measures it at w = 0, as a cold
        # start would, so that a good start does not make the rule stricter
        gnorm0 = float(np.linalg.norm(prob.fun_grad(np.zeros(m))[1]))
    w = np.zeros(m) if w0 is None else np.array(w0, dtype=np.float64)
    state = _Tron(prob, w, eff_tol, gnorm0)

    def step(k):
        return state.run(int(k)), state.it

    def report():
        return state.f, state.gnorm

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
    fit = LinearFit(state.w, None, state.f, None, it, state.gnorm, status)
    fit.cg_iter = prob.hv_calls
    return fit
