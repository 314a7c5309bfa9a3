r"""SMO on one pair of classes whose Gram matrix is held as class blocks.

Used by :mod:`maxmargin.solvers.ovo` (every one-vs-one problem of a multi-class C-SVC) and
:mod:`maxmargin.solvers.ovo_folds` (their cross-validation folds).  Rows ``0..na-1`` are class a
(:math:`y = +1`), rows ``na..`` class b (:math:`y = -1`); the kernel row of a class-a row is
``[Da[i], off[i]]``, of a class-b row ``[offT[i - na], Db[i - na]]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from .smo import TAU, pair_step


@njit(cache=True, nogil=True)
def _violation(y, G, alpha, U):
    """max_{I_up} -y G - min_{I_low} -y G (the stopping measure), 0 if a set is empty."""
    gmax = -np.inf
    gmin = np.inf
    for t in range(y.shape[0]):
        s = -y[t] * G[t]
        if (y[t] > 0 and alpha[t] < U[t]) or (y[t] < 0 and alpha[t] > 0.0):
            gmax = max(gmax, s)
        if (y[t] > 0 and alpha[t] > 0.0) or (y[t] < 0 and alpha[t] < U[t]):
            gmin = min(gmin, s)
    if gmax == -np.inf or gmin == np.inf:
        return 0.0
    return max(gmax - gmin, 0.0)


@njit(cache=True, nogil=True, inline="always")
def _row(i, na, Da, Db, off, offT):
    """Row i of the pair's Gram matrix as its two class segments (no copy)."""
    if i < na:
        return Da[i], off[i]
    return offT[i - na], Db[i - na]


@njit(cache=True, nogil=True)
def _shrink(act, m, na, U, alpha, G):
    """LIBSVM's shrinking rule on the active list ``act[:m]``: a variable at a bound whose
    gradient says it stays there leaves the selection (not the gradient update, which
    covers every variable: the Gram matrix is in memory, so nothing is rebuilt later).
    Returns the new active count (the list stays in increasing order)."""
    gmax1 = -np.inf  # max over I_up of -y G
    gmax2 = -np.inf  # max over I_low of y G
    for k in range(m):
        t = act[k]
        if t < na:
            if alpha[t] < U[t]:
                gmax1 = max(gmax1, -G[t])
            if alpha[t] > 0.0:
                gmax2 = max(gmax2, G[t])
        else:
            if alpha[t] > 0.0:
                gmax1 = max(gmax1, G[t])
            if alpha[t] < U[t]:
                gmax2 = max(gmax2, -G[t])
    keep = 0
    for k in range(m):
        t = act[k]
        out = False
        if alpha[t] >= U[t]:
            out = (-G[t] > gmax1) if t < na else (-G[t] > gmax2)
        elif alpha[t] <= 0.0:
            out = (G[t] > gmax2) if t < na else (G[t] > gmax1)
        if not out:
            act[keep] = t
            keep += 1
    return keep


@njit(cache=True, nogil=True)
def pair_smo(Da, Db, off, offT, U, alpha, G, tol, max_iter, shrinking):
    """WSS3 SMO (seed 001's clipped pair step, :func:`maxmargin.solvers.smo.pair_step`)
    on one pair whose Gram matrix is held as class blocks: rows ``0..na-1`` are class
    a (y = +1), with kernel rows ``[Da[i], off[i]]``; rows ``na..`` class b (y = -1),
    ``[offT[i - na], Db[i - na]]``.  The gradient ``G`` and ``alpha`` are updated in
    place.  With ``shrinking`` the selection looks at the active variables only
    (:func:`_shrink` every ``min(n, 1000)`` steps) and, once they are optimal, at all
    of them again.  Returns the number of steps."""
    na = Da.shape[0]
    nb = Db.shape[0]
    n = na + nb
    QD = np.empty(n)
    for t in range(na):
        QD[t] = Da[t, t]
    for t in range(nb):
        QD[na + t] = Db[t, t]
    act = np.arange(n)
    m = n
    period = min(n, 1000)
    counter = period
    it = 0
    while it < max_iter:
        if shrinking:
            counter -= 1
            if counter <= 0:
                counter = period
                m = _shrink(act, m, na, U, alpha, G)
        # i: the maximal -y G over I_up
        gmax = -np.inf
        i = -1
        for k in range(m):
            t = act[k]
            u = uint64(t)  # an unsigned index: no negative-index test on each load
            if t < na:
                if alpha[u] < U[u] and -G[u] >= gmax:
                    gmax = -G[u]
                    i = t
            elif alpha[u] > 0.0 and G[u] >= gmax:
                gmax = G[u]
                i = t
        j = -1
        gmax2 = -np.inf
        if i >= 0:
            Li, Ri = _row(i, na, Da, Db, off, offT)
            QDi = QD[i]
            # j: the second-order choice over I_low (Fan, Chen & Lin 2005)
            best = np.inf
            for k in range(m):
                t = act[k]
                u = uint64(t)
                if t < na:
                    if alpha[u] <= 0.0:
                        continue
                    v = G[u]
                    kit = Li[u]
                else:
                    if alpha[u] >= U[u]:
                        continue
                    v = -G[u]
                    kit = Ri[uint64(t - na)]
                gmax2 = max(gmax2, v)
                b = gmax + v
                if b > 0.0:
                    a = QDi + QD[u] - 2.0 * kit
                    obj = -(b * b) / (a if a > 0.0 else TAU)
                    if obj <= best:
                        best = obj
                        j = t
        if i < 0 or j < 0 or gmax + gmax2 < tol:
            if m == n:
                break
            m = n  # optimal on the active set: look at every variable again
            for t in range(n):
                act[t] = t
            counter = period
            continue
        Li, Ri = _row(i, na, Da, Db, off, offT)
        Lj, Rj = _row(j, na, Da, Db, off, offT)
        Kij = Li[j] if j < na else Ri[j - na]
        yi = 1.0 if i < na else -1.0
        yj = 1.0 if j < na else -1.0
        quad = QD[i] + QD[j] - 2.0 * Kij
        if quad <= 0.0:
            quad = TAU
        old_ai = alpha[i]
        old_aj = alpha[j]
        ai, aj = pair_step(yi != yj, old_ai, old_aj, G[i], G[j], U[i], U[j], quad)
        alpha[i] = ai
        alpha[j] = aj
        dai = (ai - old_ai) * yi
        daj = (aj - old_aj) * yj
        for t in range(na):
            G[t] += Li[t] * dai + Lj[t] * daj
        Gb = G[na:]
        for t in range(nb):
            Gb[t] -= Ri[t] * dai + Rj[t] * daj
        it += 1
    return it
